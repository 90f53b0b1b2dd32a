"""What the tools do that depends on the cloud: one folder per cloud, found by name.

``blueprint/clouds/<cloud>/`` is the tools' half of a cloud, as ``components/<cloud>/`` is the program's. The folder's
name is the cloud's name everywhere: the stack's ``cloud``, the provider package (``aws:...`` type tokens, the
``pulumi:providers:aws`` provider) and the price catalog. It holds one module per family of the tools, each meeting
the small interface the family declares beside its neutral code:

==========  ==============================================  ===============================================
module      what it does for the cloud                      interface
==========  ==============================================  ===============================================
graph       input limits of graph documents; the offline    :class:`blueprint.graph.cloud.CloudGraph`
            engine's computed outputs and invokes
pricing     cost lines of the cloud's resources; usage      :class:`blueprint.cost.cloud.CloudPricing`
checks      the account or project before and after         :class:`blueprint.acceptance.cloud.CloudChecks`
            ``pulumi up`` (preflight, audit), price refresh
admit       node groups, bucket access, node network,       :class:`blueprint.admit.cloud.CloudAdmit`
            CSI drivers as the scheduler and kubelet see
preview     the preview's platform and telemetry lines      :class:`blueprint.preview.cloud.CloudPreview`
            that name the cloud's services
report      the report's diagram of the cloud's planes and  :class:`blueprint.report.cloud.CloudReport`
            its reserved-capacity timeline
examples    how each of the cloud's policies is broken on   :class:`blueprint.policy.cloud.CloudExamples`
            a shipped stack (``policy --explain``); the
            stack-file key of its findings (SARIF lines)
changes     what a change replaces (replacements.yaml),     :class:`blueprint.changes.cloud.CloudChanges`
            what holds data, how node groups roll, versions
deployer    the deployer's least privilege: its table of     :class:`blueprint.deployer.cloud.CloudDeployer`
            permissions and the IAM policy or custom role
refresh     (optional) ``blueprint prices refresh``: the    :class:`blueprint.cost.cloud.CloudPriceRefresh`
            price catalog from the cloud's price API
==========  ==============================================  ===============================================

Neutral code asks for a family's module through :func:`part` (imported on first use, so ``blueprint policy
graph.json`` never loads a cloud's SDK); each cloud's ``__init__.py`` states, for mypy, that its modules meet the
interfaces. Nothing outside a cloud's folder imports it by name (tests/repo/test_tools_layering.py).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Literal

FAMILIES = ("graph", "pricing", "checks", "admit", "preview", "report", "examples", "changes", "deployer")
OPTIONAL = ("refresh",)  # modules a cloud may have: refresh (blueprint prices refresh)
Family = Literal["graph", "pricing", "checks", "admit", "preview", "report", "examples", "changes", "deployer",
                 "refresh"]
PROVIDER_PREFIX = "pulumi:providers:"


@cache
def names() -> tuple[str, ...]:
    """Every cloud the tools know: the packages under ``blueprint/clouds/``, by name."""
    here = Path(__file__).resolve().parent
    return tuple(sorted(p.name for p in here.iterdir() if (p / "__init__.py").is_file()))


def part(cloud: str, family: Family) -> ModuleType:
    """The cloud's module of one family (``blueprint.clouds.<cloud>.<family>``); ValueError for an unknown cloud."""
    if cloud not in names():
        raise ValueError(f"no tools for cloud {cloud!r} (blueprint/clouds has {', '.join(names())})")
    return importlib.import_module(f"blueprint.clouds.{cloud}.{family}")


def has_part(cloud: str, family: Family) -> bool:
    """Whether the cloud has a module of this family (for the optional ones)."""
    return importlib.util.find_spec(f"blueprint.clouds.{cloud}.{family}") is not None


def of_type(type_token: str) -> str | None:
    """The cloud a resource type token belongs to (``aws:eks/cluster:Cluster``, ``pulumi:providers:gcp``), or None
    for Kubernetes objects, components and anything else."""
    package = type_token.removeprefix(PROVIDER_PREFIX).partition(":")[0]
    return package if package in names() else None


def of_types(type_tokens: Iterable[str]) -> str | None:
    """The first cloud the tokens name, in order, or None (a graph of Kubernetes objects only)."""
    return next((cloud for cloud in map(of_type, type_tokens) if cloud is not None), None)
