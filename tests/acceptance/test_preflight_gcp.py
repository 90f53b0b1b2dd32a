"""``blueprint preflight`` on GCP stacks against recorded API answers (tests/acceptance/gcp_recorded.py): the shipped
stacks pass, and each check fails on the answer that should fail it. No test reaches a network."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from blueprint.acceptance.checks import AccountAccessError, Check
from blueprint.clouds.gcp.api import IMPERSONATE
from blueprint.clouds.gcp.preflight import gpu_quota_needs, run_gcp_preflight, stack_network_names
from components.spec import ClusterSpec, parse_spec
from tests.acceptance.gcp_recorded import RecordedGcp, recorded
from tests.conftest import raw_stack_config

PROD, DEV = "acme-ml-prod", "acme-ml-dev"
RESERVATION = "compute.reservations.get.a3mega-prod-16"
PROD_REGION = "compute.regions.get.us-central1"


def spec_of(name: str, change: Callable[[dict[str, Any]], None] | None = None) -> ClusterSpec:
    raw = raw_stack_config(name)["gpu-cluster:spec"]
    if change is not None:
        change(raw)
    return parse_spec(raw, f"stacks/Pulumi.{name}.yaml")


def by(checks: list[Check], name: str) -> list[Check]:
    return [c for c in checks if c.check == name]


def prod(api: RecordedGcp | None = None, change: Callable[[dict[str, Any]], None] | None = None) -> list[Check]:
    return run_gcp_preflight(spec_of("prod-gcp", change), api or recorded(PROD))


def dev(api: RecordedGcp | None = None, change: Callable[[dict[str, Any]], None] | None = None) -> list[Check]:
    return run_gcp_preflight(spec_of("dev-gcp", change), api or recorded(DEV))


def pool(raw: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in raw["gcp"]["nodePools"] if p["name"] == name)


# --- the shipped stacks -------------------------------------------------------------------------------------------


def test_prod_passes_every_check_it_can_make() -> None:
    checks = prod()
    assert [c for c in checks if c.status == "fail"] == []
    assert {c.check for c in checks if c.status == "pass"} == {
        "apis-enabled", "machine-type-offered", "catalog-matches-compute", "reservation", "network-names-free",
        "bucket-name-free", "deployer", "gpu-quota"}
    assert by(checks, "reservation") == [Check(
        "reservation", "nodePools.h100", "pass",
        "a3mega-prod-16: READY, 16 x a3-megagpu-8g in us-central1-a (0 in use), specific reservation required")]
    assert by(checks, "machine-type-offered")[1] == Check(
        "machine-type-offered", "nodePools.h100 (a3-megagpu-8g)", "pass",
        "offered in us-central1-a with nvidia-h100-mega-80gb (up to 8 per VM)")
    (a3,) = [c for c in by(checks, "catalog-matches-compute") if c.subject == "a3-megagpu-8g"]
    assert a3.detail == "208 vCPUs, 1872 GiB, GPUs 8 x nvidia-h100-mega-80gb, bundled Local SSDs 16"
    # The reservation pool needs no quota of its own; the served model's on-demand l4 pool does, at the 4 nodes it may
    # grow to with its replicas.
    assert by(checks, "gpu-quota") == [
        Check("gpu-quota", "NVIDIA_L4_GPUS (us-central1)", "pass", "4 GPUs at max size (l4) against a limit of 8"),
        Check("gpu-quota", "GPUS_ALL_REGIONS (acme-ml-prod)", "pass",
              "4 GPUs at max size (l4) against a limit of 128"),
        Check("gpu-quota", "h100", "cannot-check",
              "reservation pools run on the reservation's VMs, whose quota was taken when it was made; the "
              "reservation check covers them")]
    assert by(checks, "apis-enabled")[0].detail == "the 12 APIs the stack uses are enabled"
    assert by(checks, "bucket-name-free") == [  # the checkpoint bucket and the data bucket (gcp.storage.buckets)
        Check("bucket-name-free", f"acme-ml-prod-prod-train-gke-{what}", "pass",
              "no bucket has the name the stack gives its own") for what in ("checkpoints", "data")]
    assert by(checks, "deployer") == [Check(
        "deployer", "pulumi-deployer@acme-ml-prod.iam.gserviceaccount.com", "pass",
        "these credentials can impersonate it; pulumi up reaches the control plane through its DNS endpoint, "
        "authorized by IAM")]


def test_dev_checks_its_spot_gpu_quota() -> None:
    checks = dev()
    assert [c for c in checks if c.status != "pass"] == []
    assert by(checks, "gpu-quota") == [
        Check("gpu-quota", "PREEMPTIBLE_NVIDIA_L4_GPUS (us-central1)", "pass",
              "2 GPUs at max size (l4) against a limit of 8"),
        Check("gpu-quota", "GPUS_ALL_REGIONS (acme-ml-dev)", "pass", "2 GPUs at max size (l4) against a limit of 4")]


def test_the_network_names_are_the_ones_the_program_creates() -> None:
    """Every network the prod-gcp graph creates is one preflight looks for (and no other)."""
    from blueprint.graph.engine import run_program
    from blueprint.graph.stackfile import load_stack

    stack = load_stack("prod-gcp")
    graph = run_program(stack.name, stack.config, stack.region).graph
    created = sorted(r.inputs["name"] for r in graph.resources if r.type == "gcp:compute/network:Network")
    assert created == sorted(stack_network_names(stack.spec))
    assert len(created) == 9  # the cluster VPC and 8 TCPXO GPU VPCs


# --- each check fails ---------------------------------------------------------------------------------------------


def test_a_disabled_api() -> None:
    def disable(response: dict[str, Any]) -> None:
        for s in response["services"]:
            if s["config"]["name"] in ("lustre.googleapis.com", "container.googleapis.com"):
                s["state"] = "DISABLED"
    (check,) = by(prod(recorded(PROD).edit("serviceusage.services.batchGet", disable)), "apis-enabled")
    assert check.status == "fail"
    assert check.detail == (
        "container.googleapis.com, lustre.googleapis.com not enabled: pulumi up enables them as the deployer (which "
        "needs roles/serviceusage.serviceUsageAdmin); enable them now to check the rest: gcloud services enable "
        "container.googleapis.com lustre.googleapis.com --project acme-ml-prod")


def test_a_machine_type_the_zone_does_not_offer() -> None:
    checks = prod(recorded(PROD).drop("compute.machineTypes.get.a3-megagpu-8g"))
    (h100,) = [c for c in by(checks, "machine-type-offered") if "h100" in c.subject]
    assert h100 == Check("machine-type-offered", "nodePools.h100 (a3-megagpu-8g)", "fail",
                         "us-central1-a does not offer a3-megagpu-8g (machineTypes.get: not found): choose a zone "
                         "that does (gcloud compute machine-types list --filter=name=<type>)")
    assert [c.subject for c in by(checks, "catalog-matches-compute")] == ["g2-standard-8", "n2-standard-16"]


def test_a_gpu_the_zone_does_not_offer() -> None:
    checks = prod(recorded(PROD).drop("compute.acceleratorTypes.get.nvidia-h100-mega-80gb"))
    (h100,) = [c for c in by(checks, "machine-type-offered") if "h100" in c.subject]
    assert (h100.status, h100.detail) == ("fail", "us-central1-a offers a3-megagpu-8g but not its GPU "
                                                  "nvidia-h100-mega-80gb (acceleratorTypes.get: not found)")


def test_the_catalog_against_compute_engine() -> None:
    def change(response: dict[str, Any]) -> None:
        response["guestCpus"] = 224
        response["bundledLocalSsds"]["partitionCount"] = 32
    checks = prod(recorded(PROD).edit("compute.machineTypes.get.a3-megagpu-8g", change))
    (a3,) = [c for c in by(checks, "catalog-matches-compute") if c.subject == "a3-megagpu-8g"]
    assert a3.status == "fail"
    assert a3.detail == ("components/catalog/gcp_machines.yaml: machines.a3-megagpu-8g.vcpu: catalog 208, Compute "
                         "Engine 224; components/catalog/gcp_machines.yaml: machines.a3-megagpu-8g.local_ssd.count: "
                         "catalog 16, Compute Engine 32")


def _quota(api: RecordedGcp, metric: str, limit: float, usage: float = 0) -> RecordedGcp:
    def change(response: dict[str, Any]) -> None:
        for q in response["quotas"]:
            if q["metric"] == metric:
                q["limit"], q["usage"] = limit, usage
    return api.edit("compute.regions.get.us-central1", change)


def test_a_spot_gpu_quota_too_low() -> None:
    (quota, _) = by(dev(_quota(recorded(DEV), "PREEMPTIBLE_NVIDIA_L4_GPUS", 1)), "gpu-quota")
    assert quota == Check("gpu-quota", "PREEMPTIBLE_NVIDIA_L4_GPUS (us-central1)", "fail",
                          "2 GPUs at max size (l4) against a limit of 1: request an increase before pulumi up")


def test_without_preemptible_quota_spot_counts_against_the_standard_one() -> None:
    api = _quota(recorded(DEV), "PREEMPTIBLE_NVIDIA_L4_GPUS", 0)
    (quota, _) = by(dev(api), "gpu-quota")
    assert quota == Check("gpu-quota", "NVIDIA_L4_GPUS (us-central1)", "pass",
                          "2 GPUs at max size (l4) against a limit of 4 (no PREEMPTIBLE_NVIDIA_L4_GPUS quota here: l4 "
                          "count against this one)")
    (quota, _) = by(dev(_quota(api, "NVIDIA_L4_GPUS", 1, usage=1)), "gpu-quota")
    assert (quota.status, quota.detail) == (
        "fail", "2 GPUs at max size (l4) against a limit of 1, 1 in use now (no PREEMPTIBLE_NVIDIA_L4_GPUS quota here: "
                "l4 count against this one): request an increase before pulumi up")


def test_on_demand_h100_mega_quota_per_family() -> None:
    """prod's pool moved off its reservation to on-demand: 16 x 8 H100 Mega against NVIDIA_H100_MEGA_GPUS, and with
    the served model's 4 L4s (at its pool's max size) above the project's all-regions limit of 128."""
    def on_demand(raw: dict[str, Any]) -> None:
        pool(raw, "h100")["capacity"] = {"type": "on-demand"}
    assert gpu_quota_needs(spec_of("prod-gcp", on_demand)) == {("NVIDIA_H100_MEGA_GPUS", False): (128, ["h100"]),
                                                               ("NVIDIA_L4_GPUS", False): (4, ["l4"])}
    checks = by(prod(change=on_demand), "gpu-quota")
    assert checks == [Check("gpu-quota", "NVIDIA_H100_MEGA_GPUS (us-central1)", "pass",
                            "128 GPUs at max size (h100) against a limit of 128"),
                      Check("gpu-quota", "NVIDIA_L4_GPUS (us-central1)", "pass",
                            "4 GPUs at max size (l4) against a limit of 8"),
                      Check("gpu-quota", "GPUS_ALL_REGIONS (acme-ml-prod)", "fail",
                            "132 GPUs at max size (h100, l4) against a limit of 128: request an increase before "
                            "pulumi up")]
    low = _quota(recorded(PROD), "NVIDIA_H100_MEGA_GPUS", 64)
    assert by(prod(low, on_demand), "gpu-quota")[0].status == "fail"


