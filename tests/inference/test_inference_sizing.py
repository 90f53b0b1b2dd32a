"""``blueprint sizing`` for served models: the KV cache per token, the concurrency per replica, the cold start and the
cost per million tokens, computed by hand here from the same inputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from blueprint.cli import main
from components.sizing.inference import (
    kv_bytes_per_token,
    model_memory,
    node_group_resource_name,
    usd_per_million_tokens,
)
from components.spec import parse_spec
from components.spec.inference import ServedModelSpec
from tests.conftest import offline_run, raw_stack_config
from tests.inference.specs import aws_serving_spec, gcp_serving_spec, served

GIB = 2**30


def spec_of(fields: dict[str, Any]) -> ServedModelSpec:
    return ServedModelSpec.model_validate(fields)


def test_llama_8b_takes_128_kib_of_kv_cache_per_token() -> None:
    """2 (K, V) x 32 layers x 8 KV heads x 128 x 2 bytes = 131,072 B, split across GPUs, not multiplied, at tp 2."""
    assert kv_bytes_per_token(spec_of(served(tp=1))) == 2 * 32 * 8 * 128 * 2 == 131_072
    assert kv_bytes_per_token(spec_of(served(tp=2))) == 131_072
    fp8 = served(tp=1)
    fp8["engine"]["kvCacheDtype"] = "fp8"
    assert kv_bytes_per_token(spec_of(fp8)) == 65_536


def test_fewer_kv_heads_than_gpus_are_replicated() -> None:
    """vLLM keeps at least one KV head per GPU: 8 heads on tp 16 are 16 heads' worth."""
    wide = served(tp=16)
    wide["model"].update(attentionHeads=64, kvHeads=8)
    assert kv_bytes_per_token(spec_of(wide)) == 2 * 32 * 16 * 128 * 2


