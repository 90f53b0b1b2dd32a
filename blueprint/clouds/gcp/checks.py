"""Google Cloud in the acceptance family: the client libraries on Application Default Credentials for the stack's
project (:mod:`blueprint.clouds.gcp.api`), then ``blueprint preflight`` (:mod:`blueprint.clouds.gcp.preflight`) and
``blueprint audit`` (:mod:`blueprint.clouds.gcp.audit`)."""

from __future__ import annotations

import re
from typing import Any

from blueprint.acceptance.checks import Check
from blueprint.acceptance.kube import KubeCluster
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


def kube_cluster(spec: ClusterSpec) -> KubeCluster:
    """The GKE cluster in a kubeconfig: ``gcloud container clusters get-credentials`` names the cluster entry and the
    context ``gke_<project>_<location>_<cluster>`` (GKE docs, "Install kubectl and configure cluster access": the
    context name format), the location being the region of a regional cluster, else its zone."""
    g = spec.gcp_spec()
    location = g.region if g.cluster.location == "regional" else g.gpu_zone
    return KubeCluster(spec.name, (re.escape(f"gke_{g.project}_{location}_{spec.name}"),),
                       f"gcloud container clusters get-credentials {spec.name} --location {location} "
                       f"--project {g.project}")
