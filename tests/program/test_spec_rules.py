"""Every spec rule, each with the exact message a user sees (file, key path, requirement, rule)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.aws.summary import _node_group_line, node_group_figures
from components.catalog import load_aws_catalog
from components.spec import SpecError, is_placed, parse_spec
from components.spec.notes import spec_notes
from tests.conftest import ROOT, CatalogEdit, run_spec

FILE = "stacks/Pulumi.prod-aws.yaml"
P = f"{FILE}: gpu-cluster:spec"
NOW = datetime(2026, 12, 2, tzinfo=UTC)
# The shipped block's window (Pulumi.prod-aws.yaml), for capacity-block mutations.
WINDOW = {"start": "2027-01-04T11:30:00Z", "end": "2027-01-18T11:30:00Z", "instanceCount": 16}


def errors(spec: Any, region: str | None = "us-east-1") -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(spec, FILE, provider_region=region)
    return str(info.value).splitlines()


def group(spec: dict[str, Any], name: str) -> dict[str, Any]:
    return next(g for g in spec["aws"]["nodeGroups"] if g["name"] == name)


def test_shipped_prod_spec_is_valid(prod_spec: dict[str, Any]) -> None:
    spec = parse_spec(prod_spec, FILE, provider_region="us-east-1")
    assert spec.billing_labels["environment"] == "prod"
    assert spec.aws_spec().node_groups[1].capacity.type == "capacity-block"


def test_instance_type_must_be_in_catalog(prod_spec: dict[str, Any]) -> None:
    group(prod_spec, "h100")["instanceType"] = "p9.96xlarge"
    assert errors(prod_spec) == [
        f"{P}.aws.nodeGroups[h100].instanceType: 'p9.96xlarge' is not in the instance catalog "
        "(components/catalog/aws_instances.yaml, 152 types); closest: p5.4xlarge, p5.48xlarge, g6.16xlarge "
        "[rule: instance-type-in-catalog]"
    ]


def test_multi_node_efa_group_must_stay_in_one_zone(prod_spec: dict[str, Any]) -> None:
    g = group(prod_spec, "h100")
    g["capacity"] = {"type": "on-demand"}
    g["subnets"] = ["gpu-a", "system-b"]
    assert errors(prod_spec) == [
        f"{P}.aws.nodeGroups[h100].subnets: p5.48xlarge is EFA-capable and the group spans nodes (maxSize 16), "
        "so its subnets must be in one availability zone; got use1-az4, use1-az6 [rule: efa-group-single-az]"
    ]


def test_single_node_efa_group_may_span_zones(prod_spec: dict[str, Any]) -> None:
    g = group(prod_spec, "h100")
    g.update(capacity={"type": "on-demand"}, subnets=["gpu-a", "system-b"], minSize=0, desiredSize=1, maxSize=1)
    prod_spec["workload"]["peakGpus"] = 8
    for team in prod_spec["teams"]:
        team["quotas"] = [{"nodeGroup": "h100", "gpus": 2}]
    prod_spec.pop("inference")  # the served model's team quota on l40s is gone with the others
    parse_spec(prod_spec, FILE, provider_region="us-east-1")


@pytest.mark.parametrize("capacity", [
    {"type": "capacity-block", "reservationId": "cr-0a1b2c3d4e5f60718", **WINDOW},
    {"type": "reserved", "reservationId": "cr-0a1b2c3d4e5f60718"},
])
def test_placement_group_never_forced_onto_reserved_capacity(
    prod_spec: dict[str, Any], capacity: dict[str, str]
) -> None:
    g = group(prod_spec, "h100")
    g.update(capacity=capacity, placement="cluster")
    why = ("the block is already placed by AWS" if capacity["type"] == "capacity-block" else
           "an ODCR is placed only in the cluster placement group it was created in (name that one in "
           "placementGroupName)")
    assert errors(prod_spec) == [
        f"{P}.aws.nodeGroups[h100].placement: a new cluster placement group must not be forced onto "
        f"{capacity['type']} capacity: {why}, and a placement group the reservation is not in causes "
        "InsufficientInstanceCapacity (terraform-aws-eks PR #3730); use auto or none "
        "[rule: no-placement-group-on-reserved-capacity]"
    ]


def test_sizes_must_be_ordered(prod_spec: dict[str, Any]) -> None:
    g = group(prod_spec, "system")
    g.update(minSize=4, desiredSize=3, maxSize=6)
    assert errors(prod_spec) == [
        f"{P}.aws.nodeGroups[system].desiredSize: desiredSize (3) must be >= minSize (4); sizes must satisfy "
        "minSize <= desiredSize <= maxSize [rule: node-group-size-order]"
    ]
    g.update(minSize=1, desiredSize=7, maxSize=6)
    assert errors(prod_spec) == [
        f"{P}.aws.nodeGroups[system].desiredSize: desiredSize (7) must be <= maxSize (6); sizes must satisfy "
        "minSize <= desiredSize <= maxSize [rule: node-group-size-order]"
    ]


@pytest.mark.parametrize("capacity_gib", [1000, 1800, 3600, 4000])
def test_fsx_capacity_must_be_an_accepted_size(prod_spec: dict[str, Any], capacity_gib: int) -> None:
    prod_spec["aws"]["storage"]["filesystem"]["capacityGiB"] = capacity_gib
    assert errors(prod_spec) == [
        f"{P}.aws.storage.filesystem.capacityGiB: capacityGiB {capacity_gib} is not a size FSx for Lustre "
        "PERSISTENT_2 accepts: 1200, 2400, or a multiple of 2400 [rule: fsx-capacity-valid]"
    ]


@pytest.mark.parametrize("capacity_gib", [1200, 2400, 4800, 9600, 100800])
def test_fsx_accepted_sizes_pass(prod_spec: dict[str, Any], capacity_gib: int) -> None:
    prod_spec["aws"]["storage"]["filesystem"]["capacityGiB"] = capacity_gib
    parse_spec(prod_spec, FILE, provider_region="us-east-1")


def test_fsx_throughput_tier_must_be_valid(prod_spec: dict[str, Any]) -> None:
    prod_spec["aws"]["storage"]["filesystem"]["perUnitStorageThroughput"] = 200
    assert errors(prod_spec) == [
        f"{P}.aws.storage.filesystem.perUnitStorageThroughput: perUnitStorageThroughput must be one of "
        "125, 250, 500, 1000 MB/s/TiB for PERSISTENT_2, got 200 [rule: fsx-throughput-tier-valid]"
    ]
    prod_spec["aws"]["storage"]["filesystem"].update(deploymentType="SCRATCH_2", perUnitStorageThroughput=125)
    assert errors(prod_spec) == [
        f"{P}.aws.storage.filesystem.perUnitStorageThroughput: perUnitStorageThroughput does not apply to "
        "SCRATCH_2; remove it [rule: fsx-throughput-tier-valid]"
    ]


def test_prod_cannot_turn_off_deletion_protection(prod_spec: dict[str, Any]) -> None:
    prod_spec["deletionProtection"] = False
    assert errors(prod_spec) == [
        f"{P}.deletionProtection: prod stacks cannot turn off deletion protection of stateful resources "
        "[rule: prod-deletion-protection]"
    ]


def test_dev_may_turn_off_deletion_protection(dev_spec: dict[str, Any]) -> None:
    assert parse_spec(dev_spec, FILE, provider_region="us-west-2").deletion_protection is False


def test_cidrs_must_parse(prod_spec: dict[str, Any]) -> None:
    prod_spec["aws"]["network"]["vpcCidr"] = "10.40.0.0/33"
    prod_spec["aws"]["network"]["subnets"][1]["cidr"] = "10.40.64.1/20"
    assert errors(prod_spec) == [
        f"{P}.aws.network.vpcCidr: '10.40.0.0/33' is not an IPv4 CIDR (address/prefix, no host bits): "
        "'10.40.0.0/33' does not appear to be an IPv4 or IPv6 network [rule: cidr-valid]",
        f"{P}.aws.network.subnets[system-a].cidr: '10.40.64.1/20' is not an IPv4 CIDR (address/prefix, no host bits): "
        "10.40.64.1/20 has host bits set [rule: cidr-valid]",
    ]


def test_cidrs_must_not_overlap_and_stay_inside_the_vpc(prod_spec: dict[str, Any]) -> None:
    subnets = prod_spec["aws"]["network"]["subnets"]
    subnets[1]["cidr"] = "10.40.32.0/20"  # inside gpu-a 10.40.0.0/18
    subnets[4]["cidr"] = "10.41.0.0/24"
    assert errors(prod_spec) == [
        f"{P}.aws.network.subnets[system-a].cidr: subnet CIDR 10.40.32.0/20 overlaps aws.network.subnets[gpu-a] "
        "(10.40.0.0/18); subnets must not overlap [rule: cidr-no-overlap]",
        f"{P}.aws.network.subnets[public-b].cidr: subnet CIDR 10.41.0.0/24 must lie inside the VPC CIDR 10.40.0.0/16 "
        "[rule: subnet-inside-vpc]",
    ]


def test_public_endpoint_is_never_open_to_the_internet(prod_spec: dict[str, Any]) -> None:
    cp = prod_spec["aws"]["controlPlane"]
    cp.update(endpointAccess="public", publicAccessCidrs=["0.0.0.0/0"])
    assert errors(prod_spec) == [
        f"{P}.aws.controlPlane.publicAccessCidrs[0]: 0.0.0.0/0 opens the API endpoint to the whole internet; "
        "list the networks that need access [rule: endpoint-not-open]"
    ]
    cp["publicAccessCidrs"] = []
    assert errors(prod_spec) == [
        f"{P}.aws.controlPlane.publicAccessCidrs: a public endpoint needs publicAccessCidrs restricted to "
        "listed networks [rule: endpoint-not-open]"
    ]


def test_billing_labels_are_required(prod_spec: dict[str, Any]) -> None:
    del prod_spec["labels"]["cost-center"]
    prod_spec["labels"]["Owner Name"] = "x"
    assert errors(prod_spec) == [
        f"{P}.labels[\"Owner Name\"]: label keys must be 1-63 characters of lowercase letters, digits, '-' or '_', "
        "starting with a letter (valid as AWS tags and GCP labels alike) [rule: label-syntax]",
        f"{P}.labels: billing label 'cost-center' is required (required keys: team, cost-center, environment, "
        "owner) [rule: billing-labels-required]",
    ]


def test_environment_label_must_match(prod_spec: dict[str, Any]) -> None:
    prod_spec["labels"]["environment"] = "dev"
    assert errors(prod_spec) == [
        f"{P}.labels.environment: label environment 'dev' must equal the environment key 'prod' (it is filled "
        "in from it; leave it out) [rule: billing-labels-required]"
    ]


def test_region_must_match_provider_config(prod_spec: dict[str, Any]) -> None:
    assert errors(prod_spec, region="eu-west-1") == [
        f"{P}.aws.region: aws.region 'us-east-1' must equal the stack's aws:region 'eu-west-1' "
        "[rule: region-matches-provider]"
    ]


def test_reserved_capacity_needs_a_reservation_id(prod_spec: dict[str, Any]) -> None:
    group(prod_spec, "h100")["capacity"] = {"type": "capacity-block", **WINDOW}
    assert errors(prod_spec) == [
        f"{P}.aws.nodeGroups[h100].capacity.reservationId: capacity type 'capacity-block' needs the Capacity "
        "Reservation id (cr-...) [rule: reservation-id]"
    ]
    group(prod_spec, "h100")["capacity"] = {"type": "spot", "reservationId": "cr-0a1b2c3d4e5f60718"}
    assert errors(prod_spec) == [
        f"{P}.aws.nodeGroups[h100].capacity.reservationId: reservationId only applies to capacity-block and "
        "reserved, not 'spot' [rule: reservation-id]"
    ]


def test_raid0_needs_local_nvme(prod_spec: dict[str, Any]) -> None:
    group(prod_spec, "system")["localNvme"] = "raid0"
    assert errors(prod_spec) == [
        f"{P}.aws.nodeGroups[system].localNvme: localNvme raid0 needs instance-store NVMe, and the catalog has no "
        "local NVMe for m6i.2xlarge; use auto or none [rule: local-nvme-exists]"
    ]


def test_peak_gpus_must_fit_the_node_groups(prod_spec: dict[str, Any]) -> None:
    prod_spec["workload"]["peakGpus"] = 256
    assert errors(prod_spec) == [
        f"{P}.workload.peakGpus: peakGpus (256) exceeds the 132 GPUs the node groups provide at maxSize "
        "[rule: peak-gpus-fit]"
    ]


def test_a_system_node_group_is_required(prod_spec: dict[str, Any]) -> None:
    prod_spec["aws"]["nodeGroups"] = [group(prod_spec, "h100")]
    prod_spec.pop("inference")  # on the l40s group, gone too
    for team in prod_spec["teams"]:
        team["cpuQuotas"] = []  # on the cpu group, gone too
        team["quotas"] = [q for q in team["quotas"] if q["nodeGroup"] == "h100"]
    assert errors(prod_spec) == [
        f"{P}.aws.nodeGroups: a node group without GPUs is required for system pods (GPU nodes carry the "
        "nvidia.com/gpu=true:NoSchedule taint) [rule: system-node-group]"
    ]


def test_prod_requires_audit_logs_and_secret_encryption(prod_spec: dict[str, Any]) -> None:
    prod_spec["aws"]["controlPlane"].update(logTypes=["api", "scheduler"], secretsEncryption=False)
    assert errors(prod_spec) == [
        f"{P}.aws.controlPlane.logTypes: prod clusters must log api, audit, authenticator; missing audit, "
        "authenticator [rule: prod-audit-logs]",
        f"{P}.aws.controlPlane.secretsEncryption: prod clusters must encrypt Kubernetes secrets with KMS "
        "[rule: prod-secrets-encryption]",
    ]


def test_gpu_subnet_must_be_in_the_gpu_zone(prod_spec: dict[str, Any]) -> None:
    prod_spec["aws"]["gpuAvailabilityZoneId"] = "use1-az6"
    lines = errors(prod_spec)
    assert lines[0] == (
        f"{P}.aws.network.subnets[gpu-a].availabilityZoneId: gpu subnet 'gpu-a' must be in gpuAvailabilityZoneId "
        "'use1-az6', not 'use1-az4' [rule: gpu-subnet-in-gpu-zone]"
    )
    assert lines[1] == (
        f"{P}.aws.nodeGroups[h100].subnets: capacity-block capacity is bound to one zone; the group's subnets must "
        "all be in gpuAvailabilityZoneId 'use1-az6' [rule: reserved-capacity-in-gpu-zone]"
    )


def test_malformed_values_name_the_key_and_the_rule(prod_spec: dict[str, Any]) -> None:
    prod_spec["environment"] = "production"
    group(prod_spec, "system")["maxSize"] = "lots"
    prod_spec["aws"]["controlPlane"]["extraKey"] = 1
    del prod_spec["workload"]["peakGpus"]
    assert errors(prod_spec) == [
        f"{P}.environment: Input should be 'dev', 'staging' or 'prod'; did you mean prod? [rule: schema-type]",
        f"{P}.workload.peakGpus: required key is missing [rule: schema-required-key]",
        f"{P}.aws.nodeGroups[system].maxSize: Input should be a valid integer [rule: schema-type]",
        f"{P}.aws.controlPlane.extraKey: unknown key [rule: schema-unknown-key]",
    ]


@pytest.mark.parametrize("raw", [None, "a string", 3, ["a", "list"]])
def test_spec_that_is_not_a_mapping(raw: Any) -> None:
    assert errors(raw) == [f"{P}: must be a mapping of keys, got {type(raw).__name__} [rule: schema-type]"]


def test_admin_role_arns_must_be_role_arns(prod_spec: dict[str, Any]) -> None:
    prod_spec["aws"]["controlPlane"]["adminRoleArns"] = ["arn:aws:iam::111122223333:user/alice"]
    assert errors(prod_spec) == [
        f"{P}.aws.controlPlane.adminRoleArns[0]: 'arn:aws:iam::111122223333:user/alice' is not an IAM role ARN "
        "(arn:aws:iam::<12 digits>:role/<name>) [rule: admin-role-arn]"
    ]


def test_duplicate_names_are_rejected(prod_spec: dict[str, Any]) -> None:
    prod_spec["teams"][1]["name"] = "research"
    group(prod_spec, "system")["name"] = "h100"
    for team in prod_spec["teams"]:
        team["cpuQuotas"] = []  # or the cpu group would be the only group without GPUs left, and carry team quota
    del prod_spec["inference"]["gateway"]  # its endpoint pickers need a CPU quota (rule inference-picker-quota)
    assert errors(prod_spec) == [
        f"{P}.teams[1].name: team name 'research' is used twice [rule: unique-names]",
        f"{P}.aws.nodeGroups[1].name: node group name 'h100' is used twice [rule: unique-names]",
    ]


def test_every_team_needs_a_quota(prod_spec: dict[str, Any]) -> None:
    prod_spec["teams"][2]["quotas"] = []
    prod_spec.pop("inference")  # applied's served model needs its quota too (rule inference-quota)
    assert errors(prod_spec) == [
        f"{P}.teams[applied].quotas: team 'applied' has no quota; every team needs a GPU quota on at least one node "
        "group [rule: team-quota-required]"
    ]


def test_quotas_must_fit_the_node_groups_at_max_size(prod_spec: dict[str, Any]) -> None:
    prod_spec["teams"][0]["quotas"][0]["gpus"] = 96
    assert errors(prod_spec) == [
        f"{P}.teams: nominal GPU quotas on node group 'h100' add up to 160 (research 96, pretraining 48, "
        "applied 16) but the group provides at most 128 at maxSize 16 [rule: quota-fits-node-groups]"
    ]


def test_time_slicing_multiplies_the_gpu_units_a_group_provides(dev_spec: dict[str, Any]) -> None:
    dev_spec["teams"][0]["quotas"][0]["gpus"] = 8  # 2 nodes x 1 L4 x 4 replicas
    parse_spec(dev_spec, FILE, provider_region="us-west-2")
    dev_spec["teams"][0]["quotas"][0]["gpus"] = 9
    assert errors(dev_spec, region="us-west-2") == [
        f"{P}.teams: nominal GPU quotas on node group 'l4' add up to 9 (research 9) but the group provides at "
        "most 8 at maxSize 2 [rule: quota-fits-node-groups]"
    ]


def test_borrowing_limit_needs_a_cohort(prod_spec: dict[str, Any]) -> None:
    prod_spec["platform"]["cohort"] = False
    assert errors(prod_spec) == [
        f"{P}.teams[research].quotas[0].borrowingLimitGpus: a borrowing limit needs a cohort to borrow from; set "
        "platform.cohort: true or remove it [rule: borrowing-limit-needs-cohort]",
        f"{P}.teams[applied].quotas[0].borrowingLimitGpus: a borrowing limit needs a cohort to borrow from; set "
        "platform.cohort: true or remove it [rule: borrowing-limit-needs-cohort]",
    ]


def test_quota_must_name_a_gpu_node_group(prod_spec: dict[str, Any]) -> None:
    prod_spec["teams"][0]["quotas"].append({"nodeGroup": "system", "gpus": 1})
    prod_spec["teams"][1]["quotas"][0]["nodeGroup"] = "a100"
    assert errors(prod_spec) == [
        f"{P}.teams[research].quotas[1].nodeGroup: 'system' is not a GPU node group of this stack; known: h100, "
        "l40s [rule: quota-node-group-exists]",
        f"{P}.teams[pretraining].quotas[0].nodeGroup: 'a100' is not a GPU node group of this stack; known: h100, "
        "l40s [rule: quota-node-group-exists]",
    ]


def test_lending_limit_within_nominal_quota(prod_spec: dict[str, Any]) -> None:
    prod_spec["teams"][1]["quotas"][0]["lendingLimitGpus"] = 64
    assert errors(prod_spec) == [
        f"{P}.teams[pretraining].quotas[0].lendingLimitGpus: lendingLimitGpus (64) must be <= the nominal gpus (48) "
        "[rule: lending-limit-within-quota]"
    ]


def test_quota_resources_must_be_known_or_given(prod_spec: dict[str, Any], edited_aws_catalog: CatalogEdit) -> None:
    # Every GPU type of the shipped catalog has confirmed vCPU and memory figures; a type without them is built here.
    def unknown(instances: dict[str, Any]) -> None:
        for field in ("vcpu", "memory_gib"):
            instances["p6-b200.48xlarge"][field] = {"value": None, "status": "unconfirmed", "as_of": "2026-12-01"}

    edited_aws_catalog(unknown)
    group(prod_spec, "h100").update(instanceType="p6-b200.48xlarge", localNvme="auto")
    assert errors(prod_spec)[:2] == [
        f"{P}.teams[research].quotas[0].cpu: the catalog has no confirmed vCPU figure for p6-b200.48xlarge; set cpu "
        "for this quota [rule: quota-resources-known]",
        f"{P}.teams[research].quotas[0].memoryGiB: the catalog has no confirmed memory figure for p6-b200.48xlarge; "
        "set memoryGiB for this quota [rule: quota-resources-known]",
    ]
    for team in prod_spec["teams"]:
        team["quotas"][0].update(cpu=100, memoryGiB=1000)
    # The acceptance gate's figures for a type the catalog has none for (rule acceptance-expected-figure).
    prod_spec["acceptance"]["expected"] = [
        {"nodeGroup": "h100", "nodes": n, "busbwGbps": 700.0, "source": "our baseline run of 2026-11"} for n in (1, 2)]
    parse_spec(prod_spec, FILE, provider_region="us-east-1")


def test_team_may_not_take_a_system_namespace(prod_spec: dict[str, Any]) -> None:
    prod_spec["teams"][0]["name"] = "kube-system"
    prod_spec["platform"]["monitoring"]["alerts"]["routes"].pop()  # it routes the research team's alerts
    assert errors(prod_spec) == [
        f"{P}.teams[kube-system].name: 'kube-system' is a system namespace; choose another team name "
        "[rule: team-namespace-free]"
    ]


def test_platform_settings(prod_spec: dict[str, Any]) -> None:
    prod_spec["platform"]["gpuSharing"] = {"mode": "time-slicing", "replicas": 1}
    prod_spec["platform"]["allowedRegistries"] = ["docker.io"]
    prod_spec["acceptance"]["enabled"] = False  # its image would also leave the allowed registries
    prod_spec.pop("inference")  # and so would the engine's
    assert errors(prod_spec) == [
        f"{P}.platform.gpuSharing.replicas: time-slicing needs replicas >= 2 (1 replica is whole-GPU allocation: "
        "use mode none) [rule: time-slicing-replicas]",
        f"{P}.platform.allowedRegistries[0]: 'docker.io' must be a registry host (and optional path) ending in "
        "'/', e.g. nvcr.io/nvidia/ [rule: registry-prefix]",
    ]


# --- issue 7: deployer, Capacity Block window, zone IDs, pinned add-ons --------------------------


def test_a_private_endpoint_needs_an_in_vpc_deployer(prod_spec: dict[str, Any]) -> None:
    prod_spec["aws"]["controlPlane"]["deployer"]["apiAccess"] = "public-endpoint"
    del prod_spec["aws"]["controlPlane"]["deployer"]["transitGatewayId"]
    assert errors(prod_spec) == [
        f"{P}.aws.controlPlane.deployer.apiAccess: the API endpoint is private, so a deployer outside the VPC cannot "
        "apply the Kubernetes platform (every namespace and Helm release would time out); either run pulumi up "
        "inside the VPC (a self-hosted CI runner or Pulumi Deployments agent) and set apiAccess: in-vpc with its "
        "runnerCidrs, or set endpointAccess: public with publicAccessCidrs that include the runner and apiAccess: "
        "public-endpoint [rule: deployer-reaches-api]"
    ]


def test_the_deployer_is_required(prod_spec: dict[str, Any]) -> None:
    del prod_spec["aws"]["controlPlane"]["deployer"]
    assert errors(prod_spec) == [
        f"{P}.aws.controlPlane.deployer: required key is missing [rule: schema-required-key]"
    ]


def test_a_public_endpoint_deployer_must_be_inside_the_allowed_cidrs(dev_spec: dict[str, Any]) -> None:
    dev_spec["aws"]["controlPlane"]["deployer"]["runnerCidrs"] = ["198.51.100.0/24"]
    assert errors(dev_spec, region="us-west-2") == [
        f"{P}.aws.controlPlane.deployer.runnerCidrs[0]: runner CIDR 198.51.100.0/24 is not inside "
        "publicAccessCidrs, so the deployer cannot reach the public endpoint; add it to publicAccessCidrs "
        "[rule: deployer-reaches-api]"
    ]


def test_the_deployer_has_its_own_access_entry(prod_spec: dict[str, Any]) -> None:
    arn = "arn:aws:iam::111122223333:role/platform-admin"
    prod_spec["aws"]["controlPlane"]["deployer"]["roleArn"] = arn
    assert errors(prod_spec) == [
        f"{P}.aws.controlPlane.deployer.roleArn: '{arn}' is also listed as an admin or team role; the deployer gets "
        "its own cluster-admin access entry and EKS allows one access entry per principal: list it only as the "
        "deployer [rule: deployer-access-entry]"
    ]


def test_capacity_block_groups_scale_from_zero(prod_spec: dict[str, Any]) -> None:
    group(prod_spec, "h100").update(minSize=16, desiredSize=16)
    assert errors(prod_spec) == [
        f"{P}.aws.nodeGroups[h100].minSize: a capacity-block node group is created with minSize 0 and desiredSize 0 "
        "(got 16 and 16): no instance can launch before the block starts or after it ends, and EKS needs "
        "desiredSize 0 to update such a group; its scheduled actions scale it to the block for the window (EKS "
        "user guide, capacity-blocks-mng) [rule: capacity-block-scales-from-zero]"
    ]
    group(prod_spec, "h100").update(minSize=0, desiredSize=4)
    assert errors(prod_spec)[0].startswith(f"{P}.aws.nodeGroups[h100].desiredSize: a capacity-block node group")


def test_capacity_block_window_is_recorded(prod_spec: dict[str, Any]) -> None:
    cap = group(prod_spec, "h100")["capacity"]
    del cap["end"]
    assert errors(prod_spec) == [
        f"{P}.aws.nodeGroups[h100].capacity.end: capacity-block capacity needs the block's end (start and end in UTC, "
        "and the instance count, as shown by `aws ec2 describe-capacity-reservations`): the preview shows the "
        "window and the node group is scaled for it [rule: capacity-block-window]"
    ]
    cap["end"] = "2027-01-04T11:30:00Z"
    assert errors(prod_spec) == [
        f"{P}.aws.nodeGroups[h100].capacity.end: end (2027-01-04T11:30:00Z) must be after start "
        "(2027-01-04T11:30:00Z) [rule: capacity-block-window]"
    ]
    cap["end"] = "2027-01-18T12:30:00+01:00"
    assert errors(prod_spec) == [
        f"{P}.aws.nodeGroups[h100].capacity.end: end must be given in UTC with a Z suffix (e.g. 2027-01-04T11:30:00Z), "
        "got '2027-01-18T12:30:00+01:00' [rule: capacity-block-window]"
    ]


def test_window_fields_only_apply_to_capacity_blocks(prod_spec: dict[str, Any]) -> None:
    group(prod_spec, "system")["capacity"] = {"type": "on-demand", "instanceCount": 3}
    assert errors(prod_spec) == [
        f"{P}.aws.nodeGroups[system].capacity.instanceCount: instanceCount only applies to capacity-block capacity, "
        "not 'on-demand' [rule: capacity-block-window]"
    ]


def test_capacity_block_group_fits_the_block(prod_spec: dict[str, Any]) -> None:
    group(prod_spec, "h100")["capacity"]["instanceCount"] = 8
    assert errors(prod_spec) == [
        f"{P}.aws.nodeGroups[h100].maxSize: maxSize (16) must be <= the block's instanceCount (8): nodes beyond the "
        "block cannot launch [rule: capacity-block-size]"
    ]


def test_zone_ids_belong_to_the_region(prod_spec: dict[str, Any]) -> None:
    prod_spec["aws"]["gpuAvailabilityZoneId"] = "usw2-az1"
    assert errors(prod_spec)[0] == (
        f"{P}.aws.gpuAvailabilityZoneId: zone ID 'usw2-az1' is not in region 'us-east-1' (its zone IDs are "
        "use1-az<N>) [rule: zone-in-region]"
    )


def test_the_gpu_zone_is_given_once(prod_spec: dict[str, Any]) -> None:
    prod_spec["aws"]["gpuAvailabilityZone"] = "us-east-1a"
    assert errors(prod_spec) == [
        f"{P}.aws.gpuAvailabilityZone: give the GPU zone once: gpuAvailabilityZone (a name, e.g. us-east-1a) or "
        "gpuAvailabilityZoneId (an AZ ID, e.g. use1-az4, as Capacity Blocks and ODCRs are sold) "
        "[rule: zone-given-once]"
    ]


def test_zone_names_and_ids_are_not_mixed(prod_spec: dict[str, Any]) -> None:
    subnet = prod_spec["aws"]["network"]["subnets"][2]
    del subnet["availabilityZoneId"]
    subnet["availabilityZone"] = "us-east-1b"
    assert errors(prod_spec) == [
        f"{P}.aws.network.subnets[system-b].availabilityZone: the stack names its GPU zone with gpuAvailabilityZoneId, "
        "so every subnet must use availabilityZoneId too (names and IDs cannot be compared before the account maps "
        "them) [rule: zone-form-consistent]"
    ]


def test_every_version_in_standard_support_loads_and_unsourced_addons_are_left_to_eks(
        prod_spec: dict[str, Any]) -> None:
    """1.34 (until 2026-12-02), 1.35, 1.36 and 1.37 load (1.37 with no autoscaled group: the Cluster Autoscaler has no
    release for it); an add-on with no sourced version for the Kubernetes version is created without one (EKS's
    default for it), and the preview says so."""
    from datetime import UTC, datetime

    from components.catalog import load_addon_pins, supported_eks_versions
    from tests.conftest import run_spec

    assert supported_eks_versions(datetime(2026, 12, 1, tzinfo=UTC)) == ["1.34", "1.35", "1.36", "1.37"]
    assert supported_eks_versions(datetime(2026, 12, 2, tzinfo=UTC)) == ["1.35", "1.36", "1.37"]
    for version in ("1.34", "1.35", "1.36", "1.37"):
        prod_spec["aws"]["controlPlane"]["kubernetesVersion"] = version
        if version == "1.37":
            group(prod_spec, "system").update(minSize=3, maxSize=3)  # a fixed size: nothing to autoscale
            group(prod_spec, "cpu").update(minSize=3, desiredSize=3, maxSize=3)
            # the served model's group at its ceiling: KEDA scales the replicas within its four nodes
            group(prod_spec, "l40s").update(minSize=4, desiredSize=4, maxSize=4)
        parse_spec(prod_spec, FILE, provider_region="us-east-1")
    assert [p.name for p in load_addon_pins("1.37").values() if p.pinned] == []
    assert load_addon_pins("1.36")["kube-proxy"].version == "v1.36.0-eksbuild.14"
    assert not load_addon_pins("1.36")["aws-fsx-csi-driver"].pinned
    run = run_spec(prod_spec)  # 1.37
    addons = {a.inputs["addonName"]: a.inputs for a in run.graph.of_type("aws:eks/addon:Addon")}
    assert len(addons) == 7 and all("addonVersion" not in a for a in addons.values())
    prod_spec["aws"]["controlPlane"]["kubernetesVersion"] = "1.35"
    pinned = {a.inputs["addonName"]: a.inputs for a in run_spec(prod_spec).graph.of_type("aws:eks/addon:Addon")}
    assert pinned["kube-proxy"]["addonVersion"] == "v1.35.3-eksbuild.13"
    assert all("addonVersion" in a for a in pinned.values())


def test_an_autoscaled_group_needs_a_cluster_autoscaler_release_for_the_kubernetes_version(
        prod_spec: dict[str, Any]) -> None:
    """CA has no 1.37 release in the catalog: the system group (on-demand, 2..6) and the served model's (2..4) cannot
    be autoscaled there. The Capacity Block group (0..16) is never autoscaled and the teams' cpu group is fixed, so
    neither is named, and fixed-size groups load."""
    prod_spec["aws"]["controlPlane"]["kubernetesVersion"] = "1.37"
    assert errors(prod_spec) == [
        f"{P}.aws.controlPlane.kubernetesVersion: the Cluster Autoscaler has no release for Kubernetes 1.37 in "
        "components/catalog/charts.yaml (clusterAutoscaler; releases for 1.34, 1.35, 1.36), and it would manage node "
        "group(s) system, l40s (on-demand or spot with minSize < maxSize); it runs the release of the cluster's "
        "minor, so use kubernetesVersion 1.36, or give those groups minSize = maxSize until a 1.37 release is pinned "
        "[rule: cluster-autoscaler-release]"
    ]
    group(prod_spec, "system").update(minSize=3, maxSize=3)
    group(prod_spec, "l40s").update(minSize=4, desiredSize=4, maxSize=4)
    parse_spec(prod_spec, FILE, provider_region="us-east-1")


def test_the_preview_warns_of_unpinned_addons(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from blueprint.cli import main

    text = Path("stacks/Pulumi.prod-aws.yaml").read_text().replace('kubernetesVersion: "1.35"',
                                                                   'kubernetesVersion: "1.36"')
    stack_file = tmp_path / "Pulumi.k136.yaml"
    stack_file.write_text(text)
    assert main(["preview", str(stack_file)]) == 0
    out = capsys.readouterr().out
    assert "aws-fsx-csi-driver (EKS default, not pinned)" in out and "kube-proxy v1.36.0-eksbuild.14" in out
    assert ("warning: no sourced version of aws-fsx-csi-driver for Kubernetes 1.36 in components/catalog/charts.yaml: "
            "a new cluster gets EKS's default version for 1.36, but an installed add-on keeps the version it runs "
            "(the provider's addonVersion is optional and computed: leaving it out changes nothing), also across a "
            "Kubernetes upgrade; pin it after checking `aws eks describe-addon-versions --kubernetes-version 1.36 "
            "--addon-name <name>`, or update it by hand before the next upgrade") in out


# --- issue 8: the spec refuses what AWS refuses ----------------------------------------------------


def test_vpc_and_subnet_sizes_follow_aws_limits(prod_spec: dict[str, Any]) -> None:
    prod_spec["aws"]["network"]["vpcCidr"] = "10.0.0.0/8"
    prod_spec["aws"]["network"]["subnets"][3]["cidr"] = "10.40.96.0/29"
    lines = errors(prod_spec)
    assert f"{P}.aws.network.vpcCidr: a VPC CIDR is between /16 and /28 (Amazon VPC user guide, VPC CIDR blocks); " \
           "got /8 [rule: vpc-cidr-size]" in lines
    assert f"{P}.aws.network.subnets[public-a].cidr: a subnet is at least a /28 (Amazon VPC user guide, subnet " \
           "sizing); got /29 [rule: subnet-cidr-size]" in lines


def test_ipv6_subnets_never_share_a_64() -> None:
    """Each subnet's /64 is numbered by the /24 of the /16 VPC its IPv4 CIDR starts in: two in one /24 collide."""
    path = "examples/stacks/Pulumi.ipv6-aws.yaml"
    spec = yaml.safe_load((ROOT / path).read_text())["config"]["gpu-cluster:spec"]
    subnets = spec["aws"]["network"]["subnets"]
    subnets[3]["cidr"] = "10.80.48.0/26"
    subnets.append({"name": "public-b", "cidr": "10.80.48.64/26", "availabilityZone": "us-east-1b", "role": "public"})
    with pytest.raises(SpecError) as info:
        parse_spec(spec, path, provider_region="us-east-1")
    assert str(info.value).splitlines() == [
        f"{path}: gpu-cluster:spec.aws.network.subnets[public-b].cidr: each subnet of an IPv6 VPC gets the /64 "
        "numbered by the /24 of vpcCidr its cidr starts in (one of 256, so that editing the subnet list moves no "
        "other subnet's IPv6 block), and 10.80.48.64/26 starts in the same /24 as aws.network.subnets[public-a] "
        "(10.80.48.0/26): start it in another /24 [rule: ipv6-subnet-index]"
    ]
    subnets[4]["cidr"] = "10.80.49.0/26"
    parse_spec(spec, path, provider_region="us-east-1")


