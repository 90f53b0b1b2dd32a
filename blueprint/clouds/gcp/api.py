"""The Google Cloud reads of ``blueprint preflight`` and ``blueprint audit`` on a GCP stack: one small protocol the
checks call (:class:`GcpApi`), and its implementation with Google's client libraries (:class:`LibraryGcpApi`).

Every method is one read of one API and returns what the library returns (proto-plus messages for Compute
Engine, GKE, Service Usage and Managed Lustre; a ``google.cloud.storage.Bucket`` for Cloud Storage; the
permissions list of an IAM ``TestIamPermissionsResponse``), or raises the library's
``google.api_core.exceptions`` error (``NotFound``, ``Forbidden`` ...). The tests replace the whole layer with
answers recorded in those shapes (``tests/acceptance/gcp_recorded.py``); nothing in the checks knows which one it
talks to.

Credentials are Application Default Credentials (``GOOGLE_APPLICATION_CREDENTIALS``, ``gcloud auth
application-default login``, workload identity federation, the metadata server). Missing or refused credentials
and an endpoint that does not answer are :class:`AccountAccessError` (exit 2), as on AWS.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, cast

from blueprint.acceptance.checks import AccountAccessError, Check
from blueprint.files.input import InputTooLargeError, read_limited

SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
TIMEOUT_S = 60.0  # each call; the libraries' default retries stay on
# The IAM permission pulumi up's impersonation needs on the deployer (roles/iam.serviceAccountTokenCreator has it).
IMPERSONATE = "iam.serviceAccounts.getAccessToken"


@contextmanager
def quiet_imports() -> Iterator[None]:
    """google-api-core warns at import, on Python 3.11, that Google's future releases will drop it; a warning per
    library on every run says nothing about the account, so it is not shown."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="You are using a Python version", category=FutureWarning)
        yield


class GcpApi(Protocol):
    """The reads the GCP checks make. ``Any`` stands for the library's message types (named in each docstring):
    the generated proto-plus classes declare their fields in a way mypy cannot follow."""

    def machine_type(self, project: str, zone: str, name: str) -> Any:
        """Compute ``machineTypes.get``: ``compute_v1.MachineType``."""

    def accelerator_type(self, project: str, zone: str, name: str) -> Any:
        """Compute ``acceleratorTypes.get``: ``compute_v1.AcceleratorType``."""

    def region(self, project: str, region: str) -> Any:
        """Compute ``regions.get``: ``compute_v1.Region`` (its ``quotas`` are the regional allocation quotas)."""

    def project(self, project: str) -> Any:
        """Compute ``projects.get``: ``compute_v1.Project`` (its ``quotas`` are the project-wide ones)."""

    def reservation(self, project: str, zone: str, name: str) -> Any:
        """Compute ``reservations.get``: ``compute_v1.Reservation``."""

    def reservation_block(self, project: str, zone: str, reservation: str, block: str) -> Any:
        """Compute ``reservationBlocks.get``: ``compute_v1.ReservationBlock``."""

    def reservations_named(self, project: str, name: str) -> list[Any]:
        """Compute ``reservations.aggregatedList`` filtered by name, every zone: ``compute_v1.Reservation`` list."""

    def networks(self, project: str) -> list[Any]:
        """Compute ``networks.list``: ``compute_v1.Network`` list."""

    def services(self, project: str, names: list[str]) -> list[Any]:
        """Service Usage ``services.batchGet``: ``service_usage_v1.Service`` list."""

    def service_account_permissions(self, email: str, permissions: list[str]) -> list[str]:
        """IAM ``projects.serviceAccounts.testIamPermissions``: the permissions the caller holds on the account."""

    def bucket(self, name: str) -> Any:
        """Cloud Storage ``buckets.get``: ``google.cloud.storage.Bucket``."""

    def cluster(self, project: str, location: str, name: str) -> Any:
        """GKE ``projects.locations.clusters.get``: ``container_v1.Cluster`` (with its node pools)."""

    def lustre_instance(self, project: str, zone: str, instance_id: str) -> Any:
        """Managed Lustre ``projects.locations.instances.get``: ``lustre_v1.Instance``."""


