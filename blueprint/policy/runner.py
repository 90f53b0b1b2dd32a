"""The offline policy runner: the real CrossGuard pack in ``policies/``, run in-process on a graph.

Two engines give the same report (tests/policy/test_engines.py compares them on every shipped stack, the mutation
fixtures and an event-log graph):

- ``direct`` (the default, :mod:`blueprint.policy.direct`): each policy's ``validate`` called on the graph's data,
  with the argument objects ``pulumi_policy``'s analyzer builds (the same classes, values and enforcement rules),
  without the protobuf requests and their conversions in between;
- ``analyzer`` (:mod:`blueprint.policy.analyzer`): the pack's analyzer servicer (what the Pulumi CLI talks to under
  ``pulumi preview --policy-pack``) called with ``Analyze``/``AnalyzeStack`` requests made from the graph, the
  reference. ``BLUEPRINT_POLICY_ENGINE=analyzer`` (or ``run_policies(..., engine="analyzer")``) selects it.

Either way the pack is configured as ``--policy-pack-config`` configures it (:func:`normalize_config`).
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from blueprint.files.input import read_text_limited
from blueprint.files.markdown import md_code, md_text
from blueprint.graph.model import ResourceGraph, strict_json

# Re-exported (``X as X``): the runner is where callers find what a run is configured with and returns.
from blueprint.policy.report import LEVEL_NAMES as LEVEL_NAMES
from blueprint.policy.report import LEVELS as LEVELS
from blueprint.policy.report import PACK_VERSION as PACK_VERSION
from blueprint.policy.report import LevelConfig as LevelConfig
from blueprint.policy.report import Pack as Pack
from blueprint.policy.report import PolicyReport as PolicyReport
from blueprint.policy.report import Violation as Violation

PACK_DIR = Path(__file__).resolve().parents[2] / "policies"
ENGINES = ("direct", "analyzer")
ENGINE_ENV = "BLUEPRINT_POLICY_ENGINE"


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
    # A policy without a level of its own gets the pack's, advisory (as the runner builds the analyzer)
    default_level: dict[str, int] = {
        p.name: int(LEVELS[p.enforcement_level.value if p.enforcement_level else "advisory"]) for p in policies}
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
    import jsonschema  # only a config file's knobs need it

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


def run_policies(graph: ResourceGraph, config: LevelConfig | None = None, pack: Pack | None = None,
                 engine: str | None = None) -> PolicyReport:
    """Run every policy of the pack on the graph and return the violations, sorted.

    ``engine`` is ``"direct"`` (the default) or ``"analyzer"`` (see the module's docstring); None reads
    ``BLUEPRINT_POLICY_ENGINE``. The cyclic collector is off for the run: the pass allocates a view of every
    resource, little of it cyclic, and the collector only rescanned the graph's live objects (with the analyzer at
    1,000 node groups, 27,143 resources, that took the pass from 18.8 s to 14.9 s at the same peak memory).
    """
    chosen = engine or os.environ.get(ENGINE_ENV) or "direct"
    if chosen not in ENGINES:
        raise PolicyConfigError(f"{ENGINE_ENV}={chosen!r}: the policy engine is one of {', '.join(ENGINES)}")
    pack = pack or load_pack()
    levels, report = _prepare(graph, config, pack)
    from blueprint.files import cel_parser

    cel_parser.warm()  # the pack's admission guards evaluate CEL: cel-python's grammar from its file
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        if chosen == "analyzer":
            from blueprint.policy.analyzer import analyze

            analyze(graph, levels, pack, report)
        else:
            from blueprint.policy.direct import run_direct

            run_direct(graph, levels, pack, report)
    finally:
        if was_enabled:
            gc.enable()
    # The message breaks ties: a stack policy's findings on one resource (one per team, say) come in the order the
    # resources were registered, which changes from run to run.
    report.violations.sort(key=lambda v: (v.enforcement != "mandatory", v.policy, v.urn, v.message))
    return report


def _prepare(graph: ResourceGraph, config: LevelConfig | None, pack: Pack) -> tuple[LevelConfig, PolicyReport]:
    """Each policy's level and settings for this graph, and the report it starts from: the policies a graph cannot
    feed (:data:`OPTION_POLICIES` without recorded options, :data:`DEPENDENCY_POLICIES` without recorded
    dependencies) disabled and listed as not applicable, with the reason."""
    levels = dict(config if config is not None else normalize_config({}, pack.policies))
    unrecorded = [r for r in graph.resources if not r.options_recorded]
    skipped = [name for name in OPTION_POLICIES if name in levels] if unrecorded else []
    no_links = [name for name in DEPENDENCY_POLICIES if name in levels] if not graph.dependencies_recorded else []
    for name in skipped + no_links:
        # `pulumi preview --json` and `pulumi stack export` do not carry ignoreChanges, an event log no
        # dependencies; under `pulumi preview --policy-pack` the engine gives both to the analyzer and the policy runs.
        levels[name] = (LEVELS["disabled"], levels[name][1])
    report = PolicyReport(pack=pack.name, rules=list(pack.rules),
                          levels={name: LEVEL_NAMES.get(level, "advisory") for name, (level, _) in levels.items()})
    report.not_applicable += [(name, "the graph does not record ignoreChanges (pulumi preview --json and stack "
                                     "export omit it); run it under pulumi preview --policy-pack") for name in skipped]
    report.not_applicable += [(name, "the graph does not record dependencies (a pulumi event log omits them); run it "
                                     "under pulumi preview --policy-pack") for name in no_links]
    return levels, report


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
