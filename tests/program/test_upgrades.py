"""Day two in the program: node groups follow the control plane (their Kubernetes version and pinned AMI release), in
order (control plane, its add-ons, system groups, GPU groups), GKE pools roll by settings that fit their capacity,
node versions are checked against the control plane's, and the support warning counts days right."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from blueprint.graph.engine import run_program
from blueprint.graph.model import GraphResource, ResourceGraph
from blueprint.graph.stackfile import load_stack
from components.catalog.versions import load_node_releases, support_warning
from components.gcp.summary import gke_support_notes
from components.spec import SpecError, parse_spec
from tests.conftest import ROOT, offline_run, raw_stack_config, run_spec

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
ADDON = "aws:eks/addon:Addon"
NODE_POOL = "gcp:container/nodePool:NodePool"


def _spec(name: str) -> dict[str, Any]:
    return copy.deepcopy(raw_stack_config(name)["gpu-cluster:spec"])


def _by_name(graph: ResourceGraph, type_: str) -> dict[str, GraphResource]:
    return {r.name: r for r in graph.of_type(type_)}


def _deps(graph: ResourceGraph, res: GraphResource) -> set[str]:
    return {d.rsplit("::", 1)[-1] for d in res.dependencies}


def test_every_eks_group_carries_the_clusters_version_and_the_pinned_ami_release() -> None:
    graph = offline_run("prod-aws").graph
    pin = load_node_releases()[("al2023", "1.35")].release_version
    groups = _by_name(graph, NODE_GROUP)
    assert groups and {(g.inputs["version"], g.inputs["releaseVersion"]) for g in groups.values()} == {("1.35", pin)}


def test_a_minor_bump_moves_every_group_and_the_add_ons_with_it() -> None:
    spec = _spec("prod-aws")
    spec["aws"]["controlPlane"]["kubernetesVersion"] = "1.36"
    graph = run_spec(spec, "prod-aws").graph
    pin = load_node_releases()[("al2023", "1.36")].release_version
    assert {(g.inputs["version"], g.inputs["releaseVersion"]) for g in graph.of_type(NODE_GROUP)} == {("1.36", pin)}
    before = {a.inputs["addonName"]: a.inputs.get("addonVersion") for a in offline_run("prod-aws").graph.of_type(ADDON)}
    after = {a.inputs["addonName"]: a.inputs.get("addonVersion") for a in graph.of_type(ADDON)}
    assert after["kube-proxy"] != before["kube-proxy"] and after["kube-proxy"].startswith("v1.36.")


def test_a_custom_ami_group_carries_neither_version_nor_release() -> None:
    sf = load_stack(str(ROOT / "examples" / "stacks" / "Pulumi.custom-ami-aws.yaml"))
    graph = run_program(sf.name, sf.config, sf.region).graph
    groups = _by_name(graph, NODE_GROUP)
    custom, eks_ami = groups["nodegroup-l4-ng"], groups["nodegroup-system-ng"]  # l4 has amiId
    assert "version" not in custom.inputs and "releaseVersion" not in custom.inputs and "amiType" not in custom.inputs
    assert eks_ami.inputs["version"] == "1.35" and eks_ami.inputs["releaseVersion"]


def test_nodes_follow_the_control_plane_then_the_add_ons_in_order() -> None:
    """Control plane -> its network add-ons -> system groups -> the other add-ons -> GPU groups, as dependencies:
    one `pulumi up` after a version bump updates them in that order."""
    graph = offline_run("prod-aws").graph
    groups, addons = _by_name(graph, NODE_GROUP), _by_name(graph, ADDON)
    system, gpu = groups["nodegroup-system-ng"], groups["nodegroup-h100-ng"]
    network = {"control-plane-addon-vpc-cni", "control-plane-addon-kube-proxy",
               "control-plane-addon-eks-pod-identity-agent"}
    assert {"control-plane-eks", *network} <= _deps(graph, system)
    assert "nodegroup-h100-ng" not in _deps(graph, system)
    for name in ("addons-coredns", "addons-ebs-csi", "addons-fsx-csi"):
        assert "nodegroup-system-ng" in _deps(graph, addons[name])  # their pods need nodes to run on
    assert {"nodegroup-system-ng", "addons-coredns", "addons-fsx-csi", *network} <= _deps(graph, gpu)


def test_gke_gpu_pools_wait_for_the_system_pools() -> None:
    graph = offline_run("prod-gcp").graph
    pools = _by_name(graph, NODE_POOL)
    assert "nodepool-system-pool" in _deps(graph, pools["nodepool-h100-pool"])
    assert "nodepool-h100-pool" not in _deps(graph, pools["nodepool-system-pool"])


def test_a_pinned_gke_pool_carries_its_version() -> None:
    spec = _spec("prod-gcp")
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.35.8-gke.1036000"
    spec["gcp"]["nodePools"][0]["version"] = "1.34.9-gke.1000000"
    graph = run_spec(spec, "prod-gcp").graph
    pools = _by_name(graph, NODE_POOL)
    assert pools["nodepool-system-pool"].inputs["version"] == "1.34.9-gke.1000000"
    assert "version" not in pools["nodepool-h100-pool"].inputs  # unpinned: the channel's (held by its exclusion)


# --- GKE upgrade settings -------------------------------------------------------------------------------------


def _settings(spec: dict[str, Any], stack: str) -> dict[str, dict[str, Any]]:
    graph = run_spec(spec, stack).graph
    return {str(p.inputs["name"]): p.inputs["upgradeSettings"] for p in graph.of_type(NODE_POOL)}


def test_gke_pools_surge_on_open_capacity_and_never_on_a_reservation() -> None:
    prod = {str(p.inputs["name"]): p.inputs["upgradeSettings"]
            for p in offline_run("prod-gcp").graph.of_type(NODE_POOL)}
    assert prod["h100"] == {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 1}  # reservation: in place
    assert prod["system"] == {"strategy": "SURGE", "maxSurge": 1, "maxUnavailable": 0}
    dev = {str(p.inputs["name"]): p.inputs["upgradeSettings"] for p in offline_run("dev-gcp").graph.of_type(NODE_POOL)}
    assert dev["l4"] == {"strategy": "SURGE", "maxSurge": 1, "maxUnavailable": 0}  # Spot: open capacity


def test_a_pool_may_roll_blue_green_with_its_policy() -> None:
    spec = _spec("prod-gcp")
    spec["gcp"]["nodePools"][0]["upgrade"] = {"strategy": "blue-green", "blueGreen": {
        "batchPercentage": 0.5, "batchSoakDuration": "300s", "nodePoolSoakDuration": "3600s"}}
    assert _settings(spec, "prod-gcp")["system"] == {"strategy": "BLUE_GREEN", "blueGreenSettings": {
        "standardRolloutPolicy": {"batchPercentage": 0.5, "batchSoakDuration": "300s"},
        "nodePoolSoakDuration": "3600s"}}


def test_surge_settings_given_are_sent() -> None:
    spec = _spec("prod-gcp")
    spec["gcp"]["nodePools"][0]["upgrade"] = {"maxSurge": 2, "maxUnavailable": 1}
    assert _settings(spec, "prod-gcp")["system"] == {"strategy": "SURGE", "maxSurge": 2, "maxUnavailable": 1}


FILE = "stacks/Pulumi.prod-gcp.yaml"


def _errors(spec: dict[str, Any], region: str = "us-central1") -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(spec, FILE, provider_region=region)
    return str(info.value).splitlines()


@pytest.mark.parametrize(("pool", "upgrade", "key", "rule"), [
    (1, {"maxSurge": 1}, "nodePools[h100].upgrade.maxSurge", "pool-upgrade-on-reservation"),
    (1, {"strategy": "blue-green", "blueGreen": {"batchNodeCount": 1}}, "nodePools[h100].upgrade.strategy",
     "pool-upgrade-on-reservation"),
    (0, {"strategy": "blue-green"}, "nodePools[system].upgrade.blueGreen", "pool-upgrade-settings"),
    (0, {"strategy": "blue-green", "blueGreen": {"batchNodeCount": 1, "batchPercentage": 0.5}},
     "nodePools[system].upgrade.blueGreen", "pool-upgrade-settings"),
    (0, {"strategy": "blue-green", "blueGreen": {"batchNodeCount": 1}, "maxSurge": 1},
     "nodePools[system].upgrade.maxSurge", "pool-upgrade-settings"),
    (0, {"maxSurge": 0, "maxUnavailable": 0}, "nodePools[system].upgrade", "pool-upgrade-settings"),
])
def test_upgrade_settings_that_cannot_work_are_refused(pool: int, upgrade: dict[str, Any], key: str,
                                                       rule: str) -> None:
    spec = _spec("prod-gcp")
    spec["gcp"]["nodePools"][pool]["upgrade"] = upgrade
    found = _errors(spec)
    assert any(f"gpu-cluster:spec.gcp.{key}:" in e and e.endswith(f"[rule: {rule}]") for e in found), found


def test_blue_green_batch_share_is_a_fraction() -> None:
    spec = _spec("prod-gcp")
    spec["gcp"]["nodePools"][0]["upgrade"] = {"strategy": "blue-green", "blueGreen": {"batchPercentage": 50}}
    assert any("batchPercentage" in e for e in _errors(spec))


def test_a_flex_start_pool_keeps_gkes_way() -> None:
    spec = _spec("prod-gcp")
    pool = spec["gcp"]["nodePools"][1]
    pool["capacity"] = {"type": "flex-start"}
    pool.update(minSize=0, desiredSize=0)
    pool["upgrade"] = {"maxSurge": 1}
    assert any("nodePools[h100].upgrade:" in e and "[rule: pool-upgrade-settings]" in e for e in _errors(spec))
    # Without it, the pool sends no upgradeSettings: GKE gives queued-provisioning pools SHORT_LIVED, which the
    # provider cannot express, and settings sent there would differ from GKE's at every refresh.
    del pool["upgrade"]
    pools = {str(p.inputs["name"]): p.inputs for p in run_spec(spec, "prod-gcp").graph.of_type(NODE_POOL)}
    assert pools["h100"]["queuedProvisioning"] == {"enabled": True} and "upgradeSettings" not in pools["h100"]


# --- node versions against the control plane (EKS) ------------------------------------------------------------


AWS_FILE = "stacks/Pulumi.prod-aws.yaml"


def _aws_errors(spec: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(spec, AWS_FILE, provider_region="us-east-1")
    return str(info.value).splitlines()


def _custom(spec: dict[str, Any]) -> dict[str, Any]:
    group: dict[str, Any] = spec["aws"]["nodeGroups"][0]
    group["amiId"] = "ami-0123456789abcdef0"
    return group


@pytest.mark.parametrize(("version", "fragment"), [
    ("1.36", "newer than the control plane's 1.35"),
    ("1.31", "4 minors behind the control plane's 1.35: EKS allows kubelet at most 3 minors older"),
])
def test_a_custom_ami_outside_the_skew_is_refused(version: str, fragment: str) -> None:
    spec = _spec("prod-aws")
    _custom(spec)["amiKubernetesVersion"] = version
    found = [e for e in _aws_errors(spec) if "[rule: node-version-skew]" in e]
    assert len(found) == 1 and fragment in found[0] and ".amiKubernetesVersion:" in found[0]


def test_a_custom_ami_within_the_skew_loads() -> None:
    spec = _spec("prod-aws")
    _custom(spec)["amiKubernetesVersion"] = "1.32"
    assert not any("node-version-skew" in e for e in _errors_or_none(spec))


def _errors_or_none(spec: dict[str, Any]) -> list[str]:
    try:
        parse_spec(spec, AWS_FILE, provider_region="us-east-1")
    except SpecError as err:
        return str(err).splitlines()
    return []


def test_a_custom_ami_must_say_its_kubernetes_version() -> None:
    spec = _spec("prod-aws")
    _custom(spec)
    assert any(".amiKubernetesVersion:" in e and "[rule: custom-ami-kubernetes-version]" in e
               for e in _aws_errors(spec))


def test_an_ami_release_of_another_minor_is_refused() -> None:
    spec = _spec("prod-aws")
    spec["aws"]["nodeGroups"][0]["amiReleaseVersion"] = "1.34.11-20260930"
    assert any(".amiReleaseVersion:" in e and "is an AMI release of Kubernetes 1.34" in e and
               "[rule: ami-release-version]" in e for e in _aws_errors(spec))


def test_a_group_pins_its_own_release() -> None:
    spec = _spec("prod-aws")
    name = spec["aws"]["nodeGroups"][0]["name"]
    spec["aws"]["nodeGroups"][0]["amiReleaseVersion"] = "1.35.6-20260714"
    groups = {g.inputs["labels"]["gpu-cluster/node-group"]: g for g in run_spec(spec, "prod-aws").graph.of_type(
        NODE_GROUP)}
    assert groups[name].inputs["releaseVersion"] == "1.35.6-20260714"


# --- end of standard support ----------------------------------------------------------------------------------


END_134 = datetime(2026, 12, 2, tzinfo=UTC)  # EKS 1.34's end of standard support (eks_versions.yaml)


@pytest.mark.parametrize(("now", "days", "expected"), [
    (datetime(2026, 12, 1, 23, 0, tzinfo=UTC), 90, "(in 1 day)"),  # the day before, late: one day, not zero
    (datetime(2026, 12, 1, 0, 0, tzinfo=UTC), 90, "(in 1 day)"),
    (datetime(2026, 12, 2, 12, 0, tzinfo=UTC), 90, "(today)"),
    (datetime(2026, 11, 2, tzinfo=UTC), 30, "(in 30 days)"),
    (datetime(2026, 11, 1, tzinfo=UTC), 30, None),  # 31 days ahead, warned 30 ahead: not yet
    (datetime(2026, 12, 3, tzinfo=UTC), 90, None),  # past: the load check refuses it instead
])
def test_the_support_warning_counts_calendar_days(now: datetime, days: int, expected: str | None) -> None:
    warning = support_warning("EKS", "1.34", END_134, now, days)
    if expected is None:
        assert warning is None
    else:
        assert warning == f"Kubernetes 1.34 leaves EKS standard support on 2026-12-02 {expected}"


def test_gke_warns_ahead_of_its_minors_end_as_the_stack_configures() -> None:
    spec = _spec("prod-gcp")
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.35"  # GKE 1.35's end of standard support: 2027-04-11 (secondary)
    spec["upgrades"] = {"supportWarningDays": 365}
    notes = gke_support_notes(parse_spec(spec, FILE, provider_region="us-central1"), datetime(2026, 12, 1, tzinfo=UTC))
    assert len(notes) == 1 and "Kubernetes 1.35 leaves GKE standard support on 2027-04-11 (in 131 days)" in notes[0]
    spec["upgrades"] = {"supportWarningDays": 90}
    assert gke_support_notes(parse_spec(spec, FILE, provider_region="us-central1"),
                             datetime(2026, 12, 1, tzinfo=UTC)) == []


def test_gke_says_when_the_minor_has_left_standard_support() -> None:
    """GKE does not refuse a minor past its end (it upgrades the control plane itself): the preview says so."""
    spec = _spec("prod-gcp")
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.33"  # ended 2026-08-03 (secondary)
    del spec["inference"]["gateway"]  # its InferencePool needs 1.34 (rule gke-version-floor)
    notes = gke_support_notes(parse_spec(spec, FILE, provider_region="us-central1"), datetime(2026, 12, 1, tzinfo=UTC))
    assert len(notes) == 1 and "Kubernetes 1.33 left GKE standard support on 2026-08-03" in notes[0]
