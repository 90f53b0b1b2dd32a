"""Kueue objects: the network topology, flavors, cohort, team ClusterQueues and LocalQueues, priority classes, the
provisioning admission check, and the controller's configuration."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from components.kubernetes.objects.common import (
    GPU_TOLERATION,
    MONITORING_NAMESPACE,
    NODE_GROUP_LABEL,
    PRIORITY_CLASSES,
    PROVISIONING_CHECK,
    QUEUED_TOLERATION,
    TEAM_CPU_TOLERATION,
    TENANT_LABEL,
    Manifest,
    NetworkTopology,
    meta,
)
from components.kubernetes.objects.controllers import KUEUE_FRAMEWORKS
from components.kubernetes.quotas import (
    CPU,
    GPU,
    MEMORY,
    ZERO,
    CpuFlavorQuota,
    CpuPool,
    FlavorQuota,
    GpuPool,
    Resources,
)
from components.spec import TEAM_CPU_TAINT_KEY, TeamSpec

KUEUE_API = "kueue.x-k8s.io/v1beta2"


def topology(levels: NetworkTopology) -> Manifest:
    """The cloud's network topology, for topology-aware placement of multi-node jobs."""
    return {"apiVersion": KUEUE_API, "kind": "Topology", "metadata": meta(levels.name),
            "spec": {"levels": [{"nodeLabel": label} for label in levels.node_labels]}}


def resource_flavor(pool: GpuPool, topology_name: str | None) -> Manifest:
    """One flavor per GPU node group: its node label, the GPU toleration, topology where placed, the hosts topology
    on a served model's group (``host_topology``) where the stack has topologies."""
    spec: Manifest = {"nodeLabels": {NODE_GROUP_LABEL: pool.name},
                      "tolerations": [GPU_TOLERATION, *([QUEUED_TOLERATION] if pool.queued else [])]}
    if pool.placed and topology_name is not None:
        spec["topologyName"] = topology_name
    elif pool.host_topology and topology_name is not None:
        spec["topologyName"] = HOST_TOPOLOGY.name
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": meta(pool.name), "spec": spec}


# Kueue applies topology-aware scheduling to a pod set that asks for none only in a ClusterQueue whose flavors all
# have a topology ("TAS-only"); elsewhere it refuses such a pod set every TAS flavor ("Flavor ... supports only
# TopologyAwareScheduling": kubernetes-sigs/kueue pkg/scheduler/flavorassigner/tas_flavorassigner.go, isTASImplied /
# IsTASOnly). A CPU flavor without a topology beside TAS GPU flavors would make every GPU job that carries no
# topology annotation inadmissible, so a team whose GPU flavors all have one gets a CPU flavor with a one-level
# topology of hosts (every node has the label).
HOST_TOPOLOGY = NetworkTopology(name="hosts", node_labels=("kubernetes.io/hostname",))


# Once a ResourceFlavor has a topologyName, Kueue's CRD refuses any change to these fields ("nodeLabels are immutable
# when topologyName is set", "tolerations are immutable ...", "topologyName is immutable ...": the x-kubernetes-
# validations of ResourceFlavorSpec, blueprint/schemas/crds/kueue/kueue.x-k8s.io_resourceflavors.yaml).
TOPOLOGY_IMMUTABLE = ("nodeLabels", "tolerations", "topologyName")


def topology_flavor_name(base: str, spec: Mapping[str, Any]) -> str:
    """A flavor with a topology's name: ``base`` and a digest of the fields the CRD makes immutable, so a change to
    any of them is a new object under a new name (a new Pulumi URN): created, the ClusterQueues moved to it (they
    depend on it), then the old one deleted, which Kueue's ``kueue.x-k8s.io/resource-in-use`` finalizer lets go once no
    ClusterQueue names it. An update in place would be refused by the API server. As :func:`rule_name` of
    objects/node_check.py does for the readiness rules."""
    immutable = {k: spec[k] for k in TOPOLOGY_IMMUTABLE if k in spec}
    digest = hashlib.sha256(json.dumps(immutable, sort_keys=True).encode()).hexdigest()[:8]
    return f"{base}-{digest}"


def cpu_flavor_spec(pool: CpuPool, tas: bool) -> Manifest:
    """The CPU flavor's spec (see :func:`cpu_resource_flavor`)."""
    spec: Manifest = {"nodeLabels": {NODE_GROUP_LABEL: pool.name},
                      "nodeTaints": [{"key": TEAM_CPU_TAINT_KEY, "value": "true", "effect": "NoSchedule"}],
                      "tolerations": [TEAM_CPU_TOLERATION]}
    if tas:
        spec["topologyName"] = HOST_TOPOLOGY.name
    return spec


def cpu_flavor_name(pool: CpuPool, tas: bool, both: bool) -> str:
    """The CPU flavor's name: with the hosts topology, the group's and a digest of its immutable fields
    (:func:`topology_flavor_name`); without one, the group's, or with ``-no-topology`` when a stack needs both
    variants (teams whose GPU flavors all have a topology beside teams whose do not)."""
    if tas:
        return topology_flavor_name(pool.name, cpu_flavor_spec(pool, tas))
    return f"{pool.name}-no-topology" if both else pool.name