def test_the_project_wide_gpu_quota() -> None:
    def low(response: dict[str, Any]) -> None:
        next(q for q in response["quotas"] if q["metric"] == "GPUS_ALL_REGIONS")["limit"] = 1
    (_, everywhere) = by(dev(recorded(DEV).edit("compute.projects.get", low)), "gpu-quota")
    assert everywhere == Check("gpu-quota", "GPUS_ALL_REGIONS (acme-ml-dev)", "fail",
                               "2 GPUs at max size (l4) against a limit of 1: request an increase before pulumi up")

    def none(response: dict[str, Any]) -> None:
        response["quotas"] = [q for q in response["quotas"] if q["metric"] != "GPUS_ALL_REGIONS"]
    assert len(by(dev(recorded(DEV).edit("compute.projects.get", none)), "gpu-quota")) == 1  # no such quota: no row


def test_a_quota_the_region_does_not_list_is_not_a_pass() -> None:
    def drop(response: dict[str, Any]) -> None:
        response["quotas"] = [q for q in response["quotas"] if "L4" not in q["metric"]]
    (quota, _) = by(dev(recorded(DEV).edit("compute.regions.get.us-central1", drop)), "gpu-quota")
    assert quota.status == "cannot-check"
    assert quota.detail.startswith("us-central1 lists no NVIDIA_L4_GPUS quota for acme-ml-dev")


