"""What the deployer family needs from a cloud (``blueprint/clouds/<cloud>/deployer.py``): its table of permissions and
the document that grants them to the deployer (an IAM policy on AWS, a custom role on GCP), with what it leaves to
other grants."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from blueprint import clouds
from blueprint.deployer.table import Table, Used
from blueprint.graph.model import ResourceGraph


@dataclass(frozen=True)
class DeployerPolicy:
    """What the deployer of one stack needs, as the cloud grants it."""

    cloud: str
    stack: str
    key: str  # the document's key in the JSON output: "policy" (AWS) or "role" (GCP)
    document: dict[str, Any]  # the IAM policy document, or the custom role definition
    principal: str  # who it is for (the deployer role's ARN, the deployer service account), or ""
    attach: str  # how to create and attach it, for people
    grants: tuple[dict[str, Any], ...]  # what must be granted elsewhere (on a service account, a billing account)
    permissions: dict[str, list[str]]  # each type or invoke that needs permissions -> its permissions
    none: dict[str, str]  # each type that needs none -> why
    not_covered: tuple[str, ...]  # what the document does not grant and the deployer still needs
    tables: tuple[Table, ...]
    notes: tuple[str, ...] = ()
    parts: tuple[dict[str, Any], ...] = ()  # the document split as the cloud's size limit needs (AWS managed policies)


class CloudDeployer(Protocol):
    """A cloud's ``deployer`` module."""

    def table(self) -> Table:
        """The cloud's ``deployer_permissions.yaml``."""

    def deployer_policy(self, graph: ResourceGraph, used: Sequence[Used]) -> DeployerPolicy:
        """The document that grants the permissions of ``used`` (the graph's types and invokes with their entries)."""


def cloud_deployer(cloud: str) -> CloudDeployer:
    """The cloud's ``deployer`` module."""
    return cast(CloudDeployer, clouds.part(cloud, "deployer"))
