"""inference.models is refused at load, with its key path and rule, when it could never serve."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from components.spec import SpecError, parse_spec
from tests.inference.specs import aws_serving_spec, gcp_serving_spec

FILE = "stacks/Pulumi.serve.yaml"


def refusals(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """(rule, key path) of every problem parse_spec reports; [] when the spec is accepted."""
    try:
        parse_spec(spec, FILE)
    except SpecError as err:
        return [(i.rule, i.path) for i in err.issues]
    return []


def model(spec: dict[str, Any]) -> dict[str, Any]:
    first: dict[str, Any] = spec["inference"]["models"][0]
    return first


@pytest.mark.parametrize("build", [gcp_serving_spec, aws_serving_spec])
def test_a_served_model_that_fits_is_accepted(build: Callable[[], dict[str, Any]]) -> None:
    assert refusals(build()) == []


CASES: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    # Llama 3.1 70B in bf16 (141 GB) on two L4s (48 GB): vLLM would refuse to start.
    ("70b on two L4s", lambda s: model(s)["model"].update(parametersBillions=70.6, layers=80, attentionHeads=64),
     "inference-model-fits", "inference.models[llama-8b].contextTokens"),
    # It fits its weights but not one sequence of a 1M-token context (128 GiB of KV cache).
    ("context beyond the KV cache", lambda s: model(s).update(contextTokens=1_048_576),
     "inference-model-fits", "inference.models[llama-8b].contextTokens"),
    ("tp wider than a node without a fabric", lambda s: model(s).update(tensorParallel=4),
     "inference-multi-node-fabric", "inference.models[llama-8b].pipelineParallel"),
    ("tp that does not divide the heads", lambda s: model(s).update(tensorParallel=3),
     "inference-parallel-sizes", "inference.models[llama-8b].tensorParallel"),
    ("a concurrency four replicas cannot hold", lambda s: model(s)["objectives"].update(concurrency=200),
     "inference-concurrency-fits", "inference.models[llama-8b].objectives.concurrency"),
    ("a peak four replicas cannot serve", lambda s: model(s)["objectives"].update(peakOutputTokensPerSecond=9000),
     "inference-replicas-cover-peak", "inference.models[llama-8b].replicas.max"),
    ("a floor beyond the team's quota", lambda s: model(s)["replicas"].update(min=4, max=4) or
     next(t for t in s["teams"] if t["name"] == "applied")["quotas"][-1].update(gpus=6),
     "inference-quota", "inference.models[llama-8b].replicas.min"),
    ("one replica in production", lambda s: model(s)["replicas"].update(min=1),
     "inference-replicas-prod", "inference.models[llama-8b].replicas.min"),
    ("an unknown team", lambda s: model(s).update(team="nobody"),
     "inference-team", "inference.models[llama-8b].team"),
    ("an unknown group", lambda s: model(s).update(nodeGroup="a100"),
     "inference-node-group", "inference.models[llama-8b].nodeGroup"),
    ("a group without GPUs", lambda s: model(s).update(nodeGroup="cpu"),
     "inference-node-group", "inference.models[llama-8b].nodeGroup"),
    ("a prefix that climbs out", lambda s: model(s)["weights"].update(prefix="models/../teams/"),
     "inference-weights-prefix", "inference.models[llama-8b].weights.prefix"),
    ("a read rate without its source", lambda s: model(s)["weights"].pop("readSource"),
     "inference-figure-sourced", "inference.models[llama-8b].weights.readSource"),
    ("more kv heads than heads", lambda s: model(s)["model"].update(kvHeads=64),
     "inference-model-shape", "inference.models[llama-8b].model.kvHeads"),
    ("weights in a team's checkpoint prefix", lambda s: model(s)["weights"].update(prefix="research/"),
     "inference-weights-prefix", "inference.models[llama-8b].weights.prefix"),
    ("weights among the acceptance records", lambda s: model(s)["weights"].update(prefix="acceptance/models/"),
     "inference-weights-prefix", "inference.models[llama-8b].weights.prefix"),
    ("an engine from a registry the stack refuses",
     lambda s: model(s)["engine"].update(image="docker.io/vllm/vllm-openai@sha256:" + "cd" * 32),
     "inference-image-registry", "inference.models[llama-8b].engine.image"),
    ("no HTTPS egress for the weights", lambda s: s["platform"].update(allowHttpsEgress=False),
     "inference-weights-egress", "inference.models[llama-8b].weights"),
    ("requests longer than the context", lambda s: model(s)["objectives"].update(promptTokens=8000, outputTokens=400),
     "inference-request-shape", "inference.models[llama-8b].objectives.outputTokens"),
    ("a benchmark from a registry the stack refuses",
     lambda s: s["inference"].update(benchmark={"image": "quay.io/inference-perf/inference-perf@sha256:" + "ab" * 32}),
     "inference-image-registry", "inference.benchmark.image"),
    # g2-standard-24 holds one replica of two GPUs; the pool has at most 8 nodes.
    ("more replicas than the group's nodes hold", lambda s: model(s)["replicas"].update(max=9),
     "inference-group-capacity", "inference.models[llama-8b].replicas.max"),
    ("a model served twice", lambda s: s["inference"]["models"].append(dict(model(s))),
     "unique-names", "inference.models[1].name"),
]


@pytest.mark.parametrize(("case", "change", "rule", "path"), CASES, ids=[c[0] for c in CASES])
def test_what_could_never_serve_is_refused_at_load(case: str, change: Callable[[dict[str, Any]], None],
                                                   rule: str, path: str) -> None:
    spec = gcp_serving_spec()
    change(spec)
    found = refusals(spec)
    assert (rule, f"gpu-cluster:spec.{path}") in found, found


def test_a_block_of_capacity_ends_and_so_would_the_service() -> None:
    """prod-aws's h100 group is a Capacity Block: no node exists outside its window."""
    spec = aws_serving_spec()
    model(spec).update(nodeGroup="h100")
    next(t for t in spec["teams"] if t["name"] == "applied")["quotas"][0].update(gpus=16)
    assert ("inference-continuous-capacity", "gpu-cluster:spec.inference.models[llama-8b].nodeGroup") \
        in refusals(spec)


