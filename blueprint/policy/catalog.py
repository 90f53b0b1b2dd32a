"""``blueprint policy --list`` and ``--explain``: the pack's policies as a reviewer reads them.

The list is the pack itself (its documentation rows and policy objects), each with the enforcement level a config
file gives it, the clouds whose resources it reads, and one line; ``--explain`` adds what it checks, why (its area
and severity), how to fix it, its configuration knobs and an example violation: the pack run on a shipped
production graph broken the way :mod:`blueprint.policy.examples` breaks it, so the example is the pack's own words.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from blueprint import clouds
from blueprint.policy.runner import LEVEL_NAMES, LevelConfig, Pack, PolicyConfigError

# Why each area matters, for --explain (the mission's planes: what goes wrong when the requirement is missing).
AREA_REASONS = {
    "billing": "without it, spend cannot be attributed to a team or stopped by a budget",
    "quotas": "without it, one team's jobs can take every GPU, or wait for GPUs no quota grants",
    "telemetry": "without it, a failing GPU, a stuck queue or an idle reservation goes unseen",
    "security": "without it, the cluster, its nodes or its data are reachable by more than they should be",
    "fabric": "without it, multi-node jobs run on slower or broken interconnect",
    "data-safety": "without it, a change or a mistake can delete checkpoints, metrics or keys",
    "sizing": "without it, checkpoints cost more GPU time than the goodput target allows",
}


@dataclass(frozen=True)
class PolicyEntry:
    """One policy as ``--list`` shows it."""

    name: str
    area: str
    level: str
    severity: str
    cloud: str
    kind: str
    description: str
    remediation: str
    knobs: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {"name": self.name, "area": self.area, "level": self.level, "severity": self.severity,
                "cloud": self.cloud, "kind": self.kind, "description": self.description,
                "remediation": self.remediation, "config": self.knobs}


def _cloud(name: str) -> str:
    """Which cloud's resources a policy reads, from its name (the pack's naming rule: <cloud>-*, the rest every
    cloud's)."""
    prefix = name.split("-", 1)[0]
    return prefix if prefix in clouds.names() else ", ".join(clouds.names())


def entries(pack: Pack, config: LevelConfig | None = None) -> list[PolicyEntry]:
    """Every policy of the pack with its level under ``config`` (the pack's defaults without one)."""
    docs = {r.name: r for r in pack.rules}
    out = []
    for policy in sorted(pack.policies, key=lambda p: p.name):
        rule = docs[policy.name]
        level = str(getattr(policy.enforcement_level, "value", policy.enforcement_level))
        knobs: dict[str, Any] = {}
        if config is not None and policy.name in config:
            configured, knobs = config[policy.name]
            level = LEVEL_NAMES.get(configured, level)
        schema = getattr(policy.config_schema, "properties", None) or {}
        defaults = {k: v.get("default") for k, v in schema.items() if isinstance(v, dict)}
        out.append(PolicyEntry(name=policy.name, area=rule.area, level=level,
                               severity=str(getattr(rule.severity, "value", rule.severity)), cloud=_cloud(policy.name),
                               kind=rule.kind, description=rule.description, remediation=rule.remediation,
                               knobs={**defaults, **knobs}))
    return out


def render_list(items: list[PolicyEntry], fmt: str) -> str:
    """A table (name, area, level, severity, cloud, one line) or JSON."""
    if fmt == "json":
        return json.dumps({"policies": [e.to_dict() for e in items]}, indent=2) + "\n"
    width = max(len(e.name) for e in items)
    lines = [f"{'policy':{width}}  {'area':11}  {'level':9}  {'severity':8}  {'cloud':8}  what it requires"]
    for e in items:
        lines.append(f"{e.name:{width}}  {e.area:11}  {e.level:9}  {e.severity:8}  {e.cloud:8}  {e.description}")
    mandatory = sum(1 for e in items if e.level == "mandatory")
    lines.append(f"{len(items)} policies: {mandatory} mandatory (block `pulumi up`), {len(items) - mandatory} "
                 "advisory or disabled; `blueprint policy --explain <name>` for one")
    return "\n".join(lines) + "\n"


def find(items: list[PolicyEntry], name: str) -> PolicyEntry:
    """The entry named ``name``; :class:`PolicyConfigError` with the closest names otherwise."""
    for e in items:
        if e.name == name:
            return e
    close = difflib.get_close_matches(name, [e.name for e in items], n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else "; `blueprint policy --list` lists them"
    raise PolicyConfigError(f"--explain: no policy named {name!r} in the pack{hint}")


def render_explain(entry: PolicyEntry, example: tuple[str, str, str, str] | None) -> str:
    """What it checks, why, how to fix, its knobs, and the example (stack, how it was broken, resource, message)."""
    lines = [f"{entry.name}  ({entry.area}, {entry.level}, severity {entry.severity}, {entry.kind} policy, "
             f"reads {entry.cloud} resources)", "",
             f"Checks: {entry.description}",
             f"Why: {AREA_REASONS.get(entry.area, entry.area)} ({entry.area}); "
             + ("mandatory: a violation fails `pulumi preview --policy-pack policies` and `pulumi up`"
                if entry.level == "mandatory" else "advisory: a violation is reported, the update goes ahead"),
             f"Fix: {entry.remediation}"]
    if entry.knobs:
        lines.append("Config (--policy-pack-config): " + ", ".join(f"{k}={json.dumps(v)}"
                                                                   for k, v in sorted(entry.knobs.items())))
    if example is not None:
        stack, how, resource, message = example
        lines += ["", f"Example: the shipped {stack} stack with {how}:", f"  resource: {resource}"]
        lines += [f"  {line}" for line in message.splitlines()]
    else:
        lines += ["", "Example: none recorded for this policy"]
    return "\n".join(lines) + "\n"
