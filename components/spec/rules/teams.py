"""Rules on teams and their quotas."""

from __future__ import annotations

from components.spec.aws import NodeGroupSpec
from components.spec.base import _ROLE_ARN_RE, SYSTEM_NAMESPACES
from components.spec.billing import MAX_BUDGET_EMAIL_SUBSCRIBERS, email_problem
from components.spec.decisions import cloud_node_groups, gpu_units_per_gpu, instance_catalog
from components.spec.errors import _Collector
from components.spec.gcp import GcpNodePoolSpec
from components.spec.model import ClusterSpec


def _check_teams(spec: ClusterSpec, out: _Collector) -> None:
    seen: set[str] = set()
    in_order: list[NodeGroupSpec | GcpNodePoolSpec] = [*cloud_node_groups(spec)]
    groups = {ng.name: ng for ng in in_order}
    catalog = instance_catalog(spec)
    for i, team in enumerate(spec.teams):
        where = f".teams[{i}]"
        if team.name in seen:
            out.add(f"{where}.name", "unique-names", f"team name '{team.name}' is used twice")
        seen.add(team.name)
        if team.name in SYSTEM_NAMESPACES:
            out.add(f"{where}.name", "team-namespace-free",
                    f"'{team.name}' is a system namespace; choose another team name")
        for j, arn in enumerate(team.role_arns):
            if not _ROLE_ARN_RE.fullmatch(arn):
                out.add(f"{where}.roleArns[{j}]", "admin-role-arn",
                        f"'{arn}' is not an IAM role ARN (arn:aws:iam::<12 digits>:role/<name>)")
        if team.k8s_group.startswith("system:"):
            out.add(f"{where}.group", "team-group-not-system",
                    f"'{team.k8s_group}' is a reserved Kubernetes group (system:masters is cluster-admin, past every "
                    "RoleBinding); EKS access entries refuse groups that start with system:")
        if not team.quotas:
            out.add(f"{where}.quotas", "team-quota-required",
                    f"team '{team.name}' has no quota; every team needs a GPU quota on at least one node group")
        _check_budget(spec, i, out)
        used: set[str] = set()
        for j, q in enumerate(team.quotas):
            qwhere = f"{where}.quotas[{j}]"
            if q.node_group in used:
                out.add(f"{qwhere}.nodeGroup", "unique-names",
                        f"team '{team.name}' lists node group '{q.node_group}' twice")
            used.add(q.node_group)
            group = groups.get(q.node_group)
            facts = catalog.get(group.instance_type) if group else None
            if (group is not None and facts is None) or not groups:
                continue  # the unknown instance type is reported on the node group; missing cloud settings too
            if group is None or facts is None or facts.gpu_count == 0:
                out.add(f"{qwhere}.nodeGroup", "quota-node-group-exists",
                        f"'{q.node_group}' is not a GPU node group of this stack; known: "
                        + ", ".join(n for n, g in groups.items()
                                    if (f := catalog.get(g.instance_type)) and f.gpu_count))
                continue
            if q.borrowing_limit_gpus is not None and not spec.platform.cohort:
                out.add(f"{qwhere}.borrowingLimitGpus", "borrowing-limit-needs-cohort",
                        "a borrowing limit needs a cohort to borrow from; set platform.cohort: true or remove it")
            if q.lending_limit_gpus is not None and q.lending_limit_gpus > q.gpus:
                out.add(f"{qwhere}.lendingLimitGpus", "lending-limit-within-quota",
                        f"lendingLimitGpus ({q.lending_limit_gpus}) must be <= the nominal gpus ({q.gpus})")
            for field, known in (("cpu", facts.vcpu.value), ("memoryGiB", facts.memory_gib.value)):
                given = q.cpu if field == "cpu" else q.memory_gib
                if given is None and known is None:
                    out.add(f"{qwhere}.{field}", "quota-resources-known",
                            f"the catalog has no confirmed {'vCPU' if field == 'cpu' else 'memory'} figure for "
                            f"{group.instance_type}; set {field} for this quota")
    for i, group in enumerate(in_order):
        if group.team is None or groups[group.name] is not group:  # a name used twice is checked once
            continue
        key = ".gcp.nodePools" if spec.cloud == "gcp" else ".aws.nodeGroups"
        where = f"{key}[{i}].team"
        owner = next((t for t in spec.teams if t.name == group.team), None)
        if owner is None:
            out.add(where, "dedicated-group-team", f"'{group.team}' is not a team of this stack; known: "
                    + ", ".join(t.name for t in spec.teams))
            continue
        group_facts = catalog.get(group.instance_type)
        if group_facts is not None and not group_facts.gpu_count:  # a CPU group: its quotas are CPU quotas
            if not any(q.node_group == group.name for q in owner.cpu_quotas):  # others': rules/cpu_quotas.py
                out.add(where, "dedicated-group-team", f"node group '{group.name}' is dedicated to '{owner.name}', "
                        "which has no CPU quota on it: give the team one there (teams[].cpuQuotas)")
            continue
        others = [t.name for t in spec.teams if t.name != owner.name and any(q.node_group == group.name
                                                                              for q in t.quotas)]
        own = next((q for q in owner.quotas if q.node_group == group.name), None)
        if others:
            out.add(where, "dedicated-group-team", f"node group '{group.name}' is dedicated to '{owner.name}' (billed "
                    f"to it), so only that team may have a quota on it; also: {', '.join(others)}")
        if own is None:
            out.add(where, "dedicated-group-team", f"node group '{group.name}' is dedicated to '{owner.name}', which "
                    "has no quota on it: give the team a quota there")
        elif spec.platform.cohort and own.lending_limit_gpus != 0:
            out.add(where, "dedicated-group-team", f"node group '{group.name}' is dedicated to '{owner.name}' and "
                    "billed to it: its quota there lends nothing to the cohort (lendingLimitGpus: 0), or other teams' "
                    "jobs would run on the team's bill")
    gids: dict[int, str] = {}
    for i, team in enumerate(spec.teams):
        other = gids.get(team.posix_gid)
        if other is not None and other != team.name:
            out.add(f".teams[{i}].gid", "team-gid-unique",
                    f"team '{team.name}' would own its shared-filesystem directory with group {team.posix_gid}, as "
                    f"team '{other}' does: give one of them its own gid")
        gids.setdefault(team.posix_gid, team.name)
    shares = gpu_units_per_gpu(spec.platform.gpu_sharing)
    by_group: dict[str, list[tuple[str, int]]] = {}  # one pass over the quotas, not one per node group
    for t in spec.teams:
        for q in t.quotas:
            by_group.setdefault(q.node_group, []).append((t.name, q.gpus))
    for name, group in groups.items():
        facts = catalog.get(group.instance_type)
        if facts is None or not facts.gpu_count:
            continue
        takers = by_group.get(name, [])
        total = sum(g for _, g in takers)
        capacity = group.max_size * facts.gpu_count * shares
        if total > capacity:
            out.add(".teams", "quota-fits-node-groups",
                    f"nominal GPU quotas on node group '{name}' add up to {total} ("
                    + ", ".join(f"{t} {g}" for t, g in takers)
                    + f") but the group provides at most {capacity} at maxSize {group.max_size}")