@pytest.mark.parametrize(("change", "message"), [
    ({"status": "CREATING"}, "status CREATING (needs READY)"),
    ({"specificReservation.instanceProperties.machineType": "a3-highgpu-8g"}, "for a3-highgpu-8g, not a3-megagpu-8g"),
    ({"specificReservation.count": "8"}, "8 VMs, fewer than maxSize 16"),
    ({"specificReservationRequired": False},
     "specificReservationRequired is false: any VM of the project with these properties can consume it before the "
     "pool does (create it with --require-specific-reservation)"),
    ({"zone": "https://www.googleapis.com/compute/v1/projects/acme-ml-prod/zones/us-central1-c"},
     "in us-central1-c, not in the GPU zone us-central1-a"),
])
def test_a_reservation_that_does_not_fit(change: dict[str, Any], message: str) -> None:
    def apply(response: dict[str, Any]) -> None:
        for path, value in change.items():
            *parents, leaf = path.split(".")
            target = response
            for key in parents:
                target = target[key]
            target[leaf] = value
    (check,) = by(prod(recorded(PROD).edit(RESERVATION, apply)), "reservation")
    assert (check.status, check.detail) == ("fail", f"a3mega-prod-16: {message}")


def test_a_reservation_in_another_zone_or_nowhere() -> None:
    (check,) = by(prod(recorded(PROD).drop(RESERVATION)), "reservation")
    assert check == Check("reservation", "nodePools.h100", "fail",
                          "a3mega-prod-16 does not exist in us-central1-a of acme-ml-prod; acme-ml-prod has it in "
                          "us-central1-b: the spec's gpuZone must be the reservation's zone")
    api = recorded(PROD).drop(RESERVATION).drop("compute.reservations.aggregatedList.a3mega-prod-16")
    api.add("empty", "compute.reservations.aggregatedList",
            {"project": PROD, "filter": 'name = "a3mega-prod-16"'},
            {"kind": "compute#reservationAggregatedList", "id": "projects/acme-ml-prod/aggregated/reservations",
             "items": {}})
    (check,) = by(prod(api), "reservation")
    assert check.detail == "a3mega-prod-16 does not exist in us-central1-a of acme-ml-prod"


