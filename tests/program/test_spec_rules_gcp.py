"""Every GCP spec rule, with the exact message a user sees (file, key path, requirement, rule)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from blueprint.graph.stackfile import StackError, load_stack
from components.catalog.gcp_machines import gcp_storage_limits, gpudirect_manifests, load_gcp_catalog
from components.catalog.gke_versions import GkeVersions, load_gke_versions
from components.spec import SpecError, decisions, parse_spec
from components.spec.rules import gcp as gcp_rules
from components.spec.rules import gcp_networks
from tests.conftest import ROOT, raw_stack_config

FILE = "stacks/Pulumi.prod-gcp.yaml"
P = f"{FILE}: gpu-cluster:spec"


@pytest.fixture
def spec() -> dict[str, Any]:
    return copy.deepcopy(raw_stack_config("prod-gcp")["gpu-cluster:spec"])


def without_gateway(spec: dict[str, Any]) -> None:
    """The stack without its inference gateway, whose InferencePool floor would add to a version floor's errors."""
    spec["inference"].pop("gateway", None)


def errors(value: Any, region: str | None = "us-central1") -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(value, FILE, provider_region=region)
    return str(info.value).splitlines()


def h100(spec: dict[str, Any]) -> dict[str, Any]:
    pool: dict[str, Any] = spec["gcp"]["nodePools"][1]
    return pool


def test_shipped_gcp_specs_are_valid() -> None:
    for name in ("prod-gcp", "dev-gcp"):
        parsed = parse_spec(raw_stack_config(name)["gpu-cluster:spec"], FILE, provider_region="us-central1")
        assert parsed.cloud == "gcp" and parsed.aws is None


def test_gcp_settings_required_and_alone(spec: dict[str, Any]) -> None:
    gcp = spec.pop("gcp")
    assert errors(spec) == [f"{P}.gcp: cloud is gcp, so the gcp settings are required [rule: cloud-settings-required]"]
    spec["gcp"] = gcp
    spec["aws"] = raw_stack_config("prod-aws")["gpu-cluster:spec"]["aws"]
    assert errors(spec) == [f"{P}.aws: cloud is gcp; remove the aws settings (one stack builds one cloud) "
                            "[rule: cloud-settings-required]"]


def test_region_matches_the_provider(spec: dict[str, Any]) -> None:
    assert errors(spec, region="europe-west4") == [
        f"{P}.gcp.region: gcp.region 'us-central1' must equal the stack's gcp:region 'europe-west4' "
        "[rule: region-matches-provider]"]


def test_project_matches_the_provider(spec: dict[str, Any], tmp_path: Any) -> None:
    """The provider's gcp:project is where resources without a project of their own land: it is the spec's."""
    with pytest.raises(SpecError) as info:
        parse_spec(spec, FILE, provider_region="us-central1", provider_project="acme-ml-dev")
    assert str(info.value).splitlines() == [
        f"{P}.gcp.project: gcp.project 'acme-ml-prod' must equal the stack's gcp:project 'acme-ml-dev' "
        "[rule: project-matches-provider]"]
    # Read from the stack file, as `blueprint preview` and `blueprint graph` do.
    text = (ROOT / FILE).read_text().replace("gcp:project: acme-ml-prod", "gcp:project: acme-ml-other")
    assert "acme-ml-other" in text
    path = tmp_path / "Pulumi.prod-gcp.yaml"
    path.write_text(text)
    with pytest.raises(StackError, match=r"gcp.project 'acme-ml-prod' must equal the stack's gcp:project "
                                         r"'acme-ml-other' \[rule: project-matches-provider\]"):
        load_stack(str(path))


def test_zone_in_region(spec: dict[str, Any]) -> None:
    spec["gcp"]["gpuZone"] = "europe-west4-b"
    assert errors(spec) == [f"{P}.gcp.gpuZone: zone 'europe-west4-b' is not in region 'us-central1' "
                            "[rule: zone-in-region]"]


def test_machine_type_in_catalog(spec: dict[str, Any]) -> None:
    h100(spec)["machineType"] = "a3-megagpu-16g"
    assert errors(spec) == [
        f"{P}.gcp.nodePools[h100].machineType: 'a3-megagpu-16g' is not in the machine catalog "
        "(components/catalog/gcp_machines.yaml, 20 types); closest: a3-megagpu-8g, a3-highgpu-8g, a3-ultragpu-8g "
        "[rule: machine-type-in-catalog]"]


def test_compact_placement_is_not_forced_onto_a_reservation(spec: dict[str, Any]) -> None:
    h100(spec)["placement"] = "compact"
    assert errors(spec) == [
        f"{P}.gcp.nodePools[h100].placement: a compact placement policy must not be forced onto a reservation: the "
        "reservation already places its VMs (its own placement or blocks), and a second policy makes GKE refuse or "
        "fail to find capacity; use auto or none [rule: compact-placement-not-on-reservation]"]


def test_reservation_needs_its_name_and_fields_only_for_reservations(spec: dict[str, Any]) -> None:
    h100(spec)["capacity"] = {"type": "reservation"}
    assert errors(spec) == [f"{P}.gcp.nodePools[h100].capacity.reservation: capacity type reservation needs the "
                            "reservation's name (SPECIFIC_RESERVATION affinity) [rule: reservation-name]"]
    h100(spec)["capacity"] = {"type": "spot", "reservationBlock": "block-1"}
    assert errors(spec) == [f"{P}.gcp.nodePools[h100].capacity.reservationBlock: reservationBlock only applies to "
                            "capacity type reservation, not 'spot' [rule: reservation-name]"]


def test_flex_start_pools_start_empty(spec: dict[str, Any]) -> None:
    h100(spec)["capacity"] = {"type": "flex-start"}
    assert errors(spec) == [
        f"{P}.gcp.nodePools[h100].minSize: a flex-start pool starts empty: minSize and desiredSize must be 0 (nodes "
        "arrive when Kueue's ProvisioningRequest is granted, all at once, and leave when the job ends) "
        "[rule: flex-start-pool-shape]"]


