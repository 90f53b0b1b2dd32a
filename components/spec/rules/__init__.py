"""Every cross-field rule, grouped by plane in this package; :func:`validate` runs them all."""

from __future__ import annotations

from datetime import datetime

from components.spec.errors import _Collector
from components.spec.model import ClusterSpec
from components.spec.rules.arns import _check_arn_partitions
from components.spec.rules.cloud import _check_cloud
from components.spec.rules.control_plane import _check_control_plane
from components.spec.rules.cpu_quotas import check_cpu_quotas
from components.spec.rules.gcp import check_gcp
from components.spec.rules.identity import _check_labels
from components.spec.rules.inference import _check_inference
from components.spec.rules.network import _check_network
from components.spec.rules.node_groups import _check_node_groups
from components.spec.rules.platform import (
    _check_acceptance,
    _check_alerts,
    _check_platform,
    _check_telemetry,
    check_acceptance_figures,
)
from components.spec.rules.slurm import _check_slurm
from components.spec.rules.storage import _check_storage
from components.spec.rules.teams import _check_billing, _check_teams
from components.spec.rules.versions import check_node_versions, check_pool_upgrades
from components.spec.rules.workload import _check_workload


def validate(spec: ClusterSpec, provider_region: str | None, now: datetime,
             provider_project: str | None = None) -> _Collector:
    """Run every rule on a spec that pydantic accepted; the collector holds what broke."""
    out = _Collector(spec)
    _check_labels(spec, out)
    _check_cloud(spec, provider_region, out, provider_project)
    _check_arn_partitions(spec, out)
    _check_teams(spec, out)
    check_cpu_quotas(spec, out)
    _check_billing(spec, out)
    _check_platform(spec, out)
    _check_acceptance(spec, out)
    _check_telemetry(spec, out)
    _check_alerts(spec, out)
    _check_workload(spec, out)
    _check_slurm(spec, out)
    _check_inference(spec, out)
    if spec.environment == "prod" and not spec.deletion_protection:
        out.add(".deletionProtection", "prod-deletion-protection",
                "prod stacks cannot turn off deletion protection of stateful resources")
    if spec.aws is not None:
        _check_network(spec.aws, out)
        _check_node_groups(spec, spec.aws, now, out)
        _check_storage(spec.aws, out)
        _check_control_plane(spec, spec.aws, now, out)
        check_node_versions(spec.aws, out)
    if spec.gcp is not None:
        check_gcp(spec, spec.gcp, out)
        check_pool_upgrades(spec.gcp, out)
    if not out.issues:  # asked for once the node groups are otherwise valid (their types and sizes decide the runs)
        check_acceptance_figures(spec, out)
    return out
