"""The stack file's JSON Schema (blueprint/schemas/stack-file.schema.json) and the spec reference
(docs/spec-reference.md): generated from the models, shipped as generated, valid for every shipped stack, and as
strict as pydantic on keys, enums, bounds and patterns."""

from __future__ import annotations

import copy
import io
import json
import re
import typing
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft7Validator
from pydantic import BaseModel, TypeAdapter

from blueprint.files.output import OutputError
from blueprint.graph.stackfile import STACKS_DIR, load_stack, parse_stack_yaml
from blueprint.schema import stack_file as schema_cmd
from components.spec import ClusterSpec, SpecError, parse_spec
from components.spec.errors import _flatten
from tests.conftest import SHIPPED_STACKS

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_SCHEMA = schema_cmd.SCHEMA_FILE  # package data: an installed blueprint carries it too
SHIPPED_REFERENCE = ROOT / schema_cmd.REFERENCE_PATH
MODELINE = "# yaml-language-server: $schema=../blueprint/schemas/stack-file.schema.json"


def generated() -> dict[str, Any]:
    return schema_cmd.stack_file_schema()


def validator() -> Draft7Validator:
    return Draft7Validator(json.loads(SHIPPED_SCHEMA.read_text()))


def stack_doc(name: str) -> Any:
    """A shipped stack file as Pulumi reads it (timestamps stay strings)."""
    path = STACKS_DIR / f"Pulumi.{name}.yaml"
    return parse_stack_yaml(path.read_text(), str(path))


def _leaves(error: Any) -> list[Any]:
    """An optional object is ``anyOf: [object, null]``: its errors are those of the object branch."""
    if error.validator != "anyOf":
        return [error]
    return [leaf for c in error.context if not (c.validator == "type" and c.validator_value == "null")
            for leaf in _leaves(c)]


def schema_errors(doc: Any) -> list[tuple[list[Any], str]]:
    """Every error of ``doc`` under the shipped schema: (key path, the keyword it breaks), sorted."""
    found = [leaf for e in validator().iter_errors(doc) for leaf in _leaves(e)]
    return sorted(((list(e.absolute_path), str(e.validator)) for e in found), key=str)


# --- shipped as generated ---------------------------------------------------------------------------------------


def test_the_shipped_schema_is_the_generated_one() -> None:
    assert SHIPPED_SCHEMA == ROOT / schema_cmd.SCHEMA_PATH
    assert SHIPPED_SCHEMA.read_text() == schema_cmd.render_schema(), (
        f"{schema_cmd.SCHEMA_PATH} is out of date with components/spec: regenerate it with "
        f"`{schema_cmd.REGENERATE_SCHEMA}` (or `blueprint schema -o {schema_cmd.SCHEMA_PATH}`) and commit it")


def test_the_shipped_reference_is_the_generated_one() -> None:
    assert SHIPPED_REFERENCE.read_text() == schema_cmd.spec_reference(), (
        f"{schema_cmd.REFERENCE_PATH} is out of date with components/spec: regenerate it with "
        f"`{schema_cmd.REGENERATE_REFERENCE}` and commit it")


def test_the_schema_is_draft_07_for_yaml_language_server() -> None:
    schema = generated()
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    Draft7Validator.check_schema(schema)
    text = json.dumps(schema)
    assert "$defs" not in text and "prefixItems" not in text  # 2019-09/2020-12 keywords draft-07 does not know

    def refs_alone(node: Any) -> None:  # draft-07 ignores a $ref's siblings: they must not carry meaning
        if isinstance(node, dict):
            assert "$ref" not in node or len(node) == 1, node
            for value in node.values():
                refs_alone(value)
        elif isinstance(node, list):
            for value in node:
                refs_alone(value)

    refs_alone(schema)


# --- the shipped stacks ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SHIPPED_STACKS)
def test_every_shipped_stack_names_the_schema_and_is_valid_under_it(name: str) -> None:
    path = STACKS_DIR / f"Pulumi.{name}.yaml"
    first = path.read_text().splitlines()[0]
    assert first == MODELINE
    assert (path.parent / first.split("$schema=", 1)[1]).resolve() == SHIPPED_SCHEMA
    assert schema_errors(stack_doc(name)) == []
    assert load_stack(name).spec.name  # the comment changes nothing for the strict reader


