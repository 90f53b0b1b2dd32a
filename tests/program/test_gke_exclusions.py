"""GKE maintenance exclusions as cluster-toolkit's A3 Ultra blueprint writes them: until the end of support (GKE's
UNTIL_END_OF_SUPPORT end-time behavior, no end time), names up to 63 characters, and an exclusion longer than its scope
allows refused with the allowed length in the message."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.spec import SpecError, parse_spec
from tests.conftest import raw_stack_config, run_spec

FILE = "stacks/Pulumi.prod-gcp.yaml"
P = f"{FILE}: gpu-cluster:spec"
W = f"{P}.gcp.cluster.maintenance.exclusions"
TOOLKIT = {"name": "no-minor-or-node-upgrades-indefinite", "start": "2025-12-01T00:00:00Z",
           "scope": "NO_MINOR_OR_NODE_UPGRADES", "untilEndOfSupport": True}  # gke-a3-ultragpu.yaml @10470803


@pytest.fixture
def spec() -> dict[str, Any]:
    return copy.deepcopy(raw_stack_config("prod-gcp")["gpu-cluster:spec"])


def exclusions(spec: dict[str, Any], *items: dict[str, Any]) -> dict[str, Any]:
    spec["gcp"]["cluster"]["maintenance"]["exclusions"] = list(items)
    return spec


def errors(spec: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(spec, FILE, provider_region="us-central1")
    return str(info.value).splitlines()


def test_the_toolkit_exclusion_until_end_of_support_is_built_without_an_end(spec: dict[str, Any]) -> None:
    exclusions(spec, TOOLKIT)
    (cluster,) = run_spec(spec, "prod-gcp").graph.of_type("gcp:container/cluster:Cluster")
    assert cluster.inputs["maintenancePolicy"]["maintenanceExclusions"] == [{
        "exclusionName": "no-minor-or-node-upgrades-indefinite", "startTime": "2025-12-01T00:00:00Z",
        "exclusionOptions": {"scope": "NO_MINOR_OR_NODE_UPGRADES", "endTimeBehavior": "UNTIL_END_OF_SUPPORT"}}]


def test_an_exclusion_has_an_end_or_lasts_until_end_of_support(spec: dict[str, Any]) -> None:
    exclusions(spec, {**TOOLKIT, "end": "2026-01-01T00:00:00Z"})
    assert errors(spec) == [
        f"{W}[no-minor-or-node-upgrades-indefinite]: give exactly one of end and untilEndOfSupport (GKE takes an end "
        "time or the end-of-support behavior) [rule: maintenance-exclusion]"]
    exclusions(spec, {**TOOLKIT, "untilEndOfSupport": False})
    assert len(errors(spec)) == 1


def test_no_upgrades_never_lasts_until_end_of_support(spec: dict[str, Any]) -> None:
    exclusions(spec, {**TOOLKIT, "scope": "NO_UPGRADES"})
    assert errors(spec) == [
        f"{W}[no-minor-or-node-upgrades-indefinite].untilEndOfSupport: a NO_UPGRADES exclusion lasts at most 30 "
        "days, never until end of support; use NO_MINOR_UPGRADES or NO_MINOR_OR_NODE_UPGRADES "
        "[rule: maintenance-exclusion]"]


def test_a_minor_exclusion_ends_by_the_end_of_support_of_the_pinned_minor(spec: dict[str, Any]) -> None:
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.35.8-gke.1036000"
    exclusions(spec, {"name": "hold", "start": "2026-12-01T00:00:00Z", "end": "2027-06-01T00:00:00Z",
                      "scope": "NO_MINOR_UPGRADES"})
    assert errors(spec) == [
        f"{W}[hold].end: a NO_MINOR_UPGRADES exclusion lasts at most until the end of support of the cluster's minor "
        "version: 1.35 (minMasterVersion) until 2027-04-11 (components/catalog/gke_versions.yaml, secondary); end it "
        "by then, or set untilEndOfSupport: true instead of end [rule: maintenance-exclusion]"]
    exclusions(spec, {"name": "hold", "start": "2026-12-01T00:00:00Z", "end": "2027-04-11T00:00:00Z",
                      "scope": "NO_MINOR_UPGRADES"})
    parse_spec(spec, FILE, provider_region="us-central1")


def test_exclusion_names_up_to_63_characters_unique(spec: dict[str, Any]) -> None:
    long = "x" * 64
    exclusions(spec, {**TOOLKIT, "name": long}, {**TOOLKIT, "name": "holiday data load"},
               {**TOOLKIT, "name": "holiday data load"}, {**TOOLKIT, "name": "-bad"})
    assert errors(spec) == [
        f"{W}[0].name: an exclusion name is at most 63 characters; this one has 64 "
        "[rule: maintenance-exclusion-name]",
        f"{W}[2].name: exclusion name 'holiday data load' is used twice (GKE keys exclusions by name) "
        "[rule: maintenance-exclusion-name]",
        f"{W}[3].name: '-bad' is not an exclusion name: letters, digits, spaces, '.', '_' and '-', starting and "
        "ending with a letter or digit [rule: maintenance-exclusion-name]"]
