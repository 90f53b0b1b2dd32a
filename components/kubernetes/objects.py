"""Kubernetes objects and Helm values of the platform, as plain manifests (dicts).

Pure functions: the components turn these into Pulumi resources, the tests validate them offline
(built-in kinds with kubernetes-validate, Kueue kinds against the CRD schemas), and ``blueprint
manifests`` writes the same objects for review and GitOps.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from components.kubernetes.quotas import CPU, GPU, MEMORY, FlavorQuota, GpuPool, Resources
from components.spec import GPU_TAINT_KEY, PRIVILEGED_NAMESPACES, GpuSharingSpec, TeamSpec

Manifest = dict[str, Any]


@dataclass(frozen=True)
class EgressRule:
    """Egress a team namespace allows on top of its defaults, named as its NetworkPolicy."""

    name: str
    cidr: str
    port: int
    protocol: str = "TCP"


@dataclass(frozen=True)
class NetworkTopology:
    """A Kueue Topology: its name and the node labels of its levels, top first (the host last)."""

    name: str
    node_labels: tuple[str, ...]

TENANT_LABEL = "gpu-cluster/tenant"
POD_SECURITY_REASON_LABEL = "gpu-cluster/pod-security-reason"
NODE_GROUP_LABEL = "gpu-cluster/node-group"
MONITORING_NAMESPACE = "monitoring"
GPU_OPERATOR_NAMESPACE = "gpu-operator"
KUEUE_NAMESPACE = "kueue-system"
OPENCOST_NAMESPACE = "opencost"
PROMETHEUS_RELEASE = "kube-prometheus-stack"
GPU_TOLERATION = {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
# GKE taints nodes of a queued-provisioning (flex-start) pool with cloud.google.com/gke-queued (GKE "About GPU
# obtainability with flex-start"; cluster-toolkit gke-node-pool enable_queued_provisioning).
QUEUED_TOLERATION = {"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"}
PROVISIONING_CHECK = "dws-provisioning"
PRIORITY_CLASSES = (
    ("production", 1000, "Production training and serving; preempts lower priorities in its queue."),
    ("standard", 100, "Default for team work."),
    ("preemptible", 10, "Best-effort experiments; first to be preempted."),
)
# The DCGM fields exported: dcgm-exporter's defaults plus ECC, retired pages and throttling, which the
# default list leaves commented out (NVIDIA/dcgm-exporter etc/default-counters.csv).
DCGM_METRICS = """\
DCGM_FI_DEV_SM_CLOCK, gauge, SM clock frequency (in MHz).
DCGM_FI_DEV_MEM_CLOCK, gauge, Memory clock frequency (in MHz).
DCGM_FI_DEV_MEMORY_TEMP, gauge, Memory temperature (in C).
DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).
DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, counter, Total energy consumption since boot (in mJ).
DCGM_FI_DEV_PCIE_REPLAY_COUNTER, counter, Total number of PCIe retries.
DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).
DCGM_FI_DEV_MEM_COPY_UTIL, gauge, Memory utilization (in %).
DCGM_FI_DEV_FB_FREE, gauge, Framebuffer memory free (in MiB).
DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).
DCGM_FI_DEV_XID_ERRORS, gauge, Value of the last XID error encountered.
DCGM_FI_DEV_POWER_VIOLATION, counter, Throttling duration due to power constraints (in us).
DCGM_FI_DEV_THERMAL_VIOLATION, counter, Throttling duration due to thermal constraints (in us).
DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, counter, Total number of single-bit volatile ECC errors.
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter, Total number of double-bit volatile ECC errors.
DCGM_FI_DEV_RETIRED_DBE, counter, Total number of retired pages due to double-bit errors.
DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS, counter, Number of remapped rows for uncorrectable errors.
DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS, counter, Number of remapped rows for correctable errors.
DCGM_FI_DEV_ROW_REMAP_FAILURE, gauge, Whether remapping of rows has failed.
DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL, counter, Total number of NVLink bandwidth counters for all lanes.
"""


def _meta(name: str, namespace: str | None = None, labels: Mapping[str, str] | None = None) -> Manifest:
    meta: Manifest = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    return meta


# --- namespaces and tenancy ---------------------------------------------------------------------


def team_labels(team: TeamSpec, billing: Mapping[str, str]) -> dict[str, str]:
    """Billing labels of a team's namespace: the stack's, with the team's own team and cost-center."""
    return {**billing, "team": team.name, "cost-center": team.cost_center}


