"""The offline policy runner: the real CrossGuard pack in ``policies/``, run in-process on a graph.

The pack's analyzer (``pulumi_policy``'s servicer, the object the CLI talks to over gRPC) is built
without starting its server, configured like ``--policy-pack-config`` configures it, and called with
``Analyze`` (each resource) and ``AnalyzeStack`` (the whole stack) requests made from the graph. The
verdicts are therefore the ones ``pulumi preview --policy-pack policies`` gives.
"""

from __future__ import annotations

import gc
import importlib
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jsonschema
from google.protobuf import json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2 as proto

from blueprint.files.input import read_text_limited
from blueprint.files.markdown import md_code, md_text
from blueprint.graph.model import GraphResource, ResourceGraph, strict_json

PACK_DIR = Path(__file__).resolve().parents[2] / "policies"
LEVELS: dict[str, int] = {"advisory": proto.ADVISORY, "mandatory": proto.MANDATORY, "remediate": proto.REMEDIATE,
          "disabled": proto.DISABLED}
LEVEL_NAMES = {v: k for k, v in LEVELS.items()}
SEVERITIES = {proto.POLICY_SEVERITY_LOW: "low", proto.POLICY_SEVERITY_MEDIUM: "medium",
              proto.POLICY_SEVERITY_HIGH: "high", proto.POLICY_SEVERITY_CRITICAL: "critical",
              proto.POLICY_SEVERITY_UNSPECIFIED: "unspecified"}


LevelConfig = dict[str, tuple[int, dict[str, Any]]]
# Policies that read resource options a graph may not record (ignoreChanges): not applicable there.
OPTION_POLICIES = ("stateful-names-ignore-changes",)
# Policies that follow dependencies (a node group to its launch template and subnets, a bucket to its
# configuration resources, an Auto Scaling group tag to its node group): not applicable to a graph that does not
# record them (an engine event log), where they would report every link as missing, or find none and judge nothing.
# tests/graph/test_eventlog.py checks that no other policy's verdict changes
# when a graph loses its dependencies.
DEPENDENCY_POLICIES = ("aws-efa-node-groups-wire-all-interfaces", "aws-efa-node-groups-single-az-and-placed",
                       "aws-no-placement-group-on-reserved-capacity", "aws-autoscaler-off-reserved-capacity",
                       "aws-efa-security-group-allows-self",
                       "aws-s3-checkpoint-bucket-versioned", "aws-s3-bucket-encrypted",
                       "aws-s3-bucket-public-access-blocked")


class PolicyConfigError(ValueError):
    """A pack config file that names unknown policies or levels, or has the wrong shape."""


@dataclass(frozen=True)
class Violation:
    """One reported violation, in the JSON output's shape: ``message`` is the requirement (the policy description,
    a line break, the violation text), ``field`` the path in the resource's inputs that violates ("" when the pack
    names none), ``value`` what is there (None when not given: the field is missing), ``fix`` the rule's
    remediation."""

    policy: str
    enforcement: str
    severity: str
    urn: str
    type: str
    message: str
    field: str = ""
    value: Any = None
    fix: str = ""


@dataclass(frozen=True)
class StackKey:
    """The stack-file key a finding's fix changes (``gpu-cluster:spec.aws.nodeGroups[1].maxSize``) and where the file
    has it (``stacks/Pulumi.prod-aws.yaml:130``; "" when no stack file was read); ``add`` when the file leaves the key
    to its default and ``at`` is its nearest enclosing key's line."""

    path: str
    at: str = ""
    add: bool = False

    def where(self) -> str:
        """``<file>:<line>``, or ``not in the file: add it under the key at <file>:<line>``; "" when unknown."""
        return f"not in the file: add it under the key at {self.at}" if self.add and self.at else self.at

    def text(self) -> str:
        """``<key> (<where>)``, or the key alone when no stack file was read."""
        return f"{self.path} ({self.where()})" if self.at else self.path


@dataclass
class PolicyReport:
    """Everything one run of the pack found."""

    pack: str
    violations: list[Violation] = field(default_factory=list)
    not_applicable: list[tuple[str, str]] = field(default_factory=list)
    rules: list[Any] = field(default_factory=list)
    levels: dict[str, str] = field(default_factory=dict)  # each policy's configured enforcement level

    @property
    def mandatory(self) -> list[Violation]:
        """Violations that block a deployment."""
        return [v for v in self.violations if v.enforcement == "mandatory"]

    @property
    def passed(self) -> bool:
        """True when no mandatory policy is violated."""
        return not self.mandatory


