"""Whether a version change is one step the managed Kubernetes service takes: the control plane moves one minor per
update and never back (EKS UpdateClusterVersion; GKE "You cannot upgrade more than one minor version at a time"), EKS
refuses the update while a managed node group's minor differs from the control plane's (UpdateClusterVersion), and no
node runs newer than the control plane."""

from __future__ import annotations

from dataclasses import dataclass

from blueprint import clouds
from blueprint.changes.cloud import cloud_changes, minor
from blueprint.graph.model import ResourceGraph


@dataclass(frozen=True)
class VersionProblem:
    """A version change the service refuses, with where it is set."""

    what: str  # the resource or node group
    key: str  # the spec key that sets it (under gpu-cluster:spec)
    message: str
    rule: str  # one-minor-per-update, no-downgrade, nodes-match-control-plane, node-not-newer


def _number(version: str) -> tuple[int, int]:
    major, minor_ = minor(version).split(".")
    return int(major), int(minor_)


def version_problems(old_cluster: str | None, new_cluster: str | None,
                     old_nodes: dict[str, str], new_nodes: dict[str, str], platform: str,
                     nodes_must_match: bool, keys: tuple[str, str] = ("kubernetesVersion", "nodeGroups[{name}]")
                     ) -> list[VersionProblem]:
    """The refusals of moving from the old versions to the new ones (cluster minors and node group minors);
    ``keys``: the spec key of the control plane's version and the template of a node group's."""
    cluster_key, node_key = keys
    out: list[VersionProblem] = []
    if old_cluster is not None and new_cluster is not None:
        a, b = _number(old_cluster), _number(new_cluster)
        if a[0] == b[0] and b[1] - a[1] > 1:
            skipped = ", ".join(f"{a[0]}.{m}" for m in range(a[1] + 1, b[1]))
            out.append(VersionProblem("control plane", cluster_key, (
                f"{minor(old_cluster)} -> {minor(new_cluster)} skips {skipped}: {platform} moves the control plane "
                f"one minor per update; go to {a[0]}.{a[1] + 1}, apply, and so on (docs/upgrades.md)"),
                "one-minor-per-update"))
        elif b < a:
            out.append(VersionProblem("control plane", cluster_key, (
                f"{minor(old_cluster)} -> {minor(new_cluster)} goes back: {platform} does not downgrade a control "
                "plane"), "no-downgrade"))
        if nodes_must_match and b != a:
            behind = sorted(n for n, v in old_nodes.items() if minor(v) != minor(old_cluster))
            for name in behind:
                out.append(VersionProblem(name, node_key.format(name=name), (
                    f"node group {name} runs {minor(old_nodes[name])} and the control plane {minor(old_cluster)}: "
                    f"{platform} refuses a control-plane update while a managed node group's minor differs "
                    "(UpdateClusterVersion); bring the group to the control plane's minor first"),
                    "nodes-match-control-plane"))
    if new_cluster is not None:
        for name, version in sorted(new_nodes.items()):
            if _number(version) > _number(new_cluster):
                out.append(VersionProblem(name, node_key.format(name=name), (
                    f"node group {name} would run {minor(version)}, newer than the control plane's "
                    f"{minor(new_cluster)}: kubelet must not be newer than the API server"), "node-not-newer"))
    return out


def step_problems(old_graph: ResourceGraph, new_graph: ResourceGraph) -> list[VersionProblem]:
    """The version problems between two graphs of one stack (the cloud of the new graph says how to read them)."""
    cloud = clouds.of_types(r.type for r in new_graph.resources)
    if cloud is None:
        return []
    part = cloud_changes(cloud)
    return version_problems(part.cluster_version(old_graph), part.cluster_version(new_graph),
                            dict(part.node_versions(old_graph)), dict(part.node_versions(new_graph)), part.PLATFORM,
                            part.NODES_MATCH_BEFORE_UPGRADE, (part.CLUSTER_VERSION_KEY, part.NODE_VERSION_KEY))
