"""SARIF 2.1.0 of one stack's policy verdict, for GitHub code scanning.

Each finding points at the stack file's key its fix changes (``maxSize: 80``, :mod:`blueprint.policy.spec_keys`), or
the key that built the resource when no key sets what it names (:mod:`blueprint.graph.provenance`), so code scanning
annotates the line a pull request changes (GitHub annotates only lines inside the diff); a key the file does not write
(a default) points at its nearest enclosing key, and the message says which key to add. The resource's URN is a
logical location. One run per stack,
with its own ``automationDetails.id`` (``gpu-cluster-policies/<stack>/``): GitHub keeps one analysis per category
and refuses several runs of one tool and category in one upload. Rules carry ``security-severity`` (GitHub's 0-10
scale from the pack's severity) and the fix as help text.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import PurePosixPath
from typing import Any

from blueprint.graph.model import ResourceGraph
from blueprint.graph.provenance import Located, locate
from blueprint.policy.runner import PolicyReport, Violation
from blueprint.policy.spec_keys import finding_key

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
PACK_DOCS = "policies/README.md"
# GitHub code scanning's bands (critical over 9.0, high 7.0-8.9, medium 4.0-6.9, low 0.1-3.9), one value per band.
SECURITY_SEVERITY = {"critical": "9.5", "high": "8.0", "medium": "5.5", "low": "3.0", "unspecified": "5.0"}
# Areas whose findings are security findings in GitHub's sense (only those show a security severity there).
SECURITY_AREAS = ("security", "data-safety")
LEVELS = {"mandatory": "error", "remediate": "error", "disabled": "none"}


def _rule(rule: Any, level: str) -> dict[str, Any]:
    severity = getattr(rule.severity, "value", str(rule.severity))
    tags = sorted({rule.area, rule.kind, *(["security"] if rule.area in SECURITY_AREAS else [])})
    return {
        "id": rule.name,
        "name": "".join(part.capitalize() for part in rule.name.split("-")),
        "shortDescription": {"text": rule.description},
        "fullDescription": {"text": rule.description},
        "help": {"text": f"Fix: {rule.remediation}",
                 "markdown": f"**Requirement**: {rule.description}\n\n**Fix**: {rule.remediation}\n\n"
                             f"`blueprint policy --explain {rule.name}` shows an example violation ({PACK_DOCS} "
                             "lists every policy)."},
        # from the pack's configured enforcement: mandatory is an error, disabled is off, the rest warn
        "defaultConfiguration": {"level": LEVELS.get(level, "warning")},
        # A security severity only on security findings: GitHub shows it on those alone, and its default check
        # fails a pull request on a high one, which billing or telemetry findings are not meant to do.
        "properties": {"tags": tags, "severity": severity, "precision": "high",
                       **({"security-severity": SECURITY_SEVERITY.get(severity, "5.0")}
                          if rule.area in SECURITY_AREAS else {})},
    }


def _artifact(stack_file: str) -> dict[str, str]:
    """The stack file as an artifact location: relative to the repository's root (%SRCROOT%), as code scanning needs
    it; a file outside any repository as an absolute file URI, without a base."""
    path = PurePosixPath(stack_file)
    if path.is_absolute():
        return {"uri": path.as_uri()}
    return {"uri": stack_file, "uriBaseId": "%SRCROOT%"}


def _message(v: Violation, fix: str) -> str:
    text = v.message
    field = getattr(v, "field", "")
    if field:
        value = getattr(v, "value", None)
        text += f"\nField: {field}" + (f" = {json.dumps(value)}" if value is not None else "")
    return text + (f"\nFix: {fix}" if fix else "")


def _region(found: Located) -> dict[str, int]:
    """A SARIF region (1-based lines and columns, the end column one past the last character)."""
    region = {"startLine": found.line, "startColumn": found.column}
    if (found.end_line, found.end_column) != (found.line, found.column):
        region |= {"endLine": found.end_line, "endColumn": found.end_column}
    return region


def _where(found: Located) -> str:
    """The message's line on the stack file: the key to change, or the key to add where the file leaves it to its
    default."""
    if found.exact:
        return f"\nStack file: {found.path}"
    return (f"\nStack file: {found.path} is not in the file (its default applies): add it"
            + (f" under {found.found}" if found.found else ""))


def render_sarif(report: PolicyReport, stack: str, graph: ResourceGraph, stack_file: str | None,
                 stack_text: str | None) -> str:
    """The SARIF log of one stack's run: ``stack_file`` is the stack file's path as the repository names it
    (``stacks/Pulumi.prod-aws.yaml``) and ``stack_text`` its content; without them findings carry only the
    resource (a logical location) and the run says why."""
    rules = sorted(report.rules, key=lambda r: r.name)
    index = {r.name: i for i, r in enumerate(rules)}
    fixes = {r.name: r.remediation for r in rules}
    results = []
    for v in report.violations:
        field = str(getattr(v, "field", "") or "")
        path = finding_key(graph, v)
        found = locate(stack_text, path) if stack_file is not None and stack_text is not None else None
        result: dict[str, Any] = {
            "ruleId": v.policy,
            "level": "error" if v.enforcement in ("mandatory", "remediate") else "warning",
            "message": {"text": _message(v, fixes.get(v.policy, "")) + (_where(found) if found else "")},
            "locations": [{"logicalLocations": [{"fullyQualifiedName": v.urn or stack, "kind": "resource"}]}],
            "partialFingerprints": {"gpuClusterFinding/v1": hashlib.sha256(
                "\0".join((v.policy, v.urn, field)).encode()).hexdigest()},
            "properties": {"specPath": path, "urn": v.urn, "resourceType": v.type, "enforcement": v.enforcement,
                           **({"field": field} if field else {})},
        }
        if stack_file is not None and found is not None:
            result["locations"][0]["physicalLocation"] = {
                "artifactLocation": _artifact(stack_file), "region": _region(found)}
        if v.policy in index:
            result["ruleIndex"] = index[v.policy]
        results.append(result)
    run: dict[str, Any] = {
        "tool": {"driver": {"name": report.pack,
                            "rules": [_rule(r, report.levels.get(r.name, "advisory")) for r in rules]}},
        "automationDetails": {"id": f"{report.pack}/{stack}/"},
        "results": results,
        "properties": {"stack": stack},
    }
    if stack_file is not None:
        if not PurePosixPath(stack_file).is_absolute():
            run["originalUriBaseIds"] = {"%SRCROOT%": {"description": {"text": "the repository's root"}}}
        run["artifacts"] = [{"location": _artifact(stack_file)}]
    else:
        run["invocations"] = [{"executionSuccessful": True, "toolExecutionNotifications": [{
            "level": "warning", "message": {"text": "the stack file was not found (give --stack-file): findings "
                                                    "name their resource but no line"}}]}]
    return json.dumps({"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}, indent=2) + "\n"