def test_a_wrong_value_fails_with_its_key_path() -> None:
    doc = stack_doc("prod-aws")
    spec = doc["config"]["gpu-cluster:spec"]
    h100 = spec["aws"]["nodeGroups"][1]
    h100["maxSize"] = "lots"
    h100["maxSzie"] = 16
    h100["capacity"]["type"] = "capacity-blocks"
    spec["aws"]["controlPlane"]["logRetentionDays"] = 366
    spec["teams"][0]["budget"]["monthlyUsd"] = 0
    spec["name"] = "Prod"
    doc["config"]["gpu-cluster:spce"] = {}
    node_group = ["config", "gpu-cluster:spec", "aws", "nodeGroups", 1]
    assert schema_errors(doc) == sorted([
        (["config"], "additionalProperties"),
        (["config", "gpu-cluster:spec", "aws", "controlPlane", "logRetentionDays"], "enum"),
        (node_group, "additionalProperties"),
        ([*node_group, "capacity", "type"], "enum"),
        ([*node_group, "maxSize"], "type"),
        (["config", "gpu-cluster:spec", "name"], "pattern"),
        (["config", "gpu-cluster:spec", "teams", 0, "budget", "monthlyUsd"], "exclusiveMinimum"),
    ], key=str)


def test_other_providers_keys_are_allowed_and_typed_ones_checked() -> None:
    doc = stack_doc("prod-aws")
    doc["config"]["aws:profile"] = "ml-prod"
    doc["config"]["kubernetes:enableServerSideApply"] = True
    assert schema_errors(doc) == []
    doc["config"]["aws:region"] = 3
    doc["config"]["region"] = "us-east-1"
    assert schema_errors(doc) == sorted([(["config"], "additionalProperties"), (["config", "aws:region"], "type")],
                                        key=str)


# Values pydantic refuses in a field of its own (no cross-field rule); the schema refuses each too.
REFUSED: list[tuple[str, Any]] = [
    ("environment", "production"),
    ("deletionProtection", "yes"),
    ("workload.peakGpus", 0),
    ("workload.kind", "pretraining"),
    ("workload.workUnit", ""),
    ("aws.region", "us_east_1"),
    ("aws.nodeGroups.0.minSize", -1),
    ("aws.nodeGroups.0.rootVolumeGiB", 10),
    ("aws.nodeGroups.0.placement", "spread"),
    ("aws.nodeGroups.0.name", "System"),
    ("aws.nodeGroups.0.taints", [{"key": "a", "effect": "Never"}]),
    ("aws.network.subnets.0.role", "private"),
    ("aws.controlPlane.adminRoleArns", []),
    ("aws.controlPlane.logTypes", ["api", "everything"]),
    ("aws.storage.filesystem.deploymentType", "PERSISTENT_1"),
    ("platform.gpuSharing.replicas", 49),
    ("platform.monitoring.alerts.receivers.0.type", "sms"),
    ("teams.0.gid", 999),
    ("teams.0.quotas.0.gpus", 1.5),
    ("billing.notify", []),
    ("billing.costExport.timeGranularity", "WEEKLY"),
    ("labels", {"team": 3}),
    ("workload.economics", {"supportUsdPerMonth": 1, "operationsUsdPerMonth": 1, "idleFraction": 1}),
]