def namespace(name: str, labels: Mapping[str, str], pod_security: str, tenant: bool = False,
              warn_level: str | None = None) -> Manifest:
    """A namespace with billing labels and Pod Security Admission labels.

    Team namespaces enforce ``baseline`` (no privileged pods, no host namespaces) and warn/audit
    against ``restricted``; only the system namespaces that run node agents enforce ``privileged``.
    """
    warn = warn_level or ("restricted" if pod_security != "privileged" else "privileged")
    all_labels = {
        **labels,
        "pod-security.kubernetes.io/enforce": pod_security,
        "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/audit": warn,
        "pod-security.kubernetes.io/warn": warn,
    }
    if tenant:
        all_labels[TENANT_LABEL] = "true"
        if pod_security == "privileged":
            # Why a tenant namespace is not at baseline, for the policy pack and for reviewers: the cloud's GPU
            # networking needs host paths and NET_ADMIN in training pods; privileged containers stay refused by the
            # gpu-cluster-no-privileged-pods admission policy, which binds every tenant namespace.
            all_labels[POD_SECURITY_REASON_LABEL] = "gpudirect-sidecars"
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(name, labels=all_labels)}


def team_role(team: TeamSpec) -> Manifest:
    """What a team member may do in the team's namespace: run and inspect jobs, never change quotas."""
    run = ["get", "list", "watch", "create", "update", "patch", "delete"]
    read = ["get", "list", "watch"]
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _meta("team-member", team.name),
        "rules": [
            {"apiGroups": [""], "resources": ["pods", "pods/log", "events", "resourcequotas", "limitranges"],
             "verbs": read},
            {"apiGroups": [""], "resources": ["pods/exec", "pods/portforward"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["configmaps", "secrets", "services", "persistentvolumeclaims"],
             "verbs": run},
            {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": run},
            {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets"], "verbs": run},
            {"apiGroups": ["kubeflow.org"], "resources": ["mpijobs", "pytorchjobs"], "verbs": run},
            {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": run},
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"], "verbs": read},
        ],
    }


def service_account(name: str, namespace: str, labels: Mapping[str, str], purpose: str) -> Manifest:
    """A service account whose AWS permissions come from an EKS Pod Identity association (no annotation
    is needed: the association names the namespace and service account)."""
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {**_meta(name, namespace, labels), "annotations": {"gpu-cluster/purpose": purpose}},
            "automountServiceAccountToken": True}


CHECKPOINT_POLICY_LABEL = "gpu-cluster/checkpoint-policy"


def checkpoint_policy(team: TeamSpec, billing: Mapping[str, str], data: Mapping[str, str]) -> Manifest:
    """The goodput model's checkpoint interval and figures where the team's jobs can read them
    (``envFrom: [{configMapRef: {name: checkpoint-policy}}]``), and the policy pack can check them."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": _meta("checkpoint-policy", team.name,
                              {**team_labels(team, billing), CHECKPOINT_POLICY_LABEL: "true"}),
            "data": dict(sorted(data.items()))}


def team_role_binding(team: TeamSpec) -> Manifest:
    """Bind the team's Kubernetes group (mapped from IAM by access entries) to its Role."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _meta("team-member", team.name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "team-member"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": team.k8s_group}],
    }


def resource_quota(team: TeamSpec, hard: Resources, fabric_resource: str | None) -> Manifest:
    """A backstop under Kueue: the most the namespace can have admitted, never less."""
    limits = {
        f"requests.{GPU}": str(hard.gpu),
        "requests.cpu": str(hard.cpu),
        "requests.memory": f"{hard.memory_gib}Gi",
    }
    if fabric_resource is not None:
        limits[f"requests.{fabric_resource}"] = str(hard.fabric)
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": _meta("gpu-quota", team.name),
            "spec": {"hard": limits}}


def limit_range(team: TeamSpec) -> Manifest:
    """Defaults for containers that state no requests, so every pod is counted against the quota."""
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": _meta("defaults", team.name),
        "spec": {"limits": [{
            "type": "Container",
            "defaultRequest": {"cpu": "500m", "memory": "1Gi"},
            "default": {"cpu": "2", "memory": "8Gi"},
        }]},
    }