def test_cidrs_in_prefix_notation_only(prod_spec: dict[str, Any]) -> None:
    prod_spec["aws"]["network"]["vpcCidr"] = "10.40.0.0/255.255.0.0"
    assert errors(prod_spec)[0] == (
        f"{P}.aws.network.vpcCidr: '10.40.0.0/255.255.0.0' is not an IPv4 CIDR (address/prefix, no host bits): not in "
        "prefix notation [rule: cidr-valid]")


def test_public_cidrs_never_cover_the_internet_in_pieces(dev_spec: dict[str, Any]) -> None:
    cp = dev_spec["aws"]["controlPlane"]
    cp["publicAccessCidrs"] = ["0.0.0.0/1", "128.0.0.0/1"]
    cp["deployer"]["runnerCidrs"] = ["203.0.113.0/24"]
    assert errors(dev_spec, region="us-west-2") == [
        f"{P}.aws.controlPlane.publicAccessCidrs: publicAccessCidrs together cover the whole internet (e.g. "
        "0.0.0.0/1 and 128.0.0.0/1); list the networks that need access [rule: endpoint-not-open]"
    ]
    cp["publicAccessCidrs"] = [f"203.0.{i}.0/24" for i in range(114)]
    assert f"{P}.aws.controlPlane.publicAccessCidrs: EKS accepts at most 40 publicAccessCidrs, got 114 " \
           "[rule: endpoint-cidr-limit]" in errors(dev_spec, region="us-west-2")


