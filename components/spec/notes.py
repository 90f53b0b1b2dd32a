"""What the spec allows but a reviewer should hear about: warnings and notes shown by the preview.

An error stops the stack; these do not. Each line starts with ``warning:`` (something will not work as people
expect: a team nobody can act for, a quota of zero, a reservation window already running) or ``note:`` (worth
knowing: GPUs no team's quota can use). The key path is named as in errors.
"""

from __future__ import annotations

from datetime import UTC, datetime

from components.catalog import load_aws_catalog
from components.catalog.gcp_machines import load_gcp_catalog
from components.spec.base import SPEC_KEY
from components.spec.decisions import (
    cloud_node_groups,
    gpu_units_per_gpu,
    instance_catalog,
    is_autoscaled,
    is_placed,
    teams_billed_directly,
)
from components.spec.errors import named_path
from components.spec.gcp import NODE_MINIMUM_ROLES
from components.spec.model import ClusterSpec


def _utc(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def team_notes(spec: ClusterSpec) -> list[str]:
    """Teams nobody can act for, zero quotas, and GPU node groups outside every team's quota."""
    out: list[str] = []
    for i, team in enumerate(spec.teams):
        where = named_path(spec, f".teams[{i}]")
        if spec.cloud == "aws" and not team.role_arns:
            out.append(f"warning: {where}.roleArns: team '{team.name}' has no members: no IAM role is mapped to its "
                       f"group {team.k8s_group}, so nobody can submit to its queue (add the team's roles)")
        if spec.cloud == "gcp" and team.group is None:
            out.append(f"warning: {where}.group: team '{team.name}' has no members: no Google group is bound to its "
                       "Role, so nobody can submit to its queue (set group to the team's Google group)")
        for j, quota in enumerate(team.quotas):
            if quota.gpus != 0:
                continue
            if not spec.platform.cohort or quota.borrowing_limit_gpus == 0:
                out.append(f"warning: {where}.quotas[{j}].gpus: team '{team.name}' has 0 GPUs on "
                           f"'{quota.node_group}' and cannot borrow any: its GPU jobs there are never admitted")
            else:
                out.append(f"warning: {where}.quotas[{j}].gpus: team '{team.name}' has 0 nominal GPUs on "
                           f"'{quota.node_group}': its jobs run only on GPUs borrowed from the cohort, and are "
                           "preempted when the lender wants them back")
    catalog = instance_catalog(spec)
    used = {q.node_group for t in spec.teams for q in t.quotas if q.gpus > 0}
    for group in cloud_node_groups(spec):
        facts = catalog.get(group.instance_type)
        if facts is not None and facts.gpu_count and group.name not in used:
            out.append(f"note: node group '{group.name}' ({group.max_size} x {group.instance_type}) is in no team's "
                       "quota: only the acceptance gate and the platform can use its GPUs (add it to a team's quotas)")
    return out


def capacity_block_notes(spec: ClusterSpec, now: datetime) -> list[str]:
    """A Capacity Block whose window the clock says has begun (an ended one is an error)."""
    if spec.aws is None:
        return []
    out = []
    for i, group in enumerate(spec.aws.node_groups):
        cap = group.capacity
        if cap.type != "capacity-block" or cap.start is None or cap.end is None:
            continue
        if cap.start <= now < cap.end:
            where = named_path(spec, f".aws.nodeGroups[{i}].capacity.start")
            out.append(f"warning: {where}: the block began on {_utc(cap.start)} "
                       f"and ends on {_utc(cap.end)}: the scheduled scale-up is in the past, so an apply now leaves "
                       "the group at 0; scale it with the command the preview prints, and to 0 at least 30 minutes "
                       "before the end")
    return out


def scaling_notes(spec: ClusterSpec) -> list[str]:
    """An EKS group created at 0 nodes that nothing grows: no schedule (Capacity Block) and no autoscaler (a placed
    multi-node EFA group keeps its desired size), so its GPUs never come unless someone scales it by hand."""
    if spec.aws is None:
        return []
    catalog = load_aws_catalog()
    out = []
    for i, group in enumerate(spec.aws.node_groups):
        facts = catalog.get(group.instance_type)
        if facts is None or group.desired_size or not group.max_size or group.capacity.type == "capacity-block":
            continue
        if is_autoscaled(group, facts):
            continue
        why = ("it is a placed multi-node EFA group, whose Kueue flavor is topology-aware, so the autoscaler leaves it "
               "alone (set placement: none to have it autoscaled without topology-aware placement, or desiredSize "
               "to the nodes it should keep)") if is_placed(group, facts) else (
               "no autoscaler manages it (set desiredSize to the nodes it should keep)")
        out.append(f"warning: {named_path(spec, f'.aws.nodeGroups[{i}].desiredSize')}: node group '{group.name}' is "
                   f"created at 0 nodes and nothing grows it: {why}")
    return out


def odcr_placement_notes(spec: ClusterSpec) -> list[str]:
    """A multi-node EFA group on ODCRs that names no placement group: an ODCR is placed only when it was created in a
    cluster placement group (EC2 User Guide, "Capacity Reservations in cluster placement groups"), so its nodes may
    sit far apart and its Kueue flavor is not topology-aware."""
    if spec.aws is None:
        return []
    catalog = load_aws_catalog()
    out = []
    for i, group in enumerate(spec.aws.node_groups):
        facts = catalog.get(group.instance_type)
        if facts is None or group.capacity.type != "reserved" or is_placed(group, facts):
            continue
        if facts.efa_capable and group.max_size > 1 and group.placement != "none":
            out.append(f"warning: {named_path(spec, f'.aws.nodeGroups[{i}].placementGroupName')}: node group "
                       f"'{group.name}' runs {group.instance_type} on ODCRs with no placement group: an ODCR is "
                       "placed only if it was created in a cluster placement group, so its nodes may sit far apart "
                       "for NCCL and Kueue does not schedule it by topology; if the reservations are in one, name it "
                       "here (or set placement: none to say the spread is intended)")
    return out


def budget_notes(spec: ClusterSpec) -> list[str]:
    """Budget addresses nothing sends to: a team's ``budget.notify`` gets its in-cluster spend alert through the
    stack's first email receiver; without one, only a cloud budget (a team with a node group of its own) mails it."""
    alerts = spec.platform.monitoring.alerts
    if any(r.type == "email" for r in alerts.receivers):
        return []
    billed = teams_billed_directly(spec)
    return [f"warning: {named_path(spec, f'.teams[{i}].budget.notify')}: team '{team.name}' is on shared nodes, "
            f"so no cloud budget mails {', '.join(team.budget.notify)}; its in-cluster spend alert goes to the alert "
            f"routes only, because {SPEC_KEY}.platform.monitoring.alerts has no email receiver to send it through"
            for i, team in enumerate(spec.teams) if team.budget is not None and team.name not in billed]


def serving_route_notes(spec: ClusterSpec) -> list[str]:
    """A served model whose team no alert route names: its alerts (labelled with the team's namespace) reach the
    default receiver only (components/kubernetes/objects/alerting.py), not the team that can act on them."""
    if spec.inference is None:
        return []
    alerts = spec.platform.monitoring.alerts
    routed = {team for route in alerts.routes for team in route.teams}
    return [f"note: {named_path(spec, f'.inference.models[{i}].team')}: no alert route names team '{m.team}', so "
            f"the alerts of its served model {m.name} (latency over its objectives, queueing, errors) reach only "
            f"the default receiver ({alerts.default_receiver or 'none'}); add a route with teams: [{m.team}] under "
            f"{SPEC_KEY}.platform.monitoring.alerts.routes"
            for i, m in enumerate(spec.inference.models) if m.team not in routed]


def serving_quota_notes(spec: ClusterSpec) -> list[str]:
    """An autoscaled model whose ceiling is beyond its team's nominal quota on the group: Kueue admits the replicas past
    the quota only while the cohort lends them (rule inference-quota already keeps the floor within it)."""
    if spec.inference is None:
        return []
    teams = {t.name: t for t in spec.teams}
    out = []
    for i, m in enumerate(spec.inference.models):
        team = teams.get(m.team)
        if team is None or m.replicas.min == m.replicas.max:
            continue
        quota = sum(q.gpus for q in team.quotas if q.node_group == m.node_group)
        ceiling = m.replicas.max * m.gpus_per_replica * gpu_units_per_gpu(spec.platform.gpu_sharing)
        if quota < ceiling:
            out.append(f"note: {named_path(spec, f'.inference.models[{i}].replicas.max')}: {m.replicas.max} replicas "
                       f"of {m.name} take {ceiling} GPUs and team '{m.team}' has {quota} on '{m.node_group}': Kueue "
                       "admits the replicas past its quota only while other teams' unused quota is lent, and holds "
                       "them otherwise, however long the queue")
    return out


# The Kubernetes minors KEDA 2.20 (components/catalog/charts.yaml keda) is tested on: keda.sh/docs/2.20/operate/cluster,
# "Kubernetes Compatibility" (v2.20: v1.33 - v1.35), read 2026-12-03.
KEDA_TESTED_MINORS = (33, 35)


def serving_autoscaler_notes(spec: ClusterSpec) -> list[str]:
    """An autoscaled served model on a Kubernetes minor outside the window KEDA's release is tested on (EKS: the
    control plane's version; GKE: its minimum version when the stack sets one, otherwise the channel's, not known at
    load)."""
    if spec.inference is None or not any(m.replicas.min < m.replicas.max for m in spec.inference.models):
        return []
    if spec.aws is not None:
        version, key = spec.aws.control_plane.kubernetes_version, ".aws.controlPlane.kubernetesVersion"
    elif spec.gcp is not None and spec.gcp.cluster.min_master_version:
        version, key = spec.gcp.cluster.min_master_version, ".gcp.cluster.minMasterVersion"
    else:
        return []
    parts = version.split(".")
    if len(parts) < 2 or not parts[1].isdigit():
        return []
    low, high = KEDA_TESTED_MINORS
    if low <= int(parts[1]) <= high:
        return []
    return [f"note: {named_path(spec, key)}: KEDA 2.20, which scales the served models with replicas.min < max, is "
            f"tested on Kubernetes 1.{low} to 1.{high} (keda.sh/docs/2.20/operate/cluster); on {version} it runs "
            "untested: check its release notes, or pin a KEDA release tested there (components/catalog/charts.yaml)"]


LEGACY_NODE_ROLES = frozenset({"roles/logging.logWriter", "roles/monitoring.metricWriter"})


def node_account_notes(spec: ClusterSpec) -> list[str]:
    """A pool account the stack creates without the roles a node needs: without GKE's node role its logs and metrics
    are dropped; without Artifact Registry reader it cannot pull the platform's and the acceptance gate's images from
    the project's registry (GKE "Configure node service accounts")."""
    if spec.gcp is None:
        return []
    out = []
    for i, pool in enumerate(spec.gcp.node_pools):
        account = pool.service_account
        if account is None or account.account_id is None:
            continue
        roles = set(account.roles)
        node_role, reader = NODE_MINIMUM_ROLES
        # The node role, or the legacy pair cluster-toolkit grants for the same logs and metrics.
        missing = ([] if node_role in roles or roles >= LEGACY_NODE_ROLES else [node_role]) \
            + ([] if reader in roles else [reader])
        if missing:
            out.append(f"warning: {named_path(spec, f'.gcp.nodePools[{i}].serviceAccount.roles')}: pool "
                       f"'{pool.name}' runs as {account.account_id} without {' and '.join(missing)}: a node account "
                       f"needs {node_role} (or {' and '.join(sorted(LEGACY_NODE_ROLES))}) for its logs and metrics, "
                       f"and {reader} to pull images from the project's registry (GKE 'Configure node service "
                       "accounts')")
    return out


def zone_notes(spec: ClusterSpec) -> list[str]:
    """A GKE GPU pool in a zone where no source the catalog read lists its machine type: a typo or a zone that does
    not exist (``us-central1-z``), or one the partial lists miss; refused only once zones are confirmed (rule
    machine-type-in-zone)."""
    if spec.gcp is None:
        return []
    zone, catalog, out = spec.gcp.gpu_zone, load_gcp_catalog(), []
    for i, pool in enumerate(spec.gcp.node_pools):
        facts = catalog.get(pool.machine_type)
        if facts is None or not facts.gpu_count or facts.zones is not None or not facts.zones_recorded \
                or zone in facts.zones_recorded:
            continue
        near = [z for z in facts.zones_recorded if z.startswith(f"{spec.gcp.region}-")]
        out.append(f"warning: {named_path(spec, f'.gcp.nodePools[{i}].machineType')}: no source the catalog read "
                   f"lists {pool.machine_type} in {zone} (in {spec.gcp.region}: {', '.join(near) or 'none'}; "
                   f"{facts.zones_source}, partial): check the zone exists and offers it with `gcloud compute "
                   f"accelerator-types list --filter=zone:{zone}` before the apply fails on it")
    return out


def spec_notes(spec: ClusterSpec, now: datetime) -> list[str]:
    """Every load-time warning and note of the spec, in the order the preview shows them."""
    return (capacity_block_notes(spec, now) + team_notes(spec) + scaling_notes(spec) + odcr_placement_notes(spec)
            + budget_notes(spec) + zone_notes(spec) + node_account_notes(spec) + serving_route_notes(spec)
            + serving_quota_notes(spec) + serving_autoscaler_notes(spec))
