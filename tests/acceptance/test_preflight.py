"""``blueprint preflight`` against moto (``mock_aws``): the happy path and each failure. moto does not implement
DescribeCapacityReservations nor EC2's Service Quotas, so those two answer through botocore's Stubber and a
moto backend patched with the real response shape."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from moto.servicequotas.models import ServiceQuotasBackend

from blueprint.acceptance.checks import Check
from blueprint.clouds.aws.preflight import quota_needs, run_preflight
from components.spec import ClusterSpec, parse_spec
from tests.conftest import raw_stack_config

REGION = "us-east-1"
BLOCK = "cr-0a1b2c3d4e5f60718"
BLOCK_END = datetime(2027, 1, 18, 11, 30, tzinfo=UTC)


def spec_of(name: str, change: Callable[[dict[str, Any]], None] | None = None) -> ClusterSpec:
    raw = raw_stack_config(name)["gpu-cluster:spec"]
    if change is not None:
        change(raw)
    return parse_spec(raw, f"stacks/Pulumi.{name}.yaml")


def reservation(**overrides: Any) -> dict[str, Any]:
    """A DescribeCapacityReservations entry as EC2 returns it for a Capacity Block."""
    return {"CapacityReservationId": BLOCK, "InstanceType": "p5.48xlarge", "InstancePlatform": "Linux/UNIX",
            "AvailabilityZone": "us-east-1d", "AvailabilityZoneId": "use1-az4", "Tenancy": "default",
            "TotalInstanceCount": 16, "AvailableInstanceCount": 16, "State": "scheduled",
            "StartDate": datetime(2027, 1, 4, 11, 30, tzinfo=UTC), "EndDate": BLOCK_END, "EndDateType": "limited",
            "InstanceMatchCriteria": "targeted", "ReservationType": "capacity-block", **overrides}


class _Ec2:
    """moto's EC2 client, with DescribeCapacityReservations answered by a stubbed client."""

    def __init__(self, real: Any, reservations: list[dict[str, Any]]) -> None:
        self.real = real
        self.stubbed = boto3.client("ec2", region_name=REGION)
        self.stubber = Stubber(self.stubbed)
        self.stubber.add_response("describe_capacity_reservations", {"CapacityReservations": reservations},
                                  {"CapacityReservationIds": [BLOCK]})
        self.stubber.activate()

    def describe_capacity_reservations(self, **kwargs: Any) -> Any:
        return self.stubbed.describe_capacity_reservations(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, float]]:
    """moto for everything, and the EC2 vCPU quotas this account has (moto serves only VPC quotas)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    quotas = {"L-1216C47A": 640.0, "L-417A185B": 1536.0, "L-7212CCBC": 0.0, "L-DB2E81BA": 64.0,
              "L-3819A6DF": 64.0, "L-34B43A08": 64.0}
    original = ServiceQuotasBackend.get_service_quota

    def get_service_quota(self: Any, service_code: str, quota_code: str) -> dict[str, Any]:
        if service_code != "ec2":
            return original(self, service_code, quota_code)
        return {"ServiceCode": "ec2", "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
                "QuotaArn": f"arn:aws:servicequotas:{REGION}:123456789012:ec2/{quota_code}",
                "QuotaCode": quota_code, "QuotaName": quota_code, "Value": quotas[quota_code], "Unit": "None",
                "Adjustable": True, "GlobalQuota": False}
    monkeypatch.setattr(ServiceQuotasBackend, "get_service_quota", get_service_quota)
    with mock_aws():
        yield quotas


def run(spec: ClusterSpec, reservations: list[dict[str, Any]] | None = None) -> list[Check]:
    ec2 = _Ec2(boto3.client("ec2", region_name=REGION), reservations if reservations is not None
               else [reservation()])

    def client(name: str) -> Any:
        return ec2 if name == "ec2" else boto3.client(name, region_name=REGION)  # type: ignore[call-overload]
    return run_preflight(spec, client)


def by(checks: list[Check], check: str) -> list[Check]:
    return [c for c in checks if c.check == check]


def test_prod_passes_every_check_it_can_make(aws: dict[str, float]) -> None:
    checks = run(spec_of("prod-aws"))
    assert [c.status for c in checks if c.status == "fail"] == []
    assert {c.check for c in checks if c.status == "pass"} == {
        "instance-type-offered", "catalog-matches-ec2", "vcpu-quota", "reservation", "bucket-prefix-free",
        "deployer"}
    (gpu, quota) = [c for c in by(checks, "vcpu-quota") if c.status == "pass"]
    assert quota.detail == "112 vCPUs at max size (system, cpu) against a quota of 640"  # 6 x 8 + 2 x 32
    # The served model's on-demand group counts against the G and VT quota at its max size (4 x g6e.xlarge's 4
    # vCPUs: the node autoscaler may grow it to four).
    assert (gpu.subject, gpu.detail) == ("Running On-Demand G and VT instances (L-DB2E81BA)",
                                         "16 vCPUs at max size (l40s) against a quota of 64")
    (p5,) = [c for c in by(checks, "catalog-matches-ec2") if c.subject == "p5.48xlarge"]
    assert p5.detail == "GPUs 8, EFA interfaces 32, NVMe disks 8"


def test_a_type_not_offered_in_the_gpu_zone(aws: dict[str, float]) -> None:
    """moto's offering data: p4de.24xlarge is sold in usw2-az1..az3, not usw2-az4."""
    def to_az4(raw: dict[str, Any]) -> None:
        raw["aws"]["gpuAvailabilityZoneId"] = "usw2-az4"
        for sn in raw["aws"]["network"]["subnets"]:
            if sn["role"] == "gpu":
                sn["availabilityZoneId"] = "usw2-az4"
    spec = spec_of("byo-aws", to_az4)
    checks = [c for c in run_preflight(spec, lambda n: boto3.client(n, region_name="us-west-2"))  # type: ignore[call-overload]
              if c.check == "instance-type-offered" and "a100" in c.subject]
    assert checks == [Check("instance-type-offered", "nodeGroups.a100 (p4de.24xlarge)", "fail",
                            "not offered in usw2-az4 (availability-zone-id); offered here: none of the spec zones")]