def network_policies(team: TeamSpec, allow_https_egress: bool,
                     extra_egress: Sequence[EgressRule] = ()) -> list[Manifest]:
    """Default deny, then what a distributed training job needs: its own namespace (NCCL bootstrap,
    MPI launchers), DNS, the metrics scraper and, optionally, HTTPS egress (S3 checkpoints).

    EFA traffic bypasses the kernel network stack and is governed by the EFA security group instead.
    """
    ns = team.name

    def policy(name: str, spec: Manifest) -> Manifest:
        return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": _meta(name, ns),
                "spec": spec}

    out = [
        policy("default-deny", {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
        policy("allow-same-namespace", {
            "podSelector": {},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": {}}]}],
            "egress": [{"to": [{"podSelector": {}}]}],
        }),
        policy("allow-dns", {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [{
                "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
                "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
            }],
        }),
        policy("allow-metrics-scrape", {
            "podSelector": {},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"namespaceSelector": {
                "matchLabels": {"kubernetes.io/metadata.name": MONITORING_NAMESPACE}}}]}],
        }),
    ]
    for rule in extra_egress:  # what the cloud's node agents need (e.g. the credentials agent)
        out.append(policy(rule.name, {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [{"to": [{"ipBlock": {"cidr": rule.cidr}}],
                        "ports": [{"protocol": rule.protocol, "port": rule.port}]}],
        }))
    if allow_https_egress:
        out.append(policy("allow-https-egress", {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"protocol": "TCP", "port": 443}]}],
        }))
    return out


def _pod_rules() -> list[Manifest]:
    return [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}]


def registry_policy(allowed: Sequence[str]) -> list[Manifest]:
    """A ValidatingAdmissionPolicy (and binding) that admits team pods only from listed registries."""
    prefixes = "[" + ", ".join(json.dumps(p) for p in allowed) + "]"
    checks = []
    for field in ("containers", "initContainers", "ephemeralContainers"):
        guard = "" if field == "containers" else f"!has(object.spec.{field}) || "
        checks.append({
            "expression": f"{guard}object.spec.{field}.all(c, {prefixes}.exists(p, c.image.startsWith(p)))",
            "message": f"{field} images must come from an allowed registry: {', '.join(allowed)}",
            "reason": "Forbidden",
        })
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": _meta("gpu-cluster-allowed-registries"),
            "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": _pod_rules()},
                     "validations": checks},
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": _meta("gpu-cluster-allowed-registries"),
            "spec": {
                "policyName": "gpu-cluster-allowed-registries",
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchLabels": {TENANT_LABEL: "true"}}},
            },
        },
    ]


GPUDIRECT_CAPABILITIES = ("NET_ADMIN", "NET_BIND_SERVICE", "IPC_LOCK")


def gpudirect_pod_policy(host_paths: Sequence[str]) -> list[Manifest]:
    """What a team pod may still do in a namespace that Pod Security admits at ``privileged`` for GPUDirect
    sidecars: no host network, PID or IPC namespace, host paths only under the GPUDirect ones, and no capability
    beyond those the sidecars add (NET_ADMIN, NET_BIND_SERVICE, IPC_LOCK). Privileged containers stay refused by
    ``gpu-cluster-no-privileged-pods``."""
    paths = "[" + ", ".join(json.dumps(p) for p in host_paths) + "]"
    caps = "[" + ", ".join(json.dumps(c) for c in GPUDIRECT_CAPABILITIES) + "]"

    def capped(field: str) -> str:
        check = (f"object.spec.{field}.all(c, !has(c.securityContext) || !has(c.securityContext.capabilities) || "
                 f"!has(c.securityContext.capabilities.add) || c.securityContext.capabilities.add.all(x, x in {caps}))")
        return check if field == "containers" else f"!has(object.spec.{field}) || {check}"

    name = "gpu-cluster-gpudirect-pod-limits"
    validations = [
        {"expression": f"!has(object.spec.{ns}) || !object.spec.{ns}", "reason": "Forbidden",
         "message": f"team pods do not use the node's {ns.removeprefix('host')} namespace"}
        for ns in ("hostNetwork", "hostPID", "hostIPC")
    ] + [
        {"expression": "!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath) || "
                       f"{paths}.exists(p, v.hostPath.path == p || v.hostPath.path.startsWith(p + '/')))",
         "reason": "Forbidden", "message": f"team pods mount only the GPUDirect host paths {', '.join(host_paths)}"},
    ] + [
        {"expression": capped(f), "reason": "Forbidden",
         "message": f"{f} add no capability beyond {', '.join(GPUDIRECT_CAPABILITIES)}"}
        for f in ("containers", "initContainers")
    ]
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": _meta(name),
         "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": _pod_rules()},
                  "validations": validations}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": _meta(name),
         "spec": {"policyName": name, "validationActions": ["Deny"],
                  "matchResources": {"namespaceSelector": {"matchLabels": {
                      TENANT_LABEL: "true", POD_SECURITY_REASON_LABEL: "gpudirect-sidecars"}}}}},
    ]


