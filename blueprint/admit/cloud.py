"""What ``blueprint admit`` needs from a cloud (``blueprint/clouds/<cloud>/admit.py``): its cluster and node groups as
the scheduler and the kubelet see them, how a pod reaches the checkpoint bucket (the cloud identity, its credentials
agent), what the node network opens, which CSI drivers the cluster installs, and what the cloud adds to a pod."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, cast

from blueprint import clouds
from blueprint.admit.cluster import ClusterView
from blueprint.admit.nodes import PER_NODE_LABEL_PREFIXES, GpuSharing, NodeGroup, gpu_sharing
from blueprint.admit.resources import Amounts
from blueprint.admit.workloads import PodSet

Problem = tuple[str, str, str]  # (the object, the rule, the message)


class CloudAdmit(Protocol):
    """A cloud's ``admit`` module."""

    @property
    def CLUSTER_TYPE(self) -> str:  # noqa: N802 (a module constant)
        """The type token of the cloud's cluster: a graph with one is this cloud's cluster."""

    @property
    def PER_NODE_LABEL_PREFIXES(self) -> tuple[str, ...]:  # noqa: N802 (a module constant)
        """Labels the cloud puts on nodes that differ from node to node of a group (its topology labels)."""

    @property
    def CREDENTIALS_AGENT(self) -> tuple[str, str]:  # noqa: N802 (a module constant)
        """(address, name) of what a pod asks for its cloud credentials, over TCP 80."""

    @property
    def IDENTITY_DRIVERS(self) -> frozenset[str]:  # noqa: N802 (a module constant)
        """CSI drivers whose volumes run in the pod with its cloud identity (GCS FUSE's sidecar)."""

    @property
    def LIMITS_CRITICAL_PRIORITY(self) -> bool:  # noqa: N802 (a module constant)
        """Whether pods of the system-*-critical priority classes need a quota scoped to them outside kube-system."""

    @property
    def RUNTIME_CLASS_NOTES(self) -> dict[str, str]:  # noqa: N802 (a module constant)
        """When the cloud creates a RuntimeClass people name, by name (GKE: gvisor with GKE Sandbox)."""

    def provided_priority_classes(self, view: ClusterView) -> dict[str, str]:
        """PriorityClasses the cloud puts in every cluster of its, by name, with the source that says so."""

    def provided_runtime_classes(self, view: ClusterView) -> dict[str, str]:
        """RuntimeClasses the cloud creates for the graph's cluster, by name, with the source that says so."""

    def kubernetes_version(self, view: ClusterView) -> str | None:
        """The minor the cloud's cluster runs (or is checked against), or None without one in the graph."""

    def node_groups(self, view: ClusterView, sharing: GpuSharing) -> list[NodeGroup]:
        """The cloud's node groups (pools) of the graph: labels, taints, reach, allocatable."""

    def bucket_access(self, view: ClusterView, namespace: str, account: str) -> tuple[list[Problem], list[str]]:
        """(problems, notes): can pods running as ``namespace/account`` write checkpoints to the bucket."""

    def node_network_opens(self, view: ClusterView, port: int) -> bool:
        """Whether the cloud's node network rules in the graph open TCP ``port`` to the filesystem."""

    def lustre_ports(self, view: ClusterView, driver: str) -> tuple[int, ...]:
        """The TCP ports a Lustre volume of the cloud's CSI ``driver`` needs from the node (empty: not its)."""

    def csi_drivers(self, view: ClusterView) -> tuple[set[str], set[str]]:
        """(CSI drivers the cluster installs, CSI drivers this cloud knows how to detect)."""

    def volume_problems(self, pod_set: PodSet, driver: str, what: str,
                        annotations: Mapping[str, str]) -> list[Problem]:
        """What the cloud needs of a pod that mounts a volume of ``driver`` (an annotation for its sidecar)."""

    def pod_network_problems(self, view: ClusterView, pod_set: PodSet) -> list[Problem]:
        """The pod's extra networks (GKE multi-networking) that the cluster does not define."""

    def injected_requests(self, pod: dict[str, Any]) -> tuple[str, Amounts]:
        """(what, requests) the cloud injects into the pod after admission (a sidecar), or ("", {})."""


    def gateway_proxy_source(self, view: ClusterView) -> str | None:
        """An address the cloud's managed gateway proxies send from to the pods (GKE: the proxy-only subnet's); None
        where the proxies are pods of the cluster (agentgateway) or the cloud has none."""


def cloud_admit(cloud: str) -> CloudAdmit:
    """The cloud's ``admit`` module."""
    return cast(CloudAdmit, clouds.part(cloud, "admit"))


def every_cloud() -> list[CloudAdmit]:
    """Each cloud's ``admit`` module, by name."""
    return [cloud_admit(cloud) for cloud in clouds.names()]


# The oldest minor a cluster the stack builds may run (GKE's REGULAR channel's oldest, 2026-11-30: 1.33), for a graph
# without a cluster: objects are checked against it.
OLDEST_SCHEMA_VERSION = "1.33"


def cluster_cloud(view: ClusterView) -> str | None:
    """The cloud whose cluster the graph holds (its ``CLUSTER_TYPE``); None when it holds none."""
    return next((cloud for cloud in clouds.names() if view.graph.of_type(cloud_admit(cloud).CLUSTER_TYPE)), None)


def kubernetes_version(view: ClusterView) -> str:
    """The Kubernetes minor the cluster runs (or, on GKE, the oldest its channel may run)."""
    return next((v for part in every_cloud() if (v := part.kubernetes_version(view)) is not None),
                OLDEST_SCHEMA_VERSION)


def node_groups(view: ClusterView) -> list[NodeGroup]:
    """Every node group of the graph, ordered by name."""
    sharing = gpu_sharing(view)
    groups = [group for part in every_cloud() for group in part.node_groups(view, sharing)]
    return sorted(groups, key=lambda g: g.name)


def is_per_node_label(key: str) -> bool:
    """Labels that differ from node to node of a group (zone, hostname, the clouds' network topology)."""
    return key.startswith(PER_NODE_LABEL_PREFIXES) or any(
        key.startswith(part.PER_NODE_LABEL_PREFIXES) for part in every_cloud())
