"""Node pools' own service accounts: one per ``serviceAccount.accountId`` the stack's pools name, with the project roles
listed, as cluster-toolkit's A3 Mega and A3 Ultra blueprints give their pools (``modules/project/service-account``
with ``project_roles``); pools that name an existing account get its email and no grant. Pools without a
``serviceAccount`` keep the stack's node account (components/gcp/security.py ``GcpIdentities``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import pulumi
import pulumi_gcp as gcp

from components import provenance
from components.spec.gcp import GcpNodePoolSpec


def role_slug(role: str) -> str:
    """A role as part of a resource name: roles/logging.logWriter is logging.logWriter; a custom role keeps its
    parent (projects/p/roles/x is projects-p-x)."""
    return role.removeprefix("roles/").replace("/roles/", "-").replace("/", "-")


class GcpPoolAccounts(pulumi.ComponentResource):
    """The service accounts node pools name, created with their roles, or existing.

    Attributes:
        emails: pool name to the email its VMs run as (only pools with a ``serviceAccount``).
        grants: the role grants, which a pool's nodes wait for (a node without its roles cannot write logs or pull
            images when it registers).
    """

    emails: dict[str, pulumi.Output[str]]
    grants: dict[str, list[pulumi.Resource]]

    def __init__(self, name: str, *, project: str, pools: Sequence[GcpNodePoolSpec],
                 after: Sequence[pulumi.Resource] = (), opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:control-plane:GcpPoolAccounts", name, provenance.props(), opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=list(after))
        created: dict[str, tuple[pulumi.Output[str], list[pulumi.Resource]]] = {}
        self.emails, self.grants = {}, {}
        for pool in pools:
            spec = pool.service_account
            if spec is None:
                continue
            if spec.existing is not None:
                self.emails[pool.name] = pulumi.Output.from_input(spec.existing)
                self.grants[pool.name] = []
                continue
            assert spec.account_id is not None  # the rules ask for exactly one of the two
            if spec.account_id not in created:
                account = gcp.serviceaccount.Account(
                    f"{name}-{spec.account_id}", account_id=spec.account_id, project=project,
                    display_name=f"GKE nodes ({spec.account_id})",
                    description=f"Node service account of pool {pool.name}", opts=child)
                member = pulumi.Output.concat("serviceAccount:", account.email)
                grants: list[pulumi.Resource] = [
                    gcp.projects.IAMMember(f"{name}-{spec.account_id}-{role_slug(role)}", project=project, role=role,
                                           member=member, opts=child)
                    for role in sorted(set(spec.roles))]
                created[spec.account_id] = (account.email, grants)
            self.emails[pool.name], self.grants[pool.name] = created[spec.account_id]
        self.register_outputs({"emails": self.emails})
