"""The real client layer (blueprint/gcp_api.py, Google's libraries) without a network: each REST read goes through
the library's own transport, whose HTTP session is replaced by one that keeps the request and answers with the
recorded fixture. The library must ask for the URL the REST reference gives, and return what the recorded layer
of the other tests returns (so the fixtures are in the shape the libraries parse). IAM's library speaks gRPC only:
its request object is checked instead."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests

from blueprint.clouds.gcp.api import CLIENTS, IMPERSONATE, LibraryGcpApi, describe, gcp_access_problem, library_clients
from tests.acceptance.gcp_recorded import RecordedGcp, fixture_path, recorded

PROD = "acme-ml-prod"
COMPUTE = "https://compute.googleapis.com/compute/v1/projects/acme-ml-prod"


class Http:
    """The libraries' HTTP session: records each request, answers from a fixture, sends nothing."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, Any]] = []
        self.body: dict[str, Any] = {}
        self.status = 200

    def request(self, session: Any, method: str, url: str, *args: Any, **kwargs: Any) -> requests.Response:
        self.sent.append((method, url, kwargs.get("params")))
        answer = requests.Response()
        answer.status_code = self.status
        answer.headers["content-type"] = "application/json"
        answer._content = json.dumps(self.body).encode()
        answer.request = requests.Request(method, url).prepare()
        answer.url = url
        return answer


@pytest.fixture
def http(monkeypatch: pytest.MonkeyPatch) -> Http:
    import google.auth.transport.requests

    fake = Http()
    monkeypatch.setattr(google.auth.transport.requests.AuthorizedSession, "request",
                        lambda session, method, url, *a, **k: fake.request(session, method, url, *a, **k))
    return fake


@pytest.fixture
def library() -> LibraryGcpApi:
    from google.auth.credentials import AnonymousCredentials

    return LibraryGcpApi(library_clients(AnonymousCredentials(), PROD))


def _same(mine: Any, recorded_answer: Any) -> bool:
    from google.cloud import storage

    if isinstance(mine, storage.Bucket):
        return bool(mine._properties == recorded_answer._properties)
    return bool(mine == recorded_answer)


CASES = [
    ("machine_type", (PROD, "us-central1-a", "a3-megagpu-8g"), "compute.machineTypes.get.a3-megagpu-8g",
     f"{COMPUTE}/zones/us-central1-a/machineTypes/a3-megagpu-8g"),
    ("accelerator_type", (PROD, "us-central1-a", "nvidia-h100-mega-80gb"),
     "compute.acceleratorTypes.get.nvidia-h100-mega-80gb", f"{COMPUTE}/zones/us-central1-a/acceleratorTypes/"
                                                           "nvidia-h100-mega-80gb"),
    ("region", (PROD, "us-central1"), "compute.regions.get.us-central1", f"{COMPUTE}/regions/us-central1"),
    ("project", (PROD,), "compute.projects.get", COMPUTE),
    ("reservation", (PROD, "us-central1-a", "a3mega-prod-16"), "compute.reservations.get.a3mega-prod-16",
     f"{COMPUTE}/zones/us-central1-a/reservations/a3mega-prod-16"),
    ("reservations_named", (PROD, "a3mega-prod-16"), "compute.reservations.aggregatedList.a3mega-prod-16",
     f"{COMPUTE}/aggregated/reservations"),
    ("networks", (PROD,), "compute.networks.list", f"{COMPUTE}/global/networks"),
    ("services", (PROD, ["compute.googleapis.com", "container.googleapis.com", "cloudkms.googleapis.com",
                         "storage.googleapis.com", "iam.googleapis.com", "iamcredentials.googleapis.com",
                         "cloudresourcemanager.googleapis.com", "logging.googleapis.com", "monitoring.googleapis.com",
                         "servicenetworking.googleapis.com", "lustre.googleapis.com", "billingbudgets.googleapis.com"]),
     "serviceusage.services.batchGet", "https://serviceusage.googleapis.com/v1/projects/acme-ml-prod/services:batchGet"),
    ("bucket", ("acme-ml-prod-prod-train-gke-checkpoints",),
     "storage.buckets.get.acme-ml-prod-prod-train-gke-checkpoints",
     "https://storage.googleapis.com/storage/v1/b/acme-ml-prod-prod-train-gke-checkpoints"),
    ("cluster", (PROD, "us-central1", "prod-train-gke"), "container.clusters.get.prod-train-gke",
     "https://container.googleapis.com/v1/projects/acme-ml-prod/locations/us-central1/clusters/prod-train-gke"),
    ("lustre_instance", (PROD, "us-central1-a", "prod-train-gke-lustre"), "lustre.instances.get.prod-train-gke-lustre",
     "https://lustre.googleapis.com/v1/projects/acme-ml-prod/locations/us-central1-a/instances/prod-train-gke-lustre"),
]


