"""Google Cloud in ``blueprint admit``: GKE node pools as the scheduler sees them (the catalog's vCPUs and memory,
their accelerators and GKE's GPU taint, GPU time-sharing, hugepages), a team's bucket writes through Workload
Identity on the claim's bucket, firewall rules for Managed Lustre, the cluster's CSI add-ons, GCS FUSE's sidecar and
GKE multi-networking."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from blueprint.admit.claims import bound_volume
from blueprint.admit.cloud import Problem
from blueprint.admit.cluster import ClusterView, as_list, as_mapping, as_str_map
from blueprint.admit.nodes import (
    GPU,
    NODE_GROUP_LABEL,
    GpuSharing,
    NodeGroup,
    add_hugepages,
    cpu_memory,
    int_value,
    taints_of,
)
from blueprint.admit.quantity import QuantityError, parse_quantity
from blueprint.admit.resources import Amounts
from blueprint.admit.workloads import PodSet
from components.catalog.gcp_machines import load_gcp_catalog

CLUSTER_TYPE = "gcp:container/cluster:Cluster"
GKE_NODE_POOL = "gcp:container/nodePool:NodePool"
# GKE has no version in the spec (its release channel picks it): objects are checked against the oldest minor the
# REGULAR channel may still run (GKE release schedule, read 2026-11-30: 1.33 until mid-2027), as the tests do.
GKE_SCHEMA_VERSION = "1.33"
PER_NODE_LABEL_PREFIXES = ("cloud.google.com/gce-topology-", "topology.gke.io/")
CREDENTIALS_AGENT = ("169.254.169.254", "the GKE metadata server")  # Workload Identity tokens
# GKE Standard ships a ResourceQuota in kube-system scoped to the system-*-critical classes, so pods of those classes
# elsewhere need a quota of their own (components/kubernetes/objects/tenancy.py, critical_priority_quota).
LIMITS_CRITICAL_PRIORITY = True
# GKE Sandbox: GKE creates the RuntimeClass gvisor when a node pool runs with sandbox_config type gvisor (GKE,
# "Harden workload isolation with GKE Sandbox": pods opt in with runtimeClassName: gvisor).
GVISOR = "gvisor"
RUNTIME_CLASS_NOTES = {GVISOR: "GKE creates gvisor only for a cluster with a GKE Sandbox node pool (sandbox_config "
                               "type gvisor), which this stack has not"}
# GKE taints GPU nodes itself when the cluster has other pools (GKE, "About GPUs in GKE": nvidia.com/gpu=present).
GKE_GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}
CHECKPOINT_CLAIM = "checkpoints"  # GKE: the team's claim of its checkpoint prefix (components/gcp/platform.py)
GCS_IDENTITY_TYPES = ("gcp:storage/managedFolderIamMember:ManagedFolderIamMember",
                      "gcp:storage/bucketIAMMember:BucketIAMMember")
GCS_WRITER_ROLES = ("roles/storage.objectUser", "roles/storage.objectAdmin", "roles/storage.objectCreator",
                    "roles/storage.admin", "roles/storage.legacyBucketWriter")
FIREWALL = "gcp:compute/firewall:Firewall"
LUSTRE_INSTANCE = "gcp:lustre/instance:Instance"
LUSTRE_DRIVER = "lustre.csi.storage.gke.io"
LUSTRE_PORTS = (988,)
LUSTRE_GKE_LEGACY_PORT = 6988  # instances created with gke_support_enabled (Managed Lustre docs)
GCSFUSE_DRIVER = "gcsfuse.csi.storage.gke.io"
GCSFUSE_ANNOTATION = "gke-gcsfuse/volumes"
IDENTITY_DRIVERS = frozenset({GCSFUSE_DRIVER})  # the GCS FUSE sidecar runs in the pod, as its service account
GKE_INTERFACES = "networking.gke.io/interfaces"
# CSI driver names by the GKE add-on that installs them (each driver's GKE docs).
ADDON_DRIVERS = {"gcePersistentDiskCsiDriverConfig": "pd.csi.storage.gke.io",
                 "gcsFuseCsiDriverConfig": "gcsfuse.csi.storage.gke.io",
                 "lustreCsiDriverConfig": "lustre.csi.storage.gke.io",
                 "gcpFilestoreCsiDriverConfig": "filestore.csi.storage.gke.io",
                 "parallelstoreCsiDriverConfig": "parallelstore.csi.storage.gke.io"}


def provided_priority_classes(view: ClusterView) -> dict[str, str]:
    """None that admit knows of beyond Kubernetes' two."""
    return {}