def test_no_principal_twice(prod_spec: dict[str, Any]) -> None:
    prod_spec["teams"][1]["roleArns"] = ["arn:aws:iam::111122223333:role/research-engineers"]
    assert errors(prod_spec) == [
        f"{P}.teams[pretraining].roleArns[0]: 'arn:aws:iam::111122223333:role/research-engineers' is already "
        "teams[research].roleArns[0]; EKS allows one access entry per principal [rule: unique-principals]"
    ]


def test_no_team_is_mapped_to_a_system_group(prod_spec: dict[str, Any]) -> None:
    prod_spec["teams"][0]["group"] = "system:masters"
    assert errors(prod_spec) == [
        f"{P}.teams[research].group: 'system:masters' is a reserved Kubernetes group (system:masters is cluster-admin, "
        "past every RoleBinding); EKS access entries refuse groups that start with system: "
        "[rule: team-group-not-system]"
    ]


def test_label_and_taint_rules_exact(prod_spec: dict[str, Any]) -> None:
    g = group(prod_spec, "h100")
    g["labels"] = {"Bad Key": "x", "workload": "-training"}
    g["taints"] = [{"key": "dedicated", "value": "a b"}, {"key": "dedicated", "value": "c"},
                   {"key": "nvidia.com/gpu", "value": "true", "effect": "PreferNoSchedule"}]
    assert errors(prod_spec) == [
        f"{P}.aws.nodeGroups[h100].labels[\"Bad Key\"]: 'Bad Key: x' is not a valid Kubernetes label: its name must be "
        "1-63 characters of letters, digits, '-', '_' or '.', starting and ending with a letter or digit "
        "[rule: k8s-label-syntax]",
        f"{P}.aws.nodeGroups[h100].labels.workload: 'workload: -training' is not a valid Kubernetes label: a value is "
        "empty or 1-63 characters of letters, digits, '-', '_' or '.', starting and ending with a letter or digit "
        "[rule: k8s-label-syntax]",
        f"{P}.aws.nodeGroups[h100].taints[0]: taint 'dedicated=a b' is not valid: a value is empty or 1-63 characters "
        "of letters, digits, '-', '_' or '.', starting and ending with a letter or digit [rule: k8s-taint-syntax]",
        f"{P}.aws.nodeGroups[h100].taints[1]: taint dedicated:NoSchedule is listed twice [rule: taint-unique]",
        f"{P}.aws.nodeGroups[h100].taints[2].effect: GPU nodes keep nvidia.com/gpu=true:NoSchedule so that pods "
        "without GPU requests stay off them; remove this taint or make it NoSchedule (got PreferNoSchedule) "
        "[rule: gpu-taint-noschedule]",
    ]
    g["taints"] = [{"key": f"k{i}"} for i in range(51)]
    g["labels"] = {}
    assert errors(prod_spec) == [
        f"{P}.aws.nodeGroups[h100].taints: EKS accepts at most 50 taints per node group, got 51 [rule: taint-limit]"
    ]


