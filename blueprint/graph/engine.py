"""The offline engine: run the real Pulumi program under the SDK's mocks and record a ResourceGraph.

The Pulumi CLI and provider plugins are not available offline, but the Python SDK runs a program
against a mock resource monitor. :class:`RecordingMonitor` keeps every raw ``RegisterResource``
request (type, name, inputs in wire format, parent, provider, protect, retainOnDelete, dependencies);
:class:`OfflineMocks` echoes inputs and adds the computed outputs later resources read (ids, ARNs,
the cluster endpoint and CA, the OIDC issuer, bucket and filesystem names). Each run happens in a
fresh ``contextvars.Context`` so runs in one process never share Pulumi's global state.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import hashlib
import importlib
import itertools
import json
import runpy
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
from google.protobuf import json_format
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs, Mocks
from pulumi.runtime.settings import _get_rpc_manager
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from blueprint.graph.model import SECRET, UNKNOWN, GraphResource, ResourceGraph

PROJECT = "gpu-cluster"
OFFLINE_ACCOUNT = "123456789012"  # placeholder account id in offline ARNs; never a real account
GC_THRESHOLD = 100_000  # generation-0 threshold during a run (Python's default is 700)
DRAIN_EVERY = 250  # registrations between two waits for the mock monitor's answers

_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SIG_SECRET = "1b47061264138c4ac30d75fd1eb44270"
_SIG_RESOURCE = "5cf8f73096256a8f31e491e813e4eb8e"
_SIG_OUTPUT = "d0e6a833031e9bbcd3f4e8bde6ca49a4"

_ID_PREFIXES = {
    "aws:ec2/vpc:Vpc": "vpc-",
    "aws:ec2/subnet:Subnet": "subnet-",
    "aws:ec2/securityGroup:SecurityGroup": "sg-",
    "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup": "sg-",
    "aws:ec2/internetGateway:InternetGateway": "igw-",
    "aws:ec2/natGateway:NatGateway": "nat-",
    "aws:ec2/eip:Eip": "eipalloc-",
    "aws:ec2/routeTable:RouteTable": "rtb-",
    "aws:ec2/vpcEndpoint:VpcEndpoint": "vpce-",
    "aws:ec2/launchTemplate:LaunchTemplate": "lt-",
    "aws:fsx/lustreFileSystem:LustreFileSystem": "fs-",
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": "dra-",
}


def _digest(*parts: str, length: int = 17) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:length]


def plain(value: Any) -> Any:
    """Decode Pulumi's wire-format sentinels into the graph's plain JSON values."""
    if isinstance(value, dict):
        sig = value.get(_SIG_KEY)
        if sig == _SIG_SECRET:
            return SECRET
        if sig == _SIG_RESOURCE:
            return value.get("urn", UNKNOWN)
        if sig == _SIG_OUTPUT:
            if value.get("secret"):
                return SECRET
            return plain(value["value"]) if "value" in value else UNKNOWN
        # Keys repeat across thousands of resources: one string object each (sys.intern) instead of one per use.
        return {sys.intern(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if type(value) is str:
        # So do values (tags, security group ids, "true"): 624,036 strings in the 1,000-group graph, 19,531 distinct.
        return sys.intern(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)  # protobuf Struct has only doubles; sizes and ports are integers
    return value


class OfflineMocks(Mocks):
    """Echo inputs and add the computed outputs the program reads, deterministically."""

    def __init__(self, region: str) -> None:
        self.region = region

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        """Return a stable id and the state of one resource."""
        typ, name, inputs = args.typ, args.name, dict(args.inputs)
        rid = _ID_PREFIXES.get(typ, "") + _digest(typ, name)
        state: dict[str, Any] = dict(inputs)
        if typ.startswith("gcp:"):
            return _gcp_state(typ, name, inputs, state, self.region)
        service = typ.split(":")[1].split("/")[0] if typ.startswith("aws:") else ""
        state.setdefault("arn", f"arn:aws:{service}:{self.region}:{OFFLINE_ACCOUNT}:{name}")
        if typ == "aws:eks/cluster:Cluster":
            oidc_id = _digest("oidc", name, length=32).upper()
            state.update(
                endpoint=f"https://{oidc_id}.gr7.{self.region}.eks.amazonaws.com",
                certificateAuthority={"data": "T0ZGTElORS1DQQ=="},
                identities=[{"oidcs": [{"issuer": f"https://oidc.eks.{self.region}.amazonaws.com/id/{oidc_id}"}]}],
                vpcConfig={**inputs.get("vpcConfig", {}), "clusterSecurityGroupId": "sg-" + _digest("eks-sg", name)},
                arn=f"arn:aws:eks:{self.region}:{OFFLINE_ACCOUNT}:cluster/{inputs.get('name', name)}",
            )
            rid = str(inputs.get("name", name))
        elif typ == "aws:s3/bucket:Bucket":
            bucket = inputs.get("bucket") or f"{inputs.get('bucketPrefix', name)}{_digest('bucket', name, length=26)}"
            state.update(bucket=bucket, arn=f"arn:aws:s3:::{bucket}")
            rid = bucket
        elif typ == "aws:fsx/lustreFileSystem:LustreFileSystem":
            state.update(dnsName=f"{rid}.fsx.{self.region}.amazonaws.com", mountName=_digest("mount", name, length=8))
        elif typ == "aws:kms/key:Key":
            key_id = str(uuid.UUID(_digest("kms", name, length=32)))
            state.update(keyId=key_id, arn=f"arn:aws:kms:{self.region}:{OFFLINE_ACCOUNT}:key/{key_id}")
            rid = key_id
        elif typ == "aws:iam/role:Role":
            state["arn"] = f"arn:aws:iam::{OFFLINE_ACCOUNT}:role/{inputs.get('name', name)}"
            rid = str(inputs.get("name", name))
        elif typ == "aws:iam/openIdConnectProvider:OpenIdConnectProvider":
            url = str(inputs.get("url", "")).removeprefix("https://")
            state["arn"] = f"arn:aws:iam::{OFFLINE_ACCOUNT}:oidc-provider/{url}"
        elif typ == "aws:ec2/launchTemplate:LaunchTemplate":
            state.update(latestVersion=1, defaultVersion=1)
        elif typ == "aws:ec2/vpc:Vpc" and inputs.get("assignGeneratedIpv6CidrBlock"):
            # Amazon's /56, from the documentation prefix 2001:db8::/32, so subnets' /64s are known offline.
            block = _digest("ipv6", name, length=6)
            state["ipv6CidrBlock"] = f"2001:db8:{block[:4]}:{block[4:]}00::/56"
        elif typ == "aws:ec2/eip:Eip":
            state["allocationId"] = rid
        elif typ == "aws:ec2/placementGroup:PlacementGroup":
            rid = str(inputs.get("name", name))
        elif typ == "aws:eks/nodeGroup:NodeGroup":
            # EKS names the node group's Auto Scaling group eks-<node group>-<uuid>.
            asg = f"eks-{inputs.get('nodeGroupName', name)}-{uuid.UUID(_digest('asg', name, length=32))}"
            state["resources"] = [{"autoscalingGroups": [{"name": asg}]}]
        return rid, state

    def call(self, args: MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        """Invokes: the offline account, partition and region, and zone names for AZ IDs."""
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": OFFLINE_ACCOUNT, "arn": f"arn:aws:iam::{OFFLINE_ACCOUNT}:root",
                    "userId": OFFLINE_ACCOUNT}, []
        if args.token == "aws:index/getPartition:getPartition":
            return {"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}, []
        if args.token == "aws:index/getRegion:getRegion":
            return {"name": self.region, "region": self.region}, []
        if args.token == "gcp:organizations/getProject:getProject":
            project = str(args.args.get("projectId") or OFFLINE_GCP_PROJECT)
            return {"number": OFFLINE_GCP_PROJECT_NUMBER, "projectId": project, "name": project}, []
        if args.token == "gcp:storage/getProjectServiceAccount:getProjectServiceAccount":
            return {"emailAddress": f"service-{OFFLINE_GCP_PROJECT_NUMBER}@gs-project-accounts.iam.gserviceaccount.com",
                    "project": args.args.get("project", OFFLINE_GCP_PROJECT)}, []
        if args.token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            ids = [str(v) for f in args.args.get("filters") or [] if f.get("name") == "zone-id"
                   for v in f.get("values") or []]
            return {"zoneIds": ids, "names": [offline_zone_name(self.region, i) for i in ids]}, []
        return {}, []


OFFLINE_GCP_PROJECT = "offline-project"
OFFLINE_GCP_PROJECT_NUMBER = "123456789012"


def _gcp_state(typ: str, name: str, inputs: dict[str, Any], state: dict[str, Any],
               region: str) -> tuple[str, dict[str, Any]]:
    """Id and computed outputs of a GCP resource, in the provider's formats (``projects/<p>/...`` ids, self links,
    service account emails, addresses from the documentation ranges)."""
    project = str(inputs.get("project") or OFFLINE_GCP_PROJECT)
    physical = str(inputs.get("name") or inputs.get("instanceId") or inputs.get("accountId") or name)
    octet = int(_digest("ip", typ, name, length=2), 16)
    rid = _digest(typ, name)
    base = "https://www.googleapis.com/compute/v1"
    if typ == "gcp:compute/network:Network":
        rid = f"projects/{project}/global/networks/{physical}"
        state.update(name=physical, selfLink=f"{base}/{rid}")
    elif typ == "gcp:compute/subnetwork:Subnetwork":
        rid = f"projects/{project}/regions/{inputs.get('region', region)}/subnetworks/{physical}"
        state.update(name=physical, selfLink=f"{base}/{rid}")
    elif typ == "gcp:compute/globalAddress:GlobalAddress":
        state.update(name=physical, address=f"10.{200 + octet % 50}.0.0")
    elif typ == "gcp:container/cluster:Cluster":
        rid = f"projects/{project}/locations/{inputs.get('location', region)}/clusters/{physical}"
        endpoints = inputs.get("controlPlaneEndpointsConfig", {})
        dns = {**endpoints.get("dnsEndpointConfig", {}),
               "endpoint": f"gke-{_digest('dns', name, length=32)}.{inputs.get('location', region)}.gke.goog"}
        state.update(name=physical, endpoint=f"172.16.{octet}.2",
                     masterAuth={**inputs.get("masterAuth", {}), "clusterCaCertificate": "T0ZGTElORS1DQQ=="},
                     controlPlaneEndpointsConfig={**endpoints, "dnsEndpointConfig": dns})
    elif typ == "gcp:container/nodePool:NodePool":
        state.update(name=physical)
    elif typ == "gcp:storage/bucket:Bucket":
        rid = physical
        state.update(name=physical, url=f"gs://{physical}")
    elif typ == "gcp:kms/keyRing:KeyRing":
        rid = f"projects/{project}/locations/{inputs.get('location', region)}/keyRings/{physical}"
    elif typ == "gcp:kms/cryptoKey:CryptoKey":
        rid = f"{inputs.get('keyRing', '')}/cryptoKeys/{physical}"
    elif typ == "gcp:serviceaccount/account:Account":
        email = f"{physical}@{project}.iam.gserviceaccount.com"
        rid = f"projects/{project}/serviceAccounts/{email}"
        state.update(email=email, name=rid, member=f"serviceAccount:{email}")
    elif typ == "gcp:lustre/instance:Instance":
        state["mountPoint"] = f"10.{200 + octet % 50}.0.2@tcp:/{inputs.get('filesystem', 'lustrefs')}"
    elif typ == "gcp:filestore/instance:Instance":
        state["networks"] = [{**n, "ipAddresses": [f"10.{200 + octet % 50}.0.2"]} for n in inputs.get("networks", [])]
    elif typ == "gcp:parallelstore/instance:Instance":
        state["accessPoints"] = [f"10.{200 + octet % 50}.0.{i}" for i in (2, 3, 4)]
    elif typ == "gcp:monitoring/notificationChannel:NotificationChannel":
        rid = f"projects/{project}/notificationChannels/{int(_digest('channel', name, length=12), 16)}"
        state["name"] = rid
    elif typ == "gcp:sql/databaseInstance:DatabaseInstance":
        # A private IP from the private services access range (the instance has no public one).
        rid = physical
        state.update(name=physical, privateIpAddress=f"10.{200 + octet % 50}.0.3",
                     connectionName=f"{project}:{inputs.get('region', region)}:{physical}")
    elif typ == "gcp:projects/serviceIdentity:ServiceIdentity":
        agent = {"container.googleapis.com": "container-engine-robot",
                 "sqladmin.googleapis.com": "gcp-sa-cloud-sql"}.get(str(inputs.get("service")), "gcp-sa")
        email = f"service-{OFFLINE_GCP_PROJECT_NUMBER}@{agent}.iam.gserviceaccount.com"
        state.update(email=email, member=f"serviceAccount:{email}")
    elif typ == "gcp:storage/managedFolder:ManagedFolder":
        state["name"] = physical
    return rid, state


def offline_zone_name(region: str, zone_id: str) -> str:
    """A placeholder zone name for an AZ ID offline (``use1-az4`` -> ``us-east-1d``).

    Real accounts map IDs to names differently; only ``aws.get_availability_zones`` in a real run knows.
    """
    number = zone_id.rsplit("-az", 1)[-1]
    return region + (chr(ord("a") + int(number) - 1) if number.isdigit() and 0 < int(number) <= 26 else "?")


class _Discard(dict[str, Any]):
    """A mapping that keeps nothing: the mock monitor's copy of every resource's state, which only the
    ``getResource`` invoke and ``ExistsResource`` read (this program uses neither)."""

    def __setitem__(self, key: str, value: Any) -> None:
        return None


class RecordingMonitor(MockMonitor):
    """A mock monitor that also keeps each raw registration request, with parent and options.

    It records a resource once (as a :class:`GraphResource`), not twice: the SDK mock's own state copy is
    discarded, so the two RPCs that would read it fail loudly instead of answering wrongly.
    """

    def __init__(self, mocks: Mocks) -> None:
        super().__init__(mocks)
        self.records: list[GraphResource] = []
        self.resources = _Discard()

    def Invoke(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        """Answer invokes through the mocks; ``getResource`` (reading back a registered state) is not kept."""
        if request.tok == "pulumi:pulumi:getResource":
            raise NotImplementedError("the offline engine keeps no resource state to read back (getResource)")
        return super().Invoke(request)  # type: ignore[no-untyped-call]

    def ExistsResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        """Not supported offline: no resource state is kept."""
        raise NotImplementedError("the offline engine keeps no resource state (ExistsResource)")

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        """Record the request, then let the mock monitor answer it."""
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        inputs = json_format.MessageToDict(request.object) if request.HasField("object") else {}
        self.records.append(GraphResource(
            urn=response.urn,
            type=request.type,
            name=request.name,
            parent=request.parent or None,
            provider=request.provider or None,
            inputs=plain(inputs),
            protect=bool(request.protect),
            retain_on_delete=bool(request.retainOnDelete),
            dependencies=list(request.dependencies),
            ignore_changes=sorted(request.ignoreChanges),
        ))
        return response


class ProgramError(Exception):
    """The program raised; carries what it had registered by then (nothing, for a bad spec)."""

    def __init__(self, message: str, graph: ResourceGraph) -> None:
        super().__init__(message)
        self.graph = graph


@dataclass(frozen=True)
class ProgramRun:
    """What one offline run produced."""

    graph: ResourceGraph
    outputs: dict[str, Any]


def run_program(stack: str, config: dict[str, Any], region: str, program: Path | None = None) -> ProgramRun:
    """Run the program as stack ``stack`` with ``config`` (Pulumi keys, e.g. ``gpu-cluster:spec``).

    The program is :func:`components.program.main` (what ``__main__.py`` calls), imported as a module so
    that an installed package runs it; ``program`` runs a file instead (the project's ``__main__.py``).

    Raises:
        ProgramError: the program raised; callers validate the spec first so users see a clean
            message, and the exception's graph shows what was registered before the failure.
    """

    def _run() -> ProgramRun:
        with _offline_runtime():
            return _run_in_context()

    def _run_in_context() -> ProgramRun:
        pulumi.runtime.set_all_config({k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()})
        monitor = RecordingMonitor(OfflineMocks(region))
        pulumi.runtime.set_mocks(monitor.mocks, project=PROJECT, stack=stack, preview=True, monitor=monitor)
        root = pulumi.runtime.settings.get_root_resource()

        def body() -> None:
            if program is not None:
                runpy.run_path(str(program), run_name="__main__")
            else:
                from components.program import main

                main()

        try:
            _sync_await(run_pulumi_func(body))
        except Exception as err:
            raise ProgramError(str(err), ResourceGraph(stack, monitor.records)) from err
        outputs: dict[str, Any] = {}
        if root is not None:
            stack_outputs = getattr(root, "outputs", {}) or {}
            outputs = {k: _resolve(v) for k, v in stack_outputs.items()}
        return ProgramRun(ResourceGraph(stack, monitor.records), outputs)

    return contextvars.Context().run(_run)


@contextmanager
def _offline_runtime() -> Iterator[None]:
    """What a real engine needs and this one does not, switched off for the run.

    - The SDK walks the Python stack for every resource to report its source position (``traceback``
      over every frame): 13 % of a large run. The mocks have no use for it.
    - The cyclic garbage collector rescans every live SDK object (hundreds of thousands in a large
      stack) each time allocations pass its first threshold; raising that threshold during the run and
      freezing what was allocated before it keeps collection for the program's own garbage. Each wait
      below collects the garbage of its batch of registrations and freezes the rest, so no collection
      rescans the whole run (``gc.unfreeze`` at the end hands everything back to the collector).
    - The program registers every resource before the monitor answers the first one, so a large stack
      held tens of kilobytes per pending registration at once. Every :data:`DRAIN_EVERY` registrations
      the program now waits for the answers already asked for (the RPCs the SDK's RPC manager tracks),
      as its own ``register_resource_transform`` does with ``_wait_for_pending_rpcs``.
    """
    runtime_resource: Any = importlib.import_module("pulumi.runtime.resource")
    resource_module: Any = importlib.import_module("pulumi.resource")
    saved_trace = runtime_resource._get_stack_trace
    saved_register = resource_module.register_resource
    saved_threshold = gc.get_threshold()
    runtime_resource._get_stack_trace = _no_stack_trace
    resource_module.register_resource = _Draining(saved_register)
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, saved_threshold[1], saved_threshold[2])
    try:
        yield
    finally:
        runtime_resource._get_stack_trace = saved_trace
        resource_module.register_resource = saved_register
        gc.set_threshold(*saved_threshold)
        gc.unfreeze()


class _Draining:
    """``register_resource`` that waits, every :data:`DRAIN_EVERY` calls, for the RPCs already asked for (the
    registrations and invokes the SDK's RPC manager tracks), then forgets the ones that finished cleanly.

    The RPC manager keeps every RPC's task (with its finished coroutine) until ``wait_for_rpcs`` pops them at
    the end of the program, only to await them again: for a finished task that did not fail, that changes
    nothing, so the engine drops them here; failed or unfinished ones stay for ``wait_for_rpcs`` to raise.
    Reading the manager's list instead of every live task (``asyncio.all_tasks()``, hundreds of thousands by
    the end of a large stack) keeps each wait cheap enough to wait often, so fewer registrations are in
    flight at once.
    """

    def __init__(self, register: Any) -> None:
        self.register = register
        self.calls = 0
        self.waiting = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = self.register(*args, **kwargs)
        self.calls += 1
        if self.calls % DRAIN_EVERY == 0 and not self.waiting:
            self.waiting = True
            try:
                manager: Any = _get_rpc_manager()
                _pump(_settle(manager))
                manager.rpcs[:] = [rpc for rpc in manager.rpcs
                                   if not rpc.done() or rpc.cancelled() or rpc.exception() is not None]
                gc.collect()  # the garbage of these registrations (the SDK makes reference cycles) ...
                gc.freeze()  # ... and the rest is no longer scanned: each collection sees one batch, not the run
            finally:
                self.waiting = False
        return result


async def _settle(manager: Any) -> None:
    """Until every RPC the manager tracks is done (those started since, too)."""
    await asyncio.sleep(0)  # the RPC tasks queued by the registrations start and join the manager's list
    while True:
        live = [rpc for rpc in manager.rpcs if not rpc.done()]
        if not live:
            return
        await asyncio.wait(live)


class _Pad(asyncio.Handle):
    """A cancelled handle the event loop skips; one object fills every slot :func:`_pump` pads."""

    def __init__(self) -> None:
        self._cancelled = True
        self._callback = None
        self._args = ()
        self._loop = None
        self._source_traceback = None
        self._repr = None
        self._context = None


_PAD = _Pad()


def _pump(awaitable: Any) -> Any:
    """``_sync_await`` for the engine's waits, without its growing garbage.

    Called inside a running loop step, ``_sync_await`` pumps the loop until ``awaitable`` completes, then pads
    the ready queue back to its length on entry with new cancelled handles (so the step that called it finds
    what it expects to pop). The program registers every resource inside one step, so each wait pads again
    for every handle queued since the last one: a large stack held hundreds of thousands of cancelled
    handles, each with its own lambda and context copy, until the end. The padding here is one shared
    cancelled handle, as many times as needed (one pointer each).
    """
    loop = asyncio.get_event_loop()
    fut = asyncio.ensure_future(awaitable, loop=loop)
    if not loop.is_running():
        return loop.run_until_complete(fut)
    ready: Any = loop._ready  # type: ignore[attr-defined]
    task = asyncio.current_task(loop)
    if task is not None:
        asyncio.tasks._leave_task(loop, task)
    ntodo = len(ready)
    while not fut.done():
        loop._run_once()  # type: ignore[attr-defined]
    if len(ready) < ntodo:
        ready.extend(itertools.repeat(_PAD, ntodo - len(ready)))
    if task is not None:
        asyncio.tasks._enter_task(loop, task)
    return fut.result()


def _no_stack_trace() -> Any:
    from pulumi.runtime.proto import source_pb2

    return source_pb2.StackTrace()


def _resolve(value: Any) -> Any:
    if isinstance(value, pulumi.Output):
        future = value.future()
        return _resolve(_sync_await(future)) if future is not None else None
    if isinstance(value, dict):
        return {k: _resolve(v) for k, v in value.items()}
    return value