def provided_runtime_classes(view: ClusterView) -> dict[str, str]:
    """gvisor, where a node pool of the graph runs GKE Sandbox."""
    for pool in view.resources_of(GKE_NODE_POOL):
        sandbox = as_mapping(as_mapping(pool.inputs.get("nodeConfig")).get("sandboxConfig"))
        if str(sandbox.get("type") or sandbox.get("sandboxType") or "").lower() == GVISOR:
            return {GVISOR: f"GKE Sandbox on node pool {pool.inputs.get('name') or pool.name}"}
    return {}


def kubernetes_version(view: ClusterView) -> str | None:
    """The cluster's pinned ``minMasterVersion`` minor, else the oldest minor its channel may run."""
    clusters = view.graph.of_type(CLUSTER_TYPE)
    for res in clusters:
        version = res.inputs.get("minMasterVersion")
        if isinstance(version, str) and version[:1].isdigit():
            return ".".join(version.split("-")[0].split(".")[:2])
    return GKE_SCHEMA_VERSION if clusters else None


def _gke_max_nodes(inputs: dict[str, Any]) -> int:
    zones = max(1, len(as_list(inputs.get("nodeLocations"))))
    autoscaling = as_mapping(inputs.get("autoscaling"))
    total = int_value(autoscaling.get("totalMaxNodeCount"))
    if total is not None:
        return total
    per_zone = int_value(autoscaling.get("maxNodeCount"))
    if per_zone is not None:
        return per_zone * zones
    count = int_value(inputs.get("nodeCount"))
    if count is None:
        count = int_value(inputs.get("initialNodeCount")) or 0
    return count * zones


def node_groups(view: ClusterView, sharing: GpuSharing) -> list[NodeGroup]:
    """GKE node pools: the catalog's figures of their machine types, their accelerators (GKE taints GPU nodes
    itself), GPU time-sharing or the GPU Operator's device plugin, and the nodes a pool reaches (its autoscaling
    maximum, else its node count, in every zone it spans)."""
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
        gpus = sum(int_value(a.get("count")) or 0 for a in accelerators)
        if facts is not None:
            allocatable.update(cpu_memory(facts.vcpu.value, facts.memory_gib.value))
            gpus = gpus or facts.gpu_count
        else:
            notes.append(f"machine type {machine or '(none)'} is not in the GCP catalog: per-node capacity unknown")
        add_hugepages(int_value(as_mapping(as_mapping(config.get("linuxNodeConfig")).get("hugepagesConfig")).get(
            "hugepageSize2m")) or 0, allocatable)
        taints = taints_of(config.get("taints"))
        pool_sharing = GpuSharing()
        if gpus:
            if labels.get("gke-no-default-nvidia-gpu-device-plugin") == "true":
                pool_sharing = sharing  # the GPU Operator's device plugin serves the node
            else:
                shared = as_mapping(accelerators[0].get("gpuSharingConfig")) if accelerators else {}
                clients = int_value(shared.get("maxSharedClientsPerGpu"))
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
                                sharing=pool_sharing, notes=notes,
                                vcpus=int(facts.vcpu.value) if facts is not None and facts.vcpu.value is not None
                                else None, spec_key=f"gcp.nodePools[{name}]"))
    return groups


def checkpoint_bucket(view: ClusterView, namespace: str) -> str | None:
    """The bucket the namespace's ``checkpoints`` claim mounts through GCS FUSE (components/gcp/platform.py
    checkpoint_volume), or None."""
    claim = view.get("PersistentVolumeClaim", CHECKPOINT_CLAIM, namespace)
    pv = bound_volume(view, claim)[0] if claim is not None else None
    csi = as_mapping(pv.spec.get("csi")) if pv is not None else {}
    handle = csi.get("volumeHandle")
    return handle if csi.get("driver") == GCSFUSE_DRIVER and isinstance(handle, str) else None