def privileged_policy(cloud_namespaces: Sequence[str] = ()) -> list[Manifest]:
    """Refuse privileged containers everywhere but the system namespaces that run node agents (and those the cloud
    manages itself, which it may fill with privileged agents)."""
    def unprivileged(field: str) -> str:
        check = (f"object.spec.{field}.all(c, !has(c.securityContext) || "
                 "!has(c.securityContext.privileged) || !c.securityContext.privileged)")
        return check if field == "containers" else f"!has(object.spec.{field}) || {check}"

    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": _meta("gpu-cluster-no-privileged-pods"),
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": _pod_rules()},
                "validations": [
                    {"expression": unprivileged(f), "reason": "Forbidden",
                     "message": f"privileged {f} run only in {', '.join(PRIVILEGED_NAMESPACES)}"}
                    for f in ("containers", "initContainers")
                ],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": _meta("gpu-cluster-no-privileged-pods"),
            "spec": {
                "policyName": "gpu-cluster-no-privileged-pods",
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchExpressions": [{
                    "key": "kubernetes.io/metadata.name", "operator": "NotIn",
                    "values": [*PRIVILEGED_NAMESPACES, *cloud_namespaces]}]}},
            },
        },
    ]


def storage_class(name: str, provisioner: str, parameters: Mapping[str, str], retain: bool) -> Manifest:
    """An encrypted block storage class for platform volumes (Prometheus). With ``retain`` (stacks with
    deletion protection) a deleted claim leaves its volume, and so the metrics history, in place."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": _meta(name),
        "provisioner": provisioner,
        "parameters": dict(parameters),
        "reclaimPolicy": "Retain" if retain else "Delete",
        "allowVolumeExpansion": True,
        "volumeBindingMode": "WaitForFirstConsumer",
    }


# --- Kueue --------------------------------------------------------------------------------------

KUEUE_API = "kueue.x-k8s.io/v1beta2"


def topology(levels: NetworkTopology) -> Manifest:
    """The cloud's network topology, for topology-aware placement of multi-node jobs."""
    return {"apiVersion": KUEUE_API, "kind": "Topology", "metadata": _meta(levels.name),
            "spec": {"levels": [{"nodeLabel": label} for label in levels.node_labels]}}


def resource_flavor(pool: GpuPool, topology_name: str | None) -> Manifest:
    """One flavor per GPU node group: its node label, the GPU toleration, topology where placed."""
    spec: Manifest = {"nodeLabels": {NODE_GROUP_LABEL: pool.name},
                      "tolerations": [GPU_TOLERATION, *([QUEUED_TOLERATION] if pool.queued else [])]}
    if pool.placed and topology_name is not None:
        spec["topologyName"] = topology_name
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": _meta(pool.name), "spec": spec}


def cohort(name: str) -> Manifest:
    """The cohort every team queue joins, so idle nominal quota is lent to whoever queues."""
    return {"apiVersion": KUEUE_API, "kind": "Cohort", "metadata": _meta(name), "spec": {}}


def _resource_entries(nominal: Resources, borrow: Resources | None, lend: Resources | None,
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
                  covered: Sequence[str]) -> Manifest:
    """The team's ClusterQueue: nominal quota per flavor, borrowing/lending limits, preemption; flavors whose nodes
    come through a ProvisioningRequest (GKE flex-start) are admitted only once the request is provisioned."""
    spec: Manifest = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team.name}},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{
            "coveredResources": list(covered),
            "flavors": [{"name": fq.pool.name,
                         "resources": _resource_entries(fq.nominal, fq.borrowing_limit, fq.lending_limit, covered)}
                        for fq in flavors],
        }],
        "preemption": {
            "reclaimWithinCohort": "Any" if cohort_name else "Never",
            "withinClusterQueue": "LowerPriority",
        },
    }
    if cohort_name:
        spec["cohortName"] = cohort_name
    queued = [fq.pool.name for fq in flavors if fq.pool.queued]
    if queued:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": PROVISIONING_CHECK, "onFlavors": queued}]}
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": _meta(team.name), "spec": spec}


def provisioning_request_check(managed: Sequence[str]) -> list[Manifest]:
    """The ProvisioningRequestConfig (GKE's queued-provisioning class) and the AdmissionCheck that uses it: Kueue
    asks the cluster autoscaler for all of a workload's nodes at once and admits it when they are provisioned (GKE
    "Deploy GPUs for batch workloads with flex-start and Kueue"; Kueue "Provisioning Admission Check Controller")."""
    return [
        {"apiVersion": KUEUE_API, "kind": "ProvisioningRequestConfig", "metadata": _meta(PROVISIONING_CHECK),
         "spec": {"provisioningClassName": "queued-provisioning.gke.io", "managedResources": list(managed)}},
        {"apiVersion": KUEUE_API, "kind": "AdmissionCheck", "metadata": _meta(PROVISIONING_CHECK),
         "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig",
                                 "name": PROVISIONING_CHECK}}},
    ]


