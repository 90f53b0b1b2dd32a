"""The direct path: each policy's ``validate`` called on the graph's data, without the analyzer's protobuf.

``pulumi_policy``'s analyzer servicer (``pulumi_policy/policy.py``, ``_PolicyAnalyzerServicer.Analyze`` and
``AnalyzeStack``, version 1.21) receives a resource's inputs as a protobuf ``Struct``, turns it back into a dict
(``json_format.MessageToDict``), decodes Pulumi's signature objects (``deserialize_properties``: secrets unwrapped,
assets and archives made ``pulumi.Asset``/``Archive`` objects) and wraps the result in read-only proxies that raise
``UnknownValueError`` on a value unknown during preview (``unknown_checking_proxy``). It does that per resource and
per policy; the in-process run of :mod:`blueprint.policy.analyzer` spent about 90 % of the pass there.

Here the same Python values are built once per resource, in one walk of the graph's inputs:

- every number a float, as a ``Struct`` holds only doubles (``google.protobuf.Value.number_value``; booleans stay
  booleans), and a non-finite one refused as ``MessageToDict`` refuses it;
- a nested object carrying Pulumi's signature key decoded by ``pulumi_policy.deserialize`` itself;
- lists and objects wrapped in ``pulumi_policy.proxy``'s own ``_ListProxy``/``_DictProxy``, with the key path each
  carries for the ``UnknownValueError`` message.

and the policies get the analyzer's argument objects (``ResourceValidationArgs``, ``StackValidationArgs``,
``PolicyResource`` with parent and dependencies linked, ``PolicyResourceOptions``, ``PolicyProviderResource``), the
policy's config with its numbers as doubles (a copy per call, None when empty), the analyzer's empty stack tags, and
a ``report_violation`` that checks and formats as the analyzer's does (description, a line break, the message; a
resource policy's own URN unless it names one). The analyzer's enforcement rules hold: a disabled policy is not run,
``remediate`` reports as ``mandatory``, a resource policy without ``validate`` is not applicable on each resource, an
``UnknownValueError`` that escapes a policy is an advisory finding ("can't run policy ..."), ``not_applicable()``
is recorded with its reason and any other exception propagates.

Deliberate differences, none of which the pack can see in its verdicts (tests/policy/test_engines.py):

- an object's keys come in the graph's order; the analyzer's come in the order of protobuf's map (a hash order that
  is neither the program's nor stable across protobuf builds);
- one view of a resource serves every policy (the analyzer's memo in :mod:`blueprint.policy.analyzer` already shares
  one per request), and ``opts.ignore_changes``, ``aliases`` and ``additional_secret_outputs`` are lists where the
  analyzer passes protobuf's repeated containers of the same strings;
- Pulumi runtime settings are not configured from ``PULUMI_*`` variables (the pack reads no Pulumi config).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from inspect import isawaitable
from types import MappingProxyType
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.deserialize import SPECIAL_SIG_KEY, _deserialize_property
from pulumi_policy.policy import _NotApplicableError
from pulumi_policy.proxy import UnknownValueError, _DictProxy, _ListProxy, _proxy_helper

from blueprint.graph.model import GraphResource, ResourceGraph
from blueprint.policy.report import LEVEL_NAMES, LEVELS, PACK_VERSION, LevelConfig, Pack, PolicyReport, Violation

# The analyzer's level for each configured level number (_PolicyAnalyzerServicer._convert_enforcement_level).
_ENFORCEMENT = {LEVELS[level.value]: level for level in EnforcementLevel}
# The severity names the report uses (the analyzer maps any other value, None included, to "unspecified").
_SEVERITY = {Severity.LOW: "low", Severity.MEDIUM: "medium", Severity.HIGH: "high", Severity.CRITICAL: "critical"}
_STACK_TAGS: Any = MappingProxyType({})  # the analyzer's stack tags until ConfigureStack, which the CLI never sends
_NOT_TARGETS = ("pulumi:pulumi:Stack",)


def wire(value: Any) -> Any:
    """``value`` as the analyzer reads it back from a protobuf ``Struct`` (``ParseDict`` then ``MessageToDict``):
    plain dicts, lists, strings and booleans, every number a float; a value JSON cannot hold is refused as
    ``ParseDict`` refuses it."""
    t = type(value)
    if t is str or t is bool or value is None:
        return value
    if t is int:
        return float(value)
    if t is float:
        return _finite(value)
    if t is dict:
        return {k: wire(v) for k, v in value.items()}
    if t is list:
        return [wire(v) for v in value]
    return wire(_plain(value))


def _finite(value: float) -> float:
    if not math.isfinite(value):  # json_format: "Fail to serialize Infinity/NaN for Value.number_value"
        raise ValueError(f"Fail to serialize {value} for Value.number_value")
    return value


def _plain(value: Any) -> Any:
    """A subclass of a JSON type as ``ParseDict`` takes it (its checks in order: dict, list, None, bool, str,
    number), converted to the base type; anything else refused."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return list(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int | float):
        return float(value)
    raise TypeError(f"Value {value!r} has unexpected type {type(value)}")


