"""The recorded :class:`blueprint.clouds.gcp.api.GcpApi` of the GCP preflight and audit tests: answers kept under
``tests/fixtures/gcp_api/<project>/`` (one file per call: the REST method, its request parameters, the REST
response or error), turned into the objects Google's libraries return for them. Nothing here reaches a network.

A call whose request no file records raises ``NotFound``, as the API answers for a resource that is not there;
tests break one answer at a time with :meth:`RecordedGcp.edit`, :meth:`RecordedGcp.drop` and
:meth:`RecordedGcp.fail`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "gcp_api"


def to_library(call: str, response: dict[str, Any]) -> Any:
    """A recorded REST answer as the library returns it to :class:`~blueprint.clouds.gcp.api.LibraryGcpApi` (proto-plus
    messages parsed strictly: a field the library does not know fails the test)."""
    from google.cloud import compute_v1, container_v1, lustre_v1, service_usage_v1, storage

    text = json.dumps(response)
    if call == "storage.buckets.get":
        bucket = storage.Bucket(client=None, name=response["name"])
        bucket._set_properties(copy.deepcopy(response))  # what Client.get_bucket does with the JSON answer
        return bucket
    if call == "iam.serviceAccounts.testIamPermissions":
        from google.iam.v1 import iam_policy_pb2
        from google.protobuf import json_format

        return json_format.Parse(text, iam_policy_pb2.TestIamPermissionsResponse())
    messages: dict[str, Any] = {
        "compute.machineTypes.get": compute_v1.MachineType,
        "compute.acceleratorTypes.get": compute_v1.AcceleratorType,
        "compute.regions.get": compute_v1.Region,
        "compute.projects.get": compute_v1.Project,
        "compute.reservations.get": compute_v1.Reservation,
        "compute.reservationBlocks.get": compute_v1.ReservationBlocksGetResponse,
        "compute.reservations.aggregatedList": compute_v1.ReservationAggregatedList,
        "compute.networks.list": compute_v1.NetworkList,
        "serviceusage.services.batchGet": service_usage_v1.BatchGetServicesResponse,
        "container.projects.locations.clusters.get": container_v1.Cluster,
        "lustre.projects.locations.instances.get": lustre_v1.Instance,
    }
    return messages[call].from_json(text)


class RecordedGcp:
    """:class:`~blueprint.clouds.gcp.api.GcpApi` on the recorded answers of one project."""

    def __init__(self, project: str) -> None:
        self.entries: dict[str, dict[str, Any]] = {
            p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted((FIXTURES / project).glob("*.json"))}
        self.calls: list[tuple[str, dict[str, Any]]] = []

    # -- breaking answers ------------------------------------------------------------------------------------------

    def edit(self, stem: str, change: Callable[[dict[str, Any]], None]) -> RecordedGcp:
        change(self.entries[stem]["response"])
        return self

    def drop(self, stem: str) -> RecordedGcp:
        del self.entries[stem]
        return self

    def fail(self, stem: str, code: int, message: str, reason: str | None = None) -> RecordedGcp:
        """The call answers an HTTP error, as the REST API sends it."""
        entry = self.entries[stem]
        entry.pop("response", None)
        entry["error"] = {"code": code, "message": message, "reason": reason}
        return self

    def add(self, stem: str, call: str, request: dict[str, Any], response: dict[str, Any]) -> RecordedGcp:
        self.entries[stem] = {"call": call, "request": request, "response": response}
        return self

    # -- answering -------------------------------------------------------------------------------------------------

    def answer(self, call: str, request: dict[str, Any]) -> Any:
        from google.api_core import exceptions

        self.calls.append((call, request))
        entry = next((e for e in self.entries.values() if e["call"] == call and e["request"] == request), None)
        if entry is None:
            raise exceptions.NotFound(f"{call} {json.dumps(request, sort_keys=True)}: not recorded")
        if "error" in entry:
            # As google-api-core builds a REST error (format_http_response_error): the JSON details, ErrorInfo first.
            error = entry["error"]
            details = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": error["reason"],
                        "domain": "googleapis.com"}] if error.get("reason") else []
            raise exceptions.from_http_status(error["code"], error["message"], details=details,
                                              error_info=details[0] if details else None)
        return to_library(call, copy.deepcopy(entry["response"]))

    def machine_type(self, project: str, zone: str, name: str) -> Any:
        return self.answer("compute.machineTypes.get", {"project": project, "zone": zone, "machineType": name})

    def accelerator_type(self, project: str, zone: str, name: str) -> Any:
        return self.answer("compute.acceleratorTypes.get",
                           {"project": project, "zone": zone, "acceleratorType": name})

    def region(self, project: str, region: str) -> Any:
        return self.answer("compute.regions.get", {"project": project, "region": region})

    def project(self, project: str) -> Any:
        return self.answer("compute.projects.get", {"project": project})

    def reservation(self, project: str, zone: str, name: str) -> Any:
        return self.answer("compute.reservations.get", {"project": project, "zone": zone, "reservation": name})

    def reservation_block(self, project: str, zone: str, reservation: str, block: str) -> Any:
        return self.answer("compute.reservationBlocks.get", {"project": project, "zone": zone,
                                                             "reservation": reservation,
                                                             "reservationBlock": block}).resource

    def reservations_named(self, project: str, name: str) -> list[Any]:
        answer = self.answer("compute.reservations.aggregatedList", {"project": project, "filter": f'name = "{name}"'})
        return [r for scoped in answer.items.values() for r in scoped.reservations]

    def networks(self, project: str) -> list[Any]:
        return list(self.answer("compute.networks.list", {"project": project}).items)

    def services(self, project: str, names: list[str]) -> list[Any]:
        return list(self.answer("serviceusage.services.batchGet", {
            "parent": f"projects/{project}", "names": [f"projects/{project}/services/{n}" for n in names]}).services)

    def service_account_permissions(self, email: str, permissions: list[str]) -> list[str]:
        return list(self.answer("iam.serviceAccounts.testIamPermissions", {
            "resource": f"projects/-/serviceAccounts/{email}", "permissions": permissions}).permissions)

    def bucket(self, name: str) -> Any:
        return self.answer("storage.buckets.get", {"bucket": name})

    def cluster(self, project: str, location: str, name: str) -> Any:
        return self.answer("container.projects.locations.clusters.get",
                           {"name": f"projects/{project}/locations/{location}/clusters/{name}"})

    def lustre_instance(self, project: str, zone: str, instance_id: str) -> Any:
        return self.answer("lustre.projects.locations.instances.get",
                           {"name": f"projects/{project}/locations/{zone}/instances/{instance_id}"})


def recorded(project: str, *, deployed: bool = False) -> RecordedGcp:
    """The project before its first ``pulumi up`` (no checkpoint bucket yet), or after it."""
    api = RecordedGcp(project)
    if not deployed:
        for stem in [s for s in api.entries if s.startswith("storage.buckets.get.")]:
            api.drop(stem)
    return api


def fixture_path(project: str, stem: str) -> Path:
    return FIXTURES / project / f"{stem}.json"
