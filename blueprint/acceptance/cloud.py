"""What the acceptance family needs from a cloud (``blueprint/clouds/<cloud>/checks.py``): a session on the stack's
account or project, the checks of ``blueprint preflight`` (before ``pulumi up``) and ``blueprint audit`` (after), and
how its CLI names the cluster in a kubeconfig (the audit's in-cluster checks)."""

from __future__ import annotations

from typing import Any, Protocol, cast

from blueprint import clouds
from blueprint.acceptance.checks import Check
from blueprint.acceptance.kube import KubeCluster
from blueprint.graph.stackfile import StackFile
from components.spec import ClusterSpec


class CloudChecks(Protocol):
    """A cloud's ``checks`` module."""

    def session(self, stack: StackFile) -> Any:
        """What the checks read the account or project through (the cloud's client libraries, on the usual
        credentials); :class:`blueprint.acceptance.checks.AccountAccessError` when nothing can be read."""

    def preflight(self, spec: ClusterSpec, session: Any) -> list[Check]:
        """Before ``pulumi up``: offerings, catalog facts, quotas, reservations, what the stack brings, the
        deployer."""

    def audit(self, spec: ClusterSpec, session: Any) -> list[Check]:
        """After ``pulumi up``: the deployed account or project against the spec."""

    def kube_cluster(self, spec: ClusterSpec) -> KubeCluster:
        """How the cloud's CLI names the stack's cluster in a kubeconfig, and the command that writes it (``blueprint
        audit`` reads the cluster's Secrets through it)."""


def cloud_checks(cloud: str) -> CloudChecks:
    """The cloud's ``checks`` module."""
    return cast(CloudChecks, clouds.part(cloud, "checks"))
