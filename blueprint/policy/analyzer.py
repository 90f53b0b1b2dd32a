"""The CrossGuard path: the pack run through ``pulumi_policy``'s analyzer servicer, in-process.

The servicer (the object the Pulumi CLI talks to over gRPC under ``pulumi preview --policy-pack``) is built without
starting its server, configured as ``--policy-pack-config`` configures it, and called with ``Analyze`` (each
resource) and ``AnalyzeStack`` (the whole stack) requests made from the graph. It is what the engine runs, so it is
the reference: :mod:`blueprint.policy.direct` (the default path, no protobuf in between) must give the same report,
and tests/policy/test_engines.py holds both to it. Select it with ``run_policies(..., engine="analyzer")`` or
``BLUEPRINT_POLICY_ENGINE=analyzer``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

from google.protobuf import json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2 as proto

from blueprint.graph.model import GraphResource, ResourceGraph
from blueprint.policy.report import LEVEL_NAMES, PACK_VERSION, LevelConfig, Pack, PolicyReport, Violation

# The analyzer's severity enum (pulumi/proto/analyzer.proto, PolicySeverity) by the names the report uses.
SEVERITIES = {proto.POLICY_SEVERITY_LOW: "low", proto.POLICY_SEVERITY_MEDIUM: "medium",
              proto.POLICY_SEVERITY_HIGH: "high", proto.POLICY_SEVERITY_CRITICAL: "critical",
              proto.POLICY_SEVERITY_UNSPECIFIED: "unspecified"}


def _struct(values: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    json_format.ParseDict(values, out)
    return out


def _options(res: GraphResource) -> proto.AnalyzerResourceOptions:
    return proto.AnalyzerResourceOptions(protect=res.protect, parent=res.parent or "",
                                         ignoreChanges=list(res.ignore_changes or []))


def _providers(graph: ResourceGraph) -> dict[str, proto.AnalyzerProviderResource]:
    """Each provider of the graph as the analyzer sees it, built once (every resource refers to one)."""
    return {p.urn: proto.AnalyzerProviderResource(type=p.type, properties=_struct(p.inputs), urn=p.urn, name=p.name)
            for p in graph.resources if p.is_provider}


def _collect(report: PolicyReport, graph: ResourceGraph, pack: Pack, response: Any, default_urn: str = "") -> None:
    fixes = {r.name: r.remediation for r in pack.rules}
    for d in response.diagnostics:
        urn = d.urn or default_urn
        res = graph.get(urn)
        message, field_, value = pack.decode(d.message)
        report.violations.append(Violation(
            policy=d.policyName,
            enforcement=LEVEL_NAMES.get(d.enforcementLevel, "advisory"),
            severity=SEVERITIES.get(d.severity, "unspecified"),
            urn=urn,
            type=res.type if res else "",
            message=message,
            field=field_ or "",
            value=None if value is pack.absent else value,
            fix=fixes.get(d.policyName, ""),
        ))
    for na in response.not_applicable:
        report.not_applicable.append((na.policy_name, na.reason))


class _Memo:
    """Convert each protobuf message (its decoded dict, and that dict's read-only proxy) once per run, not
    once per policy.

    The analyzer turns a resource's properties into a dict for every policy, and every resource of the
    stack once more for every stack policy: 7,953 conversions for 150 resources. The request messages
    live for the whole run and protobuf returns the same wrapper for a field each time, so a cache keyed
    by object identity (holding the object, so identities are not reused) gives identical verdicts.
    """

    def __init__(self) -> None:
        self._dicts: dict[int, tuple[Any, Any]] = {}
        self._decoded: dict[tuple[int, bool], tuple[Any, Any]] = {}

    def message_to_dict(self, message: Any, *args: Any, **kwargs: Any) -> Any:
        hit = self._dicts.get(id(message))
        if hit is None or args or kwargs:
            value = json_format.MessageToDict(message, *args, **kwargs)
            if not args and not kwargs:
                self._dicts[id(message)] = (message, value)
            return value
        return hit[1]

    def once(self, original: Any) -> Any:
        """``original`` applied once per argument object (the unknown-checking proxy of a decoded dict)."""
        cache: dict[int, tuple[Any, Any]] = {}

        def call(value: Any) -> Any:
            hit = cache.get(id(value))
            if hit is None:
                hit = cache[id(value)] = (value, original(value))
            return hit[1]
        return call

    def per_request(self, original: Any) -> Any:
        """A servicer method applied once per request message (a stack policy rebuilds every resource's options
        and provider view for each policy: 32 times each)."""
        cache: dict[int, tuple[Any, Any]] = {}

        def call(servicer: Any, request: Any) -> Any:
            hit = cache.get(id(request))
            if hit is None:
                hit = cache[id(request)] = (request, original(servicer, request))
            return hit[1]
        return call

    def deserialize(self, original: Any) -> Any:
        def decode(props: Any, keep_unknowns: bool = False) -> Any:
            key = (id(props), keep_unknowns)
            hit = self._decoded.get(key)
            if hit is None:
                hit = self._decoded[key] = (props, original(props, keep_unknowns))
            return hit[1]
        return decode


@contextmanager
def _converted_once() -> Iterator[None]:
    """Patch the analyzer module's conversions with :class:`_Memo` for the duration of one run."""
    analyzer: Any = importlib.import_module("pulumi_policy.policy")
    servicer = analyzer._PolicyAnalyzerServicer
    memo = _Memo()
    saved = analyzer.json_format, analyzer.deserialize_properties, analyzer.unknown_checking_proxy
    saved_views = servicer._get_resource_options, servicer._get_provider_resource
    analyzer.json_format = SimpleNamespace(MessageToDict=memo.message_to_dict)
    analyzer.deserialize_properties = memo.deserialize(saved[1])
    analyzer.unknown_checking_proxy = memo.once(saved[2])
    servicer._get_resource_options = memo.per_request(saved_views[0])
    servicer._get_provider_resource = memo.per_request(saved_views[1])
    try:
        yield
    finally:
        analyzer.json_format, analyzer.deserialize_properties, analyzer.unknown_checking_proxy = saved
        servicer._get_resource_options, servicer._get_provider_resource = saved_views


def analyze(graph: ResourceGraph, levels: LevelConfig, pack: Pack, report: PolicyReport) -> None:
    """Run the pack's policies at ``levels`` on the graph through the analyzer servicer, adding what they report
    to ``report`` (in the analyzer's order: each resource's diagnostics, then the stack's)."""
    with _converted_once():
        _analyze(graph, levels, pack, report)


def _analyze(graph: ResourceGraph, levels: LevelConfig, pack: Pack, report: PolicyReport) -> None:
    from pulumi_policy.policy import EnforcementLevel, _PolicyAnalyzerServicer

    servicer = _PolicyAnalyzerServicer(pack.name, PACK_VERSION, list(pack.policies), EnforcementLevel.ADVISORY)
    servicer.Configure(proto.ConfigureAnalyzerRequest(policyConfig={
        name: proto.PolicyConfig(enforcementLevel=level, properties=_struct(props))  # type: ignore[arg-type]
        for name, (level, props) in levels.items()
    }), None)  # type: ignore[no-untyped-call]
    stack_resources = []
    providers = _providers(graph)
    for res in graph.resources:
        provider = providers.get(res.provider_urn) if res.provider_urn else None
        props = _struct(res.inputs)
        if not res.is_component and not res.is_provider and res.type != "pulumi:pulumi:Stack":
            request = proto.AnalyzeRequest(type=res.type, properties=props, urn=res.urn, name=res.name,
                                           options=_options(res), provider=provider)
            _collect(report, graph, pack, servicer.Analyze(request, None), res.urn)  # type: ignore[no-untyped-call]
        stack_resources.append(proto.AnalyzerResource(
            type=res.type, properties=props, urn=res.urn, name=res.name, options=_options(res),
            provider=provider, parent=res.parent or "", dependencies=list(res.dependencies)))
    stack_request = proto.AnalyzeStackRequest(resources=stack_resources)
    _collect(report, graph, pack, servicer.AnalyzeStack(stack_request, None))  # type: ignore[no-untyped-call]