def test_tags_stay_within_fifty_per_resource(prod_spec: dict[str, Any]) -> None:
    prod_spec["labels"].update({f"extra-{i}": "x" for i in range(42)})
    assert errors(prod_spec) == [
        f"{P}.labels: the 46 billing labels and the 5 tags the program adds make 51 tags on a subnet; AWS allows "
        "50 per resource [rule: tag-limit]"
    ]


def test_no_bottlerocket_nvidia_beside_the_gpu_operator(prod_spec: dict[str, Any]) -> None:
    """Bottlerocket's NVIDIA images bring their own device plugin, and the GPU Operator's would be a second one;
    Bottlerocket on a group without GPUs is accepted."""
    group(prod_spec, "h100").update(amiType="BOTTLEROCKET_x86_64_NVIDIA", localNvme="none")
    group(prod_spec, "system")["amiType"] = "BOTTLEROCKET_x86_64"
    assert errors(prod_spec) == [
        f"{P}.aws.nodeGroups[h100].amiType: BOTTLEROCKET_x86_64_NVIDIA nodes run their own NVIDIA device plugin (EKS "
        "user guide, GPU device plugin), so the platform's GPU Operator would register nvidia.com/gpu there a second "
        "time, and its time-slicing and MIG settings do not reach Bottlerocket: use AL2023_x86_64_NVIDIA for GPU "
        "groups (Bottlerocket suits groups without GPUs) [rule: bottlerocket-nvidia-gpu-operator]"
    ]
    group(prod_spec, "h100")["amiType"] = "AL2023_x86_64_NVIDIA"
    parse_spec(prod_spec, FILE, provider_region="us-east-1")