def test_a3_ultra_is_not_sold_on_demand(spec: dict[str, Any]) -> None:
    h100(spec).update(machineType="a3-ultragpu-8g", capacity={"type": "on-demand"}, diskType="hyperdisk-balanced")
    (line,) = errors(spec)
    assert line.startswith(f"{P}.gcp.nodePools[h100].capacity.type: a3-ultragpu-8g is not sold on-demand (catalog: ")
    assert line.endswith("); use reservation, spot, flex-start [rule: provisioning-model-offered]")


def test_gpu_networks_need_their_address_space(spec: dict[str, Any]) -> None:
    del spec["gcp"]["network"]["gpuNetworksCidr"]
    assert errors(spec) == [
        f"{P}.gcp.network.gpuNetworksCidr: a3-megagpu-8g needs 8 GPU networks (GPUDirect-TCPXO): give their address "
        "space (one /24 each), e.g. 192.168.0.0/16 [rule: gpu-networks-required]"]
    spec["gcp"]["network"]["gpuNetworksCidr"] = "192.168.0.0/22"
    assert errors(spec) == [f"{P}.gcp.network.gpuNetworksCidr: 8 GPU networks take 8 /24 subnets; '192.168.0.0/22' "
                            "holds 4 [rule: gpu-networks-cidr-size]"]


def test_gpu_subnets_stay_24_and_a_pool_they_cannot_hold_must_choose_its_prefix(spec: dict[str, Any]) -> None:
    """The default keeps every existing stack's /24 subnets (a default that followed maxSize would move them, and
    replace the GPU pools, the day a pool grew); past 252 nodes the stack says the prefix itself."""
    h100(spec)["maxSize"] = 300
    assert errors(spec) == [
        f"{P}.gcp.network.gpuSubnetPrefixLength: the GPUDirect pools reach 300 nodes, and each GPU network's /24 "
        "subnet (the default) holds 252 (four addresses of a subnet are reserved): set gpuSubnetPrefixLength to 23 "
        "(a /23 holds 508) and a gpuNetworksCidr that holds 8 of them [rule: gpu-network-subnet-size]"]
    spec["gcp"]["network"]["gpuSubnetPrefixLength"] = 25
    assert errors(spec) == [
        f"{P}.gcp.network.gpuSubnetPrefixLength: the GPUDirect pools reach 300 nodes, and each GPU network's /25 "
        "subnet holds 124 (four addresses of a subnet are reserved): use 23 or less (a /23 holds 508) "
        "[rule: gpu-network-subnet-size]"]
    spec["gcp"]["network"]["gpuSubnetPrefixLength"] = 21
    assert errors(spec) == [f"{P}.gcp.network.gpuNetworksCidr: 8 GPU networks take 8 /21 subnets; '192.168.0.0/20' "
                            "holds 2 [rule: gpu-networks-cidr-size]"]
    spec["gcp"]["network"]["gpuSubnetPrefixLength"] = 23
    parse_spec(spec, FILE, provider_region="us-central1")  # 192.168.0.0/20 holds eight /23s


def test_gpu_subnet_prefix_is_one_gcp_creates(spec: dict[str, Any]) -> None:
    limits = gcp_storage_limits()
    assert (limits.subnet_prefix_min, limits.subnet_prefix_max) == (4, 29)
    spec["gcp"]["network"]["gpuSubnetPrefixLength"] = 30
    assert errors(spec) == [
        f"{P}.gcp.network.gpuSubnetPrefixLength: GCP creates IPv4 subnets from /4 to /29 "
        f"(components/catalog/gcp_storage.yaml: {limits.subnet_prefix_source}); got /30 "
        "[rule: gpu-subnet-prefix-range]"]
    spec["gcp"]["network"]["gpuSubnetPrefixLength"] = 27  # 28 addresses each: room for the 16 nodes
    parse_spec(spec, FILE, provider_region="us-central1")


def test_rdma_takes_one_subnet_more_than_its_nics(spec: dict[str, Any]) -> None:
    """A3 Ultra wires its 8 CX-7 NICs and a second gVNIC: 9 subnets (GpuNetworkPlan.subnets), not 8."""
    h100(spec).update(machineType="a3-ultragpu-8g", diskType="hyperdisk-balanced")
    spec["gcp"]["network"]["gpuNetworksCidr"] = "192.168.0.0/21"
    assert errors(spec) == [f"{P}.gcp.network.gpuNetworksCidr: 9 GPU networks take 9 /24 subnets; '192.168.0.0/21' "
                            "holds 8 [rule: gpu-networks-cidr-size]"]


def test_gpu_networks_cidr_without_gpudirect_pools_is_refused() -> None:
    dev = copy.deepcopy(raw_stack_config("dev-gcp")["gpu-cluster:spec"])
    dev["gcp"]["network"]["gpuNetworksCidr"] = "192.168.0.0/20"
    assert errors(dev) == [
        f"{P}.gcp.network.gpuNetworksCidr: no node pool has a GPUDirect machine type, so there are no GPU networks "
        "to address [rule: gpu-networks-required]"]
    del dev["gcp"]["network"]["gpuNetworksCidr"]
    dev["gcp"]["network"]["gpuSubnetPrefixLength"] = 23
    assert errors(dev) == [
        f"{P}.gcp.network.gpuSubnetPrefixLength: no node pool has a GPUDirect machine type, so there are no GPU "
        "networks to address [rule: gpu-networks-required]"]