def test_concurrency_is_what_the_kv_cache_holds_after_the_weights() -> None:
    """Two 24 GB L4s at 0.9: 43.2 GB, less 16.06 GB of weights, over 1 GiB per 8,192-token sequence."""
    memory = model_memory(spec_of(served(tp=2)), 24)
    room = 2 * 24e9 * 0.9 - 8.03e9 * 2
    assert memory.kv_room_bytes == pytest.approx(room)
    assert memory.max_concurrency == int(room // (131_072 * 8192)) == 25


def test_cost_counts_the_idle_replicas_the_peak_does_not_need() -> None:
    model = spec_of(served(tp=2))  # 1,000 tokens/s per replica, peak 3,000
    # Two replicas run flat out: 4 GPU-hours buy 7.2 M tokens.
    assert usd_per_million_tokens(model, 2, 1.0) == pytest.approx(4 / 7.2)
    # Four replicas serve only the peak's 3,000 tokens/s: 8 GPU-hours buy 10.8 M tokens.
    assert usd_per_million_tokens(model, 4, 1.0) == pytest.approx(8 / 10.8)


@pytest.mark.parametrize(("name", "build", "cloud"), [("serve-gcp", gcp_serving_spec, "prod-gcp"),
                                                     ("serve-aws", aws_serving_spec, "prod-aws")])
def test_sizing_json_gives_each_served_model(name: str, build: Any, cloud: str, tmp_path: Path) -> None:
    config = raw_stack_config(cloud)
    config["gpu-cluster:spec"] = build()
    stack = tmp_path / f"Pulumi.{name}.yaml"
    stack.write_text(json.dumps({"config": config}))
    out = tmp_path / "sizing.json"
    assert main(["sizing", str(stack), "--format", "json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert "goodput" in doc  # the training model is still there
    [entry] = doc["inference"]
    assert entry["model"] == "llama-8b"
    assert entry["kv_cache_bytes_per_token"] == 131_072
    # 16.06 GB at 400 MB/s plus the measured 60 s engine start
    assert entry["cold_start_seconds"] == pytest.approx(8.03e9 * 2 / 400e6 + 60)
    assert entry["failover_met"] is True
    assert entry["replicas"] == {"min": 2, "max": 4, "for_peak": 3}
    assert entry["baseline_cost_per_million_tokens_usd"] == 0.6
    # The GPU-hour is the node group's priced instance-hour over its GPUs: the cost is money, not a placeholder.
    gpus = entry["gpus_per_replica"]
    hour = entry["gpu_hour_usd"]
    assert hour > 0
    assert entry["cost_per_million_tokens_usd"] == pytest.approx(2 * gpus * hour / (2000 * 3600) * 1e6)
    assert entry["cost_per_million_tokens_usd_at_max"] == pytest.approx(4 * gpus * hour / (3000 * 3600) * 1e6)
    for key in ("max_concurrency_per_replica", "cold_start_seconds", "replicas", "cost_per_million_tokens_usd",
                "baseline_cost_per_million_tokens_usd"):
        assert entry[key] is not None


def test_the_gpu_hour_is_read_from_the_groups_instance_price(tmp_path: Path) -> None:
    """g2-standard-24 on demand: the catalog's instance-hour over its 2 L4s."""
    from blueprint.cost.prices import prices_for
    from blueprint.sizing.inference import served_sizing
    from components.spec import parse_spec as parse

    config = raw_stack_config("prod-gcp")
    config["gpu-cluster:spec"] = gcp_serving_spec()
    stack = tmp_path / "Pulumi.serve-gcp.yaml"
    stack.write_text(json.dumps({"config": config}))
    from blueprint.cost.engine import price_graph
    from blueprint.graph.engine import run_program

    program = run_program("serve-gcp", config, "us-central1")
    [sized] = served_sizing(parse(config["gpu-cluster:spec"], "x"), price_graph(program.graph))
    assert sized.gpu_hour is not None
    assert sized.gpu_hour.usd == pytest.approx(prices_for("gcp")["compute_on_demand.g2-standard-24"].usd / 2)


@pytest.mark.parametrize("name", ["prod-aws", "prod-gcp", "dev-aws", "dev-gcp"])
def test_every_gpu_group_is_found_by_the_name_sizing_looks_for(name: str) -> None:
    """Sizing finds a group's price by the program's resource name: a rename in the program fails here."""
    from blueprint.cost.engine import price_graph

    run = offline_run(name)
    spec = parse_spec(raw_stack_config(name)["gpu-cluster:spec"], "x", now=None)
    report = price_graph(run.graph)
    names = {r.name for r in report.resources if r.nodes is not None}
    groups = spec.aws.node_groups if spec.aws is not None else spec.gcp_spec().node_pools
    assert {node_group_resource_name(spec.cloud, g.name) for g in groups} == names


def test_a_stack_that_only_serves_is_sized(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = raw_stack_config("prod-gcp")
    spec = gcp_serving_spec()
    del spec["workload"]["goodput"]
    spec["workload"]["economics"]["fromGoodput"] = False
    spec["workload"]["economics"].update(usefulWorkPerGpuMonth=0.07, retryFraction=0.02)
    config["gpu-cluster:spec"] = spec
    stack = tmp_path / "Pulumi.serve-only.yaml"
    stack.write_text(json.dumps({"config": config}))
    assert main(["sizing", str(stack)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("served model llama-8b (team applied, 2-4 replicas x 2 GPU(s) on l4)")
    assert "cost per million generated tokens: $0.56 at 2 replica(s), $0.74 at 4 (1,000 tokens/s per replica)" in out
    from blueprint.cost.prices import prices_for
    from blueprint.cost.render import format_usd

    hour = prices_for("gcp")["compute_on_demand.g2-standard-24"].usd / 2  # a GPU's share of the node-hour
    assert hour is not None
    assert (f"GPUs: {format_usd(2 * 2 * hour * 730)} a month at 2 replica(s), {format_usd(4 * 2 * hour * 730)} at 4 "
            f"(GPU-hour {format_usd(hour)}, from l4's instance-hour)") in out


def test_the_pr_comment_shows_the_served_models_after_the_change(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "base.json"
    assert main(["graph", "dev-aws", "-o", str(base)]) == 0  # a base without the served model: prod-aws changes
    capsys.readouterr()
    main(["cost", "diff", "--base", str(base), "prod-aws"])
    comment = capsys.readouterr().out
    section = comment.split("Served models after this change (`blueprint sizing`):", 1)[1].split("</details>", 1)[0]
    assert "served model llama-3-1-8b-instruct (team applied, 2-4 replicas x 1 GPU(s) on l40s)" in section
    # Money at each end of the autoscaled range: 2 and 4 g6e.xlarge (one L40S each) at $1.86 an hour.
    assert "GPUs: $2,717.06 a month at 2 replica(s), $5,434.12 at 4" in section
    assert "cost per million tokens: unknown" in section
    out = tmp_path / "diff.json"
    main(["cost", "diff", "--base", str(base), "prod-aws", "--format", "json", "-o", str(out)])
    doc = json.loads(out.read_text())
    assert any("cost per million tokens" in line for line in doc["serving"])