def test_a_quota_too_low(aws: dict[str, float]) -> None:
    aws["L-1216C47A"] = 32.0
    (quota,) = [c for c in by(run(spec_of("prod-aws")), "vcpu-quota") if "L-1216C47A" in c.subject]
    assert quota.status == "fail"
    assert quota.detail == ("112 vCPUs at max size (system, cpu) against a quota of 32: request an increase before "
                            "pulumi up")


def test_quota_needs_by_family_and_market() -> None:
    needs = quota_needs(spec_of("dev-aws"))
    assert set(needs) == {("G", "spot"), ("standard", "spot")}
    assert needs[("G", "spot")] == (2 * 4, ["l4"])  # 2 x g6.xlarge (4 vCPUs)


@pytest.mark.parametrize(("change", "message"), [
    ({"AvailabilityZoneId": "use1-az6", "AvailabilityZone": "us-east-1f"}, "in use1-az6, not in the GPU zone use1-az4"),
    ({"State": "expired"}, "state expired (needs active or scheduled)"),
    ({"TotalInstanceCount": 8}, "8 instances, fewer than maxSize 16; 8 instances, the spec records 16"),
    ({"InstanceType": "p5e.48xlarge"}, "for p5e.48xlarge, not p5.48xlarge"),
    ({"EndDate": datetime(2027, 1, 11, 11, 30, tzinfo=UTC)},
     "ends 2027-01-11T11:30:00Z, the spec says 2027-01-18T11:30:00Z"),
    ({"StartDate": datetime(2027, 1, 5, 11, 30, tzinfo=UTC)},
     "starts 2027-01-05T11:30:00Z, the spec says 2027-01-04T11:30:00Z"),
    ({"ReservationType": "default"}, "a default reservation, not a Capacity Block"),
])
def test_a_reservation_that_does_not_fit(aws: dict[str, float], change: dict[str, Any], message: str) -> None:
    (check,) = by(run(spec_of("prod-aws"), [reservation(**change)]), "reservation")
    assert check.status == "fail" and check.detail == f"{BLOCK}: {message}"


def test_a_missing_reservation(aws: dict[str, float]) -> None:
    (check,) = by(run(spec_of("prod-aws"), []), "reservation")
    assert (check.status, check.detail) == ("fail", f"{BLOCK} does not exist here")


def test_the_bucket_prefix_of_an_earlier_stack(aws: dict[str, float]) -> None:
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="prod-train-ckpt-20260101abcdef")
    (check,) = by(run(spec_of("prod-aws")), "bucket-prefix-free")
    assert check.status == "fail" and check.detail.startswith("prod-train-ckpt-20260101abcdef already use the prefix")