def props_view(inputs: dict[str, Any]) -> Any:
    """A resource's inputs as the analyzer hands them to a policy:
    ``unknown_checking_proxy(deserialize_properties(MessageToDict(<Struct of inputs>)))``."""
    return _DictProxy({key: _view(value, [], key) for key, value in inputs.items()}, [])


def _view(value: Any, path: list[str], key: str) -> Any:
    """One value under ``path`` (the proxies' key path), at ``key``: see :func:`props_view`."""
    t = type(value)
    if t is str or t is bool or value is None:
        return value
    if t is int:
        return float(value)
    if t is float:
        return _finite(value)
    here = [*path, key]
    if t is dict:
        if SPECIAL_SIG_KEY in value:  # a secret, asset or archive object: pulumi_policy decodes it
            return _proxy_helper(_deserialize_property(wire(value)), here)
        return _DictProxy({k: _view(v, here, k) for k, v in value.items()}, here)
    if t is list:
        return _ListProxy([_view(v, here, str(i)) for i, v in enumerate(value)], here)
    return _view(_plain(value), path, key)


def _options(res: GraphResource) -> PolicyResourceOptions:
    """``_PolicyAnalyzerServicer._get_resource_options`` of the request the analyzer path builds."""
    return PolicyResourceOptions(res.protect, list(res.ignore_changes or []), None, [], PolicyCustomTimeouts(0, 0, 0),
                                 [], res.parent or None)


class _Run:
    """A policy as the analyzer runs it: the level it reports at, its severity and config."""

    def __init__(self, pack: str, policy: ResourceValidationPolicy | StackValidationPolicy, level: EnforcementLevel,
                 props: dict[str, Any] | None) -> None:
        self.pack = pack
        self.policy = policy
        self.name = policy.name
        # A resource policy that only remediates is not applicable on each resource (Analyze).
        self.validates = not isinstance(policy, ResourceValidationPolicy) or policy.has_validation()
        self.description = policy.description
        # "If we ran a remediation, but we are still somehow triggering a violation, 'downgrade' the level we report
        # from remediate to mandatory" (Analyze); "Stack policies cannot be remediated" (AnalyzeStack).
        reported = EnforcementLevel.MANDATORY if level == EnforcementLevel.REMEDIATE else level
        self.enforcement = LEVEL_NAMES.get(LEVELS[reported.value], "advisory")
        self.severity = _SEVERITY.get(policy.severity, "unspecified")  # type: ignore[arg-type]
        self.config = wire(props) if props else {}

    def get_config(self) -> dict[str, Any] | None:
        """``_get_policy_config``: a copy of the configured properties, None when there are none."""
        return self.config.copy() if self.config else None


Found = tuple[str, str, str, str, str]  # policy, enforcement, severity, urn, message


def _reporter(run: _Run, found: list[Found], default_urn: str) -> Callable[..., None]:
    """``_create_report_violation``: the same checks and message; a diagnostic without a URN is the resource's."""
    def report_violation(message: str, urn: str | None = None) -> None:
        if message and not isinstance(message, str):
            raise TypeError("Expected message to be a string")
        if urn is not None and not isinstance(urn, str):
            raise TypeError("Expected urn to be a string")
        text = run.description + (f"\n{message}" if message else "")
        # The analyzer's diagnostic is a protobuf message, whose strings must encode as UTF-8: a lone surrogate raises
        # UnicodeEncodeError (a ValueError) in the policy, as it does there.
        text.encode("utf-8")
        (urn or "").encode("utf-8")
        found.append((run.name, run.enforcement, run.severity, urn or default_urn, text))
    return report_violation


