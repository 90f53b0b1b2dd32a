"""The same graph gives the same output, whatever order its resources were registered in and whatever order Python
iterates a set in. The engine answers registrations in a different order from run to run, and the hash seed changes
with every process: a reader that took "the first provider" or iterated a set of URNs printed us-east-1 for dev-aws one
run in six, named another team in ``policy --explain`` and numbered the report's edges differently."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from blueprint.cost.engine import price_graph
from blueprint.cost.render import render_cost_json
from blueprint.graph.model import ResourceGraph
from blueprint.policy.runner import render_json, run_policies
from blueprint.report.diagram import build_diagram, dot_source

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"


def shuffled(graph: ResourceGraph, seed: int) -> ResourceGraph:
    """The graph with its resources, and each resource's dependencies, in another order."""
    rng = random.Random(seed)
    resources = [replace(r, dependencies=rng.sample(r.dependencies, len(r.dependencies))) for r in graph.resources]
    rng.shuffle(resources)
    return ResourceGraph(graph.stack, resources, graph.unrecorded)


def golden(stack: str) -> ResourceGraph:
    return ResourceGraph.from_dict(json.loads((GOLDEN / f"{stack}.json").read_text(encoding="utf-8")))


@pytest.mark.parametrize("stack", ["dev-aws", "byo-aws", "prod-gcp"])
def test_the_cost_report_does_not_depend_on_registration_order(stack: str) -> None:
    graph = golden(stack)
    first = render_cost_json(price_graph(graph), None)
    for seed in range(4):
        assert render_cost_json(price_graph(shuffled(graph, seed)), None) == first


def test_the_region_is_the_main_providers_not_the_billing_ones() -> None:
    # dev-aws has two AWS providers: the stack's (us-west-2) and the billing one (us-east-1, for Budgets and CUR).
    report = json.loads(render_cost_json(price_graph(golden("dev-aws")), None))
    assert report["region"] == "us-west-2"
    # ... so the catalog's us-east-1 list prices are said to be another region's.
    assert "some prices are list prices of us-east-1; this stack is in us-west-2" in report["notes"]


@pytest.mark.parametrize("stack", ["prod-gcp", "dev-aws"])
def test_policy_findings_come_in_one_order(stack: str) -> None:
    graph = golden(stack)
    # Break the stack so that one stack policy reports several findings on one resource (one per team).
    mutated = ResourceGraph(graph.stack, [replace(r, inputs={k: v for k, v in r.inputs.items()
                                                              if k != "authenticatorGroupsConfig"})
                                          for r in graph.resources], graph.unrecorded)
    first = render_json(run_policies(mutated))
    for seed in range(3):
        assert render_json(run_policies(shuffled(mutated, seed))) == first


def _diagram_source(stack: str, seed: int) -> str:
    """The report diagram's DOT source of a golden graph, shuffled, in a process with its own hash seed."""
    code = ("import sys, json\n"
            "from tests.graph.test_determinism import golden, shuffled\n"
            "from blueprint.report.diagram import build_diagram, dot_source\n"
            f"graph = shuffled(golden({stack!r}), {seed})\n"
            "print(dot_source(build_diagram(graph), 'x').source)\n")
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True).stdout.removesuffix("\n")


@pytest.mark.parametrize("stack", ["prod-aws", "dev-gcp"])
def test_the_report_diagram_does_not_depend_on_set_order(stack: str) -> None:
    sources = {_diagram_source(stack, seed) for seed in (1, 2, 3)}
    assert len(sources) == 1
    assert sources.pop() == dot_source(build_diagram(golden(stack)), "x").source
