"""The real program under the offline engine: what the shipped stacks create, resource by resource."""

from __future__ import annotations

import importlib
import inspect
from functools import cache
from typing import Any

import pytest

from blueprint.graph.engine import ProgramError, run_program
from blueprint.graph.model import GraphResource, ResourceGraph
from components.spec import REQUIRED_LABEL_KEYS
from tests.conftest import AWS_STACKS, offline_run, raw_stack_config, run_spec, stack

STATEFUL_TYPES = {
    "aws:s3/bucket:Bucket",
    "aws:fsx/lustreFileSystem:LustreFileSystem",
    "aws:kms/key:Key",
    "aws:eks/cluster:Cluster",
    "aws:cloudwatch/logGroup:LogGroup",
}


@cache
def _taggable(type_token: str) -> bool:
    """Whether the installed pulumi-aws resource class takes a ``tags`` argument."""
    module, _, cls = type_token.removeprefix("aws:").partition(":")
    mod = importlib.import_module(f"pulumi_aws.{module.split('/')[0]}")
    args = getattr(mod, f"{cls}Args")  # the public input type of the resource, e.g. aws.ec2.VpcArgs
    return "tags" in inspect.signature(args.__init__).parameters


def custom(graph: ResourceGraph) -> list[GraphResource]:
    return [r for r in graph.resources if r.type.startswith("aws:")]


def one(graph: ResourceGraph, type_: str, name_suffix: str) -> GraphResource:
    found = [r for r in graph.of_type(type_) if r.name.endswith(name_suffix)]
    assert len(found) == 1, (type_, name_suffix, [r.name for r in graph.of_type(type_)])
    return found[0]