def test_a_shared_reservation_and_a_block() -> None:
    """A reservation another project owns must be shared with the stack's; a block must hold the pool."""
    def shared(raw: dict[str, Any]) -> None:
        pool(raw, "h100")["capacity"] = {"type": "reservation", "reservation": "a3mega-prod-16",
                                         "reservationProject": "acme-capacity"}
    api = recorded(PROD)
    entry = api.entries[RESERVATION]
    entry["request"]["project"] = "acme-capacity"
    entry["response"]["shareSettings"] = {"shareType": "SPECIFIC_PROJECTS",
                                          "projectMap": {"acme-ml-dev": {"projectId": "acme-ml-dev"}}}
    (check,) = by(prod(api, shared), "reservation")
    assert check.detail == "a3mega-prod-16: owned by acme-capacity and not shared with acme-ml-prod"
    entry["response"]["shareSettings"]["projectMap"]["acme-ml-prod"] = {"projectId": "acme-ml-prod"}
    assert by(prod(api, shared), "reservation")[0].status == "pass"

    def block(raw: dict[str, Any]) -> None:
        pool(raw, "h100")["capacity"]["reservationBlock"] = "block-0001"
    api = recorded(PROD)
    (check,) = by(prod(api, block), "reservation")
    assert check.detail == "a3mega-prod-16: has no block block-0001"
    api.add("block", "compute.reservationBlocks.get",
            {"project": PROD, "zone": "us-central1-a", "reservation": "a3mega-prod-16",
             "reservationBlock": "block-0001"},
            {"resource": {"kind": "compute#reservationBlock", "id": "4455667788", "name": "block-0001",
                          "zone": "https://www.googleapis.com/compute/v1/projects/acme-ml-prod/zones/us-central1-a",
                          "count": 12, "inUseCount": 0, "status": "READY",
                          "reservationSubBlockCount": 3, "reservationSubBlockInUseCount": 0}})
    (check,) = by(prod(api, block), "reservation")
    assert check.detail == "a3mega-prod-16: block block-0001 holds 12 VMs, fewer than maxSize 16"
    api.entries["block"]["response"]["resource"]["count"] = 16
    assert by(prod(api, block), "reservation")[0].detail.endswith(", block block-0001")