def test_one_gpudirect_flavour_per_stack(spec: dict[str, Any]) -> None:
    spec["gcp"]["nodePools"].append({**h100(spec), "name": "h100-high", "machineType": "a3-highgpu-8g",
                                     "capacity": {"type": "spot"}})
    assert f"{P}.gcp.nodePools: the GPUDirect pools need different GPU networks (TCPX (4 NICs), TCPXO (8 NICs)); " \
           "one stack wires one set: put the machine types in separate stacks [rule: gpudirect-one-flavour]" \
           in errors(spec)


def test_a4_loads_with_the_pinned_rdma_installer(spec: dict[str, Any]) -> None:
    """The gIB installer pinned at container-engine-accelerators @992db81 selects nvidia-b200 as well as H200."""
    h100(spec).update(machineType="a4-highgpu-8g", diskType="hyperdisk-balanced")
    parse_spec(spec, FILE, provider_region="us-central1")


def test_a_pool_the_pinned_agents_do_not_select_is_refused(spec: dict[str, Any],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    pins = gpudirect_manifests()
    (gib,) = pins["RDMA"]
    h200_only = {**pins, "RDMA": (dataclasses.replace(gib, accelerators=("nvidia-h200-141gb",)),)}
    monkeypatch.setattr(gcp_networks, "gpudirect_manifests", lambda: h200_only)
    h100(spec).update(machineType="a4-highgpu-8g", diskType="hyperdisk-balanced")
    assert errors(spec) == [
        f"{P}.gcp.nodePools[h100].machineType: the pinned GPUDirect-RDMA node agents "
        "(components/catalog/gke_manifests.yaml) do not select nvidia-b200 (nccl-rdma-installer): its pods would get "
        "no NCCL plugin; pin a manifest that covers it [rule: gpudirect-plugin-pinned]"]


def test_managed_lustre_tiers_and_sizes(spec: dict[str, Any]) -> None:
    fs = spec["gcp"]["storage"]["filesystem"]
    fs["perUnitStorageThroughput"] = 300
    assert errors(spec) == [f"{P}.gcp.storage.filesystem.perUnitStorageThroughput: Managed Lustre needs "
                            "perUnitStorageThroughput, one of 125, 250, 500, 1000 MB/s per TiB (got 300) "
                            "[rule: lustre-tier]"]
    fs["perUnitStorageThroughput"] = 500
    fs["capacityGiB"] = 20000
    (line,) = errors(spec)
    assert line.startswith(f"{P}.gcp.storage.filesystem.capacityGiB: capacityGiB 20,000 at 500 MB/s per TiB must "
                           "be a multiple of 18,000 GiB up to 3,060,000 GiB (Google Cloud, Managed Lustre")
    fs["capacityGiB"] = 9000
    assert "must be between 18,000 and 20,016,000 GiB" in errors(spec)[0]
    fs["perUnitStorageThroughput"] = 1000
    parse_spec(spec, FILE, provider_region="us-central1")  # 9,000 GiB is the 1000 tier's minimum
    fs.update(perUnitStorageThroughput=250, capacityGiB=6_120_000 + 36_000)
    assert "must be a multiple of 288,000 GiB above 6,120,000 GiB" in errors(spec)[0]


def test_authorized_networks_are_never_open(spec: dict[str, Any]) -> None:
    cluster = spec["gcp"]["cluster"]
    cluster.update(endpoint="authorized-networks", authorizedNetworks=["0.0.0.0/0"])
    assert errors(spec) == [f"{P}.gcp.cluster.authorizedNetworks[0]: 0.0.0.0/0 opens the control plane to the "
                            "internet; list the networks that need it [rule: authorized-networks-not-open]"]


def test_the_deployer_reaches_the_api(spec: dict[str, Any]) -> None:
    cluster = spec["gcp"]["cluster"]
    cluster["deployer"]["apiAccess"] = "authorized-networks"
    assert errors(spec) == [
        f"{P}.gcp.cluster.deployer.runnerCidrs: apiAccess authorized-networks needs the runners' CIDRs (they are added "
        "to the authorized networks) [rule: deployer-reaches-api]",
        f"{P}.gcp.cluster.deployer.apiAccess: the deployer uses the public endpoint, and cluster.endpoint is "
        "private: run it in-vpc or use endpoint authorized-networks [rule: deployer-reaches-api]"]
    cluster["deployer"]["runnerCidrs"] = ["10.8.0.0/24"]
    assert errors(spec) == [
        f"{P}.gcp.cluster.deployer.runnerCidrs[0]: the deployer reaches the public endpoint from '10.8.0.0/24', which "
        "is not inside cluster.authorizedNetworks [rule: deployer-reaches-api]",
        f"{P}.gcp.cluster.deployer.apiAccess: the deployer uses the public endpoint, and cluster.endpoint is "
        "private: run it in-vpc or use endpoint authorized-networks [rule: deployer-reaches-api]"]


def test_prod_keeps_a_regional_encrypted_logged_control_plane(spec: dict[str, Any]) -> None:
    spec["gcp"]["cluster"].update(location="zonal", databaseEncryption=False, logComponents=["SYSTEM_COMPONENTS"])
    assert errors(spec) == [
        f"{P}.gcp.cluster.location: prod clusters keep a regional control plane (three replicas; a zonal one is "
        "down during its upgrades) [rule: prod-regional-control-plane]",
        f"{P}.gcp.cluster.databaseEncryption: prod clusters encrypt Kubernetes secrets with a Cloud KMS key "
        "[rule: prod-secrets-encryption]",
        f"{P}.gcp.cluster.logComponents: prod clusters log WORKLOADS, APISERVER too [rule: prod-log-types]"]


def test_maintenance_window_gives_gke_48_hours_in_32_days(spec: dict[str, Any]) -> None:
    spec["gcp"]["cluster"]["maintenance"].update(recurrence="FREQ=WEEKLY;BYDAY=SA", durationHours=8)
    assert errors(spec) == [
        f"{P}.gcp.cluster.maintenance: GKE needs at least 48 hours of maintenance windows in any 32 days; "
        "'FREQ=WEEKLY;BYDAY=SA' for 8 h gives as little as 32 h [rule: maintenance-window-availability]"]
    spec["gcp"]["cluster"]["maintenance"].update(recurrence="FREQ=DAILY", durationHours=4)
    parse_spec(spec, FILE, provider_region="us-central1")


def test_no_upgrades_exclusions_last_30_days_at_most(spec: dict[str, Any]) -> None:
    spec["gcp"]["cluster"]["maintenance"]["exclusions"] = [
        {"name": "freeze", "start": "2027-01-01T00:00:00Z", "end": "2027-02-15T00:00:00Z", "scope": "NO_UPGRADES"}]
    assert errors(spec) == [
        f"{P}.gcp.cluster.maintenance.exclusions[freeze].end: a NO_UPGRADES exclusion lasts at most 30 days (this one "
        "45 days; use NO_MINOR_OR_NODE_UPGRADES for longer) [rule: maintenance-exclusion]"]


def test_bucket_protection(spec: dict[str, Any]) -> None:
    bucket = spec["gcp"]["storage"]["checkpointBucket"]
    bucket["softDeleteDays"] = 3
    assert errors(spec) == [f"{P}.gcp.storage.checkpointBucket.softDeleteDays: soft delete is off (0) or 7 to 90 days "
                            "[rule: soft-delete-range]"]
    bucket.update(softDeleteDays=0, hierarchicalNamespace=True)
    assert errors(spec) == [
        f"{P}.gcp.storage.checkpointBucket.softDeleteDays: a hierarchical-namespace bucket has no object versioning, "
        "so soft delete is the only protection of overwritten checkpoints: keep softDeleteDays >= 7 "
        "[rule: hns-needs-soft-delete]"]


def data_bucket(spec: dict[str, Any]) -> dict[str, Any]:
    bucket: dict[str, Any] = spec["gcp"]["storage"]["buckets"][0]
    assert bucket["name"] == "data"
    return bucket


def test_a_bucket_is_granted_to_teams_of_the_stack(spec: dict[str, Any]) -> None:
    data_bucket(spec)["access"]["ops"] = "read"
    assert errors(spec) == [
        f"{P}.gcp.storage.buckets[data].access.ops: 'ops' is not a team of the stack (research, pretraining, "
        "applied): a bucket is granted to a team's Workload Identity principal and mounted in its namespace "
        "[rule: bucket-access-team]"]
    data_bucket(spec)["access"] = {"research": "write"}
    (line,) = errors(spec)
    assert line.startswith(f"{P}.gcp.storage.buckets[data].access.research: ") and "[rule: schema-type]" in line


def test_bucket_names_are_unique_and_not_the_checkpoint_bucket_s(spec: dict[str, Any]) -> None:
    buckets = spec["gcp"]["storage"]["buckets"]
    buckets.append({"name": "data", "access": {"research": "read"}})
    assert errors(spec) == [f"{P}.gcp.storage.buckets[1].name: bucket name 'data' is used twice [rule: unique-names]"]
    buckets[1:] = [{"name": "checkpoints"}, {"name": "shared-fs"}]
    assert errors(spec) == [
        f"{P}.gcp.storage.buckets[checkpoints].name: every team namespace already has a claim named 'checkpoints' "
        "(the checkpoint bucket's claim), and a bucket's claim takes the bucket's name: choose another "
        "[rule: bucket-name-taken]",
        f"{P}.gcp.storage.buckets[shared-fs].name: every team namespace already has a claim named 'shared-fs' "
        "(the shared filesystem's claim), and a bucket's claim takes the bucket's name: choose another "
        "[rule: bucket-name-taken]"]
    del buckets[1:]
    spec["gcp"]["storage"]["checkpointBucket"]["existingName"] = "acme-ml-prod-prod-train-gke-data"
    assert errors(spec) == [
        f"{P}.gcp.storage.buckets[data].name: the bucket would be acme-ml-prod-prod-train-gke-data, the checkpoint "
        "bucket (checkpointBucket.existingName): choose another name [rule: bucket-name-taken]"]


def test_two_teams_claims_never_join_into_one_resource(spec: dict[str, Any]) -> None:
    """Claims are Pulumi resources <platform>-persistentvolumeclaim-<team>-<claim>: team applied's ml-data and
    team applied-ml's data would be one."""
    spec["teams"][2]["quotas"][0]["gpus"] = 8
    spec["teams"].append({"name": "applied-ml", "costCenter": "cc-4500", "group": "applied-ml@example.com",
                          "quotas": [{"nodeGroup": "h100", "gpus": 8}],
                          "budget": {"monthlyUsd": 1000, "notify": ["applied-leads@example.com"]}})
    data_bucket(spec)["access"]["applied-ml"] = "read"
    parse_spec(spec, FILE, provider_region="us-central1")
    spec["gcp"]["storage"]["buckets"].append({"name": "ml-data", "access": {"applied": "read"}})
    assert errors(spec) == [
        f"{P}.gcp.storage.buckets[ml-data].name: team applied's claim ml-data and team applied-ml's claim data would "
        "be one Pulumi resource (persistentvolumeclaim-applied-ml-data): choose another bucket name "
        "[rule: unique-names]"]
    spec["gcp"]["storage"]["buckets"][1] = {"name": "ml-checkpoints", "access": {"applied": "read"}}
    assert errors(spec) == [
        f"{P}.gcp.storage.buckets[ml-checkpoints].name: team applied's claim ml-checkpoints and team applied-ml's "
        "claim checkpoints would be one Pulumi resource (persistentvolumeclaim-applied-ml-checkpoints): choose "
        "another bucket name [rule: unique-names]"]


def test_a_bucket_name_is_one_cloud_storage_accepts_once_composed(spec: dict[str, Any]) -> None:
    """<project>-<cluster>-<name>, never cut (two cut names could meet): 63 characters at most, no "goog" prefix,
    no "google" (Cloud Storage "Bucket naming guidelines", with its source in gcp_storage.yaml)."""
    limits = gcp_storage_limits()
    source = f"components/catalog/gcp_storage.yaml: {limits.bucket_name_source}"
    assert (limits.bucket_name_max, limits.bucket_name_reserved_prefix) == (63, "goog")
    bucket = data_bucket(spec)
    spec["gcp"]["project"] = "acme-machine-learning-prod-001"  # 30 characters, the most a project ID has
    bucket["name"] = "tokenized-corpora-v2"
    assert errors(spec) == [
        f"{P}.gcp.storage.buckets[tokenized-corpora-v2].name: the bucket would be acme-machine-learning-prod-001-"
        "prod-train-gke-tokenized-corpora-v2 (<project>-<cluster>-<name>), 66 characters, and Cloud Storage names "
        "have at most 63: use a name of at most 17 characters [rule: bucket-name-length]"]
    bucket["name"] = "tokenized-corpora"
    parse_spec(spec, FILE, provider_region="us-central1")  # exactly 63
    spec["gcp"]["project"] = "acme-ml-prod"
    bucket["name"] = "google-data"
    assert errors(spec) == [
        f"{P}.gcp.storage.buckets[google-data].name: the bucket would be acme-ml-prod-prod-train-gke-google-data "
        f"(<project>-<cluster>-<name>), and it contains 'google', which Cloud Storage refuses in bucket names "
        f"({source}): choose another name [rule: bucket-name-valid]"]
    bucket["name"] = "data"
    spec["gcp"]["project"] = "goog-ml-prod"
    assert errors(spec) == [
        f"{P}.gcp.storage.buckets[data].name: the bucket would be goog-ml-prod-prod-train-gke-data "
        f"(<project>-<cluster>-<name>), and it starts with 'goog', which Cloud Storage reserves ({source}): choose "
        "another name [rule: bucket-name-valid]"]


def test_a_hierarchical_bucket_keeps_no_versions_and_keeps_soft_delete(spec: dict[str, Any]) -> None:
    data_bucket(spec).update(hierarchicalNamespace=True, noncurrentVersionRetentionDays=30)
    assert errors(spec) == [
        f"{P}.gcp.storage.buckets[data].noncurrentVersionRetentionDays: a hierarchical-namespace bucket cannot be "
        "versioned (Cloud Storage 'Hierarchical namespace'), so it keeps no noncurrent versions to retain: remove "
        "noncurrentVersionRetentionDays (soft delete keeps its overwritten and deleted objects) "
        "[rule: hns-no-versioning]"]
    del data_bucket(spec)["noncurrentVersionRetentionDays"]
    data_bucket(spec)["softDeleteDays"] = 0
    assert errors(spec) == [
        f"{P}.gcp.storage.buckets[data].softDeleteDays: a hierarchical-namespace bucket has no object versioning, so "
        "soft delete is the only protection of overwritten objects: keep softDeleteDays >= 7 "
        "[rule: hns-needs-soft-delete]"]
    data_bucket(spec)["softDeleteDays"] = 3
    assert errors(spec) == [f"{P}.gcp.storage.buckets[data].softDeleteDays: soft delete is off (0) or 7 to 90 days "
                            "[rule: soft-delete-range]"]
    data_bucket(spec)["softDeleteDays"] = 7
    parse_spec(spec, FILE, provider_region="us-central1")


def test_ranges_are_valid_private_and_disjoint(spec: dict[str, Any]) -> None:
    net = spec["gcp"]["network"]
    net.update(podsCidr="10.40.0.0/14", controlPlaneCidr="172.16.0.32/27")
    assert errors(spec) == [
        f"{P}.gcp.network.podsCidr: '10.40.0.0/14' overlaps nodeCidr '10.40.0.0/20' [rule: cidr-no-overlap]",
        f"{P}.gcp.network.servicesCidr: '10.40.32.0/20' overlaps podsCidr '10.40.0.0/14' [rule: cidr-no-overlap]",
        f"{P}.gcp.network.controlPlaneCidr: GKE takes a /28 for the private control plane (master_ipv4_cidr_block); "
        "got /27 [rule: control-plane-cidr-28]",
        f"{P}.gcp.network.proxyOnlyCidr: '10.40.48.0/23' overlaps podsCidr '10.40.0.0/14' [rule: cidr-no-overlap]"]


def test_teams_on_gke_use_groups_not_iam_role_arns(spec: dict[str, Any]) -> None:
    spec["teams"][0]["roleArns"] = ["arn:aws:iam::111122223333:role/research-engineers"]
    assert errors(spec) == [
        f"{P}.teams[research].roleArns: roleArns are AWS IAM roles; on GKE a team's members reach the cluster through "
        "its group (a Google Group with Google Groups for RBAC) and IAM [rule: team-access-per-cloud]"]


def test_gcp_budget_recipients_fit_five_channels(spec: dict[str, Any]) -> None:
    spec["teams"][0]["budget"]["notify"] = [f"lead{i}@example.com" for i in range(4)]
    assert errors(spec) == [
        f"{P}.teams[research].budget.notify: a GCP budget notifies at most 5 monitoring channels; the team's and "
        "billing.notify's addresses make 6 [rule: gcp-budget-recipients]"]


def test_quota_names_a_gke_pool(spec: dict[str, Any]) -> None:
    spec["teams"][0]["quotas"][0]["nodeGroup"] = "a100"
    assert errors(spec) == [f"{P}.teams[research].quotas[0].nodeGroup: 'a100' is not a GPU node group of this stack; "
                            "known: h100, l4 [rule: quota-node-group-exists]"]


def test_gke_gpu_taint_stays_noschedule_and_labels_are_kubernetes_labels(spec: dict[str, Any]) -> None:
    h100(spec)["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "PreferNoSchedule"}]
    h100(spec)["labels"] = {"workload": "training", "bad key": "x"}
    lines = errors(spec)
    assert f"{P}.gcp.nodePools[h100].taints[0].effect: GPU nodes keep nvidia.com/gpu=present:NoSchedule so that pods " \
           "without GPU requests stay off them; remove this taint or make it NoSchedule (got PreferNoSchedule) " \
           "[rule: gpu-taint-noschedule]" in lines
    assert any(line.startswith(f"{P}.gcp.nodePools[h100].labels['bad key']") or "bad key" in line for line in lines)
    assert len(lines) == 2


# --- GKE version floors (components/catalog/gke_versions.yaml) ----------------------------------------------------
TCPXO_FLOOR = ("GPUDirect-TCPXO on A3 Mega (node pool h100, a3-megagpu-8g) needs: GKE 1.28.15-gke.3163000 or later, "
               "and on a later minor at least its entry of 1.29.15-gke.2467000, 1.30.14-gke.1922000, "
               "1.31.14-gke.1243000, 1.32.11-gke.1174000 (components/catalog/gke_versions.yaml)")
LUSTRE_FLOOR = ("Managed Lustre on port 988 (storage.filesystem) needs: GKE 1.33.2-gke.4780000 or later "
                "(components/catalog/gke_versions.yaml)")
RAISE = "raise minMasterVersion to it or later (a version the release channel offers) [rule: gke-version-floor]"


def patch_gke_versions(monkeypatch: pytest.MonkeyPatch, versions: GkeVersions) -> None:
    """Stand another gke_versions.yaml in for the rules (which read it directly and through spec.decisions)."""
    for module in (gcp_rules, decisions):
        monkeypatch.setattr(module, "load_gke_versions", lambda: versions)


def without_lustre(spec: dict[str, Any]) -> None:
    """No shared filesystem (checkpoints straight to the bucket): only the GPUDirect floor is left to check."""
    del spec["gcp"]["storage"]["filesystem"]
    spec["workload"]["goodput"].update(checkpointPath="bucket", bucketWriteMbps=4000)


def test_min_master_version_below_the_gpudirect_and_lustre_floors_is_refused(spec: dict[str, Any]) -> None:
    without_gateway(spec)  # its own version floor (tests/program/test_gcp_serving_gateway.py)
    key = f"{P}.gcp.cluster.minMasterVersion"
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.32.9-gke.1000"
    assert errors(spec) == [
        f"{key}: minMasterVersion 1.32.9-gke.1000 is below 1.32.11-gke.1174000, which {TCPXO_FLOOR}; {RAISE}",
        f"{key}: minMasterVersion 1.32.9-gke.1000 is below 1.33.2-gke.4780000, which {LUSTRE_FLOOR}; {RAISE}"]
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.32.11-gke.1174000"  # TCPXO's 1.32 floor, not Lustre's port
    assert errors(spec) == [
        f"{key}: minMasterVersion 1.32.11-gke.1174000 is below 1.33.2-gke.4780000, which {LUSTRE_FLOOR}; {RAISE}"]
    # GKE reads "1.X" as the newest patch of that minor (GKE versioning, "Specifying cluster version"): 1.32 meets
    # TCPXO's 1.32 floor but no 1.32 patch has Lustre's port; 1.33 meets both.
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.32"
    assert errors(spec) == [f"{key}: minMasterVersion 1.32 is below 1.33.2-gke.4780000, which {LUSTRE_FLOOR}; {RAISE}"]
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.33"
    parse_spec(spec, FILE, provider_region="us-central1")
    without_lustre(spec)
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.27.16-gke.2874000"  # older than TCPXO's oldest minor
    assert errors(spec) == [f"{key}: minMasterVersion 1.27.16-gke.2874000 is below 1.28.15-gke.3163000, which "
                            f"{TCPXO_FLOOR}; {RAISE}"]
    for met in ("1.28.15-gke.3163000", "1.32.11-gke.1174000", "1.33.0-gke.1", "1.35.8-gke.1036000"):
        spec["gcp"]["cluster"]["minMasterVersion"] = met
        parse_spec(spec, FILE, provider_region="us-central1")


def test_min_master_version_meeting_every_floor_loads_and_reaches_the_cluster(spec: dict[str, Any]) -> None:
    from tests.conftest import run_spec

    spec["gcp"]["cluster"]["minMasterVersion"] = "1.35.8-gke.1036000"
    (cluster,) = run_spec(spec, "prod-gcp").graph.of_type("gcp:container/cluster:Cluster")
    assert cluster.inputs["minMasterVersion"] == "1.35.8-gke.1036000"
    assert cluster.inputs["releaseChannel"] == {"channel": "REGULAR"}


def test_rdma_floors_are_per_machine_family(spec: dict[str, Any]) -> None:
    without_gateway(spec)  # its own version floor (tests/program/test_gcp_serving_gateway.py)
    key = f"{P}.gcp.cluster.minMasterVersion"
    without_lustre(spec)
    h100(spec).update(machineType="a3-ultragpu-8g", diskType="hyperdisk-balanced")
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.31.4-gke.1183000"
    parse_spec(spec, FILE, provider_region="us-central1")  # A3 Ultra's floor
    h100(spec).update(machineType="a4-highgpu-8g")
    assert errors(spec) == [
        f"{key}: minMasterVersion 1.31.4-gke.1183000 is below 1.32.2-gke.1475000, which GPUDirect-RDMA on A4 "
        "(multi-networking) (node pool h100, a4-highgpu-8g) needs: GKE 1.32.2-gke.1475000 or later "
        f"(components/catalog/gke_versions.yaml); {RAISE}"]
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.32.2-gke.1475000"
    parse_spec(spec, FILE, provider_region="us-central1")


def test_without_min_master_version_the_channel_default_is_checked(spec: dict[str, Any],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A release channel alone is checked at its default version as the catalog's dated release note gives it
    (the shipped defaults all meet the floors, so an older default is put in the catalog for the test)."""
    without_gateway(spec)  # its own version floor (tests/program/test_gcp_serving_gateway.py)
    assert "minMasterVersion" not in spec["gcp"]["cluster"]
    parse_spec(spec, FILE, provider_region="us-central1")
    real = load_gke_versions()
    older = dataclasses.replace(real.channel_defaults["REGULAR"], version="1.33.2-gke.4000000", announced="2025-09-01")
    patch_gke_versions(monkeypatch, dataclasses.replace(real, channel_defaults={**real.channel_defaults,
                                                                                "REGULAR": older}))
    assert errors(spec) == [
        f"{P}.gcp.cluster.releaseChannel: without minMasterVersion the cluster gets the REGULAR channel's default "
        f"version as of the GKE release notes of 2025-09-01, 1.33.2-gke.4000000, which is below 1.33.2-gke.4780000, "
        "which "
        f"{LUSTRE_FLOOR}; set minMasterVersion to it or later, or choose a channel whose default meets it "
        "[rule: gke-version-floor]"]
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.33.2-gke.4780000"
    parse_spec(spec, FILE, provider_region="us-central1")  # an explicit version overrides the channel's default


def test_a_gpudirect_machine_without_a_floor_is_refused(spec: dict[str, Any],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    real = load_gke_versions()
    floors = {k: v for k, v in real.gpudirect_floors.items() if k != "nvidia-h100-mega-80gb"}
    patch_gke_versions(monkeypatch, dataclasses.replace(real, gpudirect_floors=floors))
    assert errors(spec) == [
        f"{P}.gcp.nodePools[h100].machineType: a3-megagpu-8g uses GPUDirect-TCPXO, and "
        "components/catalog/gke_versions.yaml has no GKE version floor for nvidia-h100-mega-80gb: add the version GKE "
        "documents for it [rule: gke-version-floor]"]


def test_a_pinned_pool_runs_no_newer_than_the_control_plane_and_within_its_skew(spec: dict[str, Any]) -> None:
    key = f"{P}.gcp.nodePools[h100].version"
    h100(spec)["version"] = "1.35.8-gke.1036000"
    assert errors(spec) == [
        f"{key}: a pinned node version needs cluster.minMasterVersion at or above it: nodes never run newer than the "
        "control plane (Kubernetes version skew policy), whose version is otherwise the REGULAR channel's; set "
        "minMasterVersion to 1.35.8-gke.1036000 or later [rule: gke-node-version]"]
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.35.6-gke.1000"
    assert errors(spec) == [
        f"{key}: 1.35.8-gke.1036000 is newer than minMasterVersion 1.35.6-gke.1000: nodes never run newer than the "
        "control plane (Kubernetes version skew policy); raise minMasterVersion first, or pin an older version "
        "[rule: gke-node-version]"]
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.36.4-gke.1391000"
    parse_spec(spec, FILE, provider_region="us-central1")  # one minor behind: the pin holds
    h100(spec)["version"] = "1.33.5-gke.1000"
    assert errors(spec) == [
        f"{key}: 1.33.5-gke.1000 is 3 minor versions older than minMasterVersion 1.36.4-gke.1391000, and GKE nodes "
        "trail the control plane by at most 2 (components/catalog/gke_versions.yaml node_skew, with its source); pin "
        "1.34 or later [rule: gke-node-version]"]
    h100(spec)["version"] = "1.34.6-gke.1307000"
    parse_spec(spec, FILE, provider_region="us-central1")  # two minors behind: allowed


def test_a_pinned_gpudirect_pool_meets_its_floor_on_the_nodes(spec: dict[str, Any]) -> None:
    """The GPUDirect floor is a node requirement: a pin below it is refused even when minMasterVersion meets it."""
    without_gateway(spec)  # its own version floor (tests/program/test_gcp_serving_gateway.py)
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.33.2-gke.4780000"
    h100(spec)["version"] = "1.32.9-gke.1000"
    assert errors(spec) == [
        f"{P}.gcp.nodePools[h100].version: 1.32.9-gke.1000 is below 1.32.11-gke.1174000, which {TCPXO_FLOOR}; "
        "pin it or later [rule: gke-version-floor]"]
    h100(spec)["version"] = "1.32.11-gke.1174000"
    parse_spec(spec, FILE, provider_region="us-central1")


def test_a_pin_is_an_exact_gke_version_and_no_channel_is_not_offered(spec: dict[str, Any]) -> None:
    h100(spec)["version"] = "1.35"  # fuzzy: the provider would see spurious diffs
    (line,) = errors(spec)
    assert line.startswith(f"{P}.gcp.nodePools[h100].version: ") and "[rule: schema-type]" in line
    del h100(spec)["version"]
    spec["gcp"]["cluster"]["releaseChannel"] = "UNSPECIFIED"
    assert errors(spec) == [f"{P}.gcp.cluster.releaseChannel: Input should be 'RAPID', 'REGULAR', 'STABLE' or "
                            "'EXTENDED' [rule: schema-type]"]


def test_min_master_version_is_a_gke_version(spec: dict[str, Any]) -> None:
    spec["gcp"]["cluster"]["minMasterVersion"] = "latest"
    (line,) = errors(spec)
    assert line.startswith(f"{P}.gcp.cluster.minMasterVersion: ")


def test_the_floors_cover_every_gpudirect_machine_and_the_port_the_stack_opens() -> None:
    versions = load_gke_versions()
    direct = {f.accelerator for f in load_gcp_catalog().values() if f.gpudirect != "none" and f.gpu_count}
    assert direct == set(versions.gpudirect_floors) == {
        "nvidia-h100-80gb", "nvidia-h100-mega-80gb", "nvidia-h200-141gb", "nvidia-b200"}
    assert versions.lustre_port == gcp_storage_limits().lustre_port == 988
    assert set(versions.channel_defaults) == {"RAPID", "REGULAR", "STABLE", "EXTENDED"}
    for floor in [*versions.gpudirect_floors.values(), versions.lustre_floor]:
        assert floor.status in ("confirmed", "secondary") and floor.source and floor.as_of
    # every shipped channel default meets every floor: a stack that names only its channel loads
    for default in versions.channel_defaults.values():
        assert all(f.unmet(default.version) is None
                   for f in [*versions.gpudirect_floors.values(), versions.lustre_floor]), default


def test_acceptance_is_refused_on_a_tcpx_pool(spec: dict[str, Any]) -> None:
    """The acceptance jobs are built for TCPXO and RDMA pods; an A3 High (TCPX) stack is told so at load."""
    h100(spec).update(machineType="a3-highgpu-8g", capacity={"type": "spot"})
    assert errors(spec) == [
        f"{P}.acceptance.enabled: the acceptance jobs are built for GPUDirect-TCPXO and -RDMA pools, not for "
        "a3-highgpu-8g (gcp.nodePools[1], GPUDirect-TCPX: its daemon shares a socket directory with the workload and "
        "needs IPC_LOCK there, a pod shape not built here): turn acceptance off and run container-engine-accelerators' "
        "gpudirect-tcpx NCCL test by hand [rule: acceptance-fabric-built]"]
    spec["acceptance"]["enabled"] = False
    parse_spec(spec, FILE, provider_region="us-central1")


def test_acceptance_tests_dir_is_an_absolute_path(spec: dict[str, Any]) -> None:
    spec["acceptance"]["testsDir"] = "nccl-tests/build; rm -rf /"
    (line,) = errors(spec)
    assert line.startswith(f"{P}.acceptance.testsDir: ")


def test_gke_team_groups_are_google_group_emails_passed_to_rbac(spec: dict[str, Any]) -> None:
    """IAM grants a group only as group:<email>, and GKE passes it to RBAC only with Google Groups for RBAC."""
    spec["teams"][0]["group"] = "research"
    assert errors(spec) == [
        f"{P}.teams[research].group: 'research' is not a Google Group's email: on GKE the team's group is granted "
        "IAM as group:<email> and bound by RBAC through Google Groups for RBAC (e.g. research@example.com) "
        "[rule: gke-team-group-email]"]
    spec["teams"][0]["group"] = "research-engineers@example.com"
    del spec["gcp"]["cluster"]["rbacSecurityGroup"]
    assert errors(spec)[0] == (
        f"{P}.gcp.cluster.rbacSecurityGroup: team research is reached through the Google Group "
        "research-engineers@example.com, which GKE passes to RBAC only with Google Groups for RBAC: set "
        "rbacSecurityGroup to gke-security-groups@<your domain> and nest the team groups in it "
        "[rule: gke-groups-for-rbac]")


DIGEST = "us-central1-docker.pkg.dev/acme-ml-prod/mirror/tcpgpudmarxd-dev@sha256:" + "ab" * 32


def test_rxdm_releases_are_the_catalogs_and_their_copies_name_an_accepted_one(spec: dict[str, Any]) -> None:
    spec["gcp"]["rxdm"] = {"releases": ["v1.0.21", "v1.0.20"], "images": [{"release": "v1.0.20", "image": DIGEST}]}
    parse_spec(spec, FILE, provider_region="us-central1")
    spec["gcp"]["rxdm"] = {
        "releases": ["v1.0.21", "v1.0.99"],
        "images": [{"release": "v1.0.20", "image": DIGEST},
                   {"release": "v1.0.21", "image": "us-central1-docker.pkg.dev/acme-ml-prod/mirror/rxdm:v1.0.20"},
                   {"release": "v1.0.21", "image": "ghcr.io/someone/tcpgpudmarxd-dev:v1.0.21"}]}
    assert errors(spec) == [
        f"{P}.gcp.rxdm.releases[1]: v1.0.99 is not an RxDM release the catalog knows for GPUDirect-TCPXO "
        "(components/catalog/gke_manifests.yaml, rxdm: v1.0.21, v1.0.20): add it there with the command, args, env and "
        "host mounts upstream's manifests run it with, and their commit [rule: rxdm-releases-known]",
        f"{P}.gcp.rxdm.images[0].release: v1.0.20 is not an accepted release (v1.0.21, v1.0.99): list it in "
        "gcp.rxdm.releases [rule: rxdm-image-of-release]",
        f"{P}.gcp.rxdm.images[1].image: us-central1-docker.pkg.dev/acme-ml-prod/mirror/rxdm:v1.0.20 is tagged v1.0.20, "
        "not v1.0.21: a mirror keeps the release's tag, or give the image by digest (<repository>@sha256:<64 hex>) "
        "[rule: rxdm-image-of-release]",
        f"{P}.gcp.rxdm.images[2].image: ghcr.io/someone/tcpgpudmarxd-dev:v1.0.21 is not under "
        "platform.allowedRegistries, whose admission policy would refuse the pods that run it "
        "[rule: rxdm-image-of-release]"]


def test_rxdm_on_a_stack_without_a_sidecar_is_refused() -> None:
    spec = copy.deepcopy(raw_stack_config("dev-gcp")["gpu-cluster:spec"])
    spec["gcp"]["rxdm"] = {"releases": ["v1.0.21"]}
    assert errors(spec) == [
        "stacks/Pulumi.prod-gcp.yaml: gpu-cluster:spec.gcp.rxdm: no node pool runs GPUDirect-TCPX or -TCPXO, so no pod "
        "runs an RxDM sidecar: remove gcp.rxdm [rule: rxdm-releases-known]"]
