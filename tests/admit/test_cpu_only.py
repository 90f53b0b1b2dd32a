"""Where CPU-only team work lands (issue 36): on the team's CPU flavor (``teams[].cpuQuotas``) and its node group
without GPUs where the stack gives one; otherwise, or past the CPU flavor's quota, on a GPU group, and admit says
why (docs/limits.md, "CPU-only work")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.admit.test_admit import admit, job


def prep(namespace: str = "research", cpu: str = "4", memory: str = "8Gi") -> dict[str, Any]:
    """A data-preparation Job: CPU and memory, no GPU."""
    manifest = job(namespace, gpus=0)
    manifest["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": memory}}
    return manifest


@pytest.mark.parametrize("stack", ["prod-aws", "prod-gcp"])
def test_a_cpu_only_pod_lands_on_the_cpu_group(stack: str, graph_files: Callable[[str], Path], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, report = admit(graph_files(stack), tmp_path, prep(), capsys=capsys)
    (workload,) = report["workloads"]
    assert code == 0 and workload["flavor"] == "cpu-47400688"
    assert workload["placements"] == [{"pod_set": "main", "node_group": "cpu", "nodes": 1, "pods": 1}]
    assert not [n for n in workload["notes"] if "asks for no GPU" in n]


def test_a_gpu_pod_passes_over_the_cpu_flavor(graph_files: Callable[[str], Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, report = admit(graph_files("prod-aws"), tmp_path, job(), capsys=capsys)
    (workload,) = report["workloads"]
    assert code == 0 and workload["flavor"] == "h100"
    assert workload["placements"] == [{"pod_set": "main", "node_group": "h100", "nodes": 1, "pods": 1}]
    assert not [n for n in workload["notes"] if "asks for no GPU" in n]


def test_past_its_cpu_quota_a_cpu_only_pod_lands_on_gpu_nodes_and_admit_says_why(
        graph_files: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # research's CPU quota on prod-aws is 32 cores and lends nothing: Kueue tries the next flavor, h100
    code, report = admit(graph_files("prod-aws"), tmp_path, prep(cpu="20"), capsys=capsys)
    (workload,) = report["workloads"]
    assert code == 0 and workload["flavor"] == "h100"
    assert workload["placements"] == [{"pod_set": "main", "node_group": "h100", "nodes": 1, "pods": 1}]
    assert ("pod set main asks for no GPU but lands on NodeGroup/h100 (p5.48xlarge, a GPU node group): Kueue's "
            "flavor h100 places it there, past the team's CPU flavor (flavor cpu-47400688: 20 cpu needed, at most 16 "
            "(nominal 16 + 0 borrowed from cohort prod-train-gpus (the others lend 0))); it holds a GPU node's CPU and "
            "memory while it runs") in workload["notes"]


def test_without_a_cpu_quota_admit_says_the_queue_has_no_cpu_flavor(
        graph_files: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # dev-aws gives its team no CPU quota: the l4 flavor takes the pod
    code, report = admit(graph_files("dev-aws"), tmp_path, prep(cpu="1", memory="2Gi"), capsys=capsys)
    (workload,) = report["workloads"]
    assert code == 0 and workload["flavor"] == "l4"
    assert [n for n in workload["notes"] if "asks for no GPU" in n] == [
        "pod set main asks for no GPU but lands on NodeGroup/l4 (g6.xlarge, a GPU node group): Kueue's flavor l4 "
        "places it there (the team's queue has no CPU flavor: give the team a CPU quota on a node group without GPUs, "
        "teams[].cpuQuotas); it holds a GPU node's CPU and memory while it runs"]
