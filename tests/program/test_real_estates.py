"""Real estates (issue 10): existing networks, filesystems and buckets, ODCR resource groups, existing
placement groups, the instance families people use, and rules only where AWS has them."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blueprint.graph.model import GraphResource, ResourceGraph
from components.catalog import load_aws_catalog
from components.spec import SpecError, parse_spec
from tests.conftest import offline_run, raw_stack_config, run_spec

BYO = "stacks/Pulumi.byo-aws.yaml"
P = f"{BYO}: gpu-cluster:spec"


def byo_spec() -> dict[str, Any]:
    return raw_stack_config("byo-aws")["gpu-cluster:spec"]


def errors(spec: Any, file: str = BYO, region: str = "us-west-2") -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(spec, file, provider_region=region)
    return str(info.value).splitlines()


def one(graph: ResourceGraph, type_: str, name: str) -> GraphResource:
    found = [r for r in graph.of_type(type_) if r.name == name]
    assert len(found) == 1, (type_, name)
    return found[0]


# --- bring your own infrastructure --------------------------------------------------------------


def test_byo_creates_nothing_of_the_network_filesystem_or_bucket() -> None:
    graph = offline_run("byo-aws").graph
    for type_ in ("aws:ec2/vpc:Vpc", "aws:ec2/subnet:Subnet", "aws:ec2/natGateway:NatGateway",
                  "aws:ec2/routeTable:RouteTable", "aws:fsx/lustreFileSystem:LustreFileSystem",
                  "aws:s3/bucket:Bucket", "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation",
                  "aws:ec2/placementGroup:PlacementGroup", "aws:kms/keyPolicy:KeyPolicy"):
        # The cost plane's export bucket and the telemetry plane's log key are the stack's own, not the estate's.
        assert [r.name for r in graph.of_type(type_) if graph.plane_of(r) not in ("cost", "telemetry")] == [], type_
    keys = sorted(k.name for k in graph.of_type("aws:kms/key:Key"))
    assert keys == ["control-plane-secrets-key", "telemetry-logs-key"]  # no data key
    efa = one(graph, "aws:ec2/securityGroup:SecurityGroup", "network-efa-sg")
    assert efa.inputs["vpcId"] == "vpc-0a1b2c3d4e5f60718"
    ng = one(graph, "aws:eks/nodeGroup:NodeGroup", "nodegroup-a100-ng")
    assert ng.inputs["subnetIds"] == ["subnet-0123456789abcdef0"]
    cluster = graph.of_type("aws:eks/cluster:Cluster")[0]
    assert set(cluster.inputs["vpcConfig"]["subnetIds"]) == {
        "subnet-0123456789abcdef0", "subnet-0123456789abcdef1", "subnet-0123456789abcdef2"}


def test_byo_filesystem_and_bucket_are_still_wired() -> None:
    run = offline_run("byo-aws")
    graph = run.graph
    rules = {r.name: r.inputs for r in graph.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
             if "lustre" in r.name}
    assert {(r["securityGroupId"] == "sg-0123456789abcdef0", r["fromPort"]) for r in rules.values()} == {
        (True, 988), (True, 1018), (False, 988), (False, 1018)}  # both ends of LNet
    egress = [r.inputs for r in graph.of_type("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")
              if r.name.startswith("storage-lustre-out-clients-")]
    assert {(r["securityGroupId"], r["fromPort"]) for r in egress} == {
        ("sg-0123456789abcdef0", 988), ("sg-0123456789abcdef0", 1018)}  # servers reach their clients too
    assert all(r.get("referencedSecurityGroupId") for r in rules.values())
    assert run.outputs["filesystemDnsName"] == "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com"
    assert run.outputs["checkpointBucket"] == "example-ml-checkpoints-usw2"
    policy = one(graph, "aws:iam/rolePolicy:RolePolicy", "data-access-team-finetune-policy").inputs["policy"]
    statements = {s["Sid"]: s for s in json.loads(policy)["Statement"]}
    assert statements["ReadWriteTeamObjects"]["Resource"] == "arn:aws:s3:::example-ml-checkpoints-usw2/finetune/*"
    assert statements["UseDataKeyThroughS3"]["Resource"] == (
        "arn:aws:kms:us-west-2:777788889999:key/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b")


def test_odcr_resource_group_and_existing_placement_group() -> None:
    graph = offline_run("byo-aws").graph
    lt = one(graph, "aws:ec2/launchTemplate:LaunchTemplate", "nodegroup-a100-lt").inputs
    assert lt["capacityReservationSpecification"] == {
        "capacityReservationPreference": "capacity-reservations-only",  # never fall back to full-price On-Demand
        "capacityReservationTarget": {
            "capacityReservationResourceGroupArn": "arn:aws:resource-groups:us-west-2:777788889999:group/a100-odcrs"}}
    ng = one(graph, "aws:eks/nodeGroup:NodeGroup", "nodegroup-a100-ng").inputs
    assert ng["updateConfig"] == {"updateStrategy": "MINIMAL", "maxUnavailable": 1}  # no spare ODCR to surge into
    for spec in lt["tagSpecifications"]:  # launched instances get no provider default tags
        assert spec["tags"]["GithubRepo"] == "github.com/example-org/gpu-clusters"
        assert spec["tags"]["cluster"] == "byo-train"
    assert lt["placement"] == {"groupName": "a100-odcr-pg"}
    assert len([ni for ni in lt["networkInterfaces"] if ni.get("interfaceType") == "efa-only"]) == 4


def test_mixed_instance_spot_group_and_derived_ami_types() -> None:
    graph = offline_run("byo-aws").graph
    system = one(graph, "aws:eks/nodeGroup:NodeGroup", "nodegroup-system-ng").inputs
    assert system["instanceTypes"] == ["m7i.xlarge", "m6i.xlarge", "m5.xlarge"]
    assert system["capacityType"] == "SPOT" and system["amiType"] == "AL2023_x86_64_STANDARD"
    assert one(graph, "aws:eks/nodeGroup:NodeGroup", "nodegroup-a100-ng").inputs["amiType"] == "AL2023_x86_64_NVIDIA"


def test_graviton_groups_get_the_arm_ami(dev_spec: dict[str, Any]) -> None:
    dev_spec["aws"]["nodeGroups"][0].update(instanceType="m7g.xlarge", instanceTypes=["m7g.xlarge", "c7g.xlarge"])
    graph = run_spec(dev_spec).graph
    ng = one(graph, "aws:eks/nodeGroup:NodeGroup", "nodegroup-system-ng").inputs
    assert ng["amiType"] == "AL2023_ARM_64_STANDARD" and ng["instanceTypes"] == ["m7g.xlarge", "c7g.xlarge"]


def test_system_and_cpu_pools_on_the_issue_24_families_load_and_pass_the_pack(dev_spec: dict[str, Any]) -> None:
    # Issue 24: burstable, network-optimized, compute and Graviton memory pools; each gets the AMI of its
    # architecture (the catalog's arch), the Graviton pool the ARM one.
    from blueprint.policy.runner import run_policies

    system = dev_spec["aws"]["nodeGroups"][0]
    system.update(instanceType="t3.large", capacity={"type": "on-demand"})
    pools = {"net": ("m5n.2xlarge", None), "compute": ("c7i.2xlarge", ["c7i.2xlarge", "c7a.2xlarge", "c6a.2xlarge"]),
             "memory": ("r7g.xlarge", ["r7g.xlarge", "r6g.xlarge"])}
    for name, (itype, itypes) in pools.items():
        dev_spec["aws"]["nodeGroups"].append({"name": name, "instanceType": itype, "minSize": 0, "desiredSize": 1,
                                              "maxSize": 3, "capacity": {"type": "on-demand"},
                                              **({"instanceTypes": itypes} if itypes else {})})
    graph = run_spec(dev_spec).graph
    ami = {name: one(graph, "aws:eks/nodeGroup:NodeGroup", f"nodegroup-{name}-ng").inputs["amiType"]
           for name in ("system", "net", "compute", "memory", "l4")}
    assert ami == {"system": "AL2023_x86_64_STANDARD", "net": "AL2023_x86_64_STANDARD",
                   "compute": "AL2023_x86_64_STANDARD", "memory": "AL2023_ARM_64_STANDARD",
                   "l4": "AL2023_x86_64_NVIDIA"}
    assert one(graph, "aws:eks/nodeGroup:NodeGroup", "nodegroup-memory-ng").inputs["instanceTypes"] == [
        "r7g.xlarge", "r6g.xlarge"]
    assert [v.policy for v in run_policies(graph).violations] == []


@pytest.mark.parametrize(("instance_type", "ami_type", "message"), [
    ("r7g.xlarge", "AL2023_x86_64_STANDARD",
     "AL2023_x86_64_STANDARD does not fit r7g.xlarge (arm64, no GPU); use AL2023_ARM_64_STANDARD"),
    ("c6g.large", "BOTTLEROCKET_x86_64",
     "BOTTLEROCKET_x86_64 does not fit c6g.large (arm64, no GPU); use AL2023_ARM_64_STANDARD"),
    ("t3.large", "AL2023_ARM_64_STANDARD",
     "AL2023_ARM_64_STANDARD does not fit t3.large (x86_64, no GPU); use AL2023_x86_64_STANDARD"),
])
def test_a_graviton_pool_never_gets_an_x86_ami(instance_type: str, ami_type: str, message: str) -> None:
    spec = byo_spec()
    spec["aws"]["nodeGroups"][0].update(instanceType=instance_type, amiType=ami_type)
    spec["aws"]["nodeGroups"][0].pop("instanceTypes", None)
    assert errors(spec) == [f"{P}.aws.nodeGroups[system].amiType: {message} [rule: ami-type-fits]"]


def test_other_aws_tags_reach_every_resource_through_the_provider() -> None:
    graph = offline_run("byo-aws").graph
    (provider,) = [p for p in graph.of_type("pulumi:providers:aws") if p.name == "aws"]
    tags = json.loads(provider.inputs["defaultTags"])["tags"]
    assert tags["GithubRepo"] == "github.com/example-org/gpu-clusters"
    assert graph.effective_inputs(graph.of_type("aws:eks/cluster:Cluster")[0])["tags"]["GithubRepo"]


def test_gpu_only_cluster_without_the_gpu_taint(dev_spec: dict[str, Any]) -> None:
    groups = dev_spec["aws"]["nodeGroups"]
    del groups[0]
    groups[0].update(gpuTaint=False, minSize=1, desiredSize=1)
    graph = run_spec(dev_spec).graph  # no system node group needed when no GPU group is tainted
    # no GPU taint; only the readiness taint its check lifts, which the controller tolerates where no other node is
    assert one(graph, "aws:eks/nodeGroup:NodeGroup", "nodegroup-l4-ng").inputs["taints"] == [
        {"key": "readiness.k8s.io/gpu-node-check", "value": "pending", "effect": "NO_SCHEDULE"}]
    (controller,) = [r.inputs for r in graph.of_type("kubernetes:helm.sh/v3:Release")
                     if r.inputs["name"] == "node-readiness-controller"]
    assert {"key": "readiness.k8s.io/gpu-node-check", "operator": "Exists"} in controller[
        "values"]["tolerations"]


# --- rules, relaxed and new ---------------------------------------------------------------------


def test_existing_network_needs_subnet_ids() -> None:
    spec = byo_spec()
    del spec["aws"]["network"]["subnets"][1]["id"]
    assert errors(spec) == [
        f"{P}.aws.network.subnets[private-a].id: network.existing uses subnets that already exist: give subnet "
        "'private-a' its id (subnet-...) [rule: network-existing]"
    ]


def test_subnet_ids_only_with_an_existing_network(prod_spec: dict[str, Any]) -> None:
    prod_spec["aws"]["network"]["subnets"][0]["id"] = "subnet-0123456789abcdef0"
    assert errors(prod_spec, "stacks/Pulumi.prod-aws.yaml", "us-east-1") == [
        "stacks/Pulumi.prod-aws.yaml: gpu-cluster:spec.aws.network.subnets[gpu-a].id: a subnet id only applies with "
        "network.existing (otherwise the program creates the subnet) [rule: network-existing]"
    ]


def test_a_capacity_block_never_takes_a_placement_group(prod_spec: dict[str, Any]) -> None:
    prod_spec["aws"]["nodeGroups"][1]["placementGroupName"] = "somewhere"
    assert errors(prod_spec, "stacks/Pulumi.prod-aws.yaml", "us-east-1") == [
        "stacks/Pulumi.prod-aws.yaml: gpu-cluster:spec.aws.nodeGroups[h100].placementGroupName: a placement group must "
        "not be forced onto capacity-block capacity: the block is already placed (terraform-aws-eks PR #3730) "
        "[rule: no-placement-group-on-reserved-capacity]"
    ]


def test_reservation_resource_groups_are_for_odcrs(prod_spec: dict[str, Any]) -> None:
    prod_spec["aws"]["nodeGroups"][1]["capacity"]["reservationResourceGroupArn"] = (
        "arn:aws:resource-groups:us-east-1:111122223333:group/odcrs")
    lines = errors(prod_spec, "stacks/Pulumi.prod-aws.yaml", "us-east-1")
    assert lines[0] == (
        "stacks/Pulumi.prod-aws.yaml: gpu-cluster:spec.aws.nodeGroups[h100].capacity.reservationResourceGroupArn: a "
        "reservation resource group only applies to reserved (ODCR) capacity, not 'capacity-block' "
        "[rule: reservation-id]")


def test_several_instance_types_are_for_cpu_groups() -> None:
    spec = byo_spec()
    spec["aws"]["nodeGroups"][1]["instanceTypes"] = ["p4de.24xlarge", "p4d.24xlarge"]
    spec["aws"]["nodeGroups"][0]["instanceTypes"] = ["m7i.xlarge", "m7g.xlarge"]
    assert errors(spec) == [
        f"{P}.aws.nodeGroups[system].instanceTypes[1]: 'm7g.xlarge' (arm64, 0 GPUs) does not match m7i.xlarge (x86_64, "
        "CPU only): a group's types share one architecture and AMI [rule: instance-types-cpu-only]",
        f"{P}.aws.nodeGroups[a100].instanceTypes: instanceTypes (several types) is for CPU groups; a GPU group's "
        "quotas and EFA layout need one instance type [rule: instance-types-cpu-only]",
    ]


def test_ami_type_must_fit_the_instance() -> None:
    spec = byo_spec()
    spec["aws"]["nodeGroups"][1]["amiType"] = "AL2023_ARM_64_STANDARD"
    assert errors(spec) == [
        f"{P}.aws.nodeGroups[a100].amiType: AL2023_ARM_64_STANDARD does not fit p4de.24xlarge (x86_64, GPUs); use "
        "AL2023_x86_64_NVIDIA [rule: ami-type-fits]"
    ]
    spec["aws"]["nodeGroups"][1]["amiType"] = "BOTTLEROCKET_x86_64_NVIDIA"
    assert errors(spec) == [
        f"{P}.aws.nodeGroups[a100].amiType: BOTTLEROCKET_x86_64_NVIDIA nodes run their own NVIDIA device plugin (EKS "
        "user guide, GPU device plugin), so the platform's GPU Operator would register nvidia.com/gpu there a second "
        "time, and its time-slicing and MIG settings do not reach Bottlerocket: use AL2023_x86_64_NVIDIA for GPU "
        "groups (Bottlerocket suits groups without GPUs) [rule: bottlerocket-nvidia-gpu-operator]",
        f"{P}.aws.nodeGroups[a100].localNvme: localNvme raid0 is written as AL2023 nodeadm user data; Bottlerocket "
        "nodes are not configured by it: use an AL2023 AMI type or localNvme none [rule: ami-type-fits]"
    ]


def test_aws_tags_follow_aws_rules_not_label_rules() -> None:
    spec = byo_spec()
    spec["tags"] = {"GithubRepo": "github.com/org/repo", "Owner Email": "ml@example.com"}
    parse_spec(spec, BYO, provider_region="us-west-2")  # the real-world case label rules refused
    spec["tags"] = {"aws:reserved": "x", "bad": "a\u0007b"}
    assert errors(spec) == [
        f"{P}.tags[\"aws:reserved\"]: AWS tags have keys of 1-128 and values of 0-256 letters, digits, spaces and + - "
        "= . _ : / @ (keys may not start with aws:) [rule: aws-tag-syntax]",
        f"{P}.tags.bad: AWS tags have keys of 1-128 and values of 0-256 letters, digits, spaces and + - = . _ : / @ "
        "(keys may not start with aws:) [rule: aws-tag-syntax]",
    ]


# The general-purpose, compute and memory families people use for system and CPU pools (issue 24), with the number of
# sizes each must have: burstable t3/t3a/t4g, m5/m5n/m5zn, m6i/m6a, m7i/m7a, c5/c6i/c6a/c7i/c7a, r5/r6i/r7i, Graviton.
CPU_FAMILIES = {
    "t3": 4, "t3a": 4, "t4g": 4, "m5": 5, "m5n": 5, "m5zn": 6, "m6i": 5, "m6a": 5, "m7i": 5, "m7a": 5,
    "c5": 4, "c6i": 5, "c6a": 5, "c7i": 5, "c7a": 5, "r5": 5, "r6i": 5, "r7i": 5,
    "m6g": 5, "m7g": 4, "c6g": 5, "c7g": 4, "r6g": 5, "r7g": 5,
}
GRAVITON = {"t4g", "m6g", "m7g", "c6g", "c7g", "r6g", "r7g"}
# Where a vCPU or memory figure may come from: AWS's own pages (the Instance Types guide, the EC2 User Guide) or EC2's
# own API (DescribeInstanceTypes, as Karpenter's generated reference publishes it).
EC2_OWN = ("AWS EC2 Instance Types guide", "AWS EC2 User Guide", "EC2 DescribeInstanceTypes")


def test_the_catalog_covers_the_common_families_with_sources() -> None:
    catalog = load_aws_catalog()
    for family, count in CPU_FAMILIES.items():
        sizes = [f for f in catalog.values() if f.instance_type.split(".")[0] == family]
        assert len(sizes) >= count, family
        for facts in sizes:
            for fact in (facts.vcpu, facts.memory_gib):
                assert fact.value and fact.status == "confirmed" and fact.as_of, facts.instance_type
                assert fact.source.startswith(EC2_OWN), (facts.instance_type, fact.source)
            assert facts.arch == ("arm64" if family in GRAVITON else "x86_64"), facts.instance_type
            assert facts.gpu_count == 0 and facts.nvme_disks == 0, facts.instance_type
    assert catalog["p4de.24xlarge"].nvme_disks == 8 and catalog["p4de.24xlarge"].network_gbps.value == 400


@pytest.mark.parametrize(("instance_type", "vcpu", "memory_gib", "efa", "arch"), [
    ("t3.medium", 2, 4, 0, "x86_64"),        # gp.html 2024-05
    ("t3a.2xlarge", 8, 32, 0, "x86_64"),
    ("m5n.8xlarge", 32, 128, 0, "x86_64"),
    ("m5zn.12xlarge", 48, 192, 1, "x86_64"),  # the one EFA size among them
    ("m6a.8xlarge", 32, 128, 0, "x86_64"),
    ("m7a.large", 2, 8, 0, "x86_64"),
    ("r5.8xlarge", 32, 256, 0, "x86_64"),    # EC2 User Guide 2023-05
    ("c6a.8xlarge", 32, 64, 0, "x86_64"),
    ("c7a.4xlarge", 16, 32, 0, "x86_64"),    # EC2 DescribeInstanceTypes
    ("c6g.medium", 1, 2, 0, "arm64"),
    ("r7g.4xlarge", 16, 128, 0, "arm64"),
    ("g4dn.12xlarge", 48, 192, 1, "x86_64"),
    ("g6e.24xlarge", 96, 768, 2, "x86_64"),
    ("p5.4xlarge", 16, 256, 1, "x86_64"),
    ("p6-b200.48xlarge", 192, 2048, 8, "x86_64"),
])
def test_issue_24_types_carry_the_figures_read(instance_type: str, vcpu: int, memory_gib: int, efa: int,
                                                arch: str) -> None:
    facts = load_aws_catalog()[instance_type]
    assert (facts.vcpu.value, facts.memory_gib.value, facts.efa_count, facts.arch) == (vcpu, memory_gib, efa, arch)


# --- round trip: a random valid spec builds, and its graph agrees with it ----------------------

GPU_TYPES = ["g6.xlarge", "g6e.48xlarge", "p4d.24xlarge", "p5.48xlarge"]
CPU_TYPES = ["m5.xlarge", "m6i.2xlarge", "c7i.2xlarge", "r6i.xlarge", "m7g.xlarge"]


@st.composite
def valid_specs(draw: st.DrawFn) -> dict[str, Any]:
    spec = copy.deepcopy(raw_stack_config("dev-aws")["gpu-cluster:spec"])
    cpu = draw(st.sampled_from(CPU_TYPES))
    spec["aws"]["nodeGroups"][0]["instanceType"] = cpu
    gpus = draw(st.lists(st.sampled_from(GPU_TYPES), min_size=1, max_size=3))
    groups = [spec["aws"]["nodeGroups"][0]]
    for i, itype in enumerate(gpus):
        size = draw(st.integers(1, 3))
        groups.append({"name": f"gpu-{i}", "instanceType": itype, "minSize": 0, "desiredSize": 0, "maxSize": size,
                       "capacity": {"type": draw(st.sampled_from(["spot", "on-demand"]))}})
    spec["aws"]["nodeGroups"] = groups
    catalog = load_aws_catalog()
    spec["teams"][0]["quotas"] = [{"nodeGroup": "gpu-0", "gpus": catalog[gpus[0]].gpu_count,
                                   "cpu": 1, "memoryGiB": 1}]
    spec["platform"]["gpuSharing"] = {"mode": "none"}
    spec["workload"]["peakGpus"] = 1
    spec["aws"]["storage"]["filesystem"]["capacityGiB"] = draw(st.sampled_from([1200, 2400, 4800]))
    return spec


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=valid_specs())
def test_random_valid_specs_build_and_the_graph_agrees(spec: dict[str, Any]) -> None:
    graph = run_spec(spec, stack_name="roundtrip").graph
    built = {r.inputs["nodeGroupName"]: r.inputs for r in graph.of_type("aws:eks/nodeGroup:NodeGroup")}
    assert set(built) == {f"dev-gpu-{g['name']}" for g in spec["aws"]["nodeGroups"]}
    lts = {r.inputs["name"]: r.inputs for r in graph.of_type("aws:ec2/launchTemplate:LaunchTemplate")}
    for g in spec["aws"]["nodeGroups"]:
        ng = built[f"dev-gpu-{g['name']}"]
        assert ng["instanceTypes"] == [g["instanceType"]]
        assert ng["scalingConfig"]["maxSize"] == g["maxSize"]
        efa = [ni for ni in lts[f"dev-gpu-{g['name']}"].get("networkInterfaces") or []
               if ni.get("interfaceType") == "efa-only"]
        assert len(efa) == load_aws_catalog()[g["instanceType"]].efa_count
    subnets = {r.inputs["cidrBlock"] for r in graph.of_type("aws:ec2/subnet:Subnet")}
    assert subnets == {sn["cidr"] for sn in spec["aws"]["network"]["subnets"]}
    (fs,) = graph.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    assert fs.inputs["storageCapacity"] == spec["aws"]["storage"]["filesystem"]["capacityGiB"]


def test_preview_says_when_auto_nvme_finds_no_confirmed_disks(capsys: pytest.CaptureFixture[str]) -> None:
    from blueprint.cli import main

    assert main(["preview", "dev-aws"]) == 0
    assert ("note: l4: localNvme auto found no confirmed local NVMe for g6.xlarge in the catalog, so no RAID0 is "
            "written; confirm the type's instance store and set raid0") in capsys.readouterr().out