def local_queue(team: TeamSpec) -> Manifest:
    """The queue team jobs name (``kueue.x-k8s.io/queue-name: default``)."""
    return {"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": _meta("default", team.name),
            "spec": {"clusterQueue": team.name}}


def priority_classes() -> list[Manifest]:
    """WorkloadPriorityClasses: production, standard, preemptible."""
    return [{"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": _meta(name),
             "value": value, "description": description} for name, value, description in PRIORITY_CLASSES]


def kueue_manager_config() -> str:
    """Kueue's controller configuration: quota metrics on, all-or-nothing admission for multi-node jobs,
    and every job in a team namespace managed even without a queue name (no bypassing the quota)."""
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443", "enableClusterQueueResources": True},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "clientConnection": {"qps": 50, "burst": 100},
        "waitForPodsReady": {
            "timeout": "10m",
            "blockAdmission": True,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffLimitCount": 5},
        },
        # Hugepages (EFA jobs ask for them) are node memory the scheduler accounts for, not a quota: without
        # this a workload asking for hugepages-2Mi is inadmissible in every ClusterQueue (Kueue Configuration,
        # resources.excludeResourcePrefixes).
        "resources": {"excludeResourcePrefixes": ["hugepages-"]},
        "manageJobsWithoutQueueName": True,
        "managedJobsNamespaceSelector": {"matchLabels": {TENANT_LABEL: "true"}},
        "integrations": {"frameworks": [
            "batch/job", "kubeflow.org/mpijob", "kubeflow.org/pytorchjob", "jobset.x-k8s.io/jobset",
            "ray.io/rayjob", "ray.io/raycluster", "pod", "deployment", "statefulset",
        ]},
    }
    return yaml.safe_dump(config, sort_keys=False)


def kueue_values() -> Manifest:
    """Helm values of the Kueue chart."""
    return {
        "enablePrometheus": True,
        "managerConfig": {"controllerManagerConfigYaml": kueue_manager_config()},
        "metrics": {"prometheusNamespace": MONITORING_NAMESPACE},
        "controllerManager": {"replicas": 2, "podDisruptionBudget": {"enabled": True, "minAvailable": 1}},
    }


# --- GPU stack ----------------------------------------------------------------------------------


def device_plugin_config(sharing: GpuSharingSpec) -> str:
    """NVIDIA device plugin configuration for time-slicing."""
    return yaml.safe_dump({
        "version": "v1",
        "flags": {"migStrategy": "none"},
        "sharing": {"timeSlicing": {
            "renameByDefault": False,
            "failRequestsGreaterThanOne": True,
            "resources": [{"name": GPU, "replicas": sharing.replicas}],
        }},
    }, sort_keys=False)


def gpu_operator_values(sharing: GpuSharingSpec, driver_on_host: bool) -> Manifest:
    """GPU Operator values.

    On images that ship the NVIDIA driver and container toolkit (EKS AL2023 NVIDIA AMI) the operator
    must not install them again. DCGM exporter is on with its ServiceMonitor (honouring the pod's
    namespace label, so utilization is attributed to the team) and an extended metric list.
    """
    values: Manifest = {
        "driver": {"enabled": not driver_on_host},
        "toolkit": {"enabled": not driver_on_host},
        "dcgmExporter": {
            "enabled": True,
            "serviceMonitor": {"enabled": True, "interval": "15s", "honorLabels": True},
            "config": {"name": "gpu-cluster-dcgm-metrics", "create": True, "data": DCGM_METRICS},
        },
        "migManager": {"enabled": sharing.mode == "mig"},
        "mig": {"strategy": sharing.mig_strategy if sharing.mode == "mig" else "single"},
        "daemonsets": {"tolerations": [GPU_TOLERATION], "priorityClassName": "system-node-critical"},
        "nfd": {"enabled": True},
    }
    if sharing.mode == "time-slicing":
        values["devicePlugin"] = {"config": {
            "create": True, "name": "gpu-cluster-device-plugin", "default": "time-slicing",
            "data": {"time-slicing": device_plugin_config(sharing)},
        }}
    return values


def merge_values(base: Manifest, overrides: Mapping[str, Any]) -> Manifest:
    """Chart values with a cloud's overrides laid over them, mappings merged key by key."""
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_values(out[key], value)
        else:
            out[key] = value
    return out


# --- telemetry ----------------------------------------------------------------------------------

KUBE_STATE_METRICS_LABELS = [
    "namespaces=[team,cost-center,environment,owner]",
    "pods=[team,cost-center,model,experiment,kueue.x-k8s.io/queue-name]",
    f"nodes=[{NODE_GROUP_LABEL},node.kubernetes.io/instance-type,topology.kubernetes.io/zone]",
]

