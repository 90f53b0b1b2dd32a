"""Each shipped stack's graph matches its committed golden file, so a pull request shows exactly what
changed in the infrastructure. Regenerate only on purpose: ``make golden`` (pytest --update-golden)."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from tests.conftest import SHIPPED_STACKS, offline_run

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


@pytest.mark.parametrize("stack_name", SHIPPED_STACKS)
def test_graph_matches_golden(stack_name: str, request: pytest.FixtureRequest) -> None:
    actual = offline_run(stack_name).graph.to_json()
    path = GOLDEN / f"{stack_name}.json"
    if request.config.getoption("--update-golden"):
        path.write_text(actual, encoding="utf-8")
        return
    assert path.exists(), f"{path} is missing; run `make golden` and commit it"
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = "".join(difflib.unified_diff(
            expected.splitlines(keepends=True), actual.splitlines(keepends=True),
            fromfile=f"golden/{stack_name}.json", tofile="program", n=2))
        pytest.fail(f"the {stack_name} graph changed; if intended, run `make golden` and commit:\n{diff[:6000]}")


def test_golden_runs_are_deterministic() -> None:
    from blueprint.graph.engine import run_program
    from tests.conftest import stack

    sf = stack("prod-aws")
    again = run_program(sf.name, sf.config, sf.region).graph.to_json()
    assert again == offline_run("prod-aws").graph.to_json()
