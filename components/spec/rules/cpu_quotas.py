"""Rules on teams' CPU-only quotas (``teams[].cpuQuotas``): each names a node group without GPUs, the quotas on a
group fit its nodes at maxSize, a group dedicated to a team takes only that team's quota, and a group without GPUs
and without team quota stays for system pods.

Kueue admits a pod set to the first flavor of its ClusterQueue whose quota it fits (Kueue, "Cluster Queue": flavors
are tried in the order listed), so the CPU flavor listed first takes the pods that ask for no GPU; its quota is the
only bound on them there, and it must fit the group's nodes, or admitted pods wait for nodes that never come.
"""

from __future__ import annotations

from components.spec.decisions import cloud_node_groups, instance_catalog
from components.spec.errors import _Collector
from components.spec.model import ClusterSpec


def _group_figures(spec: ClusterSpec, name: str) -> tuple[int, int] | None:
    """The vCPUs and memory (GiB) of the smallest node a CPU group may launch (AWS: of every type it lists), or None
    when the catalog lacks a figure."""
    catalog = instance_catalog(spec)
    group = next(g for g in cloud_node_groups(spec) if g.name == name)
    types = list(getattr(group, "instance_types", None) or [group.instance_type])
    facts = [catalog.get(t) for t in types]
    vcpus = [f.vcpu.value for f in facts if f is not None]
    memory = [f.memory_gib.value for f in facts if f is not None]
    if not vcpus or any(v is None for v in vcpus) or any(m is None for m in memory):
        return None
    return min(v for v in vcpus if v is not None), min(m for m in memory if m is not None)


def check_cpu_quotas(spec: ClusterSpec, out: _Collector) -> None:
    """Every CPU quota is on a node group without GPUs, fits it, respects its dedication, and leaves a system group."""
    groups = {g.name: g for g in cloud_node_groups(spec)}
    if not groups or not any(t.cpu_quotas for t in spec.teams):
        return
    catalog = instance_catalog(spec)
    types = {name: g.instance_type for name, g in groups.items()}
    cpu_groups = [n for n, t in types.items() if (f := catalog.get(t)) is not None and not f.gpu_count]
    taken: dict[str, list[tuple[str, int, int]]] = {}
    for i, team in enumerate(spec.teams):
        used: set[str] = set()
        for j, q in enumerate(team.cpu_quotas):
            where = f".teams[{i}].cpuQuotas[{j}]"
            if q.node_group in used:
                out.add(f"{where}.nodeGroup", "unique-names",
                        f"team '{team.name}' lists node group '{q.node_group}' twice")
                continue
            used.add(q.node_group)
            if q.node_group in groups and types[q.node_group] not in catalog:
                continue  # the unknown instance type is reported on the node group
            if q.node_group not in cpu_groups:
                out.add(f"{where}.nodeGroup", "cpu-quota-node-group",
                        f"'{q.node_group}' is not a node group without GPUs of this stack; known: "
                        + (", ".join(cpu_groups) or "none"))
                continue
            owner = groups[q.node_group].team
            if owner is not None and owner != team.name:
                out.add(f"{where}.nodeGroup", "dedicated-group-team",
                        f"node group '{q.node_group}' is dedicated to '{owner}' (billed to it), so only that team may "
                        "have a CPU quota on it")
            taken.setdefault(q.node_group, []).append((team.name, q.cpu, q.memory_gib))
    for name, takers in taken.items():
        figures = _group_figures(spec, name)
        if figures is None:
            continue
        vcpu, memory = figures
        group = groups[name]
        for what, total, per_node, unit in (("cpu", sum(c for _, c, _ in takers), vcpu, " cores"),
                                           ("memoryGiB", sum(m for _, _, m in takers), memory, " GiB")):
            capacity = per_node * group.max_size
            if total > capacity:
                shares = ", ".join(f"{t} {c if what == 'cpu' else m}" for t, c, m in takers)
                out.add(".teams", "cpu-quota-fits-node-group",
                        f"CPU quotas' {what} on node group '{name}' add up to {total}{unit} ({shares}) but the group "
                        f"provides at most {capacity}{unit} at maxSize {group.max_size} ({per_node}{unit} a node)")
    free = [n for n in cpu_groups if n not in taken]
    if taken and not free:
        key = ".gcp.nodePools" if spec.cloud == "gcp" else ".aws.nodeGroups"
        out.add(key, "system-node-group",
                f"every node group without GPUs carries team CPU quota ({', '.join(sorted(taken))}; "
                "teams[].cpuQuotas): keep one without it for system pods (Kueue, Prometheus, the autoscaler), so "
                "team work cannot starve the platform")
