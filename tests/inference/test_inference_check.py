"""A served model's acceptance run: the inference-perf Job `blueprint inference benchmark` writes (at the objectives'
concurrency and request shape, through the model's Service, admitted in the team's queue), and `blueprint inference
check` on real inference-perf reports (tests/fixtures/inference-perf) against the stack's objectives."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.cli import main
from components.kubernetes.objects.inference_perf import RECORD_BEGIN, RECORD_END, RECORD_SCRIPT, read_record
from tests.conftest import kubernetes_version, offline_run
from tests.inference.test_serving_objects import STACKS, served
from tests.k8s_checks import validate_builtin

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "inference-perf"


def _manifests(name: str, tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    out = tmp_path / f"{Path(name).stem}.yaml"
    assert main(["inference", "benchmark", name, "-o", str(out)]) == 0
    config, job = list(yaml.safe_load_all(out.read_text()))
    return config, job


# The fixtures' requests: some 200 prompt tokens (128-token system prompt and a 64-token question) and 64 output
# tokens (tests/fixtures/inference-perf/SOURCE.md).
FIXTURE_SHAPE = "promptTokens: 192, outputTokens: 60"


def _stack_at_fixture_shape(tmp_path: Path) -> str:
    """prod-aws with its objectives stated for requests of the fixtures' shape."""
    text = (ROOT / "stacks" / "Pulumi.prod-aws.yaml").read_text()
    shipped = "objectives: {percentile: 95, ttftMs: 500, tpotMs: 40, concurrency: 32}"
    assert shipped in text
    path = tmp_path / "stacks" / "Pulumi.prod-aws.yaml"
    path.parent.mkdir()
    path.write_text(text.replace(shipped, shipped[:-1] + ", " + FIXTURE_SHAPE + "}"))
    return str(path)


def _record(name: str, tmp_path: Path, report: str = "stage_0") -> dict[str, Any]:
    """The record the benchmark Job of ``name`` would print around a real report (the run's request count is the
    report's: the fixtures' runs were not ours)."""
    config, _ = _manifests(name, tmp_path)
    record = json.loads(config["data"]["record.json"])
    record.update(startedAt="2026-12-03T10:00:00Z", finishedAt="2026-12-03T10:20:00Z")
    record["report"] = json.loads((FIXTURES / f"{report}_lifecycle_metrics.json").read_text())
    record["load"]["requests"] = record["report"]["successes"]["count"] + record["report"]["failures"]["count"]
    return record


def _log(record: dict[str, Any], path: Path) -> Path:
    path.write_text("INFO inference-perf starting\n" + RECORD_BEGIN + "\n" + json.dumps(record) + "\n" + RECORD_END
                    + "\n")
    return path


def _gateway_url(name: str, model: str) -> str:
    """Where a client reaches the model through the stack's gateway, as the graph makes it: the host its Gateway is
    reached at (EKS: the proxy's Service, named after the Gateway; GKE: the reserved internal address) and the prefix
    of the model's HTTPRoute."""
    graph = offline_run(name).graph
    (gateway,) = graph.of_type("kubernetes:gateway.networking.k8s.io/v1:Gateway")
    (route,) = [r.inputs for r in graph.of_type("kubernetes:gateway.networking.k8s.io/v1:HTTPRoute")
                if r.inputs["metadata"]["name"] == model]
    prefix = route["spec"]["rules"][0]["matches"][0]["path"]["value"]
    if name == "prod-aws":
        host = f"{gateway.inputs['metadata']['name']}.{gateway.inputs['metadata']['namespace']}.svc"
    else:
        (address,) = gateway.inputs["spec"]["addresses"]
        (reserved,) = [r.inputs for r in graph.of_type("gcp:compute/address:Address")
                       if r.inputs["name"] == address["value"]]
        host = reserved["address"]
    return f"http://{host}{prefix}"