@dataclass(frozen=True)
class Pack:
    """The loaded pack: its name, policy objects, documentation rows and the decoder of its violation messages
    (``gpu_policies.common.decode_finding``: message, field, value)."""

    name: str
    policies: list[Any]
    rules: list[Any]
    decode: Callable[[str], tuple[str, str | None, Any]]
    absent: Any  # the value decode gives when none was reported


def load_pack(pack_dir: Path = PACK_DIR) -> Pack:
    """Import the pack from ``policies/`` the way the CLI does (its folder on the import path); an installed
    package has no source tree and imports the ``gpu_policies`` it ships instead."""
    if (pack_dir / "gpu_policies").is_dir() and str(pack_dir) not in sys.path:
        sys.path.insert(0, str(pack_dir))
    pack = importlib.import_module("gpu_policies.pack")
    common = importlib.import_module("gpu_policies.common")
    return Pack(pack.PACK_NAME, list(pack.POLICIES), list(common.RULES), common.decode_finding, common.ABSENT)


def _level_of(value: Any, where: str) -> int:
    if not isinstance(value, str) or value not in LEVELS:
        raise PolicyConfigError(f"{where}: enforcement level must be one of {', '.join(LEVELS)}, got {value!r}")
    return LEVELS[value]


def normalize_config(raw: Any, policies: list[Any], source: str = "policy config") -> LevelConfig:
    """Turn a ``--policy-pack-config`` document into (enforcement level, properties) per policy.

    Accepts what the CLI accepts: ``{"all": "advisory"}``, ``{"<policy>": "disabled"}`` and
    ``{"<policy>": {"enforcementLevel": "mandatory", "<knob>": value}}``. Unknown policies, levels or
    knobs are errors, so a typo never silently leaves a policy unconfigured.
    """
    if not isinstance(raw, dict):
        raise PolicyConfigError(f"{source}: must be a JSON object of policy names")
    by_name = {p.name: p for p in policies}
    default_level: dict[str, int] = {p.name: int(LEVELS[p.enforcement_level.value]) for p in policies}
    if "all" in raw:
        level = _level_of(raw["all"], f"{source}: all")
        default_level = {name: level for name in by_name}
    out: LevelConfig = {}
    for name, value in raw.items():
        if name == "all":
            continue
        if name not in by_name:
            raise PolicyConfigError(f"{source}: {name}: no such policy (known: {', '.join(sorted(by_name))})")
        knobs = set((by_name[name].config_schema.properties if by_name[name].config_schema else {}) or {})
        if isinstance(value, str):
            out[name] = (_level_of(value, f"{source}: {name}"), {})
        elif isinstance(value, dict):
            props = {k: v for k, v in value.items() if k != "enforcementLevel"}
            unknown = sorted(set(props) - knobs)
            if unknown:
                raise PolicyConfigError(f"{source}: {name}: unknown setting(s) {', '.join(unknown)} "
                                        f"(known: {', '.join(sorted(knobs)) or 'none'})")
            schema = by_name[name].config_schema.properties if by_name[name].config_schema else {}
            for knob, setting in props.items():
                _check_knob(setting, schema[knob], f"{source}: {name}.{knob}", name)
            level = (_level_of(value["enforcementLevel"], f"{source}: {name}.enforcementLevel")
                     if "enforcementLevel" in value else default_level[name])
            out[name] = (level, props)
        else:
            raise PolicyConfigError(f"{source}: {name}: must be a level string or an object")
    for name, level in default_level.items():
        out.setdefault(name, (level, {}))
    return out


# Schema rules by which the pack bounds a knob that, past them, would switch its policy off in effect: an empty list
# of what to require, an empty table, a cap (a max* knob) above any real size, any other knob below its minimum
# (minSoftDeleteDays 0, an EFA count of 0). Refused as Pulumi refuses a config its schema rejects, with the reason.
NEUTRALISING = ("minItems", "minProperties", "maximum", "minimum")