def prometheus_stack_values(retention_days: int, storage_gib: int, storage_class_name: str,
                            grafana_secret: str) -> Manifest:
    """kube-prometheus-stack values: scrape every ServiceMonitor and rule in the cluster, keep data on
    an encrypted volume, export the billing labels of namespaces and pods (OpenCost aggregates by them),
    and take Grafana's admin credentials from a generated Secret instead of the chart's default."""
    return {
        "prometheus": {"prometheusSpec": {
            "retention": f"{retention_days}d",
            "serviceMonitorSelectorNilUsesHelmValues": False,
            "podMonitorSelectorNilUsesHelmValues": False,
            "ruleSelectorNilUsesHelmValues": False,
            "storageSpec": {"volumeClaimTemplate": {"spec": {
                "storageClassName": storage_class_name,
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": f"{storage_gib}Gi"}},
            }}},
        }},
        "grafana": {
            "admin": {"existingSecret": grafana_secret, "userKey": "admin-user", "passwordKey": "admin-password"},
            "sidecar": {"dashboards": {"enabled": True, "label": "grafana_dashboard", "searchNamespace": "ALL"}},
        },
        "kube-state-metrics": {"metricLabelsAllowlist": KUBE_STATE_METRICS_LABELS},
        "alertmanager": {"enabled": True},
    }


def opencost_values(cluster_name: str) -> Manifest:
    """OpenCost reading the in-cluster Prometheus; cost per team, cost-center and model is the
    allocation API aggregated by label (``/allocation?aggregate=label:team``)."""
    return {"opencost": {
        "exporter": {"defaultClusterId": cluster_name},
        "prometheus": {"internal": {
            "enabled": True, "namespaceName": MONITORING_NAMESPACE,
            "serviceName": f"{PROMETHEUS_RELEASE}-prometheus", "port": 9090,
        }},
        "metrics": {"serviceMonitor": {"enabled": True, "namespace": OPENCOST_NAMESPACE}},
        "ui": {"enabled": True},
    }}


def _alert(name: str, expr: str, minutes: int, severity: str, summary: str) -> Manifest:
    return {"alert": name, "expr": expr, "for": f"{minutes}m", "labels": {"severity": severity},
            "annotations": {"summary": summary}}


def prometheus_rules() -> Manifest:
    """Recording rules and alerts for the seed's minimum telemetry: GPU utilization, errors (XID, ECC,
    row remapping), temperature and power; queue wait time and quota denials (evictions, preemptions,
    inadmissible workloads)."""
    recording = [
        {"record": "gpu_cluster:gpu_utilization:avg_by_namespace",
         "expr": "avg by (namespace) (DCGM_FI_DEV_GPU_UTIL{namespace!=\"\"})"},
        {"record": "gpu_cluster:gpu_allocated:sum_by_namespace",
         "expr": "sum by (namespace) (kube_pod_container_resource_requests{resource=\"nvidia_com_gpu\"})"},
        {"record": "gpu_cluster:gpu_power_watts:sum_by_node",
         "expr": "sum by (Hostname) (DCGM_FI_DEV_POWER_USAGE)"},
        {"record": "gpu_cluster:queue_wait_seconds:p90_by_cluster_queue",
         "expr": "histogram_quantile(0.9, sum by (le, cluster_queue) "
                 "(rate(kueue_admission_wait_time_seconds_bucket[30m])))"},
        {"record": "gpu_cluster:quota_usage_ratio:by_cluster_queue",
         "expr": "sum by (cluster_queue, resource) (kueue_cluster_queue_resource_usage) / "
                 "sum by (cluster_queue, resource) (kueue_cluster_queue_nominal_quota)"},
    ]
    alerts = [
        _alert("GpuXidError", "max by (Hostname, gpu) (DCGM_FI_DEV_XID_ERRORS) > 0", 0, "critical",
               "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} reported XID {{ $value }}"),
        _alert("GpuEccDoubleBitErrors", "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m]) > 0", 0, "critical",
               "uncorrectable ECC errors on GPU {{ $labels.gpu }} of {{ $labels.Hostname }}"),
        _alert("GpuRowRemapFailure", "max by (Hostname, gpu) (DCGM_FI_DEV_ROW_REMAP_FAILURE) > 0", 0, "critical",
               "row remapping failed on GPU {{ $labels.gpu }} of {{ $labels.Hostname }}: replace the node"),
        _alert("GpuTemperatureHigh", "max by (Hostname, gpu) (DCGM_FI_DEV_GPU_TEMP) > 85", 10, "warning",
               "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} above 85 C"),
        _alert("GpuPowerThrottling", "rate(DCGM_FI_DEV_POWER_VIOLATION[10m]) > 0", 15, "warning",
               "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} is throttled by its power limit"),
        _alert("GpuAllocatedButIdle",
               "gpu_cluster:gpu_utilization:avg_by_namespace < 10 and "
               "gpu_cluster:gpu_allocated:sum_by_namespace > 0", 60, "warning",
               "namespace {{ $labels.namespace }} holds GPUs at under 10% utilization"),
        _alert("KueueQueueWaitHigh", "gpu_cluster:queue_wait_seconds:p90_by_cluster_queue > 3600", 30, "warning",
               "90% of workloads in {{ $labels.cluster_queue }} waited more than an hour for admission"),
        _alert("KueueInadmissibleWorkloads", "sum by (cluster_queue) "
               "(kueue_pending_workloads{status=\"inadmissible\"}) > 0", 30, "warning",
               "{{ $labels.cluster_queue }} has workloads its quota cannot admit"),
        _alert("KueueWorkloadsEvicted", "sum by (cluster_queue, reason) "
               "(increase(kueue_evicted_workloads_total[30m])) > 0", 0, "info",
               "{{ $labels.cluster_queue }} evicted workloads ({{ $labels.reason }})"),
        _alert("KueueWorkloadsPreempted", "sum by (preempting_cluster_queue, reason) "
               "(increase(kueue_preempted_workloads_total[30m])) > 0", 0, "info",
               "workloads were preempted ({{ $labels.reason }})"),
    ]
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": _meta("gpu-cluster", MONITORING_NAMESPACE),
        "spec": {"groups": [
            {"name": "gpu-cluster.recording", "interval": "1m", "rules": recording},
            {"name": "gpu-cluster.alerts", "rules": alerts},
        ]},
    }