def _check_budget(spec: ClusterSpec, i: int, out: _Collector) -> None:
    """Every team has a budget whose alerts AWS Budgets can send."""
    team = spec.teams[i]
    where = f".teams[{i}].budget"
    if team.budget is None:
        out.add(where, "team-budget-required",
                f"team '{team.name}' has no budget; every team needs one (monthlyUsd and notify) so that its spend "
                "is watched")
        return
    for j, address in enumerate(team.budget.notify):
        if (problem := email_problem(address)) is not None:
            out.add(f"{where}.notify[{j}]", "budget-email", problem)
    thresholds = team.budget.alert_at_percent
    for j, pct in enumerate(thresholds):
        if not 1 <= pct <= 1000:
            out.add(f"{where}.alertAtPercent[{j}]", "budget-threshold-range",
                    f"{pct} is not a threshold AWS Budgets alerts on here (1 to 1000 percent)")
    if len(set(thresholds)) != len(thresholds):
        out.add(f"{where}.alertAtPercent", "unique-names", "a threshold is listed twice")
    recipients = set(team.budget.notify) | set(spec.billing.notify)
    if len(recipients) > MAX_BUDGET_EMAIL_SUBSCRIBERS:
        out.add(f"{where}.notify", "budget-subscribers",
                f"team '{team.name}''s budget would alert {len(recipients)} addresses (its notify and billing.notify); "
                f"AWS Budgets takes at most {MAX_BUDGET_EMAIL_SUBSCRIBERS} email subscribers per notification")


def _check_billing(spec: ClusterSpec, out: _Collector) -> None:
    """The finance recipients are addresses."""
    for j, address in enumerate(spec.billing.notify):
        if (problem := email_problem(address)) is not None:
            out.add(f".billing.notify[{j}]", "budget-email", problem)
