"""The node groups of the graph as the scheduler sees them: labels, taints, how many nodes at most, and what one
node can give pods (its allocatable resources).

Labels and taints come from the node group (``aws:eks/nodeGroup:NodeGroup``) or node pool
(``gcp:container/nodePool:NodePool``) plus the labels the cloud puts on every node (instance type, architecture,
node group or pool name). Per-node figures come from the instance catalogs:

- GPUs: the catalog's ``gpu_count`` (GKE: the pool's ``guestAccelerators``), times the time-slicing replicas when
  the GPU Operator's device plugin shares GPUs (its Helm values in the graph);
- ``vpc.amazonaws.com/efa``: the catalog's EFA interfaces, on AWS, where the EFA device plugin release runs on the
  type (its ``supportedInstanceLabels``);
- CPU and memory: the catalog's vCPUs and memory minus what the kubelet reserves. Assumption: GKE's published
  reservation tiers (CPU 6 % of the first core, 1 % of the second, 0.5 % of the next two, 0.25 % above four; memory
  25 % of the first 4 GiB, 20 % of the next 4, 10 % of the next 8, 6 % of the next 112, 2 % above 128 GiB) plus
  the 100 MiB eviction threshold, on both clouds. They reserve more than EKS's AL2023 formula on large nodes, so a
  pod that fits here fits there; DaemonSet pods (device plugins, exporters) are not subtracted.
- hugepages and ephemeral storage depend on the node's boot configuration and disks: admit does not guess them
  (the pod is reported with "check allocatable on a node").

How many nodes a group reaches: an EKS group the Cluster Autoscaler manages (the opt-in tag on its Auto Scaling group
and the autoscaler's release, both in the graph) and a Capacity Block group (its schedule) at their maxSize; any other
EKS group at its desiredSize, since nothing grows it (a reserved ODCR group the operator sizes, a fixed group). A GKE
pool at its autoscaling maximum, else its node count.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import yaml

from blueprint.admit.cluster import ClusterView, as_list, as_mapping, as_str_map
from blueprint.graph.model import GraphResource
from components.aws.autoscaler import AUTOSCALE_TAG
from components.aws.autoscaler import RELEASE as AUTOSCALER_RELEASE
from components.catalog.gcp_machines import load_gcp_catalog
from components.catalog.instances import load_aws_catalog

EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
GKE_NODE_POOL = "gcp:container/nodePool:NodePool"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
ASG_TAG = "aws:autoscaling/tag:Tag"
NODE_GROUP_LABEL = "gpu-cluster/node-group"
GPU = "nvidia.com/gpu"
EFA = "vpc.amazonaws.com/efa"
GIB = 2**30
MIB = 2**20
EVICTION_HARD = 100 * MIB
# Resources whose per-node amount depends on the node's boot settings or disks: never guessed.
UNKNOWN_CAPACITY_PREFIXES = ("hugepages-", "ephemeral-storage")
# Labels each node has but that differ per node (zone, host, network topology): a selector on them is satisfiable
# on some node of the group, which admit cannot see.
PER_NODE_LABEL_PREFIXES = ("kubernetes.io/hostname", "topology.kubernetes.io/", "failure-domain.beta.kubernetes.io/",
                           "topology.k8s.aws/", "cloud.google.com/gce-topology-", "topology.gke.io/")
_TAINT_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
# GKE taints GPU nodes itself when the cluster has other pools (GKE, "About GPUs in GKE": nvidia.com/gpu=present).
GKE_GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}


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

    def __post_init__(self) -> None:
        if self.max_size is None:
            self.max_size = self.max_nodes

    def taint_text(self) -> str:
        """The taints as ``key=value:Effect``."""
        return ", ".join(f"{t['key']}={t.get('value', '')}:{t['effect']}" if t.get("value") else
                         f"{t['key']}:{t['effect']}" for t in self.taints) or "none"


def reserved_cpu(cores: Fraction) -> Fraction:
    """CPU the kubelet keeps for the system (GKE's tiers, used for both clouds; see the module docstring)."""
    tiers = ((Fraction(1), Fraction(6, 100)), (Fraction(1), Fraction(1, 100)), (Fraction(2), Fraction(5, 1000)))
    left, out = cores, Fraction(0)
    for size, rate in tiers:
        take = min(left, size)
        out += take * rate
        left -= take
    return out + max(left, Fraction(0)) * Fraction(25, 10000)


def reserved_memory(total: Fraction) -> Fraction:
    """Memory the kubelet keeps for the system and eviction (GKE's tiers plus 100 MiB; module docstring)."""
    if total < GIB:
        return Fraction(255 * MIB) + EVICTION_HARD
    tiers = ((4 * GIB, Fraction(25, 100)), (4 * GIB, Fraction(20, 100)), (8 * GIB, Fraction(10, 100)),
             (112 * GIB, Fraction(6, 100)))
    left, out = total, Fraction(0)
    for size, rate in tiers:
        take = min(left, Fraction(size))
        out += take * rate
        left -= take
    return out + max(left, Fraction(0)) * Fraction(2, 100) + EVICTION_HARD


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


def _efa_plugin_types(view: ClusterView) -> tuple[bool, tuple[str, ...] | None]:
    """Whether the EFA device plugin runs, and on which instance types (None: on every node it tolerates)."""
    release = view.release(("efa-k8s-device-plugin",))
    if release is None:
        return False, None
    supported = as_mapping(release.values.get("supportedInstanceLabels"))
    values = [str(v) for v in as_list(supported.get("values"))]
    return True, tuple(values) if values else None


def _taints(raw: Any) -> list[dict[str, str]]:
    out = []
    for taint in as_list(raw):
        if isinstance(taint, dict) and isinstance(taint.get("key"), str):
            effect = str(taint.get("effect", ""))
            out.append({"key": taint["key"], "value": str(taint.get("value") or ""),
                        "effect": _TAINT_EFFECTS.get(effect, effect)})
    return out


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _launch_template(view: ClusterView, group: GraphResource) -> dict[str, Any]:
    """The launch template created beside a node group under the same component (blueprint.cost does the same)."""
    if group.parent is None:
        return {}
    return next((s.inputs for s in view.graph.children(group.parent) if s.type == LAUNCH_TEMPLATE), {})


HUGEPAGES = "hugepages-2Mi"
_NR_HUGEPAGES = re.compile(r"vm\.nr_hugepages=(\d+)")


def _hugepages(pages: int, allocatable: dict[str, Fraction]) -> None:
    """2 MiB hugepages the node reserves at boot: kubelet offers them as hugepages-2Mi and takes them out of the
    memory it offers (Kubernetes "Manage HugePages")."""
    if pages <= 0:
        return
    size = Fraction(pages * 2 * 1024 * 1024)
    allocatable[HUGEPAGES] = size
    if "memory" in allocatable:
        allocatable["memory"] = max(Fraction(0), allocatable["memory"] - size)


def _boot_hugepages(template: dict[str, Any]) -> int:
    """The hugepages a launch template's user data reserves (the program's sysctl before kubelet starts)."""
    raw = template.get("userData")
    if not isinstance(raw, str) or not raw:
        return 0
    try:
        text = base64.b64decode(raw).decode("utf-8", "replace")
    except (ValueError, TypeError):
        return 0
    found = _NR_HUGEPAGES.findall(text)
    return int(found[-1]) if found else 0


def _autoscaled(view: ClusterView, group: GraphResource) -> bool:
    """Whether the Cluster Autoscaler manages the group: its Auto Scaling group carries the opt-in tag (a tag beside
    the node group under the same component) and the autoscaler's release runs."""
    if group.parent is None or view.release((AUTOSCALER_RELEASE,)) is None:
        return False
    return any(as_mapping(s.inputs.get("tag")).get("key") == AUTOSCALE_TAG
               and as_mapping(s.inputs.get("tag")).get("value") == "true"
               for s in view.graph.children(group.parent) if s.type == ASG_TAG)


def _cpu_memory(vcpu: int | None, memory_gib: int | None) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    if vcpu:
        out["cpu"] = Fraction(vcpu) - reserved_cpu(Fraction(vcpu))
    if memory_gib:
        total = Fraction(memory_gib * GIB)
        out["memory"] = total - reserved_memory(total)
    return out


def _aws_groups(view: ClusterView, sharing: GpuSharing) -> list[NodeGroup]:
    catalog = load_aws_catalog()
    efa_plugin, efa_types = _efa_plugin_types(view)
    groups = []
    for res in view.resources_of(EKS_NODE_GROUP):
        inputs = res.inputs
        listed = [str(t) for t in as_list(inputs.get("instanceTypes"))]
        types = listed or [str(_launch_template(view, res).get("instanceType") or "")]
        known = [catalog[t] for t in types if t in catalog]
        labels = as_str_map(inputs.get("labels"))
        name = labels.get(NODE_GROUP_LABEL) or str(inputs.get("nodeGroupName") or res.name)
        notes = []
        allocatable: dict[str, Fraction] = {}
        if known:
            # Several types (a mixed CPU group): a pod must fit the smallest, since any of them may come up.
            per_type = [_cpu_memory(f.vcpu.value, f.memory_gib.value) for f in known]
            for key in ("cpu", "memory"):
                if all(key in p for p in per_type):
                    allocatable[key] = min(p[key] for p in per_type)
            gpus = min(f.gpu_count for f in known)
            if gpus:
                allocatable[GPU] = Fraction(gpus * sharing.replicas)
            efa = min(f.efa_count for f in known)
            wired = labels.get("gpu-cluster/efa-interfaces", "")
            if wired.isdigit():  # the group wires fewer than the type has (efaInterfaces)
                efa = min(efa, int(wired))
            if efa and efa_plugin and (efa_types is None or all(t in efa_types for t in types)):
                allocatable[EFA] = Fraction(efa)
            elif efa and not efa_plugin:
                notes.append(f"{types[0]} has {efa} EFA interfaces but no EFA device plugin release runs: pods cannot "
                             f"request {EFA}")
        else:
            notes.append(f"instance type {', '.join(types) or '(none)'} is not in the AWS catalog: per-node capacity "
                         "unknown")
        _hugepages(_boot_hugepages(_launch_template(view, res)), allocatable)
        arch = "arm64" if known and known[0].arch == "arm64" else "amd64"
        labels = {**labels, "node.kubernetes.io/instance-type": types[0], "kubernetes.io/arch": arch,
                  "kubernetes.io/os": "linux", "eks.amazonaws.com/nodegroup": str(inputs.get("nodeGroupName") or name),
                  "eks.amazonaws.com/capacityType": str(inputs.get("capacityType") or "ON_DEMAND")}
        scaling = as_mapping(inputs.get("scalingConfig"))
        low, desired = _int(scaling.get("minSize")) or 0, _int(scaling.get("desiredSize")) or 0
        high = _int(scaling.get("maxSize")) or 0
        window = as_str_map(inputs.get("tags")).get("capacity-block-window")
        reach = high
        if window:
            notes.append(f"its nodes exist only inside the Capacity Block window {window.replace('/', ' to ')}")
        elif _autoscaled(view, res):
            if desired < high:
                notes.append(f"the Cluster Autoscaler grows it from {desired} to at most {high} nodes for pending pods "
                             f"(min {low}): counted at {high}")
        elif desired < high:
            reach = desired
            notes.append(f"nothing grows it past its desiredSize {desired} (not autoscaled; maxSize {high}): counted "
                         f"at {desired}")
        groups.append(NodeGroup(name=name, ref=f"NodeGroup/{name}", instance_type=types[0], labels=labels,
                                taints=_taints(inputs.get("taints")), max_nodes=reach,
                                allocatable=allocatable, sharing=sharing if GPU in allocatable else GpuSharing(),
                                notes=notes, max_size=high))
    return groups


def _gke_max_nodes(inputs: dict[str, Any]) -> int:
    zones = max(1, len(as_list(inputs.get("nodeLocations"))))
    autoscaling = as_mapping(inputs.get("autoscaling"))
    total = _int(autoscaling.get("totalMaxNodeCount"))
    if total is not None:
        return total
    per_zone = _int(autoscaling.get("maxNodeCount"))
    if per_zone is not None:
        return per_zone * zones
    count = _int(inputs.get("nodeCount"))
    if count is None:
        count = _int(inputs.get("initialNodeCount")) or 0
    return count * zones


def _gcp_groups(view: ClusterView, sharing: GpuSharing) -> list[NodeGroup]:
    catalog = load_gcp_catalog()
    groups = []
    for res in view.resources_of(GKE_NODE_POOL):
        inputs = res.inputs
        config = as_mapping(inputs.get("nodeConfig"))
        machine = str(config.get("machineType") or "")
        facts = catalog.get(machine)
        labels = as_str_map(config.get("labels"))
        pool = str(inputs.get("name") or res.name)
        name = labels.get(NODE_GROUP_LABEL) or pool
        notes = []
        allocatable: dict[str, Fraction] = {}
        accelerators = [a for a in as_list(config.get("guestAccelerators")) if isinstance(a, dict)]
        gpus = sum(_int(a.get("count")) or 0 for a in accelerators)
        if facts is not None:
            allocatable.update(_cpu_memory(facts.vcpu.value, facts.memory_gib.value))
            gpus = gpus or facts.gpu_count
        else:
            notes.append(f"machine type {machine or '(none)'} is not in the GCP catalog: per-node capacity unknown")
        _hugepages(_int(as_mapping(as_mapping(config.get("linuxNodeConfig")).get("hugepagesConfig")).get(
            "hugepageSize2m")) or 0, allocatable)
        taints = _taints(config.get("taints"))
        pool_sharing = GpuSharing()
        if gpus:
            if labels.get("gke-no-default-nvidia-gpu-device-plugin") == "true":
                pool_sharing = sharing  # the GPU Operator's device plugin serves the node
            else:
                shared = as_mapping(accelerators[0].get("gpuSharingConfig")) if accelerators else {}
                clients = _int(shared.get("maxSharedClientsPerGpu"))
                if clients:
                    pool_sharing = GpuSharing(replicas=clients, fail_requests_greater_than_one=True,
                                              source=f"{pool} gpuSharingConfig")
            allocatable[GPU] = Fraction(gpus * pool_sharing.replicas)
            if not any(t["key"] == GPU for t in taints):
                taints.append(dict(GKE_GPU_TAINT))
            accelerator = str(accelerators[0].get("type")) if accelerators else (facts.accelerator if facts else None)
            if accelerator:
                labels = {**labels, "cloud.google.com/gke-accelerator": accelerator}
        labels = {**labels, "node.kubernetes.io/instance-type": machine, "kubernetes.io/arch": "amd64",
                  "kubernetes.io/os": "linux", "cloud.google.com/gke-nodepool": pool}
        if config.get("spot") is True:
            labels["cloud.google.com/gke-spot"] = "true"
        groups.append(NodeGroup(name=name, ref=f"NodePool/{pool}", instance_type=machine, labels=labels,
                                taints=taints, max_nodes=_gke_max_nodes(inputs), allocatable=allocatable,
                                sharing=pool_sharing, notes=notes))
    return groups


def node_groups(view: ClusterView) -> list[NodeGroup]:
    """Every node group of the graph, ordered by name."""
    sharing = gpu_sharing(view)
    groups = _aws_groups(view, sharing) + _gcp_groups(view, sharing)
    return sorted(groups, key=lambda g: g.name)


def is_per_node_label(key: str) -> bool:
    """Labels that differ from node to node of a group (zone, hostname, network topology)."""
    return key.startswith(PER_NODE_LABEL_PREFIXES)


def unknown_capacity(resource: str) -> bool:
    """Resources whose per-node amount admit does not guess (hugepages, ephemeral storage)."""
    return resource.startswith(UNKNOWN_CAPACITY_PREFIXES)


