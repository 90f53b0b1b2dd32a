"""The deployer's policy for people (a short header, then the document) and for machines (one JSON object holding the
document under ``policy`` or ``role``, the grants it cannot hold, and what it does not cover)."""

from __future__ import annotations

import json
from typing import Any

from blueprint.deployer.cloud import DeployerPolicy

JSON_FORMAT_VERSION = 1


def as_json(policy: DeployerPolicy) -> dict[str, Any]:
    """The JSON object: ``policy`` (AWS: the IAM policy document, as ``aws iam create-policy --policy-document``
    takes it) or ``role`` (GCP: the custom role, as ``gcloud iam roles create --file`` takes it), beside what else the
    deployer needs and where each permission comes from."""
    return {
        "formatVersion": JSON_FORMAT_VERSION,
        "stack": policy.stack,
        "cloud": policy.cloud,
        "principal": policy.principal,
        policy.key: policy.document,
        **({"managedPolicies": list(policy.parts)} if len(policy.parts) > 1 else {}),
        "grants": list(policy.grants),
        "notCovered": list(policy.not_covered),
        "notes": list(policy.notes),
        "permissionsByType": policy.permissions,
        "noPermissionNeeded": policy.none,
        "tables": [{"file": t.shown, "checked": t.checked, "reference": t.reference} for t in policy.tables],
    }


def render_json(policy: DeployerPolicy) -> str:
    """``--format json``."""
    return json.dumps(as_json(policy), indent=2, sort_keys=False) + "\n"


def document_permissions(policy: DeployerPolicy) -> set[str]:
    """Every permission the document itself grants (a policy's actions, a role's includedPermissions)."""
    if "includedPermissions" in policy.document:
        return set(policy.document["includedPermissions"])
    return {a for st in policy.document.get("Statement", []) for a in (st["Action"] if isinstance(st["Action"], list)
                                                                      else [st["Action"]])}


def render_text(policy: DeployerPolicy) -> str:
    """The header (which stack, how many types, the tables and their dates, what else is needed), then the document."""
    needing = len(policy.permissions)
    distinct = sorted({p for perms in policy.permissions.values() for p in perms})
    services = sorted({p.split(":")[0] if ":" in p else p.split(".")[0] for p in distinct})  # ec2:X, compute.x.y
    what = "IAM policy" if policy.key == "policy" else "custom role"
    in_document = len(document_permissions(policy))
    held = f" ({in_document} in the {what}, the rest granted elsewhere)" if in_document != len(distinct) else ""
    lines = [
        f"# deployer {what} for stack {policy.stack} ({policy.cloud})",
        f"# {needing + len(policy.none)} resource types and invokes in the graph: {needing} need "
        f"{len(distinct)} permissions of {len(services)} services{held}, {len(policy.none)} need none",
        *(f"# table: {t.shown} (checked {t.checked}{', ' + t.reference if t.reference else ''})"
          for t in policy.tables),
        f"# for: {policy.principal or '(the stack names no deployer)'}",
        f"# create and attach: {policy.attach}",
    ]
    for grant in policy.grants:
        held = grant.get("role") or ", ".join(grant["permissions"])
        lines.append(f"# also grant {held} on {grant['resource']}: {grant['why']}")
    lines += [f"# not covered: {item}" for item in policy.not_covered]
    lines += [f"# note: {note}" for note in policy.notes]
    return "\n".join(lines) + "\n" + json.dumps(policy.document, indent=2) + "\n"
