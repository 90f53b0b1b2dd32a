"""GCP in the deployer family: the custom role the deployer service account (the gcp provider's
impersonateServiceAccount) needs on the project for exactly the stack's graph, from ``deployer_permissions.yaml``, in
the form ``gcloud iam roles create ROLE --project PROJECT --file role.json`` takes.

What a project role cannot scope is granted elsewhere, and said so: iam.serviceAccounts.actAs on the service accounts
the graph runs nodes as (roles/iam.serviceAccountUser on each account, not project-wide), and the budgets'
permissions on the billing account they live in."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from blueprint.changes.cloud import inputs_at
from blueprint.deployer.cloud import DeployerPolicy
from blueprint.deployer.table import Table, Used, load_table, needing, no_cloud_table
from blueprint.graph.model import ResourceGraph

TABLE = Path(__file__).with_name("deployer_permissions.yaml")
EXTRA_KEYS = ("act_as", "on_billing_account")
PROVIDER = "pulumi:providers:gcp"
PROJECT_IAM = "gcp:projects/iAMMember:IAMMember"
ACT_AS = "iam.serviceAccounts.actAs"
SERVICE_ACCOUNT_USER = "roles/iam.serviceAccountUser"  # holds iam.serviceAccounts.actAs (IAM roles reference)
TITLE_CHARS, DESCRIPTION_CHARS = 100, 256  # a custom role's title and description limits (IAM custom roles guide)


@cache
def table() -> Table:
    """This folder's deployer_permissions.yaml."""
    return load_table(TABLE, EXTRA_KEYS)


def _provider_inputs(graph: ResourceGraph) -> dict[str, Any]:
    provider = next(iter(graph.of_type(PROVIDER)), None)
    return provider.inputs if provider is not None else {}


def deployer_policy(graph: ResourceGraph, used: Sequence[Used]) -> DeployerPolicy:
    """The custom role for the deployer service account, and the grants it cannot hold."""
    inputs = _provider_inputs(graph)
    project = str(inputs.get("project") or "<project>")
    principal = str(inputs.get("impersonateServiceAccount") or "")
    role: set[str] = set()
    act_as: dict[str, set[str]] = {}  # service account -> the types that run as it
    billing: dict[str, set[str]] = {}  # billing account -> permissions
    permissions: dict[str, list[str]] = {}
    uses, none = needing(used)
    for use in uses:
        entry = use.entry
        granted = entry.permissions(use.resources)
        account_key = entry.extra.get("on_billing_account")
        if account_key:
            for res in use.resources:
                billing.setdefault(str(res.inputs.get(account_key) or "<billing account>"), set()).update(granted)
        else:
            role |= granted
        for res in use.resources:
            for key in entry.extra.get("act_as") or ():
                for email in _emails(inputs_at(res.inputs, key)):
                    act_as.setdefault(email, set()).add(use.token)
                    granted = granted | {ACT_AS}
        if granted:
            permissions[use.token] = sorted(granted)
    grants = [{"resource": f"projects/{project}/serviceAccounts/{email}", "role": SERVICE_ACCOUNT_USER,
               "permissions": [ACT_AS], "why": f"{', '.join(sorted(types))} run nodes as this account"}
              for email, types in sorted(act_as.items())]
    grants += [{"resource": f"billingAccounts/{account}", "permissions": sorted(perms),
                "why": "budgets live on the billing account; a project's custom role cannot grant on it"}
               for account, perms in sorted(billing.items())]
    granted_roles = sorted({str(r.inputs.get("role")) for r in graph.of_type(PROJECT_IAM) if r.inputs.get("role")})
    notes: tuple[str, ...] = ()
    if granted_roles:
        notes = ("the project IAM bindings of the stack need resourcemanager.projects.setIamPolicy, which can grant "
                 "any role: bind this custom role with an IAM condition that limits it to the roles the stack grants "
                 "(api.getAttribute('iam.googleapis.com/modifiedGrantsByRole', []).hasOnly([...]) with "
                 + ", ".join(f"'{r}'" for r in granted_roles) + ")",)
    document = {
        "title": f"Pulumi deployer of {graph.stack}"[:TITLE_CHARS],
        "description": (f"What pulumi up needs for the resource types of stack {graph.stack} "
                        "(blueprint deployer-policy)")[:DESCRIPTION_CHARS],
        "stage": "GA",
        "includedPermissions": sorted(role),
    }
    return DeployerPolicy(
        cloud="gcp", stack=graph.stack, key="role", document=document, principal=principal,
        attach=(f"gcloud iam roles create <role id> --project {project} --file role.json, then gcloud projects "
                f"add-iam-policy-binding {project} --member serviceAccount:{principal or '<deployer>'} "
                f"--role projects/{project}/roles/<role id>"),
        grants=tuple(grants), permissions=permissions, none=none, not_covered=_not_covered(principal),
        tables=(table(), no_cloud_table()), notes=notes)


def _emails(value: Any) -> list[str]:
    if isinstance(value, list):
        return [v for item in value for v in _emails(item)]
    return [value] if isinstance(value, str) and "@" in value else []


def _not_covered(principal: str) -> tuple[str, ...]:
    who = principal or "the deployer service account"
    return (
        "Kubernetes objects (namespaces, RBAC, Helm releases, CRDs): authorised by the cluster; GKE accepts IAM or "
        f"RBAC, and the spec asks for roles/container.admin on {who} (gcp.cluster.deployer.serviceAccount), which "
        "covers them",
        "the Pulumi state backend (a Cloud Storage bucket or Pulumi Cloud): its own access, outside this stack",
        f"impersonating {who}: the CI runner's iam.serviceAccounts.getAccessToken on that account "
        "(roles/iam.serviceAccountTokenCreator)",
    )