def last_segment(url: str) -> str:
    """The name at the end of a Compute Engine URL (``.../zones/us-central1-a`` -> ``us-central1-a``)."""
    return url.rstrip("/").rsplit("/", 1)[-1]


class LibraryGcpApi:
    """:class:`GcpApi` through Google's client libraries. ``clients(name)`` gives the library client for a name
    of :data:`CLIENTS`; the CLI builds them from Application Default Credentials (:func:`library_clients`), the
    tests from recorders that keep each request object and send nothing."""

    def __init__(self, clients: Callable[[str], Any]) -> None:
        self._clients = clients
        self._made: dict[str, Any] = {}

    def _client(self, name: str) -> Any:
        if name not in self._made:
            self._made[name] = self._clients(name)
        return self._made[name]

    def machine_type(self, project: str, zone: str, name: str) -> Any:
        from google.cloud import compute_v1

        request = compute_v1.GetMachineTypeRequest(project=project, zone=zone, machine_type=name)
        return self._client("machine_types").get(request=request, timeout=TIMEOUT_S)

    def accelerator_type(self, project: str, zone: str, name: str) -> Any:
        from google.cloud import compute_v1

        request = compute_v1.GetAcceleratorTypeRequest(project=project, zone=zone, accelerator_type=name)
        return self._client("accelerator_types").get(request=request, timeout=TIMEOUT_S)

    def region(self, project: str, region: str) -> Any:
        from google.cloud import compute_v1

        return self._client("regions").get(request=compute_v1.GetRegionRequest(project=project, region=region),
                                           timeout=TIMEOUT_S)

    def project(self, project: str) -> Any:
        from google.cloud import compute_v1

        return self._client("projects").get(request=compute_v1.GetProjectRequest(project=project),
                                            timeout=TIMEOUT_S)

    def reservation(self, project: str, zone: str, name: str) -> Any:
        from google.cloud import compute_v1

        request = compute_v1.GetReservationRequest(project=project, zone=zone, reservation=name)
        return self._client("reservations").get(request=request, timeout=TIMEOUT_S)

    def reservation_block(self, project: str, zone: str, reservation: str, block: str) -> Any:
        from google.cloud import compute_v1

        request = compute_v1.GetReservationBlockRequest(project=project, zone=zone, reservation=reservation,
                                                        reservation_block=block)
        answer = self._client("reservation_blocks").get(request=request, timeout=TIMEOUT_S)
        return answer.resource  # ReservationBlocksGetResponse wraps the block

    def reservations_named(self, project: str, name: str) -> list[Any]:
        from google.cloud import compute_v1

        request = compute_v1.AggregatedListReservationsRequest(project=project, filter=f'name = "{name}"')
        pages = self._client("reservations").aggregated_list(request=request, timeout=TIMEOUT_S)
        return [r for _, scoped in pages for r in scoped.reservations]

    def networks(self, project: str) -> list[Any]:
        from google.cloud import compute_v1

        return list(self._client("networks").list(request=compute_v1.ListNetworksRequest(project=project),
                                                  timeout=TIMEOUT_S))

    def services(self, project: str, names: list[str]) -> list[Any]:
        from google.cloud import service_usage_v1

        out: list[Any] = []
        for start in range(0, len(names), 30):  # batchGet takes at most 30 names
            chunk = names[start:start + 30]
            request = service_usage_v1.BatchGetServicesRequest(
                parent=f"projects/{project}", names=[f"projects/{project}/services/{n}" for n in chunk])
            out += self._client("service_usage").batch_get_services(request=request, timeout=TIMEOUT_S).services
        return out

    def service_account_permissions(self, email: str, permissions: list[str]) -> list[str]:
        from google.iam.v1 import iam_policy_pb2

        # "-" lets IAM infer the project from the account's email (IAM REST reference, serviceAccounts).
        request = iam_policy_pb2.TestIamPermissionsRequest(resource=f"projects/-/serviceAccounts/{email}",
                                                           permissions=permissions)
        return list(self._client("iam").test_iam_permissions(request=request, timeout=TIMEOUT_S).permissions)

    def bucket(self, name: str) -> Any:
        return self._client("storage").get_bucket(name, timeout=TIMEOUT_S)

    def cluster(self, project: str, location: str, name: str) -> Any:
        from google.cloud import container_v1

        request = container_v1.GetClusterRequest(name=f"projects/{project}/locations/{location}/clusters/{name}")
        return self._client("container").get_cluster(request=request, timeout=TIMEOUT_S)

    def lustre_instance(self, project: str, zone: str, instance_id: str) -> Any:
        from google.cloud import lustre_v1

        request = lustre_v1.GetInstanceRequest(name=f"projects/{project}/locations/{zone}/instances/{instance_id}")
        return self._client("lustre").get_instance(request=request, timeout=TIMEOUT_S)