def _panel(panel_id: int, title: str, expr: str, legend: str, unit: str, x: int, y: int) -> Manifest:
    return {
        "id": panel_id, "type": "timeseries", "title": title,
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "datasource": {"type": "prometheus", "uid": "prometheus"},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [{"refId": "A", "expr": expr, "legendFormat": legend}],
    }


def grafana_dashboard() -> Manifest:
    """A ConfigMap the Grafana sidecar loads: GPU utilization and queue time by team."""
    dashboard = {
        "title": "GPU cluster: utilization and queues by team",
        "uid": "gpu-cluster-teams",
        "schemaVersion": 39,
        "time": {"from": "now-24h", "to": "now"},
        "panels": [
            _panel(1, "GPU utilization by team", "gpu_cluster:gpu_utilization:avg_by_namespace",
                   "{{namespace}}", "percent", 0, 0),
            _panel(2, "GPUs allocated by team", "gpu_cluster:gpu_allocated:sum_by_namespace",
                   "{{namespace}}", "short", 12, 0),
            _panel(3, "Queue wait p90 by team", "gpu_cluster:queue_wait_seconds:p90_by_cluster_queue",
                   "{{cluster_queue}}", "s", 0, 8),
            _panel(4, "Quota usage / nominal", "gpu_cluster:quota_usage_ratio:by_cluster_queue",
                   "{{cluster_queue}} {{resource}}", "percentunit", 12, 8),
            _panel(5, "Pending workloads", "sum by (cluster_queue, status) (kueue_pending_workloads)",
                   "{{cluster_queue}} {{status}}", "short", 0, 16),
            _panel(6, "GPU power", "gpu_cluster:gpu_power_watts:sum_by_node", "{{Hostname}}", "watt", 12, 16),
        ],
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta("gpu-cluster-dashboard", MONITORING_NAMESPACE, {"grafana_dashboard": "1"}),
        "data": {"gpu-cluster.json": json.dumps(dashboard, indent=1)},
    }


# --- the NCCL acceptance gate ----------------------------------------------------------------------------

ACCEPTANCE_NAMESPACE = "gpu-acceptance"
ACCEPTANCE_QUEUE = "gpu-acceptance"
NCCL_TESTS_BINARY = "/opt/nccl-tests/build/all_reduce_perf"
# all_reduce_perf from 8 B to 16 GiB, doubling, one GPU per rank (the seed's acceptance test).
NCCL_TESTS_ARGS = ["-b", "8", "-e", "16G", "-f", "2", "-g", "1"]
# Shared memory for NCCL's intra-node buffers and the hugepages EFA registers (the awsome-distributed-training
# nccl-tests MPIJob asks for hugepages-2Mi 5120Mi per worker). A memory-backed /dev/shm counts against the
# container's memory limit, so the limit leaves room for it; CPUs for 8 ranks, sshd and NCCL's proxy threads.
SHM_SIZE = "64Gi"
HUGEPAGES = "5120Mi"
WORKER_MEMORY = "256Gi"
WORKER_CPU = 32
LAUNCHER_RETRIES = 5  # the launcher may reach a worker still pulling its image: retried, not failed