def _check_knob(value: Any, schema: dict[str, Any], where: str, policy: str) -> None:
    """A knob's value against its JSON schema (the pack's configSchema), as the Pulumi CLI checks it; a value past a
    bound that keeps the policy meaningful says that it would switch ``policy`` off."""
    rules = {k: v for k, v in schema.items() if k != "default"}
    try:
        jsonschema.validate(value, rules)
    except jsonschema.ValidationError as err:
        at = "".join(f"[{p!r}]" for p in err.absolute_path)
        why, cap = "", where.rsplit(".", 1)[-1].startswith("max")  # a cap (maxNodes) is neutral when too high
        if err.validator in NEUTRALISING and (err.validator in ("minItems", "minProperties")
                                              or (err.validator == "maximum") is cap):
            why = (f"; it would switch {policy} off in effect (to switch a policy off, set \"{policy}\": "
                   "\"disabled\", which every report shows)")
        raise PolicyConfigError(f"{where}{at}: {err.message[:300]}{why}") from None


# A policy configuration is a few knobs: what `policy --config` reads at most (blueprint.files.input).
MAX_POLICY_CONFIG_BYTES = 1024 * 1024


def load_config_file(path: Path, policies: list[Any]) -> LevelConfig:
    """Read and normalize a pack config file."""
    try:
        raw = strict_json(read_text_limited(path, MAX_POLICY_CONFIG_BYTES))
    except (OSError, ValueError) as err:
        raise PolicyConfigError(f"{path}: not a readable JSON file: {str(err)[:200]}") from None
    return normalize_config(raw, policies, str(path))


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


def run_policies(graph: ResourceGraph, config: LevelConfig | None = None,
                 pack: Pack | None = None) -> PolicyReport:
    """Run every policy of the pack on the graph and return the violations.

    The analyzer allocates a view of every resource for every stack policy, little of it cyclic: the cyclic
    collector is off for the run (it only rescanned the graph's live objects). At 1,000 node groups (27,143
    resources) that took the pass from 18.8 s to 14.9 s with the same peak memory (1,854 MiB).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with _converted_once():
            return _run_policies(graph, config, pack)
    finally:
        if was_enabled:
            gc.enable()


def _run_policies(graph: ResourceGraph, config: LevelConfig | None, pack: Pack | None) -> PolicyReport:
    from pulumi_policy.policy import EnforcementLevel, _PolicyAnalyzerServicer

    pack = pack or load_pack()
    servicer = _PolicyAnalyzerServicer(pack.name, "0.1.0", list(pack.policies), EnforcementLevel.ADVISORY)
    levels = dict(config if config is not None else normalize_config({}, pack.policies))
    unrecorded = [r for r in graph.resources if not r.options_recorded]
    skipped = [name for name in OPTION_POLICIES if name in levels] if unrecorded else []
    no_links = [name for name in DEPENDENCY_POLICIES if name in levels] if not graph.dependencies_recorded else []
    for name in skipped + no_links:
        # `pulumi preview --json` and `pulumi stack export` do not carry ignoreChanges, an event log no
        # dependencies; under `pulumi preview --policy-pack` the engine gives both to the analyzer and the policy runs.
        levels[name] = (proto.DISABLED, levels[name][1])
    servicer.Configure(proto.ConfigureAnalyzerRequest(policyConfig={
        name: proto.PolicyConfig(enforcementLevel=level, properties=_struct(props))  # type: ignore[arg-type]
        for name, (level, props) in levels.items()
    }), None)  # type: ignore[no-untyped-call]

    report = PolicyReport(pack=pack.name, rules=list(pack.rules),
                          levels={name: LEVEL_NAMES.get(level, "advisory") for name, (level, _) in levels.items()})
    report.not_applicable += [(name, "the graph does not record ignoreChanges (pulumi preview --json and stack "
                                     "export omit it); run it under pulumi preview --policy-pack") for name in skipped]
    report.not_applicable += [(name, "the graph does not record dependencies (a pulumi event log omits them); run it "
                                     "under pulumi preview --policy-pack") for name in no_links]
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
    # The message breaks ties: a stack policy's findings on one resource (one per team, say) come in the order the
    # resources were registered, which changes from run to run.
    report.violations.sort(key=lambda v: (v.enforcement != "mandatory", v.policy, v.urn, v.message))
    return report


# --- output formats -----------------------------------------------------------------------------


def _short(message: str) -> str:
    """The violation text without the policy description the analyzer prepends."""
    return message.split("\n", 1)[1] if "\n" in message else message


TABLE_VALUE_CHARS = 200  # the table cuts a longer value (the JSON output has it whole)


def _seen(value: Any) -> str:
    """A value as the table shows it: compact JSON, cut at :data:`TABLE_VALUE_CHARS`."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= TABLE_VALUE_CHARS else text[:TABLE_VALUE_CHARS - 1] + "…"