def test_an_autoscaled_groups_tags_fit_its_auto_scaling_group(dev_spec: dict[str, Any]) -> None:
    """dev-aws's l4 is autoscaled: its 8 opt-in and node-template tags and EKS's 5 leave room for 37 more labels."""
    l4 = group(dev_spec, "l4")
    l4["labels"] = {f"example.com/l{i}": "x" for i in range(37)}
    parse_spec(dev_spec, FILE, provider_region="us-west-2")  # 45 + 5 = 50: AWS's limit, accepted
    l4["labels"]["example.com/l37"] = "x"
    assert errors(dev_spec, region="us-west-2") == [
        f"{P}.aws.nodeGroups[l4]: the Cluster Autoscaler reads this group's labels, taints and resources from its Auto "
        "Scaling group's tags: 46 of them and the 5 EKS puts there make 51, over the 50 EC2 Auto Scaling allows per "
        "group (Auto Scaling user guide, tag restrictions): use fewer labels or taints, or fixed sizes (minSize = "
        "maxSize: not autoscaled) [rule: asg-tag-limit]"
    ]
    l4.update(minSize=2, desiredSize=2)  # fixed sizes: the Auto Scaling group gets no tags of the program's
    parse_spec(dev_spec, FILE, provider_region="us-west-2")
    # A key past 128 characters with the node-template prefix (46): EKS's own 63-character limit refuses it too.
    long_key = "a" * 20 + ".example.com/" + "b" * 50
    l4.update(minSize=0, desiredSize=0, labels={long_key: "x"})
    assert errors(dev_spec, region="us-west-2") == [
        f"{P}.aws.nodeGroups[l4].labels[\"{long_key}\"]: '{long_key}': the EKS API takes label keys of at most 63 "
        "characters, prefix included (83) [rule: eks-label-key]",
        f"{P}.aws.nodeGroups[l4].labels[\"{long_key}\"]: its Auto Scaling group tag for the Cluster Autoscaler, "
        f"k8s.io/cluster-autoscaler/node-template/label/{long_key}, has 129 characters, over the 128 of an Auto "
        "Scaling tag key (API reference, Tag): shorten the key [rule: asg-tag-limit]",
    ]