def cpu_resource_flavor(pool: CpuPool, tas: bool = False, both: bool = False) -> Manifest:
    """One flavor per node group without GPUs that teams have CPU quota on: its node label and the group's team CPU
    taint, tolerated, so the pods it takes land there and stay off the GPU nodes (tainted nvidia.com/gpu, not
    tolerated) and off the system nodes (another label), while platform pods, which do not tolerate the taint, stay
    off the group; with ``tas`` the hosts topology, so its teams' ClusterQueues stay TAS-only.

    Kueue adds a flavor's ``tolerations`` to the pods it admits to it, and ``nodeTaints`` names the taints its nodes
    carry; with a matching toleration on the flavor the node taints are not held against the pod set at admission
    (Kueue ResourceFlavor API, kueue.x-k8s.io/v1beta2 ResourceFlavorSpec ``tolerations``: "extra tolerations that
    will be added to the pods admitted in the quota associated with this resource flavor"; ``nodeTaints``: "When this
    ResourceFlavor has also set the matching tolerations (in .spec.tolerations), then the nodeTaints are not
    considered during admission"; Kueue docs, "Resource Flavor", kueue.sigs.k8s.io/docs/concepts/resource_flavor)."""
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": meta(cpu_flavor_name(pool, tas, both)),
            "spec": cpu_flavor_spec(pool, tas)}


def cohort(name: str) -> Manifest:
    """The cohort every team queue joins, so idle nominal quota is lent to whoever queues."""
    return {"apiVersion": KUEUE_API, "kind": "Cohort", "metadata": meta(name), "spec": {}}


def resource_entries(nominal: Resources, borrow: Resources | None, lend: Resources | None,
                      covered: Sequence[str]) -> list[Manifest]:
    fabric = next((r for r in covered if r not in (GPU, CPU, MEMORY)), None)
    n = nominal.as_kueue(fabric)
    b = borrow.as_kueue(fabric) if borrow else None
    ln = lend.as_kueue(fabric) if lend else None
    out = []
    for resource in covered:
        entry: Manifest = {"name": resource, "nominalQuota": n[resource]}
        if b is not None:
            entry["borrowingLimit"] = b[resource]
        if ln is not None:
            entry["lendingLimit"] = ln[resource]
        out.append(entry)
    return out


def covered_resources(pools: Sequence[GpuPool], fabric_resource: str | None) -> list[str]:
    """Resources a team queue accounts for: GPUs, CPU, memory, and the fabric's where any pool has it."""
    covered = [GPU, CPU, MEMORY]
    if fabric_resource is not None and any(p.fabric_per_node for p in pools):
        covered.append(fabric_resource)
    return covered


def cluster_queue(team: TeamSpec, flavors: Sequence[FlavorQuota], cohort_name: str | None,
                  covered: Sequence[str], cpu_flavors: Sequence[CpuFlavorQuota] = (),
                  cpu_flavor_names: Sequence[str] | None = None) -> Manifest:
    """The team's ClusterQueue: nominal quota per flavor, borrowing/lending limits, preemption; flavors whose nodes
    come through a ProvisioningRequest (GKE flex-start) are admitted only once the request is provisioned.

    CPU flavors (``teams[].cpuQuotas``) come first, with no GPU and no fabric quota: Kueue gives a pod set the first
    flavor of the resource group whose quota fits it (Kueue, "Cluster Queue"; ``flavorFungibility``), so a pod set
    that asks for no GPU is admitted there, and one that asks for a GPU does not fit it (quota 0) and passes on to
    the GPU flavors. In a cohort they lend nothing (lendingLimit 0), so no team borrows another's CPU quota."""
    lend = ZERO if cohort_name else None
    spec: Manifest = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team.name}},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{
            "coveredResources": list(covered),
            "flavors": [*({"name": name, "resources": resource_entries(fq.nominal, None, lend, covered)}
                          for fq, name in zip(cpu_flavors, cpu_flavor_names or [fq.pool.name for fq in cpu_flavors],
                                              strict=True)),
                        *({"name": fq.pool.name,
                           "resources": resource_entries(fq.nominal, fq.borrowing_limit, fq.lending_limit, covered)}
                          for fq in flavors)],
        }],
        "preemption": {
            "reclaimWithinCohort": "Any" if cohort_name else "Never",
            "withinClusterQueue": "LowerPriority",
        },
    }
    if not flavors and not cpu_flavors:  # every GPU of the team is Slurm's: no flavor (Kueue needs at least one)
        del spec["resourceGroups"]
    if cohort_name:
        spec["cohortName"] = cohort_name
    queued = [fq.pool.name for fq in flavors if fq.pool.queued]
    if queued:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": PROVISIONING_CHECK, "onFlavors": queued}]}
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": meta(team.name), "spec": spec}