# The library client behind each name LibraryGcpApi asks for: (module, class, REST transport).
CLIENTS: dict[str, tuple[str, str, bool]] = {
    "machine_types": ("google.cloud.compute_v1", "MachineTypesClient", True),
    "accelerator_types": ("google.cloud.compute_v1", "AcceleratorTypesClient", True),
    "regions": ("google.cloud.compute_v1", "RegionsClient", True),
    "projects": ("google.cloud.compute_v1", "ProjectsClient", True),
    "reservations": ("google.cloud.compute_v1", "ReservationsClient", True),
    "reservation_blocks": ("google.cloud.compute_v1", "ReservationBlocksClient", True),
    "networks": ("google.cloud.compute_v1", "NetworksClient", True),
    "service_usage": ("google.cloud.service_usage_v1", "ServiceUsageClient", True),
    "iam": ("google.cloud.iam_admin_v1", "IAMClient", False),  # the IAM admin library has gRPC only
    "container": ("google.cloud.container_v1", "ClusterManagerClient", True),
    "lustre": ("google.cloud.lustre_v1", "LustreClient", True),
}


def library_clients(credentials: Any, project: str) -> Callable[[str], Any]:
    """A factory of the libraries' clients on these credentials (nothing is sent until a method is called)."""
    import importlib

    def make(name: str) -> Any:
        with quiet_imports():
            if name == "storage":
                from google.cloud import storage

                return storage.Client(project=project, credentials=credentials)
            module, cls, rest = CLIENTS[name]
            client_class = getattr(importlib.import_module(module), cls)
        return client_class(credentials=credentials, **({"transport": "rest"} if rest else {}))
    return make



# A service account key or an external account configuration is a few KB; a device or a FIFO named by the variable
# would be read by google.auth without end (blueprint.files.input).
MAX_CREDENTIALS_BYTES = 1024 * 1024


def _check_credentials_file() -> None:
    """The file ``GOOGLE_APPLICATION_CREDENTIALS`` names, read once within :data:`MAX_CREDENTIALS_BYTES` before
    google.auth reads it: a directory, an unreadable file or one past the limit is an :class:`AccountAccessError`
    naming it."""
    named = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if not named:
        return
    try:
        read_limited(Path(named), MAX_CREDENTIALS_BYTES)
    except FileNotFoundError:
        return  # google.auth says so in its own words ("File ... was not found")
    except InputTooLargeError as err:
        raise AccountAccessError(f"GOOGLE_APPLICATION_CREDENTIALS={named}: {err}") from None
    except OSError as err:
        raise AccountAccessError(f"GOOGLE_APPLICATION_CREDENTIALS={named}: cannot be read: "
                                 f"{err.strerror or err}") from None

def adc_credentials(project: str) -> Any:
    """Application Default Credentials, refreshed once so that refused ones stop the run here (exit 2) and not
    as a cannot-check per call. End-user credentials get the stack's project as quota project (Service Usage
    and IAM refuse end-user calls without one)."""
    with quiet_imports():
        import google.auth
        import google.auth.exceptions
        import google.auth.transport.requests
        import google.oauth2.credentials

    _check_credentials_file()
    try:
        credentials, _ = google.auth.default(scopes=list(SCOPES))
    except google.auth.exceptions.DefaultCredentialsError as err:
        text = ": ".join(str(a) for a in err.args).splitlines()[0]
        what = "no Google Cloud credentials were found" if text.startswith("Your default credentials were not") \
            else "the Google Cloud credentials cannot be loaded"
        raise AccountAccessError(f"{what} ({text}); run gcloud auth application-default login, or set "
                                 "GOOGLE_APPLICATION_CREDENTIALS") from None
    if isinstance(credentials, google.oauth2.credentials.Credentials) and not credentials.quota_project_id:
        credentials = credentials.with_quota_project(project)
    try:
        credentials.refresh(google.auth.transport.requests.Request())  # type: ignore[no-untyped-call]
    except Exception as err:
        problem = gcp_access_problem(err)
        if problem is None:
            raise
        raise AccountAccessError(problem) from None
    return credentials