@pytest.mark.parametrize("name", STACKS)
def test_the_benchmark_runs_at_the_objectives_through_the_gateway(name: str, tmp_path: Path) -> None:
    model = served(name)
    config, job = _manifests(name, tmp_path)
    for manifest in (config, job):
        validate_builtin(copy.deepcopy(manifest), kubernetes_version(name))
    perf = yaml.safe_load(config["data"]["config.yml"])
    (stage,) = perf["load"]["stages"]
    assert perf["load"]["type"] == "concurrent" and stage["concurrency_level"] == model.objectives.concurrency
    assert stage["num_requests"] == model.objectives.concurrency * 10
    assert perf["data"]["input_distribution"]["mean"] == model.objectives.prompt_tokens
    assert perf["data"]["output_distribution"]["mean"] == model.objectives.output_tokens
    assert perf["server"] == {"type": "vllm", "model_name": model.name, "ignore_eos": True,
                              "base_url": _gateway_url(name, model.name)}
    assert perf["api"] == {"type": "completion", "streaming": True}
    assert model.objectives.percentile in perf["report"]["request_lifecycle"]["percentiles"]
    pod = job["spec"]["template"]["spec"]
    assert job["metadata"]["namespace"] == model.team and job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    # The tokenizer comes from the weights' prefix, read with the replicas' read-only identity.
    assert pod["serviceAccountName"] == f"serve-{model.name}"
    (init,) = pod["initContainers"]
    assert init["image"] == model.engine.image and "pull_files" in init["command"][-1]
    assert "*.safetensors" in init["command"][-1]
    assert init["envFrom"] == [{"configMapRef": {"name": f"{model.name}-weights"}}]
    (client,) = pod["containers"]
    assert "python inference_perf/main.py --config_file /config/config.yml" in client["command"][-1]
    # The record's facts are the stack's.
    facts = json.loads(config["data"]["record.json"])
    assert (facts["path"], facts["target"]) == ("gateway", _gateway_url(name, model.name))
    assert facts["engine"]["version"] == model.engine.version and facts["load"]["concurrency"] == \
        model.objectives.concurrency


def test_the_record_script_prints_what_check_reads(tmp_path: Path) -> None:
    """The script the Job runs after inference-perf, run here on a real report: check reads its output."""
    import os
    import subprocess
    import sys

    config, _ = _manifests("prod-aws", tmp_path)
    (tmp_path / "config").mkdir()
    (tmp_path / "reports").mkdir()
    (tmp_path / "config" / "record.json").write_text(config["data"]["record.json"])
    (tmp_path / "reports" / "summary_lifecycle_metrics.json").write_text(
        (FIXTURES / "stage_0_lifecycle_metrics.json").read_text())
    script = config["data"]["record.py"].replace("/config/", f"{tmp_path}/config/").replace(
        "/reports/", f"{tmp_path}/reports/")
    assert config["data"]["record.py"] == RECORD_SCRIPT
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         env={**os.environ, "STARTED_AT": "2026-12-03T10:00:00Z"}).stdout
    record = read_record("some inference-perf output\n" + out)
    assert record["startedAt"] == "2026-12-03T10:00:00Z" and record["finishedAt"]
    assert record["report"]["successes"]["count"] == 60