def test_networks_the_stack_would_create_already_exist() -> None:
    def taken(response: dict[str, Any]) -> None:
        for name in ("prod-train-gke-net", "prod-train-gke-gpunet-3"):
            response["items"].append({**response["items"][0], "name": name, "autoCreateSubnetworks": False,
                                      "mtu": 8244})
    (check,) = by(prod(recorded(PROD).edit("compute.networks.list", taken)), "network-names-free")
    assert check == Check("network-names-free", PROD, "fail",
                          "prod-train-gke-gpunet-3, prod-train-gke-net already exist: networks of an earlier stack of "
                          "this name, or this stack is already up (preflight is for before its first pulumi up); "
                          "import or remove them")


def test_the_bucket_name_is_taken() -> None:
    check, data = by(prod(recorded(PROD, deployed=True)), "bucket-name-free")
    assert check.status == "fail" and check.detail.startswith("already exists (project number 123456789012)")
    assert data.status == "pass"
    api = recorded(PROD, deployed=True).fail("storage.buckets.get.acme-ml-prod-prod-train-gke-checkpoints", 403,
                                             "caller does not have storage.buckets.get access to the Google Cloud "
                                             "Storage bucket")
    check, _ = by(prod(api), "bucket-name-free")
    assert check.status == "fail" and check.detail.startswith("taken by a bucket these credentials cannot read "
                                                              "(Forbidden (403): caller does not have")


def test_a_data_bucket_name_is_free_too() -> None:
    """Bucket names are global: a gcp.storage.buckets name another project holds fails before the first up, and
    the fix is another name (there is no existing bucket to fall back on)."""
    stem = "storage.buckets.get.acme-ml-prod-prod-train-gke-data"
    api = recorded(PROD).add(stem, "storage.buckets.get", {"bucket": "acme-ml-prod-prod-train-gke-data"},
                             {"kind": "storage#bucket", "name": "acme-ml-prod-prod-train-gke-data",
                              "projectNumber": "998877665544", "location": "US-CENTRAL1"})
    checkpoints, data = by(prod(api), "bucket-name-free")
    assert checkpoints.status == "pass"
    assert data == Check("bucket-name-free", "acme-ml-prod-prod-train-gke-data", "fail",
                         "already exists (project number 998877665544): a retained bucket of an earlier stack, or this "
                         "stack is already up; import it, or choose another name than data in gcp.storage.buckets")
    (_, data) = by(prod(api.fail(stem, 403, "caller does not have storage.buckets.get access")), "bucket-name-free")
    assert data.status == "fail" and data.detail.endswith(
        "bucket names are global: another project's? choose another name than data in gcp.storage.buckets")