def render_table(report: PolicyReport, keys: Sequence[StackKey] | None = None) -> str:
    """A plain-text verdict and table for terminals and logs: per violation its resource, requirement, field with
    the value seen (``(not set)`` for a missing one), the stack-file key to change (``keys``, one per violation, when
    given) and fix."""
    lines = [verdict_line(report)]
    for i, v in enumerate(report.violations):
        lines.append(f"  {v.enforcement.upper():9} {v.severity:8} {v.policy}")
        lines.append(f"            {v.urn or '(stack)'}")
        lines.append(f"            {_short(v.message)}")
        if v.field:
            seen = "(not set)" if v.value is None else f"= {_seen(v.value)}"
            lines.append(f"            field: {v.field} {seen}")
        if keys is not None:
            lines.append(f"            stack file: {keys[i].text()}")
        if v.fix:
            lines.append(f"            fix: {v.fix}")
    return "\n".join(lines) + "\n"


def verdict_line(report: PolicyReport) -> str:
    """One line: pass or fail, with counts."""
    advisory = len(report.violations) - len(report.mandatory)
    state = "PASS" if report.passed else "FAIL"
    return (f"policy verdict: {state} ({len(report.mandatory)} mandatory, {advisory} advisory violation(s); "
            f"{len(report.rules)} policies in {report.pack})")


def render_markdown(report: PolicyReport, stack: str, keys: Sequence[StackKey] | None = None) -> str:
    """A pull-request comment; with ``keys`` (one per violation) a column names the stack-file key to change."""
    icon = "✅" if report.passed else "❌"
    out = [f"### {icon} Policy check for {md_code(stack, table=False)}", "", verdict_line(report), ""]
    if report.violations:
        key_head, key_rule = ("stack-file key | ", "--- | ") if keys is not None else ("", "")
        out += [f"| enforcement | severity | policy | resource | field | {key_head}requirement |",
                f"| --- | --- | --- | --- | --- | {key_rule}--- |"]
        for i, v in enumerate(report.violations):
            name = v.urn.rsplit("::", 1)[-1] if v.urn else "(stack)"
            text = md_text(_short(v.message))
            field = md_code(v.field) if v.field else ""
            key = "" if keys is None else md_code(keys[i].path) + (
                f" ({md_text(keys[i].where())})" if keys[i].at else "") + " | "
            out.append(f"| {v.enforcement} | {v.severity} | `{v.policy}` | {md_code(name)} | {field} | {key}{text} |")
        by_name = {r.name: r for r in report.rules}
        fixes = sorted({v.policy for v in report.violations})
        out += ["", "<details><summary>How to fix</summary>", ""]
        out += [f"- `{p}`: {by_name[p].remediation}" for p in fixes if p in by_name]
        out += ["", "</details>"]
    return "\n".join(out) + "\n\n"  # a blank line after the last block, so the next section renders


def render_json(report: PolicyReport, keys: Sequence[StackKey] | None = None) -> str:
    """``{"violations": [{"policy", "enforcement", "severity", "urn", "type", "message", "field", "value",
    "fix"}]}``; with ``keys`` (one per violation) also ``specPath`` (the stack-file key to change) and, when a stack
    file was read, ``stackFile`` (``<file>:<line>``) and ``addKey`` (the file leaves the key to its default: the line
    is its nearest enclosing key's)."""
    rows = [asdict(v) for v in report.violations]
    for row, key in zip(rows, keys or (), strict=False):
        row["specPath"] = key.path
        if key.at:
            row |= {"stackFile": key.at, "addKey": key.add}
    return json.dumps({"violations": rows}, indent=2) + "\n"