def test_capacity_blocks_only_on_types_sold_as_blocks(prod_spec: dict[str, Any]) -> None:
    g = group(prod_spec, "h100")
    g["instanceType"] = "g6e.48xlarge"
    g["localNvme"] = "none"
    lines = errors(prod_spec)
    assert lines[0] == (
        f"{P}.aws.nodeGroups[h100].capacity.type: g6e.48xlarge is not sold as an EC2 Capacity Block for ML (catalog: "
        "AWS EC2 User Guide, Capacity Blocks for ML, supported instance types (read 2026-11-29; not listed)); use "
        "on-demand, spot or a reserved ODCR [rule: capacity-block-instance-type]")


def test_mig_only_on_gpus_that_support_it(dev_spec: dict[str, Any]) -> None:
    dev_spec["platform"]["gpuSharing"] = {"mode": "mig"}
    assert errors(dev_spec, region="us-west-2") == [
        f"{P}.platform.gpuSharing.mode: MIG needs GPUs that support it, and g6.xlarge (NVIDIA L4 24GB) does not "
        "(catalog: NVIDIA MIG User Guide, Supported GPUs (read 2026-11-29) (not in the table)); use time-slicing "
        "or none [rule: mig-supported]"
    ]


def test_nat_per_az_needs_a_public_subnet_in_every_private_zone(prod_spec: dict[str, Any]) -> None:
    del prod_spec["aws"]["network"]["subnets"][4]  # public-b in use1-az6
    assert errors(prod_spec) == [
        f"{P}.aws.network.natGateways: natGateways per-az puts a NAT gateway in a public subnet of each zone with "
        "private subnets, and use1-az6 has no public subnet; add one there, or use natGateways: single "
        "[rule: nat-per-az]"
    ]


