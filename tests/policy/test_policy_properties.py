"""Every policy meets arbitrary inputs of the resource types it checks, as a real preview can hand it any
value: a wrongly typed input is a violation or not applicable, never a crash of the pack (issue 8)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import re
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blueprint.graph.model import ResourceGraph
from blueprint.policy.runner import LevelConfig, Pack, load_pack, normalize_config, run_policies
from tests.conftest import json_paths, offline_run
from tests.policy.test_policies import assert_fields_hold

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


@cache
def pack() -> Pack:
    return load_pack()


@cache
def graph() -> ResourceGraph:
    return offline_run("prod-aws").graph


@cache
def only(policy: str) -> LevelConfig:
    levels = {p.name: "disabled" for p in pack().policies}
    levels[policy] = "advisory"
    return normalize_config(levels, pack().policies)


@cache
def types_checked(policy: str) -> tuple[str, ...]:
    """The resource types named in the policy's module that the prod graph has (all of them if none)."""
    obj = next(p for p in pack().policies if p.name == policy)
    validate = next(v for k, v in vars(obj).items() if k.endswith("__validate"))  # the function the pack gave
    check = inspect.getclosurevars(validate).nonlocals["check"]
    source = inspect.getsource(inspect.getmodule(check))  # type: ignore[arg-type]
    named = set(re.findall(r'"((?:aws|kubernetes|pulumi):[^"\s]+)"', source))
    present = {r.type for r in graph().resources if not r.is_component}
    return tuple(sorted(named & present)) or tuple(sorted(t for t in present if t != "pulumi:pulumi:Stack"))




@st.composite
def mutated_inputs(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    inputs = copy.deepcopy(base)
    if draw(st.booleans()):
        # every top-level input of a wrong shape at once: what a hostile or buggy preview could send
        return {key: draw(json_values) for key in inputs}
    paths = json_paths(inputs)
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["replace", "delete", "add", "wrong-top"] if paths else ["add"]))
        if action == "add":
            inputs[draw(st.text(min_size=1, max_size=8))] = draw(json_values)
            continue
        if action == "wrong-top" and inputs:
            inputs[draw(st.sampled_from(sorted(inputs)))] = draw(json_values)
            continue
        path = draw(st.sampled_from(paths))
        parent: Any = inputs
        try:
            for part in path[:-1]:
                parent = parent[part]
            if isinstance(parent, dict) != isinstance(path[-1], str):
                continue  # an earlier change turned a list into an object (or back): JSON keys stay strings
            if action == "replace":
                parent[path[-1]] = draw(json_values)
            elif isinstance(parent, dict):
                del parent[path[-1]]
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change removed the path
    return inputs


POLICY_NAMES = sorted(p.name for p in load_pack().policies)


@pytest.mark.parametrize("policy", POLICY_NAMES)
@given(data=st.data())
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_policy_never_crashes_on_arbitrary_inputs(policy: str, data: st.DataObject) -> None:
    type_ = data.draw(st.sampled_from(types_checked(policy)))
    target = data.draw(st.sampled_from([r for r in graph().resources if r.type == type_]))
    inputs = data.draw(mutated_inputs(target.inputs))
    protect = data.draw(st.booleans())
    changed = [dataclasses.replace(r, inputs=inputs, protect=protect) if r.urn == target.urn else r
               for r in graph().resources]
    mutated = ResourceGraph(graph().stack, changed)
    report = run_policies(mutated, only(policy), pack())
    assert {v.policy for v in report.violations} <= {policy}
    for v in report.violations:
        assert v.message and "Traceback" not in v.message
    assert_fields_hold(mutated, report.violations)


def test_a_wrongly_typed_input_is_a_violation_not_a_crash() -> None:
    changed = [dataclasses.replace(r, inputs={**r.inputs, "metadataOptions": "required"})
               if r.type == "aws:ec2/launchTemplate:LaunchTemplate" else r for r in graph().resources]
    report = run_policies(ResourceGraph(graph().stack, changed), only("aws-ec2-launch-template-requires-imdsv2"),
                          pack())
    assert report.violations and all(v.policy == "aws-ec2-launch-template-requires-imdsv2"
                                      for v in report.violations)
    changed = [dataclasses.replace(r, inputs={**r.inputs, "scalingConfig": {"maxSize": "lots"}})
               if r.type == "aws:eks/nodeGroup:NodeGroup" else r for r in graph().resources]
    report = run_policies(ResourceGraph(graph().stack, changed), only("aws-eks-gpu-nodegroup-max-size-cap"), pack())
    assert any("unexpected shape" in v.message for v in report.violations)