def test_an_existing_bucket_the_spec_brings() -> None:
    def existing(raw: dict[str, Any]) -> None:
        raw["gcp"]["storage"]["checkpointBucket"] = {"existingName": "acme-shared-checkpoints"}
    (check,) = by(prod(change=existing), "existing-bucket")
    assert check == Check("existing-bucket", "acme-shared-checkpoints", "fail", "does not exist")
    api = recorded(PROD, deployed=True)
    stem = "storage.buckets.get.acme-ml-prod-prod-train-gke-checkpoints"
    api.entries[stem]["request"] = {"bucket": "acme-shared-checkpoints"}
    api.edit(stem, lambda r: r.update(name="acme-shared-checkpoints", id="acme-shared-checkpoints"))
    (check,) = by(prod(api, existing), "existing-bucket")
    assert check == Check("existing-bucket", "acme-shared-checkpoints", "pass",
                          "exists in US-CENTRAL1, versioned, soft delete 7 days")

    def unprotected(response: dict[str, Any]) -> None:
        response["versioning"] = {"enabled": False}
        response["softDeletePolicy"]["retentionDurationSeconds"] = "0"
    (check,) = by(prod(api.edit(stem, unprotected), existing), "existing-bucket")
    assert (check.status, check.detail) == (
        "fail", "exists in US-CENTRAL1 with neither versioning nor soft delete: an overwritten or deleted checkpoint "
                "is gone")


def test_the_deployer_cannot_be_impersonated() -> None:
    stem = "iam.serviceAccounts.testIamPermissions"
    (check,) = by(prod(recorded(PROD).edit(stem, lambda r: r.update(permissions=[]))), "deployer")
    assert check == Check("deployer", "pulumi-deployer@acme-ml-prod.iam.gserviceaccount.com", "fail",
                          f"these credentials cannot impersonate it (no {IMPERSONATE}): grant them "
                          "roles/iam.serviceAccountTokenCreator on the account")
    (check,) = by(prod(recorded(PROD).fail(stem, 404, "Unknown service account")), "deployer")
    assert (check.status, check.detail) == ("fail", "the service account does not exist")


# --- errors of the API and of the credentials ---------------------------------------------------------------------


def test_an_api_error_is_cannot_check_with_the_reason() -> None:
    api = recorded(DEV).fail("compute.regions.get.us-central1", 403,
                             "Compute Engine API has not been used in project acme-ml-dev before or it is disabled.",
                             reason="SERVICE_DISABLED")
    (quota, _) = by(dev(api), "gpu-quota")
    assert quota == Check("gpu-quota", "us-central1", "cannot-check",
                          "Forbidden (403): Compute Engine API has not been used in project acme-ml-dev before or it "
                          "is disabled. (the API is disabled in the project: see the apis-enabled check)")


def test_refused_credentials_stop_the_run() -> None:
    api = recorded(DEV).fail("serviceusage.services.batchGet", 401, "Request had invalid authentication credentials.")
    with pytest.raises(AccountAccessError, match=r"^Google refused the credentials \(401 Request had invalid"):
        dev(api)