def test_region_must_exist(prod_spec: dict[str, Any]) -> None:
    prod_spec["aws"]["region"] = "us-east-9"
    lines = errors(prod_spec, region=None)
    assert lines[0].startswith(
        f"{P}.aws.region: 'us-east-9' is not a region of the catalog (components/catalog/aws_regions.yaml, with "
        "sources); known: ap-east-1, ap-northeast-1,")
    assert lines[0].endswith("[rule: region-known]")


def test_kubernetes_version_must_be_in_standard_support(prod_spec: dict[str, Any]) -> None:
    """The error names the versions that load on the day (tests run on 2026-11-29: 1.34 until 2026-12-02)."""
    from datetime import UTC, datetime

    prod_spec["aws"]["controlPlane"]["kubernetesVersion"] = "1.33"
    lines = errors(prod_spec)
    assert lines[0] == (
        f"{P}.aws.controlPlane.kubernetesVersion: Kubernetes 1.33 left EKS standard support on 2026-07-29; this "
        "blueprint keeps clusters on standard support (no extended-support charges): versions in EKS standard "
        "support today: 1.34, 1.35, 1.36, 1.37 [rule: kubernetes-version-supported]")
    prod_spec["aws"]["controlPlane"]["kubernetesVersion"] = "1.99"
    assert errors(prod_spec)[0] == (
        f"{P}.aws.controlPlane.kubernetesVersion: Kubernetes 1.99 is not a version of the EKS catalog "
        "(components/catalog/eks_versions.yaml); versions in EKS standard support today: 1.34, 1.35, 1.36, 1.37 "
        "[rule: kubernetes-version-supported]")
    prod_spec["aws"]["controlPlane"]["kubernetesVersion"] = "1.34"
    with pytest.raises(SpecError) as info:
        parse_spec(prod_spec, FILE, provider_region="us-east-1", now=datetime(2026, 12, 2, tzinfo=UTC))
    assert str(info.value).splitlines()[0].endswith(
        "Kubernetes 1.34 left EKS standard support on 2026-12-02; this blueprint keeps clusters on standard "
        "support (no extended-support charges): versions in EKS standard support today: 1.35, 1.36, 1.37 "
        "[rule: kubernetes-version-supported]")
    prod_spec["aws"]["controlPlane"]["kubernetesVersion"] = "1.37"
    with pytest.raises(SpecError) as info:
        parse_spec(prod_spec, FILE, provider_region="us-east-1", now=datetime(2026, 9, 1, tzinfo=UTC))
    assert "Kubernetes 1.37 is not released on EKS before 2026-10-01; versions in EKS standard support today: " \
           "1.34, 1.35, 1.36 [rule: kubernetes-version-supported]" in str(info.value)


