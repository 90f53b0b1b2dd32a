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
import importlib
import itertools
import json
import runpy
import sys
import threading
from collections.abc import Iterator, Mapping
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

from blueprint import clouds
from blueprint.graph.cloud import cloud_graph, stable_id
from blueprint.graph.model import SECRET, UNKNOWN, GraphResource, ResourceGraph

PROJECT = "gpu-cluster"
GC_THRESHOLD = 100_000  # generation-0 threshold during a run (Python's default is 700)
DRAIN_EVERY = 250  # registrations between two waits for the mock monitor's answers

_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SIG_SECRET = "1b47061264138c4ac30d75fd1eb44270"
_SIG_RESOURCE = "5cf8f73096256a8f31e491e813e4eb8e"
_SIG_OUTPUT = "d0e6a833031e9bbcd3f4e8bde6ca49a4"

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
    """Echo inputs and add the computed outputs the program reads, deterministically: each cloud's ``graph`` module
    answers for its resources and invokes (:class:`blueprint.graph.cloud.CloudGraph`); any other resource (a
    Kubernetes object) gets a stable id and its inputs back."""

    def __init__(self, region: str, previous: Mapping[str, tuple[str, str, dict[str, Any]]] | None = None) -> None:
        self.region = region
        # A previous run's answers (blueprint.graph.previous): urn -> (type, id, computed outputs).
        self.previous = previous or {}
        # The URN being registered, per thread: the SDK registers from executor threads, and RecordingMonitor sets it
        # on the thread that then calls new_resource (MockResourceArgs has no URN).
        self.registering = threading.local()
        # Every invoke token the program called (aws:index/getCallerIdentity:getCallerIdentity, ...): the graph keeps
        # resources only, and the deployer's policy needs the invokes' permissions too.
        self.invokes: set[str] = set()

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        """Return a stable id and the state of one resource; a resource the previous run had keeps that run's id and
        computed outputs, as the provider's state gives them to a second ``pulumi up``."""
        cloud = clouds.of_type(args.typ)
        if cloud is None:
            rid, state = stable_id(args.typ, args.name), dict(args.inputs)
        else:
            rid, state = cloud_graph(cloud).new_resource(args.typ, args.name, dict(args.inputs), self.region)
        before = self.previous.get(getattr(self.registering, "urn", ""))
        if before is not None and before[0] == args.typ:
            rid = before[1] or rid
            state.update(before[2])
        return rid, state

    def call(self, args: MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        """Invokes, answered by the cloud whose package the token names (empty for any other)."""
        self.invokes.add(args.token)
        cloud = clouds.of_type(args.token)
        answer = cloud_graph(cloud).call(args.token, args.args, self.region) if cloud is not None else None
        return answer or {}, []


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
        if isinstance(self.mocks, OfflineMocks) and self.mocks.previous:
            self.mocks.registering.urn = self.make_urn(request.parent, request.type, request.name)
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
    invokes: frozenset[str] = frozenset()  # the invoke tokens the program called


def run_program(stack: str, config: dict[str, Any], region: str, program: Path | None = None,
                previous: Mapping[str, tuple[str, str, dict[str, Any]]] | None = None) -> ProgramRun:
    """Run the program as stack ``stack`` with ``config`` (Pulumi keys, e.g. ``gpu-cluster:spec``).

    The program is :func:`components.program.main` (what ``__main__.py`` calls), imported as a module so
    that an installed package runs it; ``program`` runs a file instead (the project's ``__main__.py``).
    ``previous`` answers the resources a previous run had with its ids and outputs
    (:func:`blueprint.graph.previous.load_previous`), as a second ``pulumi up`` meets them.

    Raises:
        ProgramError: the program raised; callers validate the spec first so users see a clean
            message, and the exception's graph shows what was registered before the failure.
    """

    def _run() -> ProgramRun:
        with _offline_runtime():
            return _run_in_context()

    def _run_in_context() -> ProgramRun:
        pulumi.runtime.set_all_config({k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()})
        monitor = RecordingMonitor(OfflineMocks(region, previous))
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
        mocks = monitor.mocks
        invokes = frozenset(mocks.invokes) if isinstance(mocks, OfflineMocks) else frozenset()
        return ProgramRun(ResourceGraph(stack, monitor.records), outputs, invokes)

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
