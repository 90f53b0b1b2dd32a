"""Google Cloud in the acceptance family: the client libraries on Application Default Credentials for the stack's
project (:mod:`blueprint.clouds.gcp.api`), then ``blueprint preflight`` (:mod:`blueprint.clouds.gcp.preflight`) and
``blueprint audit`` (:mod:`blueprint.clouds.gcp.audit`)."""

from __future__ import annotations

from typing import Any

from blueprint.acceptance.checks import Check
from blueprint.clouds.gcp import api as _api
from blueprint.clouds.gcp import audit as _audit
from blueprint.clouds.gcp import preflight as _preflight
from blueprint.graph.stackfile import StackFile
from components.spec import ClusterSpec


def session(stack: StackFile) -> Any:
    """The project's API (read through the module, so tests can stand in recorded answers)."""
    return _api.gcp_session(stack.spec.gcp_spec().project)


def preflight(spec: ClusterSpec, session: Any) -> list[Check]:
    """The project before ``pulumi up``."""
    return _preflight.run_gcp_preflight(spec, session)


def audit(spec: ClusterSpec, session: Any) -> list[Check]:
    """The deployed project after ``pulumi up``."""
    return _audit.run_gcp_audit(spec, session)