def test_prod_has_sixteen_p5_nodes_with_all_efa_and_no_placement_group_on_the_capacity_block() -> None:
    graph = offline_run("prod-aws").graph
    ng = one(graph, "aws:eks/nodeGroup:NodeGroup", "nodegroup-h100-ng").inputs
    assert "instanceTypes" not in ng  # a Capacity Block group names its type in the launch template
    assert ng["scalingConfig"] == {"minSize": 0, "desiredSize": 0, "maxSize": 16}
    assert ng["capacityType"] == "CAPACITY_BLOCK"
    assert ng["amiType"] == "AL2023_x86_64_NVIDIA"
    assert {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"} in ng["taints"]
    assert ng["labels"]["gpu-cluster/node-group"] == "h100"
    assert ng["labels"]["gpu-cluster/instance-type"] == "p5.48xlarge"
    lt = one(graph, "aws:ec2/launchTemplate:LaunchTemplate", "nodegroup-h100-lt").inputs
    assert lt["instanceType"] == "p5.48xlarge"
    efa = [ni for ni in lt["networkInterfaces"] if ni.get("interfaceType") == "efa-only"]
    assert len(efa) == 32
    assert sorted(ni["networkCardIndex"] for ni in efa) == list(range(32))
    assert "placement" not in lt
    assert graph.of_type("aws:ec2/placementGroup:PlacementGroup") == []
    assert lt["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert lt["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0a1b2c3d4e5f60718"}
    }


def test_every_efa_interface_joins_the_efa_security_group() -> None:
    graph = offline_run("prod-aws").graph
    efa_sg = one(graph, "aws:ec2/securityGroup:SecurityGroup", "network-efa-sg")
    lt = one(graph, "aws:ec2/launchTemplate:LaunchTemplate", "nodegroup-h100-lt").inputs
    sg_ids = {tuple(ni["securityGroups"]) for ni in lt["networkInterfaces"]}
    assert len(sg_ids) == 1
    assert "vpcSecurityGroupIds" not in lt  # groups sit on each interface when interfaces are declared
    assert efa_sg.urn in one(graph, "aws:ec2/launchTemplate:LaunchTemplate", "nodegroup-h100-lt").dependencies
    ingress = one(graph, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "efa-ingress-self").inputs
    egress = one(graph, "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule", "efa-egress-self").inputs
    for rule in (ingress, egress):
        assert rule["ipProtocol"] == "-1"
        assert rule["securityGroupId"] == rule["referencedSecurityGroupId"]


def test_on_demand_multi_node_efa_group_gets_a_cluster_placement_group(prod_spec: dict[str, Any]) -> None:
    h100 = prod_spec["aws"]["nodeGroups"][1]
    h100["capacity"] = {"type": "on-demand"}
    graph = run_spec(prod_spec).graph
    pg = one(graph, "aws:ec2/placementGroup:PlacementGroup", "nodegroup-h100-placement")
    assert pg.inputs["strategy"] == "cluster"
    lt = one(graph, "aws:ec2/launchTemplate:LaunchTemplate", "nodegroup-h100-lt").inputs
    assert lt["placement"] == {"groupName": "prod-train-h100"}
    assert "instanceMarketOptions" not in lt and "capacityReservationSpecification" not in lt
    assert "instanceType" not in lt
    ng = one(graph, "aws:eks/nodeGroup:NodeGroup", "nodegroup-h100-ng").inputs
    assert ng["instanceTypes"] == ["p5.48xlarge"] and ng["capacityType"] == "ON_DEMAND"


def test_placement_none_is_respected(prod_spec: dict[str, Any]) -> None:
    prod_spec["aws"]["nodeGroups"][1].update(capacity={"type": "on-demand"}, placement="none")
    graph = run_spec(prod_spec).graph
    assert graph.of_type("aws:ec2/placementGroup:PlacementGroup") == []


@pytest.mark.parametrize("stack_name", AWS_STACKS)
def test_launch_templates_require_imdsv2_encrypt_and_open_no_ssh(stack_name: str) -> None:
    graph = offline_run(stack_name).graph
    templates = graph.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    assert templates
    for lt in templates:
        md = lt.inputs["metadataOptions"]
        assert md["httpTokens"] == "required" and md["httpPutResponseHopLimit"] == 1, lt.name
        for bdm in lt.inputs["blockDeviceMappings"]:
            assert bdm["ebs"]["encrypted"] == "true", lt.name
        assert "keyName" not in lt.inputs, lt.name
        kinds = {ts["resourceType"] for ts in lt.inputs["tagSpecifications"]}
        assert kinds == {"instance", "volume", "network-interface"}, lt.name
    for ng in graph.of_type("aws:eks/nodeGroup:NodeGroup"):
        assert "remoteAccess" not in ng.inputs, ng.name
    for rule in graph.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"):
        assert rule.inputs.get("fromPort") != 22, rule.name
        # the only CIDR-sourced rules are the deployer's: HTTPS to the API
        if "cidrIpv4" in rule.inputs:
            assert rule.name.startswith("control-plane-deployer-https-"), rule.name
            assert (rule.inputs["fromPort"], rule.inputs["toPort"]) == (443, 443)
            runners = stack(stack_name).spec.aws_spec().control_plane.deployer.runner_cidrs
            assert rule.inputs["cidrIpv4"] in runners


@pytest.mark.parametrize("stack_name", AWS_STACKS)
def test_every_taggable_resource_carries_the_billing_labels(stack_name: str) -> None:
    graph = offline_run(stack_name).graph
    checked = 0
    for res in custom(graph):
        if not _taggable(res.type):
            continue
        checked += 1
        explicit = res.inputs.get("tags") or {}
        effective = graph.effective_inputs(res).get("tags") or {}
        for key in REQUIRED_LABEL_KEYS:
            assert key in explicit, f"{res.name} ({res.type}) lacks explicit tag {key}"
            assert key in effective, f"{res.name} ({res.type}) lacks tag {key}"
    assert checked > 30


@pytest.mark.parametrize("stack_name", AWS_STACKS)
def test_provider_default_tags_carry_the_labels(stack_name: str) -> None:
    graph = offline_run(stack_name).graph
    (provider,) = [p for p in graph.of_type("pulumi:providers:aws") if p.name == "aws"]
    cluster = graph.of_type("aws:eks/cluster:Cluster")[0]
    effective = graph.effective_inputs(cluster)["tags"]
    for key in REQUIRED_LABEL_KEYS:
        assert key in effective
    assert effective["cluster"] == cluster.inputs["name"]
    assert cluster.provider is not None and cluster.provider_urn == provider.urn


def test_stateful_resources_are_protected_and_retained_in_prod() -> None:
    graph = offline_run("prod-aws").graph
    stateful = [r for r in graph.resources if r.type in STATEFUL_TYPES]
    assert {r.type for r in stateful} == STATEFUL_TYPES
    for r in stateful:
        assert r.protect and r.retain_on_delete, r.name
    cluster = graph.of_type("aws:eks/cluster:Cluster")[0]
    assert cluster.inputs["deletionProtection"] is True


def test_dev_is_cheap_spot_scale_to_zero_and_disposable() -> None:
    graph = offline_run("dev-aws").graph
    ng = one(graph, "aws:eks/nodeGroup:NodeGroup", "nodegroup-l4-ng").inputs
    assert ng["instanceTypes"] == ["g6.xlarge"]
    assert ng["capacityType"] == "SPOT"
    assert ng["scalingConfig"]["minSize"] == 0 and ng["scalingConfig"]["desiredSize"] == 0
    lt = one(graph, "aws:ec2/launchTemplate:LaunchTemplate", "nodegroup-l4-lt").inputs
    assert "networkInterfaces" not in lt  # g6.xlarge has no EFA
    fs = graph.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")[0]
    assert fs.inputs["deploymentType"] == "SCRATCH_2"
    assert "importPath" not in fs.inputs and "exportPath" not in fs.inputs
    assert not any(r.protect for r in graph.resources)
    assert len(graph.of_type("aws:ec2/natGateway:NatGateway")) == 1


def test_checkpoint_bucket_is_versioned_encrypted_private_and_never_expires_current_versions() -> None:
    graph = offline_run("prod-aws").graph
    assert one(graph, "aws:s3/bucketVersioning:BucketVersioning", "checkpoints-versioning").inputs[
        "versioningConfiguration"] == {"status": "Enabled"}
    sse = one(graph, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
              "checkpoints-sse").inputs["rules"][0]["applyServerSideEncryptionByDefault"]
    assert sse["sseAlgorithm"] == "aws:kms" and sse["kmsMasterKeyId"].startswith("arn:aws:kms:")
    pab = one(graph, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "checkpoints-public-access").inputs
    assert all(pab[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls",
                                        "restrictPublicBuckets"))
    rules = one(graph, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
                "checkpoints-lifecycle").inputs["rules"]
    # Current versions never expire, except the acceptance gate's records under their own prefix (issue 27).
    assert [r["id"] for r in rules if "expiration" in r] == ["expire-acceptance-records"]
    assert {r["id"]: r for r in rules}["expire-acceptance-records"]["filter"] == {"prefix": "acceptance/"}
    assert {r["id"]: r for r in rules}["expire-noncurrent-versions"]["noncurrentVersionExpiration"] == {
        "noncurrentDays": 30}
    assert {r["id"]: r for r in rules}["abort-incomplete-multipart-uploads"]["abortIncompleteMultipartUpload"] == {
        "daysAfterInitiation": 7}
    for key in graph.of_type("aws:kms/key:Key"):
        assert key.inputs["enableKeyRotation"] is True


def test_lustre_is_persistent_encrypted_in_the_gpu_subnet_and_linked_to_the_bucket() -> None:
    graph = offline_run("prod-aws").graph
    fs = one(graph, "aws:fsx/lustreFileSystem:LustreFileSystem", "storage-lustre").inputs
    assert fs["deploymentType"] == "PERSISTENT_2"
    assert fs["storageCapacity"] == 9600 and fs["perUnitStorageThroughput"] == 500
    assert fs["kmsKeyId"].startswith("arn:aws:kms:")
    gpu_subnet = one(graph, "aws:ec2/subnet:Subnet", "subnet-gpu-a")
    assert gpu_subnet.urn in graph.get(
        one(graph, "aws:fsx/lustreFileSystem:LustreFileSystem", "storage-lustre").urn).dependencies  # type: ignore[union-attr]
    dra = one(graph, "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation", "checkpoints-link").inputs
    assert dra["fileSystemPath"] == "/checkpoints"
    assert dra["dataRepositoryPath"].startswith("s3://prod-train-ckpt-")
    assert dra["deleteDataInFilesystem"] is False
    ports = {(r.inputs["fromPort"], r.inputs["toPort"]) for r in
             graph.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule") if "lustre" in r.name}
    assert ports == {(988, 988), (1018, 1023)}


def test_eks_control_plane() -> None:
    graph = offline_run("prod-aws").graph
    c = graph.of_type("aws:eks/cluster:Cluster")[0].inputs
    assert c["vpcConfig"]["endpointPrivateAccess"] is True and c["vpcConfig"]["endpointPublicAccess"] is False
    assert c["encryptionConfig"]["resources"] == ["secrets"]
    assert set(c["enabledClusterLogTypes"]) == {"api", "audit", "authenticator", "controllerManager", "scheduler"}
    assert c["accessConfig"] == {"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": False}
    addons = {a.inputs["addonName"] for a in graph.of_type("aws:eks/addon:Addon")}
    assert addons == {"vpc-cni", "kube-proxy", "coredns", "aws-ebs-csi-driver", "aws-fsx-csi-driver",
                      "eks-pod-identity-agent", "eks-node-monitoring-agent"}
    # one way of granting AWS access in the cluster: EKS Pod Identity, no OIDC provider for IRSA
    assert graph.of_type("aws:iam/openIdConnectProvider:OpenIdConnectProvider") == []
    principals = {e.inputs["principalArn"] for e in graph.of_type("aws:eks/accessEntry:AccessEntry")
                  if "kubernetesGroups" not in e.inputs}
    assert principals == {"arn:aws:iam::111122223333:role/platform-admin", "arn:aws:iam::111122223333:role/break-glass",
                          "arn:aws:iam::111122223333:role/pulumi-deployer"}
    log_group = graph.of_type("aws:cloudwatch/logGroup:LogGroup")[0].inputs
    assert log_group["name"] == "/aws/eks/prod-train/cluster" and log_group["retentionInDays"] == 365


def test_no_fsx_csi_driver_without_a_filesystem(dev_spec: dict[str, Any]) -> None:
    del dev_spec["aws"]["storage"]["filesystem"]
    graph = run_spec(dev_spec).graph
    assert graph.of_type("aws:fsx/lustreFileSystem:LustreFileSystem") == []
    assert "aws-fsx-csi-driver" not in {a.inputs["addonName"] for a in graph.of_type("aws:eks/addon:Addon")}


def test_renaming_the_cluster_keeps_the_urns_of_everything_that_holds_data(prod_spec: dict[str, Any]) -> None:
    before = run_spec(prod_spec, stack_name="rename").graph
    prod_spec["name"] = "prod-train-v2"
    run = run_spec(prod_spec, stack_name="rename")
    after = run.graph
    for type_ in STATEFUL_TYPES:
        assert sorted(r.urn for r in before.of_type(type_)) == sorted(r.urn for r in after.of_type(type_)), type_
    bucket = one(after, "aws:s3/bucket:Bucket", "storage-checkpoints")
    assert bucket.inputs["bucketPrefix"] == "prod-train-v2-ckpt-"  # a new physical name would replace it ...
    cluster = after.of_type("aws:eks/cluster:Cluster")[0]
    assert cluster.inputs["name"] == "prod-train-v2"
    # ... so the program ignores changes to the name-like inputs of stateful resources (part of the graph),
    assert bucket.ignore_changes == ["bucketPrefix"]
    assert cluster.ignore_changes == ["name"]
    assert after.of_type("aws:cloudwatch/logGroup:LogGroup")[0].ignore_changes == ["name"]
    # and protects and retains them, so even a replacement could not delete the data.
    assert bucket.protect and bucket.retain_on_delete


def test_program_refuses_an_invalid_spec_and_registers_nothing() -> None:
    config = raw_stack_config("prod-aws")
    config["gpu-cluster:spec"]["aws"]["nodeGroups"][0]["maxSize"] = 0
    with pytest.raises(ProgramError) as info:
        run_program("prod-aws", config, "us-east-1")
    assert "invalid stack configuration" in str(info.value)
    assert "stacks/Pulumi.prod-aws.yaml: gpu-cluster:spec.aws.nodeGroups[system].maxSize" in str(info.value)
    assert [r.type for r in info.value.graph.resources] == ["pulumi:pulumi:Stack"]


@pytest.mark.parametrize("stack_name", AWS_STACKS)
def test_exports_what_operators_need(stack_name: str) -> None:
    outputs = offline_run(stack_name).outputs
    assert {"clusterName", "endpoint", "kubeconfig", "checkpointBucket", "filesystemDnsName",
            "filesystemMountName", "nodeGroupNames", "kubeconfigCommand", "gpuAvailabilityZone",
            "checkpointRoleArns"} <= set(outputs)
    assert '"command": "aws"' in outputs["kubeconfig"]