def test_a_run_within_the_objectives_passes_and_gives_the_throughput(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # The light stage of a real run (Llama 3.1 8B on vLLM v0.11.0): p95 TTFT 40 ms, p95 inter-token latency 7.2 ms.
    stack = _stack_at_fixture_shape(tmp_path)
    log = _log(_record(stack, tmp_path), tmp_path / "run.log")
    assert main(["inference", "check", str(log), "--stack", stack]) == 0
    out = capsys.readouterr().out
    assert out.startswith("PASS: llama-3-1-8b-instruct on l40s (g6e.xlarge")
    assert "p95 time to first token   40.1 ms (objective 500.0 ms)" in out
    assert "set inference.models[].throughput" in out
    assert main(["inference", "check", str(log), "--stack", stack, "--format", "json"]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["passed"] and verdict["measured"]["ttft_seconds"] == pytest.approx(0.04010422827559523)
    # The time per output token is the inter-token latency the alert reads, not the per-request average (3.5 ms).
    assert verdict["measured"]["tpot_seconds"] == pytest.approx(0.00720704187406227)
    assert verdict["measured"]["output_tokens_per_second_per_replica"] == pytest.approx(62.15363932698074 / 2)


def test_an_overloaded_run_fails_on_the_objective_it_misses(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    # The whole sweep of the same run: p95 TTFT 2.68 s, over prod-aws's 500 ms.
    stack = _stack_at_fixture_shape(tmp_path)
    path = tmp_path / "record.json"
    path.write_text(json.dumps(_record(stack, tmp_path, "summary")))
    assert main(["inference", "check", str(path), "--stack", stack]) == 1
    out = capsys.readouterr().out
    assert out.startswith("FAIL")
    assert "p95 time to first token 2,683.7 ms is over the objective of 500.0 ms" in out
    assert "time per output token" not in out.split("  - ", 1)[1]  # 38.2 ms is within 40 ms


@pytest.mark.parametrize(("change", "message"), [
    (lambda r: r["load"].update(concurrency=4), "the run held 4 requests in flight, fewer than the objectives' 32"),
    (lambda r: r["load"].update(promptTokens=128), "the run's requests had 128 promptTokens, fewer than"),
    (lambda r: r["report"]["successes"]["output_len"].update(mean=20.0),
     "the report's requests had 20 output len tokens on average, fewer than the objectives' 60"),
    (lambda r: r["engine"].update(version="v0.10.2"), "the run measured engine v0.10.2, the stack serves v0.11.0"),
    (lambda r: r["engine"].update(image="vllm/vllm-openai@sha256:" + "0" * 64), "the run measured the image "
     "vllm/vllm-openai@sha256:"),
    (lambda r: r["report"]["failures"].update(count=5) or r["load"].update(requests=65),
     "5 of 65 requests failed (7.7%, over 1%)"),
    (lambda r: r["load"].update(requests=320), "the report counts 60 of the 320 requests"),
    (lambda r: r.update(stack="prod-gcp"), "the record is of stack prod-gcp, not prod-aws"),
    (lambda r: r["report"]["successes"]["latency"]["time_to_first_token"].pop("p95"),
     "the report has no p95 time to first token"),
])
def test_a_run_that_does_not_test_the_objectives_fails(change: Any, message: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    stack = _stack_at_fixture_shape(tmp_path)
    record = _record(stack, tmp_path)
    change(record)
    assert main(["inference", "check", str(_log(record, tmp_path / "run.log")), "--stack", stack]) == 1
    assert message in capsys.readouterr().out


def test_the_shipped_objectives_are_not_met_by_shorter_requests(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """prod-aws states its objectives for 1,024-token prompts and 256 output tokens; the fixtures' requests are
    shorter, so their speed says nothing about them."""
    record = _record("prod-aws", tmp_path)
    record["load"].update(promptTokens=1024, outputTokens=256)  # what the record claims; the report says otherwise
    assert main(["inference", "check", str(_log(record, tmp_path / "run.log")), "--stack", "prod-aws"]) == 1
    assert "the report's requests had 201 prompt len tokens on average, fewer than the objectives' 1024" in \
        capsys.readouterr().out


def test_unreadable_records_and_unknown_models_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cut = tmp_path / "cut.log"
    cut.write_text(RECORD_BEGIN + "\n{\"kind\": \"gpu-cluster/inference-record\"")
    assert main(["inference", "check", str(cut), "--stack", "prod-aws"]) == 2
    assert "the run was cut short" in capsys.readouterr().err
    bare = tmp_path / "summary.json"
    bare.write_text((FIXTURES / "summary_lifecycle_metrics.json").read_text())
    assert main(["inference", "check", str(bare), "--stack", "prod-aws"]) == 2
    assert "not a record" in capsys.readouterr().err
    record = _record("prod-aws", tmp_path)
    record["model"] = "mistral"
    assert main(["inference", "check", str(_log(record, tmp_path / "run.log")), "--stack", "prod-aws"]) == 2
    assert "inference.models: no model 'mistral'" in capsys.readouterr().err
    assert main(["inference", "check", str(tmp_path / "run.log"), "--stack", "prod-aws", "--model",
                 "llama-3-1-8b-instruct"]) == 2
    assert "the record is of model mistral, not llama-3-1-8b-instruct" in capsys.readouterr().err
    assert main(["inference", "benchmark", "dev-aws"]) == 2
    assert "the stack serves no model" in capsys.readouterr().err


@pytest.mark.parametrize("name", STACKS)
def test_the_shipped_example_is_what_the_command_writes(name: str, tmp_path: Path) -> None:
    out = tmp_path / "bench.yaml"
    assert main(["inference", "benchmark", name, "-o", str(out)]) == 0
    shipped = ROOT / "examples" / "workloads" / name / "inference-benchmark.yaml"
    assert shipped.read_text() == out.read_text(), f"regenerate: blueprint inference benchmark {name} -o {shipped}"


def test_a_file_of_config_maps_alone_is_not_a_workload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, _ = _manifests("prod-aws", tmp_path)
    alone = tmp_path / "config-only.yaml"
    alone.write_text(yaml.safe_dump(config))
    assert main(["admit", "prod-aws", str(alone)]) == 1
    assert "not-a-workload" in capsys.readouterr().out
