"""The node groups of the graph as the scheduler sees them: labels, taints, how many nodes at most, and what one
node can give pods (its allocatable resources). Each cloud's admit module reads its own groups (EKS node groups, GKE
node pools; :mod:`blueprint.admit.cloud`) into :class:`NodeGroup`; what is the same on every cloud is here:

- GPUs are shared when the GPU Operator's device plugin time-slices them (its Helm values in the graph);
- CPU and memory: the catalog's vCPUs and memory minus what the kubelet reserves, by the formula the program's
  Slurm defaults use too (:mod:`components.kubernetes.reserved`: GKE's published tiers plus the 100 MiB eviction
  threshold, on both clouds); DaemonSet pods (device plugins, exporters) are not subtracted.
- hugepages the node reserves at boot come out of its memory; otherwise hugepages and ephemeral storage depend on the
  node's boot configuration and disks: admit does not guess them (the pod is reported with "check allocatable on a
  node").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import yaml

from blueprint.admit.cluster import ClusterView, as_list, as_mapping
from components.kubernetes.reserved import allocatable_cpu, allocatable_memory

NODE_GROUP_LABEL = "gpu-cluster/node-group"
GPU = "nvidia.com/gpu"
# Resources whose per-node amount depends on the node's boot settings or disks: never guessed.
UNKNOWN_CAPACITY_PREFIXES = ("hugepages-", "ephemeral-storage")
# Labels each node has but that differ per node (zone, host; the clouds' network topology labels are in their admit
# modules): a selector on them is satisfiable on some node of the group, which admit cannot see.
PER_NODE_LABEL_PREFIXES = ("kubernetes.io/hostname", "topology.kubernetes.io/", "failure-domain.beta.kubernetes.io/")
_TAINT_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}


@dataclass(frozen=True)
class GpuSharing:
    """How the device plugin advertises GPUs: ``replicas`` units per GPU (time-slicing), and whether a container may
    ask for more than one unit."""

    replicas: int = 1
    fail_requests_greater_than_one: bool = False
    source: str = ""


@dataclass
class NodeGroup:
    """One node group or node pool as the scheduler sees it."""

    name: str  # the gpu-cluster/node-group label when present, else the provider's name
    ref: str  # NodeGroup/<name> or NodePool/<name>, for reasons
    instance_type: str
    labels: dict[str, str]
    taints: list[dict[str, str]]
    max_nodes: int  # the nodes it reaches: maxSize where something grows it (module docstring), else desiredSize
    allocatable: dict[str, Fraction]
    sharing: GpuSharing = field(default_factory=GpuSharing)
    notes: list[str] = field(default_factory=list)
    max_size: int | None = None  # the group's maxSize, when the nodes it reaches are fewer
    vcpus: int | None = None  # the catalog's vCPUs of its instance type, when known
    spec_key: str = ""  # the stack file's key of the group (aws.nodeGroups[x], gcp.nodePools[x])

    def __post_init__(self) -> None:
        if self.max_size is None:
            self.max_size = self.max_nodes

    def taint_text(self) -> str:
        """The taints as ``key=value:Effect``."""
        return ", ".join(f"{t['key']}={t.get('value', '')}:{t['effect']}" if t.get("value") else
                         f"{t['key']}:{t['effect']}" for t in self.taints) or "none"


def gpu_sharing(view: ClusterView) -> GpuSharing:
    """Time-slicing from the GPU Operator's device-plugin configuration (its default config), when shared."""
    release = view.release(("gpu-operator",))
    if release is None:
        return GpuSharing()
    config = as_mapping(as_mapping(release.values.get("devicePlugin")).get("config"))
    data, default = as_mapping(config.get("data")), config.get("default")
    text = data.get(default) if isinstance(default, str) else None
    if text is None and len(data) == 1:
        text = next(iter(data.values()))
    if not isinstance(text, str):
        return GpuSharing()
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return GpuSharing()
    slicing = as_mapping(as_mapping(as_mapping(doc).get("sharing")).get("timeSlicing"))
    for item in as_list(slicing.get("resources")):
        if isinstance(item, dict) and item.get("name") == GPU and isinstance(item.get("replicas"), int):
            return GpuSharing(replicas=max(1, item["replicas"]),
                              fail_requests_greater_than_one=slicing.get("failRequestsGreaterThanOne") is True,
                              source=f"{release.ref} devicePlugin config {default}")
    return GpuSharing()


# Taints a GPU node registers with until the Node Readiness Controller removes them (its check passed, its health is
# reported): they hold a new node, not a job, so a job is judged against the node it will get (components/kubernetes/
# objects/node_check.py), as the Cluster Autoscaler judges it against its template.
TRANSIENT_TAINT_PREFIX = "readiness.k8s.io/"


def taints_of(raw: Any) -> list[dict[str, str]]:
    out = []
    for taint in as_list(raw):
        if isinstance(taint, dict) and isinstance(taint.get("key"), str) \
                and not taint["key"].startswith(TRANSIENT_TAINT_PREFIX):
            effect = str(taint.get("effect", ""))
            out.append({"key": taint["key"], "value": str(taint.get("value") or ""),
                        "effect": _TAINT_EFFECTS.get(effect, effect)})
    return out


def int_value(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


HUGEPAGES = "hugepages-2Mi"


def add_hugepages(pages: int, allocatable: dict[str, Fraction]) -> None:
    """2 MiB hugepages the node reserves at boot: kubelet offers them as hugepages-2Mi and takes them out of the
    memory it offers (Kubernetes "Manage HugePages")."""
    if pages <= 0:
        return
    size = Fraction(pages * 2 * 1024 * 1024)
    allocatable[HUGEPAGES] = size
    if "memory" in allocatable:
        allocatable["memory"] = max(Fraction(0), allocatable["memory"] - size)


def cpu_memory(vcpu: int | None, memory_gib: int | None) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    if vcpu:
        out["cpu"] = allocatable_cpu(vcpu)
    if memory_gib:
        out["memory"] = allocatable_memory(memory_gib)
    return out


def unknown_capacity(resource: str) -> bool:
    """Resources whose per-node amount admit does not guess (hugepages, ephemeral storage)."""
    return resource.startswith(UNKNOWN_CAPACITY_PREFIXES)


