"""``blueprint audit`` against moto: the deployed account compared with the spec."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from blueprint.acceptance.checks import Check
from blueprint.clouds.aws.audit import run_audit
from components.spec import parse_spec
from tests.conftest import raw_stack_config

REGION = "us-east-1"
LABELS = {"team": "ml-platform", "cost-center": "cc-4100", "owner": "ml-platform-oncall", "environment": "prod",
          "cluster": "prod-train"}


@pytest.fixture
def account(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        yield


def _deploy(public: bool, efa: int, tag_all: bool = True) -> None:
    """What a pulumi up of prod-aws leaves, in the parts the audit reads."""
    ec2 = boto3.client("ec2", region_name=REGION)
    s3 = boto3.client("s3", region_name=REGION)
    eks = boto3.client("eks", region_name=REGION)
    tags = [{"Key": k, "Value": v} for k, v in LABELS.items() if tag_all or k != "cost-center"]
    s3.create_bucket(Bucket="prod-train-ckpt-abc")
    s3.put_bucket_tagging(Bucket="prod-train-ckpt-abc", Tagging={"TagSet": tags})
    s3.put_bucket_versioning(Bucket="prod-train-ckpt-abc", VersioningConfiguration={"Status": "Enabled"})
    s3.put_bucket_encryption(Bucket="prod-train-ckpt-abc", ServerSideEncryptionConfiguration={
        "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms"}}]})
    vpc = ec2.create_vpc(CidrBlock="10.40.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.40.0.0/18")["Subnet"]["SubnetId"]
    eks.create_cluster(name="prod-train", roleArn="arn:aws:iam::123456789012:role/eks",
                       resourcesVpcConfig={"subnetIds": [subnet], "endpointPublicAccess": public,
                                           "endpointPrivateAccess": True,
                                           "publicAccessCidrs": ["0.0.0.0/0"] if public else []})
    interfaces = [{"NetworkCardIndex": i, "DeviceIndex": 0 if i == 0 else 1,
                   "InterfaceType": "efa" if i == 0 else "efa-only"} for i in range(efa)]
    lt = ec2.create_launch_template(LaunchTemplateName="prod-train-h100", LaunchTemplateData={
        "InstanceType": "p5.48xlarge", "NetworkInterfaces": interfaces})["LaunchTemplate"]["LaunchTemplateId"]
    for name in ("prod-train-h100",):
        eks.create_nodegroup(clusterName="prod-train", nodegroupName=name, subnets=[subnet],
                             nodeRole="arn:aws:iam::123456789012:role/node",
                             launchTemplate={"id": lt, "version": "1"})


def audit() -> list[Check]:
    spec = parse_spec(raw_stack_config("prod-aws")["gpu-cluster:spec"], "stacks/Pulumi.prod-aws.yaml")
    return run_audit(spec, lambda n: boto3.client(n, region_name=REGION))  # type: ignore[call-overload]


def by(checks: list[Check], name: str) -> list[Check]:
    return [c for c in checks if c.check == name]


def test_a_deployment_as_the_spec_says(account: None) -> None:
    _deploy(public=False, efa=32)
    checks = audit()
    assert by(checks, "billing-tags")[0].status == "pass"
    assert by(checks, "bucket-protection") == [Check("bucket-protection", "prod-train-ckpt-abc", "pass",
                                                     "SSE-KMS, versioned")]
    assert by(checks, "endpoint-access") == [Check("endpoint-access", "prod-train", "pass", "private endpoint only")]
    assert by(checks, "efa-interfaces")[0] == Check("efa-interfaces", "prod-train-h100", "pass",
                                                    "32 of the 32 EFA interfaces of p5.48xlarge")


def test_drift_is_reported(account: None) -> None:
    _deploy(public=True, efa=1, tag_all=False)
    s3 = boto3.client("s3", region_name=REGION)
    s3.put_bucket_versioning(Bucket="prod-train-ckpt-abc", VersioningConfiguration={"Status": "Suspended"})
    s3.put_bucket_encryption(Bucket="prod-train-ckpt-abc", ServerSideEncryptionConfiguration={
        "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
    checks = audit()
    (tags,) = by(checks, "billing-tags")
    assert tags.status == "fail" and tags.detail == "missing cost-center"
    assert by(checks, "bucket-protection")[0].detail == (
        "default encryption AES256, not SSE-KMS as the stack builds the checkpoint bucket; versioning is off")
    (endpoint,) = by(checks, "endpoint-access")
    assert endpoint.status == "fail" and endpoint.detail == (
        "the public endpoint is on; the spec says private; public access from 0.0.0.0/0, not in the spec's "
        "publicAccessCidrs")
    assert by(checks, "efa-interfaces")[0].detail == "1 of the 32 EFA interfaces of p5.48xlarge"


def test_nothing_deployed_is_cannot_check(account: None) -> None:
    checks = audit()
    assert {c.status for c in checks} == {"cannot-check"}