@pytest.fixture
def recorded_session(monkeypatch: pytest.MonkeyPatch) -> dict[str, RecordedGcp]:
    """``blueprint preflight/audit`` on a GCP stack talks to the recorded project instead of the libraries."""
    from blueprint.clouds.gcp import api as gcp_api

    apis = {PROD: recorded(PROD), DEV: recorded(DEV)}
    monkeypatch.setattr(gcp_api, "gcp_session", lambda project: apis[project])
    return apis


def test_cli_json_and_exit_status(recorded_session: dict[str, RecordedGcp],
                                  capsys: pytest.CaptureFixture[str]) -> None:
    from blueprint.cli import main

    assert main(["preflight", "prod-gcp", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["passed"] is True and {c["check"] for c in doc["checks"]} >= {"reservation", "deployer"}
    assert main(["preflight", "prod-gcp", "--strict"]) == 4  # the reservation pool's quota row
    recorded_session[PROD].edit(RESERVATION, lambda r: r.update(status="DELETING"))
    assert main(["preflight", "prod-gcp"]) == 1
    assert "FAIL          reservation" in capsys.readouterr().out


def test_cli_nothing_checked(recorded_session: dict[str, RecordedGcp], capsys: pytest.CaptureFixture[str]) -> None:
    api = recorded_session[DEV] = recorded(DEV, deployed=True)
    for stem in list(api.entries):
        api.fail(stem, 503, "The service is currently unavailable.")
    from blueprint.cli import main

    assert main(["preflight", "dev-gcp"]) == 4
    out, err = capsys.readouterr()
    assert "0 pass, 0 fail" in out and err.startswith("error: preflight: nothing could be checked")


@pytest.fixture
def no_gcp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No Application Default Credentials anywhere, and no metadata server to ask."""
    import google.auth.compute_engine._metadata as metadata

    for name in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT",
                 "GOOGLE_CLOUD_QUOTA_PROJECT", "CLOUDSDK_AUTH_ACCESS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    monkeypatch.setattr(metadata, "is_on_gce", lambda *a, **k: False)


@pytest.mark.parametrize("command", ["preflight", "audit"])
def test_no_credentials_is_an_input_error(no_gcp: None, capsys: pytest.CaptureFixture[str], command: str) -> None:
    from blueprint.cli import main

    assert main([command, "prod-gcp"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("error: no Google Cloud credentials were found (Your default credentials were not found.")
    assert err.endswith("run gcloud auth application-default login, or set GOOGLE_APPLICATION_CREDENTIALS\n")


def test_a_credentials_file_that_cannot_be_read(no_gcp: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from blueprint.cli import main

    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent.json"))
    assert main(["preflight", "dev-gcp"]) == 2
    assert capsys.readouterr().err.startswith(f"error: the Google Cloud credentials cannot be loaded (File "
                                              f"{tmp_path / 'absent.json'} was not found.)")
    bad = tmp_path / "key.json"
    bad.write_text('{"type": "service_account", "project_id": "acme-ml-dev"}')
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(bad))
    assert main(["preflight", "dev-gcp"]) == 2
    assert capsys.readouterr().err.startswith(
        f"error: the Google Cloud credentials cannot be loaded (Failed to load service account credentials from {bad}: "
        "Service account info was not in the expected format, missing fields ")  # in set order


def test_credentials_google_refuses(no_gcp: None, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Expired or revoked credentials fail their first refresh: exit 2 before any check."""
    import google.auth
    import google.oauth2.credentials
    from google.auth import exceptions

    class Revoked(google.oauth2.credentials.Credentials):
        def refresh(self, request: Any) -> None:
            raise exceptions.RefreshError("invalid_grant: Token has been expired or revoked.")
    monkeypatch.setattr(google.auth, "default", lambda scopes=None: (Revoked(token=None), None))
    from blueprint.cli import main

    assert main(["audit", "prod-gcp"]) == 2
    assert capsys.readouterr().err == (
        "error: Google refused the credentials (invalid_grant: Token has been expired or revoked.); run gcloud auth "
        "application-default login again\n")