def test_booleans_and_integers_are_strict_and_numbers_finite(prod_spec: dict[str, Any]) -> None:
    group(prod_spec, "system")["maxSize"] = True
    prod_spec["deletionProtection"] = "yes"
    prod_spec["workload"]["targetWorkPerMonth"] = float("nan")
    assert errors(prod_spec) == [
        f"{P}.workload.targetWorkPerMonth: Input should be a finite number [rule: schema-type]",
        f"{P}.deletionProtection: Input should be a valid boolean [rule: schema-type]",
        f"{P}.aws.nodeGroups[system].maxSize: Input should be a valid integer [rule: schema-type]",
    ]


def test_repeated_problems_are_summarised(prod_spec: dict[str, Any]) -> None:
    subnet = prod_spec["aws"]["network"]["subnets"][1]
    prod_spec["aws"]["network"]["subnets"] += [dict(subnet, name=f"copy-{i}") for i in range(300)]
    lines = errors(prod_spec)
    assert len(lines) <= 61
    assert sum(1 for line in lines if "[rule: cidr-no-overlap]" in line) == 11
    assert re.fullmatch(rf"{re.escape(P)}: \d{{5}} more problem\(s\) of this rule not shown \[rule: cidr-no-overlap\]",
                        lines[-1]), lines[-1]
    assert max(len(line) for line in lines) < 600


def test_runners_outside_the_vpc_need_the_transit_gateway(prod_spec: dict[str, Any]) -> None:
    del prod_spec["aws"]["controlPlane"]["deployer"]["transitGatewayId"]
    assert errors(prod_spec) == [
        f"{P}.aws.controlPlane.deployer.transitGatewayId: runner CIDR(s) 10.8.0.0/24 are outside the VPC "
        "(10.40.0.0/16): give the Transit Gateway that connects them (transitGatewayId), so the stack attaches the "
        "VPC, routes their traffic back and lets them resolve the private endpoint; or run the deployer inside the "
        "VPC [rule: deployer-reaches-api]"
    ]
    prod_spec["aws"]["controlPlane"]["deployer"]["runnerCidrs"] = ["10.40.112.0/24"]
    parse_spec(prod_spec, FILE, provider_region="us-east-1")  # a runner inside the VPC needs no gateway


def test_a_trailing_newline_never_passes_a_pattern_and_is_shown_escaped(prod_spec: dict[str, Any]) -> None:
    """``$`` matches before a final newline: every pattern of the rules is a full match, and a value's control
    characters (and the line separators str.splitlines knows) are escaped, so one issue stays one line."""
    prod_spec["platform"]["allowedRegistries"] = ["nvcr.io/nvidia/\n", "nvcr.io/\u2028x/"]
    prod_spec["acceptance"]["enabled"] = False
    prod_spec.pop("inference")
    prod_spec["teams"][0]["roleArns"] = ["arn:aws:iam::111122223333:role/research-engineers\n"]
    assert errors(prod_spec) == [
        f"{P}.teams[research].roleArns[0]: 'arn:aws:iam::111122223333:role/research-engineers\\n' is not an IAM role "
        "ARN (arn:aws:iam::<12 digits>:role/<name>) [rule: admin-role-arn]",
        f"{P}.platform.allowedRegistries[0]: 'nvcr.io/nvidia/\\n' must be a registry host (and optional path) ending "
        "in '/', e.g. nvcr.io/nvidia/ [rule: registry-prefix]",
        f"{P}.platform.allowedRegistries[1]: 'nvcr.io/\\u2028x/' must be a registry host (and optional path) ending "
        "in '/', e.g. nvcr.io/nvidia/ [rule: registry-prefix]",
    ]



def test_the_acceptance_image_is_pinned_and_allowed(prod_spec: dict[str, Any]) -> None:
    prod_spec["acceptance"]["image"] = "public.ecr.aws/hpc-cloud/nccl-tests:latest"
    assert errors(prod_spec) == [
        f"{P}.acceptance.image: 'public.ecr.aws/hpc-cloud/nccl-tests:latest' is not pinned: give the nccl-tests image "
        "as <repository>@sha256:<64 hex> (the catalog has no verified digest) [rule: acceptance-image-digest]"]
    prod_spec["acceptance"]["image"] = "docker.io/library/nccl@sha256:" + "a" * 64
    assert errors(prod_spec) == [
        f"{P}.acceptance.image: docker.io/library/nccl is not under platform.allowedRegistries, whose admission "
        "policy would refuse the acceptance pods [rule: acceptance-image-allowed]"]
    del prod_spec["acceptance"]["image"]
    assert errors(prod_spec)[0].endswith("acceptance.image is required: give the nccl-tests image as "
                                         "<repository>@sha256:<64 hex> (the catalog has no verified digest) "
                                         "[rule: acceptance-image-digest]")


def test_an_odcr_is_placed_only_in_its_placement_group(prod_spec: dict[str, Any]) -> None:
    """A Capacity Block is placed by AWS; an ODCR only when created in a cluster placement group, which the group
    names. Without one the group is not topology-aware, the preview says why, and a warning asks for the group."""
    facts = load_aws_catalog()["p5.48xlarge"]
    g = group(prod_spec, "h100")
    g["capacity"] = {"type": "reserved", "reservationId": "cr-0a1b2c3d4e5f60718"}
    g["desiredSize"] = g["minSize"] = 16
    parsed = parse_spec(prod_spec, FILE, provider_region="us-east-1")
    h100 = next(x for x in parsed.aws_spec().node_groups if x.name == "h100")
    assert not is_placed(h100, facts)
    warnings = [n for n in spec_notes(parsed, NOW) if "ODCRs with no placement group" in n]
    assert len(warnings) == 1 and warnings[0].startswith(
        "warning: gpu-cluster:spec.aws.nodeGroups[h100].placementGroupName: node group 'h100' runs p5.48xlarge on "
        "ODCRs with no placement group: an ODCR is placed only if it was created in a cluster placement group")
    lines = [_node_group_line(f) for f in node_group_figures(run_spec(prod_spec, "prod-aws").graph)]
    assert any("(an ODCR is placed only if it was created in a cluster placement group: name that one)" in line
               for line in lines), lines
    g["placementGroupName"] = "h100-odcr-pg"
    parsed = parse_spec(prod_spec, FILE, provider_region="us-east-1")
    h100 = next(x for x in parsed.aws_spec().node_groups if x.name == "h100")
    assert is_placed(h100, facts)
    assert not [n for n in spec_notes(parsed, NOW) if "ODCRs with no placement group" in n]
