"""What every group of platform objects shares: the manifest type, object metadata, the names and labels the
platform uses across groups, and the small value types the clouds hand in."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.spec import GPU_TAINT_KEY, HEALTH_TAINT_KEY, READINESS_TAINT_KEY, TEAM_CPU_TAINT_KEY

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
# What the team CPU flavor adds to the pods it admits: the taint of the node groups teams have CPU quota on.
TEAM_CPU_TOLERATION = {"key": TEAM_CPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
# What the node agents a GPU node needs before its check can pass (driver, device plugins, exporters) and the check
# itself tolerate: the readiness taints the node registers with or gets when unhealthy (objects/node_check.py).
# Workloads never tolerate them.
# Whatever the effect (the health taint may be NoExecute, platform.nodeChecks.unhealthyEffect): an agent evicted from
# an unhealthy node could never report it healthy again.
READINESS_TOLERATIONS = [{"key": READINESS_TAINT_KEY, "operator": "Exists"},
                         {"key": HEALTH_TAINT_KEY, "operator": "Exists"}]
NODE_AGENT_TOLERATIONS = [GPU_TOLERATION, *READINESS_TOLERATIONS]
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
DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, counter, Total number of NVLink flow-control CRC errors.
DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL, counter, Total number of NVLink data CRC errors.
DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL, counter, Total number of NVLink recovery errors.
"""


def meta(name: str, namespace: str | None = None, labels: Mapping[str, str] | None = None) -> Manifest:
    meta: Manifest = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    return meta