def bucket_access(view: ClusterView, namespace: str, account: str) -> tuple[list[Problem], list[str]]:
    """A write role for the Workload Identity principal on the team's managed folder (or the bucket) of the bucket
    the namespace's checkpoints claim mounts."""
    suffix = f"/ns/{namespace}/sa/{account}"
    bucket = checkpoint_bucket(view, namespace)
    grants = [r for t in GCS_IDENTITY_TYPES for r in view.resources_of(t)
              if str(r.inputs.get("member", "")).endswith(suffix)
              and (bucket is None or r.inputs.get("bucket") == bucket)]
    writers = [g for g in grants if g.inputs.get("role") in GCS_WRITER_ROLES]
    if not writers:
        have = ", ".join(sorted({str(g.inputs.get("role")) for g in grants})) or "no role"
        return [(f"ServiceAccount/{namespace}/{account}", "bucket-access",
                 f"the Workload Identity principal ...{suffix} has {have} on the checkpoint bucket"
                 f"{f' {bucket}' if bucket else ''}, no write role: checkpoints cannot be written; grant "
                 "roles/storage.objectUser on the team's managed folder")], []
    folder = writers[0].inputs.get("managedFolder")
    where = f"managed folder {folder}" if folder else f"bucket {writers[0].inputs.get('bucket')}"
    return [], [f"{namespace}/{account} writes {where} as {writers[0].inputs.get('role')}"]


def node_network_opens(view: ClusterView, port: int) -> bool:
    """A firewall rule of direction INGRESS that opens the port."""
    for firewall in view.resources_of(FIREWALL):
        if str(firewall.inputs.get("direction") or "INGRESS") != "INGRESS":
            continue
        for allow in as_list(firewall.inputs.get("allows")):
            allow = as_mapping(allow)
            if str(allow.get("protocol")) not in ("tcp", "all"):
                continue
            ports = [str(p) for p in as_list(allow.get("ports"))]
            if not ports or any(_port_in(p, port) for p in ports):
                return True
    return False


def _port_in(text: str, port: int) -> bool:
    low, _, high = text.partition("-")
    try:
        return int(low) <= port <= int(high or low)
    except ValueError:
        return False


def lustre_ports(view: ClusterView, driver: str) -> tuple[int, ...]:
    """Managed Lustre's LNet port (6988 for an instance created with gke_support_enabled)."""
    if driver != LUSTRE_DRIVER:
        return ()
    if any(r.inputs.get("gkeSupportEnabled") is True for r in view.resources_of(LUSTRE_INSTANCE)):
        return (LUSTRE_GKE_LEGACY_PORT,)
    return LUSTRE_PORTS


def csi_drivers(view: ClusterView) -> tuple[set[str], set[str]]:
    """The drivers of the cluster's add-ons (the Persistent Disk driver is on by default)."""
    installed: set[str] = set()
    for cluster in view.resources_of(CLUSTER_TYPE):
        addons = as_mapping(cluster.inputs.get("addonsConfig"))
        for key, driver in ADDON_DRIVERS.items():
            if as_mapping(addons.get(key)).get("enabled") is True:
                installed.add(driver)
        installed.add("pd.csi.storage.gke.io")  # GKE enables the Persistent Disk driver by default
    return installed, set(ADDON_DRIVERS.values())


def volume_problems(pod_set: PodSet, driver: str, what: str, annotations: Mapping[str, str]) -> list[Problem]:
    """A GCS FUSE volume needs the pod annotation that makes GKE inject its sidecar."""
    if driver == GCSFUSE_DRIVER and annotations.get(GCSFUSE_ANNOTATION) != "true":
        return [(what, "volume-driver", f"pod set {pod_set.name} mounts a GCS FUSE volume ({what}) without the pod "
                 f"annotation {GCSFUSE_ANNOTATION}: \"true\": GKE injects the mounting sidecar only on it; add the "
                 "annotation to the pod template")]
    return []


def pod_network_problems(view: ClusterView, pod_set: PodSet) -> list[Problem]:
    """Each Network a GKE multi-network pod names must be in the cluster."""
    annotations = as_str_map(as_mapping(pod_set.pod.get("metadata")).get("annotations"))
    text = annotations.get(GKE_INTERFACES)
    if not text:
        return []
    try:
        interfaces = json.loads(text)
    except ValueError:
        return [(f"Pod/{pod_set.name}", "pod-network", f"pod set {pod_set.name}: annotation {GKE_INTERFACES} is not "
                 "JSON: write it as a JSON list of {interfaceName, network}")]
    problems = _rxdm_problems(view, pod_set, interfaces)
    missing = sorted({str(as_mapping(i).get("network")) for i in as_list(interfaces)
                      if as_mapping(i).get("network") not in (None, "default")
                      and view.get("Network", str(as_mapping(i).get("network"))) is None})
    if not missing:
        return problems
    present = ", ".join(sorted(n.name for n in view.of_kind("Network"))) or "none"
    return [*problems, (f"Network/{missing[0]}", "pod-network", f"pod set {pod_set.name} attaches networks "
                        f"{', '.join(missing)}, which the cluster does not define (its Networks: {present}): name "
                        f"those in {GKE_INTERFACES}")]


