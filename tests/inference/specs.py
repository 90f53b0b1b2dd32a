"""The shipped production stacks with a served model added (for the inference tests): a GPU group of its own, the
owning team's quota on it, and one ``inference.models`` entry whose figures are Llama 3.1 8B Instruct's."""

from __future__ import annotations

import copy
from typing import Any

from tests.conftest import raw_stack_config

# Llama 3.1 8B Instruct's config.json (huggingface.co/meta-llama/Llama-3.1-8B-Instruct, read 2026-12-03):
# num_hidden_layers 32, num_attention_heads 32, num_key_value_heads 8, hidden_size 4096 (head_dim 128); 8.03B
# parameters (the model card).
LLAMA_8B: dict[str, Any] = {
    "parametersBillions": 8.03, "layers": 32, "attentionHeads": 32, "kvHeads": 8, "headDim": 128,
    "source": "huggingface.co/meta-llama/Llama-3.1-8B-Instruct config.json (read 2026-12-03)",
}
AWS_REGISTRY = "111122223333.dkr.ecr.us-east-1.amazonaws.com/"
DIGEST = "@sha256:" + "ab" * 32


def served(name: str = "llama-8b", group: str = "l4", team: str = "applied", tp: int = 2,
           registry: str = "us-central1-docker.pkg.dev/acme-ml-prod/ml/") -> dict[str, Any]:
    """One served model (figures of the test, not measurements: throughput and read rate are examples)."""
    return {
        "name": name, "team": team, "nodeGroup": group,
        "model": copy.deepcopy(LLAMA_8B),
        "weights": {"prefix": f"models/{name}/", "dtype": "bf16", "readMBps": 400,
                    "readSource": "test figure"},
        "engine": {"image": f"{registry}vllm-openai{DIGEST}", "version": "v0.11.0",
                   "startSeconds": 60},
        "contextTokens": 8192, "tensorParallel": tp,
        "replicas": {"min": 2, "max": 4},
        "objectives": {"ttftMs": 500, "tpotMs": 50, "concurrency": 64, "failoverSeconds": 300,
                       "peakOutputTokensPerSecond": 3000},
        "throughput": {"outputTokensPerSecond": 1000, "source": "test figure"},
        "baseline": {"usdPerMillionTokens": 0.6, "source": "test figure"},
    }


def without_serving(spec: dict[str, Any]) -> dict[str, Any]:
    """A shipped spec (prod-aws, prod-gcp) without its served model, the model's node group and its team's quota
    there: the training cluster, for tests of other planes that change its groups or teams wholesale."""
    groups = spec["aws"]["nodeGroups"] if spec["cloud"] == "aws" else spec["gcp"]["nodePools"]
    for model in (spec.get("inference") or {}).get("models", []):
        _without_serving(spec, groups, model["nodeGroup"])
    spec.pop("inference", None)
    return spec


def _without_serving(spec: dict[str, Any], groups: list[dict[str, Any]], name: str) -> None:
    """The shipped stack's own served model, its group and its team's quota there taken out (the tests add theirs)."""
    spec.pop("inference", None)
    groups[:] = [g for g in groups if g["name"] != name]
    for team in spec["teams"]:
        team["quotas"] = [q for q in team["quotas"] if q["nodeGroup"] != name]


def gcp_serving_spec() -> dict[str, Any]:
    """prod-gcp with an autoscaled g2-standard-24 pool (2 x L4 24 GB) serving one model for team applied."""
    spec: dict[str, Any] = raw_stack_config("prod-gcp")["gpu-cluster:spec"]
    _without_serving(spec, spec["gcp"]["nodePools"], "l4")
    spec["gcp"]["nodePools"].append({"name": "l4", "machineType": "g2-standard-24", "minSize": 4, "desiredSize": 4,
                                     "maxSize": 8})
    team = next(t for t in spec["teams"] if t["name"] == "applied")
    team["quotas"].append({"nodeGroup": "l4", "gpus": 16})
    spec["acceptance"]["expected"].append({"nodeGroup": "l4", "nodes": 1, "busbwGbps": 10, "source": "test figure"})
    spec["acceptance"]["expected"].append({"nodeGroup": "l4", "nodes": 8, "busbwGbps": 5, "source": "test figure"})
    spec["inference"] = {"models": [served()]}
    return spec


def aws_serving_spec() -> dict[str, Any]:
    """prod-aws with an on-demand g6e.12xlarge group (4 x L40S 48 GB) serving one model for team applied."""
    spec: dict[str, Any] = raw_stack_config("prod-aws")["gpu-cluster:spec"]
    _without_serving(spec, spec["aws"]["nodeGroups"], "l40s")
    spec["aws"]["nodeGroups"].append({"name": "l40s", "instanceType": "g6e.12xlarge", "minSize": 2,
                                      "desiredSize": 2, "maxSize": 4})
    team = next(t for t in spec["teams"] if t["name"] == "applied")
    team["quotas"].append({"nodeGroup": "l40s", "gpus": 16})
    spec["acceptance"].setdefault("expected", []).append(
        {"nodeGroup": "l40s", "nodes": 1, "busbwGbps": 20, "source": "test figure"})
    spec["acceptance"]["expected"].append({"nodeGroup": "l40s", "nodes": 4, "busbwGbps": 10, "source": "test figure"})
    spec["inference"] = {"models": [served(group="l40s", tp=1, registry=AWS_REGISTRY)]}
    return spec