def acceptance_cluster_queue(pools: Sequence[GpuPool], covered: Sequence[str]) -> Manifest:
    """The acceptance queue: each tested group's whole capacity, outside the teams' cohort, held
    (``stopPolicy: Hold``). Kueue unsuspends a job it admits, so the queue admits nothing until an operator sets
    ``stopPolicy: None`` for a run (on capacity the teams are not using: their queues held too); the next
    ``pulumi up`` holds it again."""
    flavors = [{"name": p.name, "resources": _resource_entries(
        Resources(p.capacity_units, p.max_nodes * (p.vcpu_per_node or 0), p.max_nodes * (p.memory_gib_per_node or 0),
                  p.max_nodes * p.fabric_per_node), None, None, covered)} for p in pools]
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue",
            "metadata": _meta(ACCEPTANCE_QUEUE, labels={"gpu-cluster/acceptance": "true"}),
            "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ACCEPTANCE_NAMESPACE}},
                     "queueingStrategy": "BestEffortFIFO",
                     "resourceGroups": [{"coveredResources": list(covered), "flavors": flavors}],
                     "preemption": {"reclaimWithinCohort": "Never", "withinClusterQueue": "Never"},
                     "stopPolicy": "Hold"}}


def acceptance_local_queue() -> Manifest:
    return {"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": _meta("default", ACCEPTANCE_NAMESPACE),
            "spec": {"clusterQueue": ACCEPTANCE_QUEUE}}


def nccl_mpijob(pool: GpuPool, image: str, nodes: int, fabric_resource: str | None, device_rdma: bool,
                labels: Mapping[str, str]) -> Manifest:
    """An MPIJob running all_reduce_perf on ``nodes`` nodes of the pool, one rank per GPU, with every GPU and fabric
    device of each node; created suspended (``runPolicy.suspend``), which Kueue lifts when its held queue admits
    it (README, "Before you commit capacity")."""
    variant = "allreduce" if nodes > 1 else "nvlink"
    name = f"nccl-{variant}-{pool.name}"
    env = [{"name": "NCCL_DEBUG", "value": "INFO"}]
    limits: dict[str, Any] = {GPU: pool.gpus_per_node, "hugepages-2Mi": HUGEPAGES, MEMORY: WORKER_MEMORY,
                              CPU: WORKER_CPU}
    if fabric_resource and pool.fabric_per_node and nodes > 1:
        env += [{"name": "FI_PROVIDER", "value": "efa"}]
        if device_rdma:
            env += [{"name": "FI_EFA_USE_DEVICE_RDMA", "value": "1"}]
        limits[fabric_resource] = pool.fabric_per_node
    ranks = nodes * pool.gpus_per_node
    mpirun = ["mpirun", "--allow-run-as-root", "--tag-output", "-np", str(ranks), "-N", str(pool.gpus_per_node),
              "--bind-to", "none", *[a for e in env for a in ("-x", e["name"])], "-x", "LD_LIBRARY_PATH",
              NCCL_TESTS_BINARY, *NCCL_TESTS_ARGS]
    worker = {"tolerations": [GPU_TOLERATION], "containers": [{
        "name": "worker", "image": image, "imagePullPolicy": "IfNotPresent", "env": env,
        "resources": {"limits": limits, "requests": dict(limits)},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }], "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE}}]}
    launcher = {"tolerations": [GPU_TOLERATION], "containers": [{
        "name": "launcher", "image": image, "imagePullPolicy": "IfNotPresent", "command": mpirun[:1],
        "args": mpirun[1:], "env": env,
        "resources": {"limits": {CPU: 1, MEMORY: "2Gi"}, "requests": {CPU: 1, MEMORY: "2Gi"}},
    }]}
    return {
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": _meta(name, ACCEPTANCE_NAMESPACE, {**labels, "kueue.x-k8s.io/queue-name": "default",
                                                       "gpu-cluster/node-group": pool.name,
                                                       "gpu-cluster/acceptance": variant}),
        "spec": {
            "slotsPerWorker": pool.gpus_per_node,
            "runPolicy": {"suspend": True, "cleanPodPolicy": "Running", "backoffLimit": LAUNCHER_RETRIES},
            "mpiImplementation": "OpenMPI",
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": launcher}},
                "Worker": {"replicas": nodes, "restartPolicy": "Never", "template": {"spec": worker}},
            },
        },
    }
