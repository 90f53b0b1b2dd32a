"""The GPU stack: the GPU Operator's values and device plugin configuration, or the scrape of a GPU stack the cloud
runs itself."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from components.kubernetes.objects.common import (
    DCGM_METRICS,
    MONITORING_NAMESPACE,
    NODE_AGENT_TOLERATIONS,
    Manifest,
    meta,
)
from components.kubernetes.quotas import GPU
from components.spec import GpuSharingSpec


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
        "daemonsets": {"tolerations": list(NODE_AGENT_TOLERATIONS), "priorityClassName": "system-node-critical"},
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




@dataclass(frozen=True)
class CloudGpuStack:
    """A GPU stack the cloud installs and runs itself (GKE: the driver, the device plugin and the DCGM exporter), so
    the platform installs no GPU Operator; it only scrapes the cloud's DCGM exporter into its own Prometheus, where the
    GPU alerts are evaluated."""

    description: str  # for the preview
    dcgm_namespace: str
    dcgm_labels: Mapping[str, str] = field(default_factory=dict)
    dcgm_port: str = "metrics"
    dcgm_path: str = "/metrics"
    source: str = ""


def cloud_dcgm_pod_monitor(stack: CloudGpuStack) -> Manifest:
    """A PodMonitor (monitoring.coreos.com/v1) in the monitoring namespace that scrapes the cloud's DCGM exporter pods.
    ``honorLabels`` keeps the exporter's own namespace and pod labels (the pod that uses the GPU), which the
    utilization rules group by, instead of the exporter pod's namespace."""
    return {
        "apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
        "metadata": meta("cloud-dcgm-exporter", MONITORING_NAMESPACE, {"gpu-cluster/scrape": "dcgm"}),
        "spec": {
            "namespaceSelector": {"matchNames": [stack.dcgm_namespace]},
            "selector": {"matchLabels": dict(stack.dcgm_labels)},
            "podMetricsEndpoints": [{"port": stack.dcgm_port, "path": stack.dcgm_path, "interval": "15s",
                                     "honorLabels": True}],
        },
    }
