"""What a real `pulumi up` of the shipped stacks meets: the deployer's path to the API, Capacity Block
timing, the checkpoint data path (KMS, IAM, security groups) and node health (issue 7)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from blueprint.graph.model import GraphResource, ResourceGraph
from blueprint.preview.render import render_preview
from components.aws.capacity_block import BlockWindow
from components.aws.iam import data_key_policy, team_checkpoint_policy
from components.catalog import load_addon_pins
from components.spec import parse_spec
from tests.conftest import offline_run, run_spec

ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
DEPLOYER = "arn:aws:iam::111122223333:role/pulumi-deployer"


def one(graph: ResourceGraph, type_: str, name: str) -> GraphResource:
    found = [r for r in graph.of_type(type_) if r.name == name]
    assert len(found) == 1, (type_, name, [r.name for r in graph.of_type(type_)])
    return found[0]


def k8s_provider(graph: ResourceGraph) -> GraphResource:
    (provider,) = graph.of_type("pulumi:providers:kubernetes")
    return provider


# --- 1. the deployer reaches the API ------------------------------------------------------------


def test_deployer_gets_a_cluster_admin_entry_before_any_kubernetes_resource() -> None:
    graph = offline_run("prod-aws").graph
    entry = one(graph, "aws:eks/accessEntry:AccessEntry", "control-plane-deployer")
    assert entry.inputs["principalArn"] == DEPLOYER and entry.inputs["type"] == "STANDARD"
    assoc = one(graph, "aws:eks/accessPolicyAssociation:AccessPolicyAssociation", "control-plane-deployer-policy")
    assert assoc.inputs["principalArn"] == DEPLOYER
    assert assoc.inputs["policyArn"] == ADMIN_POLICY and assoc.inputs["accessScope"] == {"type": "cluster"}
    assert entry.urn in assoc.dependencies
    provider = k8s_provider(graph)
    assert assoc.urn in provider.dependencies
    # every Kubernetes object and release goes through that provider, so it waits for the entry
    k8s = [r for r in graph.resources if r.type.startswith("kubernetes:")]
    assert len(k8s) > 50
    assert all(r.provider_urn == provider.urn for r in k8s), [r.name for r in k8s if r.provider_urn != provider.urn]


def test_in_vpc_deployer_gets_https_on_the_cluster_security_group() -> None:
    graph = offline_run("prod-aws").graph
    rule = one(graph, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "control-plane-deployer-https-0")
    assert rule.inputs["cidrIpv4"] == "10.8.0.0/24"
    assert (rule.inputs["ipProtocol"], rule.inputs["fromPort"], rule.inputs["toPort"]) == ("tcp", 443, 443)
    cluster = graph.of_type("aws:eks/cluster:Cluster")[0]
    assert rule.inputs["securityGroupId"].startswith("sg-") and cluster.urn in rule.dependencies
    assert rule.urn in k8s_provider(graph).dependencies


def test_public_endpoint_deployer_opens_nothing_in_the_vpc() -> None:
    graph = offline_run("dev-aws").graph
    assert not [r for r in graph.resources if "deployer-https" in r.name]
    assert one(graph, "aws:eks/accessEntry:AccessEntry", "control-plane-deployer").inputs["principalArn"] == (
        "arn:aws:iam::444455556666:role/pulumi-deployer")


def test_kubeconfig_assumes_the_deployer_and_people_get_the_command() -> None:
    outputs = offline_run("prod-aws").outputs
    config = json.loads(outputs["kubeconfig"]) if outputs["kubeconfig"] != "[secret]" else None
    if config is None:  # secret outputs resolve to their value offline
        pytest.fail("kubeconfig output is not readable offline")
    args = config["users"][0]["user"]["exec"]["args"]
    assert args[-2:] == ["--role-arn", DEPLOYER]
    assert outputs["kubeconfigCommand"] == (
        "aws eks update-kubeconfig --region us-east-1 --name prod-train --alias prod-train")


def test_runners_outside_the_vpc_come_in_through_the_transit_gateway() -> None:
    graph = offline_run("prod-aws").graph
    tgw = one(graph, "aws:ec2transitgateway/vpcAttachment:VpcAttachment", "network-deployer-tgw").inputs
    assert tgw["transitGatewayId"] == "tgw-0123456789abcdef0" and len(tgw["subnetIds"]) == 2  # one per zone
    routes = [r for r in graph.of_type("aws:ec2/route:Route") if r.name.startswith("network-route-deployer-")]
    private_tables = [r for r in graph.of_type("aws:ec2/routeTable:RouteTable") if "rt-private" in r.name]
    assert len(routes) == len(private_tables) == 2
    assert all(r.inputs["destinationCidrBlock"] == "10.8.0.0/24" and r.inputs["transitGatewayId"] ==
               "tgw-0123456789abcdef0" for r in routes)
    # The private endpoint's name resolves through public DNS: no Resolver endpoint (two ENIs) and no DNS rules.
    assert not graph.of_type("aws:route53/resolverEndpoint:ResolverEndpoint")
    assert not [r for r in graph.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
                if r.inputs.get("fromPort") == 53]
    provider = k8s_provider(graph)
    for r in routes:
        assert r.urn in provider.dependencies
    assert graph.of_type("aws:ec2transitgateway/vpcAttachment:VpcAttachment")[0].urn in provider.dependencies


def test_aws_and_kubernetes_calls_run_as_the_deployer() -> None:
    graph = offline_run("prod-aws").graph
    (provider,) = graph.of_type("pulumi:providers:aws")
    roles = provider.inputs["assumeRoles"]
    roles = json.loads(roles) if isinstance(roles, str) else roles
    assert roles == [{"roleArn": DEPLOYER, "sessionName": "pulumi-prod-train"}]


# --- 2. Capacity Blocks: before and through the window ------------------------------------------


def test_capacity_block_group_is_created_empty_and_scaled_at_the_block_start() -> None:
    graph = offline_run("prod-aws").graph  # the tests' clock: 2026-11-29, before the block
    ng = one(graph, "aws:eks/nodeGroup:NodeGroup", "nodegroup-h100-ng")
    assert ng.inputs["scalingConfig"] == {"minSize": 0, "desiredSize": 0, "maxSize": 16}
    assert ng.inputs["updateConfig"] == {"updateStrategy": "MINIMAL", "maxUnavailablePercentage": 100}
    schedule = one(graph, "aws:autoscaling/schedule:Schedule", "nodegroup-h100-block-start")
    assert schedule.inputs["startTime"] == "2027-01-04T11:30:00Z"
    assert (schedule.inputs["minSize"], schedule.inputs["maxSize"], schedule.inputs["desiredCapacity"]) == (0, 16, 16)
    assert schedule.inputs["autoscalingGroupName"].startswith("eks-prod-train-h100-")
    assert ng.urn in schedule.dependencies
    system = one(graph, "aws:eks/nodeGroup:NodeGroup", "nodegroup-system-ng")
    assert system.inputs["updateConfig"] == {"maxUnavailable": 1}


def test_no_scale_up_action_is_declared_once_the_block_has_started(
        prod_spec: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # Auto Scaling refuses a scheduled action in the past: an apply during the window must not declare one.
    monkeypatch.setenv("GPU_CLUSTER_NOW", "2027-01-05T00:00:00Z")
    graph = run_spec(prod_spec).graph
    assert graph.of_type("aws:autoscaling/schedule:Schedule") == []
    assert one(graph, "aws:eks/nodeGroup:NodeGroup", "nodegroup-h100-ng").inputs["scalingConfig"]["desiredSize"] == 0


@pytest.mark.parametrize(("now", "phase", "step"), [
    ("2026-11-29T00:00:00Z", "FUTURE", "a scheduled action scales it to 16 at 2027-01-04T11:30:00Z"),
    ("2027-01-10T00:00:00Z", "ACTIVE", "the block is active: the group is created at 0 nodes; scale it now: aws eks "
     "update-nodegroup-config --cluster-name prod-train --nodegroup-name prod-train-h100 --scaling-config "
     "minSize=0,maxSize=16,desiredSize=16"),
    ("2027-01-18T11:10:00Z", "ENDING", "EC2 is reclaiming the instances: the group must be at 0"),
    ("2027-02-01T00:00:00Z", "ENDED", "the block has ended: the group stays at 0"),
])
def test_preview_shows_where_the_window_stands(now: str, phase: str, step: str) -> None:
    run = offline_run("prod-aws")
    spec = parse_spec(run_config_spec(), "stacks/Pulumi.prod-aws.yaml")
    moment = datetime.fromisoformat(now.replace("Z", "+00:00"))
    text = render_preview(run.graph, spec, "stacks/Pulumi.prod-aws.yaml", run.outputs, now=moment)
    assert f"now {now}: {phase}" in text
    assert step in text
    if phase in ("FUTURE", "ACTIVE"):
        assert ("operator step: scale to 0 at least 30 minutes before the block ends (by 2027-01-18T11:00:00Z; EC2 "
                "reclaims the instances then); EKS's own scheduled action does it at 2027-01-18T10:50:00Z") in text


def run_config_spec() -> dict[str, Any]:
    from tests.conftest import raw_stack_config

    return raw_stack_config("prod-aws")["gpu-cluster:spec"]


def test_block_window_arithmetic() -> None:
    start, end = datetime(2027, 1, 4, 11, 30, tzinfo=UTC), datetime(2027, 1, 18, 11, 30, tzinfo=UTC)
    block = BlockWindow(start=start, end=end, instance_count=16, now=datetime(2027, 1, 18, 10, 59, tzinfo=UTC))
    assert block.hours == 336 and block.phase == "active" and not block.schedule_scale_up
    assert block.scale_to_zero_by == datetime(2027, 1, 18, 11, 0, tzinfo=UTC)
    assert BlockWindow(start=start, end=end, instance_count=16, now=block.scale_to_zero_by).phase == "ending"


# --- 3. the checkpoint data path ----------------------------------------------------------------


def _doc(resource: GraphResource, key: str) -> dict[str, Any]:
    value = resource.inputs[key]
    doc: dict[str, Any] = json.loads(value) if isinstance(value, str) else value
    return doc


@pytest.mark.parametrize("stack_name", ["prod-aws", "dev-aws"])
def test_data_key_lets_the_fsx_link_use_the_bucket(stack_name: str) -> None:
    graph = offline_run(stack_name).graph
    fs = graph.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")[0]
    dra = graph.of_type("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")[0]
    policy = one(graph, "aws:kms/keyPolicy:KeyPolicy", "storage-data-key-policy")
    statements = {s["Sid"]: s for s in _doc(policy, "policy")["Statement"]}
    assert statements["EnableIamPolicies"]["Principal"] == {"AWS": "arn:aws:iam::123456789012:root"}
    fsx = statements["FsxLustreS3DataRepository"]
    # the service-linked role of exactly this filesystem (the DRA names the same filesystem id), named by
    # condition because FSx creates it only with the DRA, after this policy
    assert fsx["Principal"] == {"AWS": "*"}
    assert fsx["Condition"]["ArnEquals"] == {"aws:PrincipalArn": (
        "arn:aws:iam::123456789012:role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/"
        f"AWSServiceRoleForFSxS3Access_{dra.inputs['fileSystemId']}")}
    assert dra.inputs["fileSystemId"].startswith("fs-")
    assert sorted(fsx["Action"]) == ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*"]
    # DescribeKey has no encryption context: its own statement, with the same principal and service conditions
    describe = statements["FsxLustreS3DataRepositoryDescribeKey"]
    assert describe["Action"] == ["kms:DescribeKey"] and "StringLike" not in describe["Condition"]
    assert describe["Condition"]["ArnEquals"] == fsx["Condition"]["ArnEquals"]
    region = "us-east-1" if stack_name == "prod-aws" else "us-west-2"
    assert fsx["Condition"]["StringEquals"] == {"kms:ViaService": f"s3.{region}.amazonaws.com",
                                                "kms:CallerAccount": "123456789012"}
    # With S3 Bucket Keys (the default) the encryption context is the bucket's ARN; an object written without
    # one carries its own ARN, so both forms are granted
    bucket = dra.inputs["dataRepositoryPath"].removeprefix("s3://")
    assert fsx["Condition"]["StringLike"] == {"kms:EncryptionContext:aws:s3:arn": [
        f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"]}
    assert fs.urn in policy.dependencies
    assert policy.urn in dra.dependencies  # the link waits for the key policy


def test_data_key_policy_names_the_filesystem_and_the_bucket() -> None:
    doc = data_key_policy("aws", "111122223333", "us-east-1", "arn:aws:s3:::ckpt", "fs-0123456789abcdef0")
    (root, fsx, describe) = doc["Statement"]
    assert describe["Action"] == ["kms:DescribeKey"]
    assert root["Action"] == ["kms:*"] and root["Principal"] == {"AWS": "arn:aws:iam::111122223333:root"}
    assert fsx["Condition"]["ArnEquals"] == {"aws:PrincipalArn": (
        "arn:aws:iam::111122223333:role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/"
        "AWSServiceRoleForFSxS3Access_fs-0123456789abcdef0")}
    assert fsx["Condition"]["StringEquals"]["kms:CallerAccount"] == "111122223333"
    assert fsx.get("Condition", {}).get("StringLike") == {"kms:EncryptionContext:aws:s3:arn": [
        "arn:aws:s3:::ckpt", "arn:aws:s3:::ckpt/*"]}
    assert len(data_key_policy("aws", "1", "us-east-1", "arn:aws:s3:::ckpt", None)["Statement"]) == 1


def test_dev_links_its_scratch_filesystem_with_auto_export() -> None:
    graph = offline_run("dev-aws").graph
    dra = one(graph, "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation", "storage-lustre-checkpoints-link")
    assert dra.inputs["s3"]["autoExportPolicy"] == {"events": ["NEW", "CHANGED", "DELETED"]}
    fs = graph.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")[0].inputs
    assert fs["deploymentType"] == "SCRATCH_2" and fs["fileSystemTypeVersion"] == "2.15"
    assert not {"importPath", "exportPath", "autoImportPolicy"} & set(fs)


@pytest.mark.parametrize("stack_name", ["prod-aws", "dev-aws"])
def test_nodes_accept_lnet_from_the_filesystem(stack_name: str) -> None:
    graph = offline_run(stack_name).graph
    lustre_sg = one(graph, "aws:ec2/securityGroup:SecurityGroup", "storage-lustre-sg")
    rules = [r for r in graph.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
             if r.name.startswith("storage-lustre-clients-in-")]
    assert {(r.inputs["fromPort"], r.inputs["toPort"]) for r in rules} == {(988, 988), (1018, 1023)}
    for r in rules:
        assert r.inputs["ipProtocol"] == "tcp"
        assert lustre_sg.urn in r.dependencies  # the source is the filesystem's group
        # the rule sits on the cluster security group, which every node (and EFA interface) carries
        cluster = graph.of_type("aws:eks/cluster:Cluster")[0]
        assert cluster.urn in r.dependencies
        lt = one(graph, "aws:ec2/launchTemplate:LaunchTemplate", "nodegroup-system-lt")
        assert r.inputs["securityGroupId"] in lt.inputs["vpcSecurityGroupIds"]


def test_filesystem_waits_for_its_lnet_rules() -> None:
    graph = offline_run("prod-aws").graph
    fs = one(graph, "aws:fsx/lustreFileSystem:LustreFileSystem", "storage-lustre")
    self_rules = [r for r in graph.resources if r.name.startswith("storage-lustre-in-self-")
                  or r.name.startswith("storage-lustre-out-self-")]
    assert len(self_rules) == 4 and all(r.urn in fs.dependencies for r in self_rules)


def test_team_pods_reach_the_pod_identity_agent() -> None:
    graph = offline_run("prod-aws").graph
    for team in ("research", "pretraining", "applied"):
        policy = one(graph, "kubernetes:networking.k8s.io/v1:NetworkPolicy",
                     f"tenancy-networkpolicy-{team}-allow-pod-identity-agent").inputs["spec"]
        assert policy["egress"] == [{"to": [{"ipBlock": {"cidr": "169.254.170.23/32"}}],
                                     "ports": [{"protocol": "TCP", "port": 80}]}]


def test_every_team_reads_and_writes_only_its_prefix_through_pod_identity() -> None:
    graph = offline_run("prod-aws").graph
    assoc = {a.inputs["namespace"]: a for a in graph.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
             if a.inputs["serviceAccount"] == "checkpoints"}  # a served model's reader: tests/inference
    assert {"research", "pretraining", "applied"} <= set(assoc)
    roles = {r.name: r for r in graph.of_type("aws:iam/role:Role")}
    for team in ("research", "pretraining", "applied"):
        a = assoc[team]
        assert a.inputs["serviceAccount"] == "checkpoints"
        role = roles[f"data-access-team-{team}-role"]
        assert a.inputs["roleArn"] == f"arn:aws:iam::123456789012:role/prod-train-{team}-ckpt"
        trust = _doc(role, "assumeRolePolicy")["Statement"][0]
        assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
        assert trust["Action"] == ["sts:AssumeRole", "sts:TagSession"]
        policy = _doc(one(graph, "aws:iam/rolePolicy:RolePolicy", f"data-access-team-{team}-policy"), "policy")
        stmts = {s["Sid"]: s for s in policy["Statement"]}
        assert stmts["ListTeamPrefix"]["Condition"] == {"StringLike": {"s3:prefix": [f"{team}/", f"{team}/*"]}}
        assert stmts["ReadWriteTeamObjects"]["Resource"].endswith(f"/{team}/*")
        assert stmts["UseDataKeyThroughS3"]["Resource"].startswith("arn:aws:kms:")
        sa = one(graph, "kubernetes:core/v1:ServiceAccount", f"tenancy-serviceaccount-{team}-checkpoints")
        assert sa.inputs["metadata"]["namespace"] == team
    # No identity reads every team's prefix (the platform reader had no consumer and was removed).
    every = graph.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
    assert not [a for a in every if a.inputs["serviceAccount"] == "checkpoint-reader"]
    assert not [r for r in graph.of_type("aws:iam/rolePolicy:RolePolicy") if r.name == "data-access-platform-policy"]


def test_team_policy_never_reaches_another_prefix() -> None:
    doc = team_checkpoint_policy("arn:aws:s3:::ckpt", "arn:aws:kms:us-east-1:1:key/k", "research", "us-east-1")
    for s in doc["Statement"]:
        resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
        for res in resources:
            assert res in ("arn:aws:s3:::ckpt", "arn:aws:s3:::ckpt/research/*", "arn:aws:kms:us-east-1:1:key/k")
        if s["Sid"] == "UseDataKeyThroughS3":
            assert s["Condition"] == {"StringEquals": {"kms:ViaService": "s3.us-east-1.amazonaws.com"}}


def test_csi_drivers_use_pod_identity_after_the_agent() -> None:
    graph = offline_run("prod-aws").graph
    addons = {a.inputs["addonName"]: a for a in graph.of_type("aws:eks/addon:Addon")}
    agent = addons["eks-pod-identity-agent"]
    for name, account in (("aws-ebs-csi-driver", "ebs-csi-controller-sa"),
                          ("aws-fsx-csi-driver", "fsx-csi-controller-sa")):
        a = addons[name]
        (association,) = a.inputs["podIdentityAssociations"]
        assert association["serviceAccount"] == account and association["roleArn"].startswith("arn:aws:iam::")
        assert "serviceAccountRoleArn" not in a.inputs
    component = next(r for r in graph.resources if r.type == "gpu-cluster:control-plane:EksAddons")
    assert agent.urn in component.dependencies
    for role in graph.of_type("aws:iam/role:Role"):
        trust = _doc(role, "assumeRolePolicy")["Statement"][0]
        assert "Federated" not in trust["Principal"], role.name  # no IRSA anywhere


# --- 4. node health, add-on pins, zones ---------------------------------------------------------


def test_gpu_faults_are_reported_to_node_repair() -> None:
    graph = offline_run("prod-aws").graph
    addons = {a.inputs["addonName"] for a in graph.of_type("aws:eks/addon:Addon")}
    assert "eks-node-monitoring-agent" in addons
    for ng in graph.of_type("aws:eks/nodeGroup:NodeGroup"):
        assert ng.inputs["nodeRepairConfig"] == {"enabled": True}


@pytest.mark.parametrize("stack_name", ["prod-aws", "dev-aws"])
def test_every_addon_runs_its_pinned_version(stack_name: str) -> None:
    graph = offline_run(stack_name).graph
    pins = load_addon_pins("1.35")
    addons = graph.of_type("aws:eks/addon:Addon")
    assert len(addons) >= 6
    for a in addons:
        assert a.inputs["addonVersion"] == pins[a.inputs["addonName"]].version, a.name


def test_gpu_zone_by_id_is_resolved_and_subnets_use_ids() -> None:
    run = offline_run("prod-aws")
    assert run.outputs["gpuAvailabilityZone"] == "us-east-1d"  # the offline placeholder of use1-az4
    gpu = one(run.graph, "aws:ec2/subnet:Subnet", "network-subnet-gpu-a").inputs
    assert gpu["availabilityZoneId"] == "use1-az4" and "availabilityZone" not in gpu
    dev = one(offline_run("dev-aws").graph, "aws:ec2/subnet:Subnet", "network-subnet-gpu-a").inputs
    assert dev["availabilityZone"] == "us-west-2a" and "availabilityZoneId" not in dev