@pytest.mark.parametrize(("method", "args", "stem", "url"), CASES, ids=[c[0] for c in CASES])
def test_each_read_asks_for_the_rest_url_and_parses_the_recorded_answer(
        http: Http, library: LibraryGcpApi, method: str, args: tuple[Any, ...], stem: str, url: str) -> None:
    entry = json.loads(fixture_path(PROD, stem).read_text(encoding="utf-8"))
    http.body = entry["response"]
    mine = getattr(library, method)(*args)
    ((verb, sent, params),) = http.sent
    assert verb == "GET" and sent.split("?", 1)[0] == url
    if method == "reservations_named":
        assert ("filter", 'name = "a3mega-prod-16"') in params
    if method == "services":
        assert [v for k, v in params if k == "names"] == [f"projects/{PROD}/services/{n}" for n in args[1]]
    theirs = getattr(recorded(PROD, deployed=True), method)(*args)
    if isinstance(mine, list):
        assert len(mine) == len(theirs) and all(_same(a, b) for a, b in zip(mine, theirs, strict=True))
    else:
        assert _same(mine, theirs)


def test_every_recorded_call_goes_through_the_library_here() -> None:
    calls = {json.loads(p.read_text())["call"] for p in fixture_path(PROD, "x").parent.parent.glob("*/*.json")}
    tested = {json.loads(fixture_path(PROD, c[2]).read_text())["call"] for c in CASES}
    assert calls - tested == {"iam.serviceAccounts.testIamPermissions"}  # gRPC: test_the_iam_request


def test_a_reservation_block(http: Http, library: LibraryGcpApi) -> None:
    http.body = {"resource": {"kind": "compute#reservationBlock", "name": "block-0001", "count": 16,
                              "inUseCount": 2, "status": "READY"}}
    block = library.reservation_block(PROD, "us-central1-a", "a3mega-prod-16", "block-0001")
    assert (block.name, block.count, block.status) == ("block-0001", 16, "READY")
    assert http.sent[0][1] == f"{COMPUTE}/zones/us-central1-a/reservations/a3mega-prod-16/reservationBlocks/block-0001"


def test_a_404_is_not_found(http: Http, library: LibraryGcpApi) -> None:
    from blueprint.clouds.gcp.api import not_found

    http.status = 404
    http.body = {"error": {"code": 404, "message": "The resource 'projects/acme-ml-prod/zones/us-central1-a/"
                                                   "reservations/a3mega-prod-16' was not found",
                           "errors": [{"message": "was not found", "domain": "global", "reason": "notFound"}]}}
    assert not_found(lambda: library.reservation(PROD, "us-central1-a", "a3mega-prod-16")) is None
    http.body = {"error": {"code": 403, "message": "Compute Engine API has not been used in project acme-ml-prod "
                                                   "before or it is disabled.", "status": "PERMISSION_DENIED",
                           "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                        "reason": "SERVICE_DISABLED", "domain": "googleapis.com"}]}}
    http.status = 403
    from google.api_core import exceptions

    with pytest.raises(exceptions.Forbidden) as caught:
        library.reservation(PROD, "us-central1-a", "a3mega-prod-16")
    assert describe(caught.value).endswith("(the API is disabled in the project: see the apis-enabled check)")


def test_the_iam_request() -> None:
    """IAM's testIamPermissions goes over gRPC: the request object the library is handed is the check."""
    from google.iam.v1 import iam_policy_pb2

    from tests.acceptance.gcp_recorded import to_library

    asked: list[Any] = []

    class Iam:
        def test_iam_permissions(self, request: Any, timeout: float) -> Any:
            asked.append(request)
            entry = json.loads(fixture_path(PROD, "iam.serviceAccounts.testIamPermissions").read_text())
            return to_library(entry["call"], entry["response"])
    api = LibraryGcpApi(lambda name: Iam())
    assert api.service_account_permissions("pulumi-deployer@acme-ml-prod.iam.gserviceaccount.com",
                                           [IMPERSONATE]) == [IMPERSONATE]
    assert asked == [iam_policy_pb2.TestIamPermissionsRequest(
        resource="projects/-/serviceAccounts/pulumi-deployer@acme-ml-prod.iam.gserviceaccount.com",
        permissions=[IMPERSONATE])]


@pytest.mark.parametrize("name", [*CLIENTS, "storage"])
def test_every_client_is_made_without_a_network(name: str) -> None:
    from google.auth.credentials import AnonymousCredentials

    client = library_clients(AnonymousCredentials(), PROD)(name)
    assert client is not None


def test_errors_that_stop_the_run() -> None:
    from google.api_core import exceptions as api
    from google.auth import exceptions as auth

    assert gcp_access_problem(auth.RefreshError("invalid_grant")) == (
        "Google refused the credentials (invalid_grant); run gcloud auth application-default login again")
    assert gcp_access_problem(requests.ConnectionError("Connection refused")) == (
        "the Google Cloud endpoint does not answer (Connection refused); check the proxy and the network")
    assert gcp_access_problem(api.Unauthenticated("bad token")).startswith("Google refused the credentials (401")
    assert gcp_access_problem(api.Forbidden("no")) is None
    assert gcp_access_problem(api.NotFound("no")) is None


def test_the_recorded_layer_refuses_an_unknown_field() -> None:
    """from_json is strict: a fixture field the library does not know fails instead of being dropped."""
    api = RecordedGcp(PROD).edit("compute.reservations.get.a3mega-prod-16", lambda r: r.update(notAField=1))
    with pytest.raises(Exception, match="notAField"):
        api.reservation(PROD, "us-central1-a", "a3mega-prod-16")
