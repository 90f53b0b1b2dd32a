"""Where CPU-only team work lands (issue 36): admit says which node group takes it and, when that is a GPU group,
why (docs/limits.md, "CPU-only work")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.admit.test_admit import admit, job


def test_a_cpu_only_pod_is_shown_landing_on_the_gpu_nodes(graph_files: Callable[[str], Path], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    prep = job(gpus=0)
    prep["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "4", "memory": "8Gi"}}
    code, report = admit(graph_files("prod-aws"), tmp_path, prep, capsys=capsys)
    (workload,) = report["workloads"]
    assert code == 0 and workload["flavor"] == "h100"
    assert workload["placements"] == [{"pod_set": "main", "node_group": "h100", "nodes": 1, "pods": 1}]
    assert ("pod set main asks for no GPU but lands on NodeGroup/h100 (p5.48xlarge, a GPU node group): Kueue's "
            "flavor h100 places it there (the team's queue has no CPU flavor); it holds a GPU node's CPU and memory "
            "while it runs") in workload["notes"]


def test_a_gpu_pod_gets_no_such_note(graph_files: Callable[[str], Path], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, report = admit(graph_files("prod-aws"), tmp_path, job(), capsys=capsys)
    assert code == 0 and not [n for n in report["workloads"][0]["notes"] if "asks for no GPU" in n]
