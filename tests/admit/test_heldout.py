"""Held-out workloads (issue 36): each file of ``tests/admit/heldout/`` is a workload people wrote that the API server,
the scheduler or Kueue treats in a way ``blueprint admit`` once got wrong (admitted what is refused, or refused it
for the wrong reason), with the stack it is judged on and the exact verdict expected: admitted or not, every reason
(rule, object, message) in order, and, where given, where its pods land.

A case file is YAML: ``stack``, ``expect`` (``admitted``, ``reasons``, optional ``placements`` and ``flavor``) and
``workload`` (one Kubernetes object); a comment at its top says what it is and which rule decides it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.cli import main

CASES = Path(__file__).resolve().parent / "heldout"


def _cases() -> list[Path]:
    return sorted(CASES.glob("*.yaml"))


def load_case(path: Path) -> dict[str, Any]:
    """A case file's stack, expectation and workload."""
    case = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert set(case) == {"stack", "expect", "workload"}, path.name
    return case  # type: ignore[no-any-return]


def verdict(graph: Path, workload: dict[str, Any], tmp_path: Path,
            capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    """``blueprint admit --format json`` on one workload: (exit status, its result)."""
    path = tmp_path / "workload.yaml"
    path.write_text(yaml.safe_dump(workload, sort_keys=False), encoding="utf-8")
    code = main(["admit", str(graph), str(path), "--format", "json"])
    (result,) = json.loads(capsys.readouterr().out)["workloads"]
    return code, result  # type: ignore[no-any-return]


@pytest.mark.parametrize("path", _cases(), ids=lambda p: p.stem)
def test_each_held_out_workload_gets_its_verdict(path: Path, graph_files: Callable[[str], Path], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    case = load_case(path)
    expect = case["expect"]
    code, result = verdict(graph_files(case["stack"]), case["workload"], tmp_path, capsys)
    assert result["admitted"] is expect["admitted"] and code == (0 if expect["admitted"] else 1), result["reasons"]
    assert result["reasons"] == expect["reasons"]
    if "placements" in expect:
        assert result["placements"] == expect["placements"]
    if "flavor" in expect:
        assert result["flavor"] == expect["flavor"]