def _call(run: _Run, args: Any, report: Callable[..., None], found: list[Found], default_urn: str,
          not_applicable: list[tuple[str, str]]) -> None:
    """``policy.validate(args, report)`` with the analyzer's handling of what it returns and raises."""
    try:
        result = run.policy.validate(args, report)
        if isawaitable(result):
            import asyncio

            loop = asyncio.new_event_loop()
            task: Any = asyncio.Task(result, loop=loop)  # type: ignore[arg-type]
            loop.run_until_complete(task)
            loop.close()
    except UnknownValueError as err:
        found.append((run.name, "advisory", "unspecified", default_urn,
                      f"can't run policy '{run.name}' from policy pack '{run.pack}@v{PACK_VERSION}' during "
                      f"preview: {err.message}"))
    except _NotApplicableError as err:
        not_applicable.append((run.name, err.reason or ""))


def _runs(pack: Pack, levels: LevelConfig) -> tuple[list[_Run], list[_Run]]:
    """(resource policies, stack policies) that run at their levels, in the pack's order; a policy the config does
    not name runs at its own level, or advisory (the pack's default)."""
    resource: list[_Run] = []
    stack: list[_Run] = []
    for policy in pack.policies:
        if policy.name in levels:
            number, props = levels[policy.name]
            level = _ENFORCEMENT.get(number)
            if level is None:
                raise AssertionError(f"unknown enforcement level: {number}")
        else:
            level, props = policy.enforcement_level or EnforcementLevel.ADVISORY, {}
        if level == EnforcementLevel.DISABLED:
            continue
        if isinstance(policy, ResourceValidationPolicy):
            resource.append(_Run(pack.name, policy, level, props))
        elif isinstance(policy, StackValidationPolicy):
            stack.append(_Run(pack.name, policy, level, props))
    return resource, stack


def run_direct(graph: ResourceGraph, levels: LevelConfig, pack: Pack, report: PolicyReport) -> None:
    """Run the pack's policies at ``levels`` on the graph, adding what they report to ``report`` in the analyzer's
    order (each resource's findings in the pack's order, then the stack policies')."""
    resource_runs, stack_runs = _runs(pack, levels)
    found: list[Found] = []
    not_applicable = report.not_applicable
    providers = {p.urn: PolicyProviderResource(p.type, props_view(p.inputs), p.urn, p.name)
                 for p in graph.resources if p.is_provider}
    views: list[PolicyResource] = []
    for res in graph.resources:
        provider = providers.get(res.provider_urn) if res.provider_urn else None
        props = props_view(res.inputs)
        opts = _options(res)
        views.append(PolicyResource(res.type, props, res.urn, res.name, opts, provider, None, [], {}))
        if res.is_component or res.is_provider or res.type in _NOT_TARGETS:
            continue
        for run in resource_runs:
            if not run.validates:
                not_applicable.append((run.name, "Policy does not implement validate"))
                continue
            args: Any = ResourceValidationArgs(res.type, props, res.urn, res.name, opts, provider, run.get_config(),
                                               _STACK_TAGS)
            _call(run, args, _reporter(run, found, res.urn), found, res.urn, not_applicable)
    if stack_runs:
        _link(graph, views)
        for run in stack_runs:
            args = StackValidationArgs(list(views), run.get_config(), _STACK_TAGS)
            _call(run, args, _reporter(run, found, ""), found, "", not_applicable)
    _collect(report, graph, pack, found)


def _link(graph: ResourceGraph, views: list[PolicyResource]) -> None:
    """Each view's parent and dependencies, the resources of the stack they name (AnalyzeStack: the last resource
    with a URN wins, a URN not in the stack is left out)."""
    by_urn = {view.urn: view for view in views}
    for res, view in zip(graph.resources, views, strict=True):
        if res.parent and res.parent in by_urn:
            view.parent = by_urn[res.parent]
        view.dependencies.extend(by_urn[d] for d in res.dependencies if d in by_urn)


def _collect(report: PolicyReport, graph: ResourceGraph, pack: Pack, found: list[Found]) -> None:
    """The findings as the report's violations (the analyzer path's ``_collect``)."""
    fixes = {r.name: r.remediation for r in pack.rules}
    for policy, enforcement, severity, urn, text in found:
        res = graph.get(urn)
        message, field_, value = pack.decode(text)
        report.violations.append(Violation(
            policy=policy, enforcement=enforcement, severity=severity, urn=urn, type=res.type if res else "",
            message=message, field=field_ or "", value=None if value is pack.absent else value,
            fix=fixes.get(policy, "")))
