"""How errors and warnings point into the stack file: list items by name, and "did you mean" for near misses."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from blueprint.graph.stackfile import StackError, load_stack
from components.spec import SpecError, parse_spec
from components.spec.errors import did_you_mean, named_path
from components.spec.notes import capacity_block_notes

FILE = "stacks/Pulumi.prod-aws.yaml"
P = f"{FILE}: gpu-cluster:spec"


def errors(spec: Any, stack_file: str = FILE) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(spec, stack_file)
    return str(info.value).splitlines()


def h100(spec: dict[str, Any]) -> dict[str, Any]:
    return next(g for g in spec["aws"]["nodeGroups"] if g["name"] == "h100")


# --- did you mean -------------------------------------------------------------------------------------------------


def test_an_unknown_key_names_the_key_it_is_closest_to(prod_spec: dict[str, Any]) -> None:
    h100(prod_spec)["maxSzie"] = 16
    assert errors(prod_spec) == [
        f"{P}.aws.nodeGroups[h100].maxSzie: unknown key; did you mean maxSize? [rule: schema-unknown-key]"]


def test_keys_written_in_another_case_or_style_are_recognised(prod_spec: dict[str, Any]) -> None:
    prod_spec["billing"]["Cost-Export"] = {}
    prod_spec["aws"]["controlPlane"]["endpoint_acess"] = "private"
    assert errors(prod_spec) == [
        f"{P}.billing.Cost-Export: unknown key; did you mean costExport? [rule: schema-unknown-key]",
        f"{P}.aws.controlPlane.endpoint_acess: unknown key; did you mean endpointAccess? [rule: schema-unknown-key]",
    ]


def test_no_suggestion_when_nothing_is_close(prod_spec: dict[str, Any]) -> None:
    h100(prod_spec)["spotPrice"] = 3
    prod_spec["platform"]["zzz"] = 1
    assert errors(prod_spec) == [
        f"{P}.platform.zzz: unknown key [rule: schema-unknown-key]",
        f"{P}.aws.nodeGroups[h100].spotPrice: unknown key [rule: schema-unknown-key]",
    ]


def test_an_enum_value_names_the_allowed_value_it_is_closest_to(prod_spec: dict[str, Any]) -> None:
    h100(prod_spec)["capacity"]["type"] = "capacity-blocks"
    prod_spec["aws"]["controlPlane"]["logTypes"] = ["api", "Audit", "everything"]
    assert errors(prod_spec) == [
        f"{P}.aws.nodeGroups[h100].capacity.type: Input should be 'on-demand', 'spot', 'capacity-block' or "
        "'reserved'; did you mean capacity-block? [rule: schema-type]",
        f"{P}.aws.controlPlane.logTypes[1]: Input should be 'api', 'audit', 'authenticator', 'controllerManager' or "
        "'scheduler'; did you mean audit? [rule: schema-type]",
        f"{P}.aws.controlPlane.logTypes[2]: Input should be 'api', 'audit', 'authenticator', 'controllerManager' or "
        "'scheduler' [rule: schema-type]",
    ]


def test_numbers_out_of_an_enum_get_no_suggestion(prod_spec: dict[str, Any]) -> None:
    prod_spec["aws"]["controlPlane"]["logRetentionDays"] = 366
    (line,) = errors(prod_spec)
    assert line.endswith("3288 or 3653 [rule: schema-type]")


def test_did_you_mean_lists_up_to_three_and_joins_them() -> None:
    assert did_you_mean("sz", ["size"]) == ""
    assert did_you_mean("instance", ["instanceType", "instanceTypes", "name"]) == (
        "; did you mean instanceType or instanceTypes?")
    assert did_you_mean("production", ["dev", "staging", "prod"]) == "; did you mean prod?"
    assert did_you_mean(3, ["a"]) == ""
    assert did_you_mean("maxSize" + "e" * 100_000, ["maxSize"]) == "; did you mean maxSize?"  # bounded work


# --- list items by name --------------------------------------------------------------------------------------------


def test_pydantic_and_rule_errors_name_items_by_their_name(prod_spec: dict[str, Any]) -> None:
    prod_spec["teams"][1]["budget"]["monthlyUsd"] = -1  # pydantic
    prod_spec["teams"][1]["quotas"][0]["lendingLimitGpus"] = 999  # a rule; quotas have no name: an index
    prod_spec["platform"]["monitoring"]["alerts"]["receivers"][2]["to"] = ["nobody"]  # a rule
    assert errors(prod_spec) == [
        f"{P}.teams[pretraining].budget.monthlyUsd: Input should be greater than 0 [rule: schema-type]"]
    prod_spec["teams"][1]["budget"]["monthlyUsd"] = 100
    assert errors(prod_spec) == [
        f"{P}.teams[pretraining].quotas[0].lendingLimitGpus: lendingLimitGpus (999) must be <= the nominal gpus (48) "
        "[rule: lending-limit-within-quota]",
        f"{P}.platform.monitoring.alerts.receivers[research-leads].to[0]: 'nobody' is not an email address "
        "(name@domain.tld) [rule: budget-email]",
    ]


def test_gke_node_pools_are_named_too() -> None:
    from tests.conftest import raw_stack_config

    spec = raw_stack_config("prod-gcp")["gpu-cluster:spec"]
    spec["gcp"]["nodePools"][1]["minSize"] = -1
    assert errors(spec, "stacks/Pulumi.prod-gcp.yaml") == [
        "stacks/Pulumi.prod-gcp.yaml: gpu-cluster:spec.gcp.nodePools[h100].minSize: Input should be greater than or "
        "equal to 0 [rule: schema-type]"]


def test_items_whose_name_cannot_stand_for_them_keep_their_index(prod_spec: dict[str, Any]) -> None:
    prod_spec["teams"][0]["name"] = "Research Team"  # not a plain word: the pattern error names it by index
    prod_spec["teams"][1]["name"] = "7up"  # starts with a digit: could be read as an index
    lines = errors(prod_spec)
    assert lines[0].startswith(f"{P}.teams[0].name: String should match pattern ")
    assert lines[1].startswith(f"{P}.teams[1].name: String should match pattern ")


def test_a_name_used_twice_keeps_the_index(prod_spec: dict[str, Any]) -> None:
    prod_spec["teams"][2]["name"] = "research"
    prod_spec["teams"][2]["roleArns"] = ["not-an-arn"]
    assert errors(prod_spec)[:2] == [
        f"{P}.teams[2].name: team name 'research' is used twice [rule: unique-names]",
        f"{P}.teams[2].roleArns[0]: 'not-an-arn' is not an IAM role ARN (arn:aws:iam::<12 digits>:role/<name>) "
        "[rule: admin-role-arn]",
    ]


def test_the_first_of_two_principals_is_named_in_the_message(prod_spec: dict[str, Any]) -> None:
    arn = prod_spec["teams"][0]["roleArns"][0]
    prod_spec["teams"][2]["roleArns"] = [arn]
    assert errors(prod_spec) == [
        f"{P}.teams[applied].roleArns[0]: '{arn}' is already teams[research].roleArns[0]; EKS allows one access entry "
        "per principal [rule: unique-principals]"]


def test_named_path_walks_the_parsed_spec(prod_spec: dict[str, Any]) -> None:
    spec = parse_spec(prod_spec, FILE)
    assert named_path(spec, ".aws.nodeGroups[1].labels") == "gpu-cluster:spec.aws.nodeGroups[h100].labels"
    assert named_path(spec, ".teams[2].quotas[0]") == "gpu-cluster:spec.teams[applied].quotas[0]"
    assert named_path(spec, ".teams[9]") == "gpu-cluster:spec.teams[9]"  # nothing there: as given
    assert named_path(spec, '.labels["a b"]') == 'gpu-cluster:spec.labels["a b"]'
    assert named_path(spec, " not a path") == "gpu-cluster:spec not a path"


def test_preview_warnings_name_items_as_errors_do(prod_spec: dict[str, Any]) -> None:
    spec = parse_spec(prod_spec, FILE, now=datetime(2026, 11, 29, tzinfo=UTC))
    (note,) = capacity_block_notes(spec, datetime(2027, 1, 5, tzinfo=UTC))
    assert note.startswith("warning: gpu-cluster:spec.aws.nodeGroups[h100].capacity.start: the block began on ")


def test_stack_file_yaml_errors_name_items_too(tmp_path: Path) -> None:
    text = Path(FILE).read_text().replace("maxSize: 16", "maxSize: !!binary AAAA")
    path = tmp_path / "Pulumi.named.yaml"
    path.write_text(text)
    with pytest.raises(StackError) as info:
        load_stack(str(path))
    assert "config.gpu-cluster:spec.aws.nodeGroups[h100].maxSize: the tag !!binary is not allowed" in str(info.value)


def test_a_number_that_may_be_an_integer_or_a_float_has_one_key_path(prod_spec: dict[str, Any]) -> None:
    prod_spec["teams"][0]["budget"]["monthlyUsd"] = "lots"  # StrictInt | StrictFloat: pydantic tags each member
    assert errors(prod_spec) == [
        f"{P}.teams[research].budget.monthlyUsd: Input should be a valid integer [rule: schema-type]",
        f"{P}.teams[research].budget.monthlyUsd: Input should be a valid number [rule: schema-type]",
    ]