# The receive-datapath manager's image (GPUDirect-TCPX and TCPXO): Google's tcpgpudmarxd[-dev], or a mirror of it the
# stack names (gcp.rxdm.images keeps the repository's name).
RXDM_IMAGE_NAME = "tcpgpudmarxd"
RXDM_FLAVOURS = ("TCPX", "TCPXO")


def _rxdm_problems(view: ClusterView, pod_set: PodSet, interfaces: Any) -> list[Problem]:
    """A pod that attaches the GPU networks of a GPUDirect-TCPXO (or TCPX) pool needs the RxDM sidecar beside it: the
    NCCL plugin moves data through the receive-datapath manager, which every such pod runs as the tcpxo-daemon
    container (GKE, "Maximize GPU network bandwidth in Standard mode clusters"; Google's NCCL test pods,
    tests/fixtures/gke-tcpxo). Without it NCCL has no GPUDirect path: the job fails at NCCL init or runs without
    the fabric."""
    networks = sorted({str(as_mapping(i).get("network")) for i in as_list(interfaces)
                       if as_mapping(i).get("network") not in (None, "default")
                       and view.get("Network", str(as_mapping(i).get("network"))) is not None})
    if not networks or any(RXDM_IMAGE_NAME in str(c.get("image", "")) for c in pod_set.containers()):
        return []
    catalog = load_gcp_catalog()
    pools = sorted((str(pool.inputs.get("name") or pool.name), catalog[machine].gpudirect)
                   for pool in view.resources_of(GKE_NODE_POOL)
                   if (machine := str(as_mapping(pool.inputs.get("nodeConfig")).get("machineType"))) in catalog
                   and catalog[machine].gpudirect in RXDM_FLAVOURS)
    if not pools:
        return []
    where = ", ".join(f"{name} (GPUDirect-{flavour})" for name, flavour in pools)
    return [(f"Pod/{pod_set.name}", "gpudirect-sidecar",
             f"pod set {pod_set.name} attaches the GPU networks {', '.join(networks)} of {where} but runs no RxDM "
             f"sidecar (no container of the {RXDM_IMAGE_NAME} image): the NCCL plugin moves data through it, so the "
             "job gets no GPUDirect path; add the tcpxo-daemon container as the stack's examples and Google's NCCL "
             "test pods run it, or drop the networks annotation to run without the fabric")]


# GKE injects the GCS FUSE sidecar into pods annotated gke-gcsfuse/volumes: "true" after Kueue admitted them, with
# these requests unless the pod's annotations set others (GKE, "Configure resources for the sidecar container";
# Standard clusters): the namespace's ResourceQuota counts them, Kueue's quota does not.
GCSFUSE_SIDECAR_REQUESTS = {"cpu": "250m", "memory": "256Mi", "ephemeral-storage": "5Gi"}


def _injected_sidecar(pod: dict[str, Any]) -> Amounts:
    """What GKE's GCS FUSE sidecar adds to a pod's requests (empty for pods that mount no GCS FUSE volume)."""
    annotations = as_mapping(as_mapping(pod.get("metadata")).get("annotations"))
    if annotations.get("gke-gcsfuse/volumes") != "true":
        return {}
    out: Amounts = {}
    for resource, default in GCSFUSE_SIDECAR_REQUESTS.items():
        try:
            out[resource] = parse_quantity(annotations.get(f"gke-gcsfuse/{resource}-request", default))
        except QuantityError:
            out[resource] = parse_quantity(default)
    return out


def injected_requests(pod: dict[str, Any]) -> tuple[str, Amounts]:
    """GKE's GCS FUSE sidecar, on pods annotated for it."""
    extra = _injected_sidecar(pod)
    return ("GKE's GCS FUSE sidecar", extra) if extra else ("", {})


def gateway_proxy_source(view: ClusterView) -> str | None:
    """The first address of the stack's proxy-only subnet: GKE's internal Application Load Balancer's proxies send to
    the backends from it (Cloud Load Balancing, "Proxy-only subnets")."""
    for subnet in view.resources_of("gcp:compute/subnetwork:Subnetwork"):
        if subnet.inputs.get("purpose") == "REGIONAL_MANAGED_PROXY" and subnet.inputs.get("ipCidrRange"):
            return str(next(ipaddress.ip_network(str(subnet.inputs["ipCidrRange"])).hosts()))
    return None