def gcp_access_problem(err: BaseException) -> str | None:
    """Why ``err`` means that nothing of the project can be read (credentials refused, the endpoint silent), or
    None for an error of one check."""
    import requests
    from google.api_core import exceptions as api
    from google.auth import exceptions as auth

    if isinstance(err, auth.RefreshError):
        return f"Google refused the credentials ({err}); run gcloud auth application-default login again"
    if isinstance(err, auth.DefaultCredentialsError):
        return f"the Google Cloud credentials cannot be loaded: {err}"
    if isinstance(err, api.Unauthorized):  # 401; gRPC UNAUTHENTICATED is its subclass
        return f"Google refused the credentials ({err.code} {err.message})"
    if isinstance(err, auth.TransportError | requests.ConnectionError | requests.Timeout | api.RetryError):
        return f"the Google Cloud endpoint does not answer ({err}); check the proxy and the network"
    return None


def error_reason(err: Any) -> str | None:
    """The ErrorInfo reason of an API error (``SERVICE_DISABLED`` ...). google-api-core 2.33 keeps a REST error's
    ErrorInfo as the JSON dict, on which its ``reason`` property fails; the details list has it either way."""
    try:
        return cast("str | None", err.reason)
    except AttributeError:
        return next((str(d.get("reason")) for d in err.details
                     if isinstance(d, dict) and str(d.get("@type", "")).endswith("google.rpc.ErrorInfo")), None)


def describe(err: Exception) -> str:
    """One line for an API error: status, message, and what to do for a disabled API."""
    from google.api_core import exceptions as api

    if not isinstance(err, api.GoogleAPICallError):
        return str(err)
    text = f"{type(err).__name__} ({err.code}): {err.message}"
    if error_reason(err) == "SERVICE_DISABLED" or "it is disabled" in (err.message or ""):
        text += " (the API is disabled in the project: see the apis-enabled check)"
    return text


def guard(check: str, subject: str, fn: Callable[[], list[Check]]) -> list[Check]:
    """Run one check; an API error becomes cannot-check with the reason. One that means no check can be made
    stops the run with :class:`AccountAccessError`."""
    import requests
    from google.api_core import exceptions as api
    from google.auth import exceptions as auth

    try:
        return fn()
    except (api.GoogleAPIError, auth.GoogleAuthError, requests.RequestException) as err:
        problem = gcp_access_problem(err)
        if problem is not None:
            raise AccountAccessError(problem) from None
        return [Check(check, subject, "cannot-check", describe(err))]


def not_found(fn: Callable[[], Any]) -> Any | None:
    """``fn()``, or None when the API answers 404."""
    from google.api_core import exceptions as api

    try:
        return fn()
    except api.NotFound:
        return None


def import_libraries() -> None:
    """Import every library the GCP checks use, without their import-time warnings (see :func:`quiet_imports`)."""
    with quiet_imports():
        import google.api_core.exceptions
        import google.auth
        import google.cloud.compute_v1
        import google.cloud.container_v1
        import google.cloud.iam_admin_v1
        import google.cloud.lustre_v1
        import google.cloud.service_usage_v1
        import google.cloud.storage  # noqa: F401


def gcp_session(project: str) -> LibraryGcpApi:
    """The libraries on Application Default Credentials for a stack's project (exit 2 when there are none)."""
    import_libraries()
    return LibraryGcpApi(library_clients(adc_credentials(project), project))


__all__ = ["CLIENTS", "IMPERSONATE", "GcpApi", "LibraryGcpApi", "adc_credentials", "describe", "error_reason",
           "gcp_access_problem", "gcp_session", "guard", "import_libraries", "last_segment", "library_clients",
           "not_found", "quiet_imports"]
