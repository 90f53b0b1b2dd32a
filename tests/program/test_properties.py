"""Property-based: any malformed spec gives a clear, well-formed error and registers nothing."""

from __future__ import annotations

import copy
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import blueprint.cli
import blueprint.graph.engine
from components.spec import SpecError, parse_spec
from tests.conftest import json_paths, raw_stack_config

FILE = "stacks/Pulumi.fuzz.yaml"
LINE = re.compile(r"^stacks/Pulumi\.fuzz\.yaml: gpu-cluster:spec.*?: .+ \[rule: [a-z0-9-]+\]$")
BASE = raw_stack_config("prod-aws")["gpu-cluster:spec"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)




PATHS = json_paths(BASE)


@st.composite
def mutated_specs(draw: st.DrawFn) -> dict[str, Any]:
    spec = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        parent: Any = spec
        try:
            for part in path[:-1]:
                parent = parent[part]
            action = draw(st.sampled_from(["replace", "delete", "extra"]))
            if action == "replace":
                parent[path[-1]] = draw(json_values)
            elif action == "delete" and isinstance(parent, dict):
                del parent[path[-1]]
            elif isinstance(parent, dict):
                parent[draw(st.text(min_size=1, max_size=8))] = draw(json_values)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or replaced this path
    return spec


def _check(spec: Any) -> SpecError | None:
    try:
        parse_spec(spec, FILE, provider_region="us-east-1")
    except SpecError as err:
        lines = str(err).splitlines()
        assert lines, "a SpecError must list at least one issue"
        for line in lines:
            assert LINE.match(line), line
        return err
    return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_specs())
def test_mutated_specs_fail_only_with_clear_errors(spec: dict[str, Any]) -> None:
    _check(spec)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_arbitrary_values_are_always_rejected_clearly(value: Any) -> None:
    assert _check(value) is not None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=mutated_specs())
def test_cli_registers_nothing_for_an_invalid_spec(spec: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    if _check(spec) is None:
        return  # the mutation happened to be valid
    calls: list[str] = []
    monkeypatch.setattr(blueprint.graph.engine, "run_program", lambda *a, **k: calls.append("ran"))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "Pulumi.fuzz.yaml"
        path.write_text(yaml.safe_dump({"config": {"aws:region": "us-east-1", "gpu-cluster:spec": spec}}))
        assert blueprint.cli.main(["graph", str(path)]) == 2
    assert calls == []


REQUIRED = [("name",), ("environment",), ("labels",), ("workload",), ("aws", "region"), ("aws", "network"),
            ("aws", "nodeGroups"), ("aws", "controlPlane"), ("aws", "controlPlane", "deployer"),
            ("workload", "peakGpus"), ("aws", "network", "vpcCidr")]


@pytest.mark.parametrize("path", REQUIRED, ids=".".join)
def test_removing_a_required_key_is_always_rejected(path: tuple[str, ...]) -> None:
    # Guards the properties above: with validation switched off they would pass, this would not.
    spec = copy.deepcopy(BASE)
    parent: Any = spec
    for part in path[:-1]:
        parent = parent[part]
    del parent[path[-1]]
    err = _check(spec)
    assert err is not None
    assert any(i.rule == "schema-required-key" for i in err.issues)