def _set(spec: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = [int(p) if p.isdigit() else p for p in dotted.split(".")]
    node: Any = spec
    for part in parents:
        node = node[part]
    node[last] = value


@pytest.mark.parametrize(("key", "value"), REFUSED, ids=[k for k, _ in REFUSED])
def test_what_pydantic_refuses_in_a_field_the_schema_refuses(key: str, value: Any) -> None:
    doc = stack_doc("prod-aws")
    _set(doc["config"]["gpu-cluster:spec"], key, value)
    with pytest.raises(SpecError) as info:
        parse_spec(copy.deepcopy(doc["config"]["gpu-cluster:spec"]), "stacks/Pulumi.prod-aws.yaml")
    assert "[rule: schema-" in str(info.value)
    assert schema_errors(doc) != []


# --- the schema mirrors the models ---------------------------------------------------------------------------------


def _models() -> list[type[BaseModel]]:
    return list(schema_cmd._models(ClusterSpec))


def _numeric(annotation: Any) -> bool:
    stack = _flatten(annotation)
    while stack:
        t = stack.pop()
        if t in (int, float) or (typing.get_origin(t) is typing.Literal
                                 and any(isinstance(a, int) for a in typing.get_args(t))):
            return True
        if typing.get_origin(t) is list:
            stack += _flatten(typing.get_args(t)[0])
    return False


def test_keys_are_written_as_people_write_them_and_every_key_is_described() -> None:
    definitions = generated()["definitions"]
    assert {m.__name__ for m in _models()} == set(definitions)
    for model in _models():
        properties = definitions[model.__name__]["properties"]
        assert list(properties) == [f.alias or n for n, f in model.model_fields.items()], model.__name__
        assert definitions[model.__name__].get("additionalProperties") is False, model.__name__
        for key, prop in properties.items():
            assert prop.get("description"), f"{model.__name__}.{key} has no description"
    assert "rootVolumeGiB" in definitions["NodeGroupSpec"]["properties"]
    assert "from" in definitions["AlertReceiverSpec"]["properties"]  # the alias, not the field name (sender)


UNITLESS = {("TeamSpec", "gid")}  # an identifier, not a quantity


def test_every_number_has_its_unit() -> None:
    definitions = generated()["definitions"]
    for model in _models():
        for name, field in model.model_fields.items():
            key = field.alias or name
            unit = definitions[model.__name__]["properties"][key].get("x-unit")
            if _numeric(field.annotation) and (model.__name__, name) not in UNITLESS:
                assert unit, f"{model.__name__}.{key}: give it json_schema_extra=unit(...)"
            elif not _numeric(field.annotation):
                assert unit is None, f"{model.__name__}.{key} is not a number"


def test_the_schema_defaults_are_the_models_defaults() -> None:
    definitions = generated()["definitions"]
    for model in _models():
        for name, field in model.model_fields.items():
            prop = definitions[model.__name__]["properties"][field.alias or name]
            if field.is_required():
                assert "default" not in prop and (field.alias or name) in definitions[model.__name__]["required"]
                continue
            expected = field.get_default(call_default_factory=True, validated_data={})
            read = TypeAdapter[Any](field.annotation).validate_python(prop["default"])
            assert read == expected, f"{model.__name__}.{name}"


def test_enums_and_bounds_reach_the_schema() -> None:
    definitions = generated()["definitions"]
    max_size = definitions["NodeGroupSpec"]["properties"]["maxSize"]
    assert (max_size["type"], max_size["minimum"], max_size["maximum"], max_size["x-unit"]) == ("integer", 1, 1000,
                                                                                               "nodes")
    capacity = definitions["CapacitySpec"]["properties"]["type"]
    assert capacity["enum"] == ["on-demand", "spot", "capacity-block", "reserved"]
    assert capacity["default"] == "on-demand"
    monthly = definitions["BudgetSpec"]["properties"]["monthlyUsd"]
    assert (monthly["exclusiveMinimum"], monthly["maximum"]) == (0, 100_000_000)
    assert "gt" not in monthly and "le" not in monthly


# --- the reference -------------------------------------------------------------------------------------------------


def test_the_reference_lists_every_key_path_with_its_facts() -> None:
    text = schema_cmd.spec_reference()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `([^`]+)` \|.*$", text, re.M)}
    assert rows["aws.nodeGroups[].maxSize"] == (
        "| `aws.nodeGroups[].maxSize` | integer | **required** | 1 to 1000 | nodes | Maximum nodes. |")
    assert rows["aws.nodeGroups[].capacity.type"].startswith(
        "| `aws.nodeGroups[].capacity.type` | string | `on-demand` | `on-demand`, `spot`, `capacity-block`, "
        "`reserved` |  | on-demand, spot, an EC2 Capacity Block")
    assert rows["gcp.cluster.maintenance.recurrence"].split(" | ")[3] == (
        r"pattern `^FREQ=(DAILY\|WEEKLY)(;BYDAY=[A-Z,]+)?$`")  # a pipe would split the cell
    assert rows["teams[].budget.monthlyUsd"].split(" | ")[3:5] == ["> 0 and <= 100000000", "USD per month"]
    assert "aws:region" in rows and "gcp:project" in rows
    assert "&lt;repository>@sha256:&lt;64 hex>" in rows["acceptance.image"]  # not read as HTML tags
    for model in _models():
        for name, field in model.model_fields.items():
            key = field.alias or name
            assert any(path == key or path.endswith(f".{key}") for path in rows), f"{model.__name__}.{key}"


# --- the command ---------------------------------------------------------------------------------------------------


def test_registering_the_command_loads_no_model() -> None:
    """`blueprint` imports the module for every sub-command; `blueprint policy graph.json` needs no spec."""
    import subprocess
    import sys

    code = ("import sys, blueprint.schema.stack_file; "
            "print(sorted(m for m in sys.modules if m.startswith(('pydantic', 'components'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    from components.spec import SPEC_KEY

    assert schema_cmd.SPEC_KEY == SPEC_KEY
    assert ClusterSpec.__name__ == schema_cmd.ROOT_MODEL


def _args(*argv: str) -> Any:
    import argparse

    parser = argparse.ArgumentParser()
    schema_cmd.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["schema", *argv])


def test_the_command_writes_the_schema_or_the_reference(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert schema_cmd.run(_args()) == 0
    assert capsys.readouterr().out == SHIPPED_SCHEMA.read_text()
    out = tmp_path / "reference.md"
    assert schema_cmd.run(_args("--format", "markdown", "-o", str(out))) == 0
    assert out.read_text() == SHIPPED_REFERENCE.read_text()
    assert capsys.readouterr().out == ""


def test_an_output_that_cannot_be_written_is_refused_before_any_work(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(OutputError, match="is a directory"):
        schema_cmd.run(_args("-o", str(tmp_path)))
    assert schema_cmd.main(["-o", str(tmp_path / "missing" / "schema.json")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'missing' / 'schema.json'}: the directory " \
                                      f"{tmp_path / 'missing'} does not exist\n"


def test_python_m_blueprint_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    assert schema_cmd.main(["--format", "json"]) == 0
    assert json.loads(out.getvalue()) == generated()