def test_a_slurm_group_does_not_serve() -> None:
    from tests.conftest import raw_stack_config

    spec = raw_stack_config("prod-aws-slurm")["gpu-cluster:spec"]
    group = spec["scheduler"]["slurm"]["nodeGroups"][0]
    team = spec["teams"][0]
    spec["inference"] = {"models": [{**gcp_serving_spec()["inference"]["models"][0], "nodeGroup": group,
                                     "team": team["name"], "tensorParallel": 1}]}
    assert any(r == ("inference-node-group", "gpu-cluster:spec.inference.models[llama-8b].nodeGroup")
               for r in refusals(spec)), refusals(spec)


def test_the_error_names_the_file_the_key_and_the_rule() -> None:
    spec = gcp_serving_spec()
    model(spec)["model"].update(parametersBillions=70.6, layers=80, attentionHeads=64)
    with pytest.raises(SpecError) as err:
        parse_spec(spec, FILE)
    line = next(line for line in str(err.value).splitlines() if "inference-model-fits" in line)
    assert line.startswith(f"{FILE}: gpu-cluster:spec.inference.models[llama-8b].contextTokens: llama-8b does not "
                           "fit 2 x 24 GB")
    assert "weights 131.5 GiB" in line


def test_a_node_too_small_for_the_engine_on_the_host_is_refused() -> None:
    """g6.xlarge: one L4 and 16 GiB; three quarters of it (12) cannot hold the streamer's 4 GB buffer, the engine's
    8 GiB and 2 GiB of /dev/shm."""
    spec = aws_serving_spec()
    next(g for g in spec["aws"]["nodeGroups"] if g["name"] == "l40s")["instanceType"] = "g6.xlarge"
    assert ("inference-host-memory", "gpu-cluster:spec.inference.models[llama-8b].nodeGroup") in refusals(spec)