def provisioning_request_check(managed: Sequence[str]) -> list[Manifest]:
    """The ProvisioningRequestConfig (GKE's queued-provisioning class) and the AdmissionCheck that uses it: Kueue
    asks the cluster autoscaler for all of a workload's nodes at once and admits it when they are provisioned (GKE
    "Deploy GPUs for batch workloads with flex-start and Kueue"; Kueue "Provisioning Admission Check Controller")."""
    return [
        {"apiVersion": KUEUE_API, "kind": "ProvisioningRequestConfig", "metadata": meta(PROVISIONING_CHECK),
         "spec": {"provisioningClassName": "queued-provisioning.gke.io", "managedResources": list(managed)}},
        {"apiVersion": KUEUE_API, "kind": "AdmissionCheck", "metadata": meta(PROVISIONING_CHECK),
         "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig",
                                 "name": PROVISIONING_CHECK}}},
    ]


def local_queue(team: TeamSpec) -> Manifest:
    """The queue team jobs name (``kueue.x-k8s.io/queue-name: default``)."""
    return {"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": meta("default", team.name),
            "spec": {"clusterQueue": team.name}}


def priority_classes() -> list[Manifest]:
    """WorkloadPriorityClasses: production, standard, preemptible."""
    return [{"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": meta(name),
             "value": value, "description": description} for name, value, description in PRIORITY_CLASSES]


# How long an admitted workload's pods have to be ready before Kueue evicts and requeues it (Kueue, "Sequential
# Admission with Ready Pods": waitForPodsReady.timeout, 5 minutes by default; requeuingStrategy with
# backoffLimitCount 5 deactivates the workload after five such evictions; blockAdmission holds every other admission
# meanwhile). 10 minutes where the nodes exist at admission: the pods wait for the image and the GPU stack only.
PODS_READY_TIMEOUT = "10m"
# Where a node autoscaler adds nodes after admission, the pods also wait for a node to launch and join: the Cluster
# Autoscaler gives a node up to 15 minutes to register before it counts the scale-up failed (its default
# --max-node-provision-time, cluster-autoscaler FAQ), and the new node then starts the GPU stack's daemonsets and
# pulls the training image (the example's nvcr.io/nvidia/pytorch is about 10 GB). 15 + 10 minutes: a timeout below
# CA's own would evict workloads whose nodes are still coming up normally.
PODS_READY_TIMEOUT_SCALE_UP = "25m"


def pods_ready_timeout(pools: Sequence[GpuPool], cpu_pools: Sequence[CpuPool] = (), serving_s: int = 0) -> str:
    """waitForPodsReady's timeout: :data:`PODS_READY_TIMEOUT_SCALE_UP` when a GPU or team CPU pool grows after
    admission (one a node autoscaler manages and no ProvisioningRequest provisions first), else
    :data:`PODS_READY_TIMEOUT`; and at least ``serving_s``, the longest a served model's replica may take from
    admission to ready (objects/serving.py serving_ready_allowance_s): a replica still loading normally must not be
    evicted, and after five evictions Kueue deactivates its Workload for good. The setting is the controller's, one for
    every queue."""
    grows = any(p.grows_after_admission for p in pools) or any(p.grows_after_admission for p in cpu_pools)
    base = PODS_READY_TIMEOUT_SCALE_UP if grows else PODS_READY_TIMEOUT
    minutes = max(int(base.rstrip("m")), -(-serving_s // 60))
    return f"{minutes}m"


def kueue_manager_config(timeout: str = PODS_READY_TIMEOUT) -> str:
    """Kueue's controller configuration: quota metrics on, all-or-nothing admission for multi-node jobs (pods ready
    within ``timeout``), and every job in a team namespace managed even without a queue name (no bypassing the
    quota)."""
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443", "enableClusterQueueResources": True},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "clientConnection": {"qps": 50, "burst": 100},
        "waitForPodsReady": {
            "timeout": timeout,
            "blockAdmission": True,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffLimitCount": 5},
        },
        # Hugepages (EFA jobs ask for them) are node memory the scheduler accounts for, not a quota: without
        # this a workload asking for hugepages-2Mi is inadmissible in every ClusterQueue (Kueue Configuration,
        # resources.excludeResourcePrefixes).
        "resources": {"excludeResourcePrefixes": ["hugepages-"]},
        "manageJobsWithoutQueueName": True,
        "managedJobsNamespaceSelector": {"matchLabels": {TENANT_LABEL: "true"}},
        # The kinds whose controllers the platform installs (objects/controllers.py), no more.
        "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
    }
    return yaml.safe_dump(config, sort_keys=False)


def kueue_values(pools: Sequence[GpuPool] = (), cpu_pools: Sequence[CpuPool] = (), serving_s: int = 0) -> Manifest:
    """Helm values of the Kueue chart, for the stack's GPU pools, team CPU pools and served models."""
    return {
        "enablePrometheus": True,
        "managerConfig": {"controllerManagerConfigYaml": kueue_manager_config(
            pods_ready_timeout(pools, cpu_pools, serving_s))},
        "metrics": {"prometheusNamespace": MONITORING_NAMESPACE},
        "controllerManager": {"replicas": 2, "podDisruptionBudget": {"enabled": True, "minAvailable": 1}},
    }


