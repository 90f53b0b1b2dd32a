"""``blueprint audit`` on GCP stacks against recorded API answers: what ``pulumi up`` of prod-gcp and dev-gcp
leaves passes, and each drift fails its check."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from blueprint.acceptance.checks import Check
from blueprint.clouds.gcp.audit import run_gcp_audit
from components.spec import parse_spec
from tests.acceptance.gcp_recorded import RecordedGcp, recorded
from tests.conftest import raw_stack_config

PROD, DEV = "acme-ml-prod", "acme-ml-dev"
PROD_CLUSTER = "container.clusters.get.prod-train-gke"
DEV_CLUSTER = "container.clusters.get.dev-gpu-gke"
PROD_BUCKET = "storage.buckets.get.acme-ml-prod-prod-train-gke-checkpoints"


def audit(name: str, api: RecordedGcp) -> list[Check]:
    spec = parse_spec(raw_stack_config(name)["gpu-cluster:spec"], f"stacks/Pulumi.{name}.yaml")
    return run_gcp_audit(spec, api)


def by(checks: list[Check], name: str) -> list[Check]:
    return [c for c in checks if c.check == name]


def prod(change: Callable[[RecordedGcp], Any] | None = None) -> list[Check]:
    api = recorded(PROD, deployed=True)
    if change is not None:
        change(api)
    return audit("prod-gcp", api)


def dev(change: Callable[[RecordedGcp], Any] | None = None) -> list[Check]:
    api = recorded(DEV, deployed=True)
    if change is not None:
        change(api)
    return audit("dev-gcp", api)


def node_pool(cluster: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in cluster["nodePools"] if p["name"] == name)


def test_prod_as_the_spec_says() -> None:
    checks = prod()
    assert [c for c in checks if c.status != "pass"] == []
    assert by(checks, "billing-labels") == [Check(
        "billing-labels", "prod-train-gke", "pass",
        "7 resources carry every billing label (cluster prod-train-gke, node pool system, node pool h100, node pool "
        "cpu, node pool l4, bucket "
        "acme-ml-prod-prod-train-gke-checkpoints, Lustre prod-train-gke-lustre)")]
    assert by(checks, "bucket-protection") == [Check(
        "bucket-protection", "acme-ml-prod-prod-train-gke-checkpoints", "pass",
        "public access prevented, uniform access, versioned, soft delete 7 days, CMEK")]
    assert by(checks, "endpoint-access") == [Check(
        "endpoint-access", "prod-train-gke", "pass",
        "private IP endpoint only; authorized networks none; DNS endpoint open to IAM-authorized callers")]
    assert by(checks, "node-pools") == [Check("node-pools", "system", "pass", "n2-standard-16, on-demand"),
                                        Check("node-pools", "h100", "pass", "a3-megagpu-8g, reservation"),
                                        Check("node-pools", "cpu", "pass", "n2-standard-16, on-demand"),
                                        Check("node-pools", "l4", "pass", "g2-standard-8, on-demand")]
    assert by(checks, "gpu-networks") == [Check("gpu-networks", "h100", "pass",
                                                "8 of the 8 additional networks of a3-megagpu-8g (TCPXO)")]


def test_dev_as_the_spec_says() -> None:
    checks = dev()
    assert [c for c in checks if c.status != "pass"] == []
    assert by(checks, "endpoint-access")[0].detail == (
        "public IP endpoint; authorized networks 203.0.113.0/24; DNS endpoint internal only")
    assert by(checks, "bucket-protection")[0].detail == (
        "public access prevented, uniform access, versioned, soft delete 0 days, CMEK")
    assert by(checks, "gpu-networks") == []  # g2 has no GPU NICs


def test_missing_billing_labels() -> None:
    def drift(api: RecordedGcp) -> None:
        api.edit(PROD_CLUSTER, lambda c: node_pool(c, "h100")["config"]["resourceLabels"].pop("cost-center"))
        api.edit("lustre.instances.get.prod-train-gke-lustre", lambda i: i["labels"].pop("owner"))
    assert by(prod(drift), "billing-labels") == [
        Check("billing-labels", "node pool h100", "fail", "missing cost-center"),
        Check("billing-labels", "Lustre prod-train-gke-lustre", "fail", "missing owner")]


def test_an_existing_lustre_instance_s_labels_stay_its_owner_s() -> None:
    """gcp.storage.filesystem.existing: the audit reads no instance the stack did not create (as for an existing
    bucket), so its labels are not asked for."""
    raw = raw_stack_config("prod-gcp")["gpu-cluster:spec"]
    raw["gcp"]["storage"]["filesystem"]["existing"] = {"name": "shared-lustre", "location": "us-central1-a",
                                                       "ip": "10.90.0.4", "filesystem": "ckpt"}
    checks = run_gcp_audit(parse_spec(raw, "stacks/Pulumi.prod-gcp.yaml"), recorded(PROD, deployed=True))
    assert by(checks, "billing-labels") == [Check(
        "billing-labels", "prod-train-gke", "pass",
        "6 resources carry every billing label (cluster prod-train-gke, node pool system, node pool h100, node pool "
        "cpu, node pool l4, bucket "
        "acme-ml-prod-prod-train-gke-checkpoints)")]


def test_an_unprotected_bucket() -> None:
    def drift(bucket: dict[str, Any]) -> None:
        bucket["iamConfiguration"]["publicAccessPrevention"] = "inherited"
        bucket["iamConfiguration"]["uniformBucketLevelAccess"]["enabled"] = False
        bucket["versioning"]["enabled"] = False
        bucket["softDeletePolicy"]["retentionDurationSeconds"] = "0"
        del bucket["encryption"]
    (check,) = by(prod(lambda api: api.edit(PROD_BUCKET, drift)), "bucket-protection")
    assert check.status == "fail"
    assert check.detail == (
        "public access prevention is inherited, not enforced; uniform bucket-level access is off: object ACLs can "
        "grant access; versioning is off and soft delete too: an overwritten checkpoint is gone; soft delete 0 days, "
        "the spec says 7; default key none (Google-managed), not the stack's CMEK projects/acme-ml-prod/locations/"
        "us-central1/keyRings/prod-train-gke-keys/cryptoKeys/prod-train-gke-data")


def test_a_control_plane_more_open_than_the_spec() -> None:
    def drift(cluster: dict[str, Any]) -> None:
        ip = cluster["controlPlaneEndpointsConfig"]["ipEndpointsConfig"]
        ip["enablePublicEndpoint"] = True
        ip["authorizedNetworksConfig"] = {"enabled": True, "gcpPublicCidrsAccessEnabled": True,
                                          "cidrBlocks": [{"displayName": "office", "cidrBlock": "198.51.100.0/24"}]}
    (check,) = by(prod(lambda api: api.edit(PROD_CLUSTER, drift)), "endpoint-access")
    assert (check.status, check.detail) == (
        "fail", "the public IP endpoint is on; the spec says private; authorized networks 198.51.100.0/24 are not in "
                "the spec's authorizedNetworks or runnerCidrs; every Google Cloud public IP may reach the endpoint "
                "(gcpPublicCidrsAccessEnabled)")

    def open_to_all(cluster: dict[str, Any]) -> None:
        cluster["controlPlaneEndpointsConfig"]["ipEndpointsConfig"]["authorizedNetworksConfig"]["enabled"] = False
    (check,) = by(dev(lambda api: api.edit(DEV_CLUSTER, open_to_all)), "endpoint-access")
    assert check.detail == "the public IP endpoint takes every address (authorized networks not enforced)"


def test_the_dns_endpoint_against_the_deployer() -> None:
    def closed(cluster: dict[str, Any]) -> None:
        cluster["controlPlaneEndpointsConfig"]["dnsEndpointConfig"]["allowExternalTraffic"] = False
    (check,) = by(prod(lambda api: api.edit(PROD_CLUSTER, closed)), "endpoint-access")
    assert (check.status, check.detail) == (
        "fail", "the DNS endpoint refuses external traffic: the deployer (apiAccess dns-endpoint) cannot reach the API")

    def opened(cluster: dict[str, Any]) -> None:
        cluster["controlPlaneEndpointsConfig"]["dnsEndpointConfig"]["allowExternalTraffic"] = True
    (check,) = by(dev(lambda api: api.edit(DEV_CLUSTER, opened)), "endpoint-access")
    assert check.detail == ("the DNS endpoint takes traffic from anywhere IAM allows; the spec's deployer does not "
                            "use it")


def test_the_legacy_endpoint_fields_when_the_new_ones_are_absent() -> None:
    """Clusters that report only privateClusterConfig and masterAuthorizedNetworksConfig are read from them."""
    def legacy(cluster: dict[str, Any]) -> None:
        del cluster["controlPlaneEndpointsConfig"]["ipEndpointsConfig"]
        cluster["privateClusterConfig"]["enablePrivateEndpoint"] = False
        cluster["masterAuthorizedNetworksConfig"]["cidrBlocks"] = [{"cidrBlock": "0.0.0.0/0"}]
    (check,) = by(prod(lambda api: api.edit(PROD_CLUSTER, legacy)), "endpoint-access")
    assert check.detail == ("the public IP endpoint is on; the spec says private; authorized networks 0.0.0.0/0 are "
                            "not in the spec's authorizedNetworks or runnerCidrs")


def test_node_pools_that_differ_from_the_spec() -> None:
    def drift(cluster: dict[str, Any]) -> None:
        h100 = node_pool(cluster, "h100")
        h100["config"]["reservationAffinity"] = {"consumeReservationType": "ANY_RESERVATION"}
        h100["networkConfig"]["additionalNodeNetworkConfigs"] = h100["networkConfig"][
            "additionalNodeNetworkConfigs"][:1]
        node_pool(cluster, "system")["config"]["machineType"] = "n2-standard-8"
        cluster["nodePools"].append({**node_pool(cluster, "system"), "name": "debug"})
    checks = prod(lambda api: api.edit(PROD_CLUSTER, drift))
    assert by(checks, "node-pools") == [
        Check("node-pools", "system", "fail", "machine type n2-standard-8, the spec says n2-standard-16"),
        Check("node-pools", "h100", "fail", "reservation affinity ANY_RESERVATION, not the specific reservation "
                                            "projects/acme-ml-prod/reservations/a3mega-prod-16"),
        Check("node-pools", "cpu", "pass", "n2-standard-16, on-demand"),
        Check("node-pools", "l4", "pass", "g2-standard-8, on-demand"),
        Check("node-pools", "prod-train-gke", "fail", "debug not in the spec: made outside the stack?")]
    assert by(checks, "gpu-networks") == [Check("gpu-networks", "h100", "fail",
                                                "1 of the 8 additional networks of a3-megagpu-8g (TCPXO)")]

    def spot_off(cluster: dict[str, Any]) -> None:
        node_pool(cluster, "l4")["config"].pop("spot")
        cluster["nodePools"] = [p for p in cluster["nodePools"] if p["name"] != "system"]
    assert by(dev(lambda api: api.edit(DEV_CLUSTER, spot_off)), "node-pools") == [
        Check("node-pools", "system", "fail", "not in the cluster"),
        Check("node-pools", "l4", "fail", "not on Spot VMs, as the spec says")]


def test_nothing_deployed_is_cannot_check() -> None:
    checks = audit("prod-gcp", recorded(PROD).drop(PROD_CLUSTER).drop("lustre.instances.get.prod-train-gke-lustre"))
    assert checks and {c.status for c in checks} == {"cannot-check"}
    (cluster, *_) = checks
    assert cluster.detail == ('NotFound (404): container.projects.locations.clusters.get {"name": '
                              '"projects/acme-ml-prod/locations/us-central1/clusters/prod-train-gke"}: not recorded: '
                              "is the stack deployed in acme-ml-prod?")
    assert all(c.detail.endswith("is the stack deployed in acme-ml-prod?") for c in checks)


def test_cli_audit_exit_status(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                               tmp_path: Path) -> None:
    from blueprint.cli import main
    from blueprint.clouds.gcp import api as gcp_api

    api = recorded(PROD, deployed=True)
    monkeypatch.setattr(gcp_api, "gcp_session", lambda project: api)
    # No kubeconfig: the alert Secrets in the cluster are skipped, and counted so (test_audit_alert_secrets.py).
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    assert main(["audit", "prod-gcp"]) == 0
    assert capsys.readouterr().out.endswith("audit: 8 pass, 0 fail, 1 cannot-check\n")
    api.edit(PROD_BUCKET, lambda b: b["iamConfiguration"].update(publicAccessPrevention="inherited"))
    assert main(["audit", "prod-gcp"]) == 1
    assert "FAIL          bucket-protection" in capsys.readouterr().out