def test_the_existing_network_and_bucket_of_byo(aws: dict[str, float]) -> None:
    ec2 = boto3.client("ec2", region_name="us-west-2")
    vpc = ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
    spec_raw = raw_stack_config("byo-aws")["gpu-cluster:spec"]
    spec_raw["aws"]["network"]["existing"]["vpcId"] = vpc
    made = ec2.create_subnet(VpcId=vpc, CidrBlock="10.20.0.0/19", AvailabilityZoneId="usw2-az2")["Subnet"]
    spec_raw["aws"]["network"]["subnets"][0]["id"] = made["SubnetId"]
    spec = parse_spec(spec_raw, "stacks/Pulumi.byo-aws.yaml")
    checks = run_preflight(spec, lambda n: boto3.client(n, region_name="us-west-2"))  # type: ignore[call-overload]
    net = by(checks, "existing-network")
    assert net[0] == Check("existing-network", vpc, "pass", "exists with 10.20.0.0/16")
    assert net[1].status == "pass" and net[1].subject.startswith("subnets.gpu-b")
    assert net[2].status == "cannot-check"  # subnet-0123456789abcdef1 does not exist in this account
    (bucket,) = by(checks, "existing-bucket")
    assert (bucket.status, bucket.detail) == ("fail", "does not exist")
    boto3.client("s3", region_name="us-west-2").create_bucket(
        Bucket="example-ml-checkpoints-usw2", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    checks = run_preflight(spec, lambda n: boto3.client(n, region_name="us-west-2"))  # type: ignore[call-overload]
    (bucket,) = by(checks, "existing-bucket")
    assert (bucket.status, bucket.detail) == (
        "fail", "exists but versioning is off: checkpoints can be overwritten")


def test_cli_json_and_exit_status(aws: dict[str, float], capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from blueprint.cli import main
    from blueprint.clouds.aws import preflight

    real = preflight.run_preflight
    monkeypatch.setattr(preflight, "run_preflight",
                        lambda spec, client: real(spec, lambda n: _Ec2(client(n), [reservation()])
                                                  if n == "ec2" else client(n)))
    assert main(["preflight", "prod-aws", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["passed"] is True and {c["check"] for c in doc["checks"]} >= {"reservation", "vcpu-quota"}
    aws["L-1216C47A"] = 8.0
    assert main(["preflight", "prod-aws"]) == 1
    assert "FAIL          vcpu-quota" in capsys.readouterr().out


# --- the account cannot be read at all: never "0 pass, 0 fail, 7 cannot-check" and exit 0 -------------------------


@pytest.fixture
def no_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """No credentials anywhere: an empty home, no AWS variables, no instance metadata to ask."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")


@pytest.mark.parametrize("command", ["preflight", "audit"])
@pytest.mark.parametrize(("env", "message"), [
    ({}, "error: no AWS credentials were found (environment variables, AWS_PROFILE, the shared credentials file, "
         "SSO or an instance role)\n"),
    ({"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE"},
     "error: Partial credentials found in env, missing: AWS_SECRET_ACCESS_KEY\n"),
    ({"AWS_PROFILE": "no-such-profile"}, "error: The config profile (no-such-profile) could not be found\n"),
    ({"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b", "AWS_ENDPOINT_URL": "not a url"},
     "error: Invalid endpoint: not a url: check AWS_ENDPOINT_URL and the endpoint settings of the profile\n"),
])
def test_credentials_and_endpoints_that_cannot_work_are_input_errors(
        no_aws: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str,
        env: dict[str, str], message: str) -> None:
    from blueprint.cli import main

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert main([command, "prod-aws"]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", message)


def test_an_endpoint_that_does_not_answer_is_an_input_error(no_aws: None, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from blueprint.cli import main

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "a")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "b")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # the discard port: nothing listens
    assert main(["preflight", "prod-aws"]) == 2
    err = capsys.readouterr().err
    assert err.startswith('error: the AWS endpoint does not answer (Could not connect to the endpoint URL: '
                          '"http://127.0.0.1:9/"); check AWS_ENDPOINT_URL, the proxy and the network')


def test_refused_credentials_stop_the_run(aws: dict[str, float]) -> None:
    from botocore.exceptions import ClientError

    from blueprint.acceptance.checks import AccountAccessError
    from blueprint.clouds.aws.preflight import guard

    def refused() -> list[Check]:
        raise ClientError({"Error": {"Code": "InvalidClientTokenId", "Message": "The security token included in "
                                     "the request is invalid."}}, "DescribeInstanceTypeOfferings")
    with pytest.raises(AccountAccessError, match=r"^AWS refused the credentials \(InvalidClientTokenId\)"):
        guard("instance-type-offered", "node groups", refused)

    def denied() -> list[Check]:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "GetServiceQuota")
    assert guard("vcpu-quota", "P", denied) == [Check("vcpu-quota", "P", "cannot-check", "AccessDenied: "
                                                       "An error occurred (AccessDenied) when calling the "
                                                       "GetServiceQuota operation: no")]


def test_nothing_checked_is_not_a_pass(aws: dict[str, float], capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Every check cannot-check: exit 4, never 0; --strict makes any cannot-check exit 4."""
    from blueprint.cli import main
    from blueprint.clouds.aws import preflight

    unknown = [Check("reservation", "nodeGroups.h100", "cannot-check", "AccessDenied")] * 7
    monkeypatch.setattr(preflight, "run_preflight", lambda spec, client: unknown)
    assert main(["preflight", "prod-aws"]) == 4
    out, err = capsys.readouterr()
    assert out.endswith("preflight: 0 pass, 0 fail, 7 cannot-check\n")
    assert err == ("error: preflight: nothing could be checked (7 cannot-check); a gate must not pass on that: see "
                   "the reasons above\n")
    mixed = [Check("deployer", "r", "pass", "ok"), *unknown[:1]]
    monkeypatch.setattr(preflight, "run_preflight", lambda spec, client: mixed)
    assert main(["preflight", "prod-aws"]) == 0
    assert main(["preflight", "prod-aws", "--strict"]) == 4
    assert capsys.readouterr().err == "error: preflight --strict: 1 check(s) could not be made\n"
