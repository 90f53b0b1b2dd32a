"""Google Cloud in the preview: GKE's own GPU stack (its driver, device plugin and DCGM exporter) and the GPU networks
of multi-networking, the Stackdriver exporter for Managed Lustre and GCS, Cloud Logging, and Slurm's Cloud SQL
database."""

from __future__ import annotations

from blueprint.graph.model import GraphResource, ResourceGraph
from blueprint.preview.platform import chart, release

NETWORK = "kubernetes:networking.gke.io/v1:Network"
POD_MONITOR = "kubernetes:monitoring.coreos.com/v1:PodMonitor"
NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
DATABASE = "gcp:sql/databaseInstance:DatabaseInstance"


def gpu_fabric(graph: ResourceGraph) -> str:
    return f"GPU networks for pods: {len(graph.of_type(NETWORK))} (GKE multi-networking)"


def gpu_stack_without_operator(graph: ResourceGraph) -> str | None:
    if not graph.of_type(POD_MONITOR):
        return None
    pools = [r for r in graph.of_type(NODE_POOL) if (r.inputs.get("nodeConfig") or {}).get("guestAccelerators")]
    accelerators = [a for r in pools for a in (r.inputs.get("nodeConfig") or {}).get("guestAccelerators") or []]
    drivers = sorted({str((a.get("gpuDriverInstallationConfig") or {}).get("gpuDriverVersion", "?"))
                      for a in accelerators})
    shared = sorted({int((a.get("gpuSharingConfig") or {}).get("maxSharedClientsPerGpu") or 0)
                     for a in accelerators} - {0})
    sharing = f"time-sharing x{', x'.join(map(str, shared))} (GKE)" if shared else "whole GPUs"
    return (f"GPU stack: GKE's own (driver {', '.join(drivers) or '?'}, GKE's device plugin and DCGM exporter, no GPU "
            f"Operator; PodMonitor cloud-dcgm-exporter feeds the GPU alerts), {sharing}; GPU networks for pods: "
            f"{len(graph.of_type(NETWORK))} (GKE multi-networking)")


def fabric_telemetry(graph: ResourceGraph) -> list[str]:
    return []  # what the GPUDirect fabric does not show is on the PrometheusRule's not-visible annotation


def storage_telemetry(graph: ResourceGraph) -> str | None:
    storage = release(graph, "stackdriver-exporter")
    if storage is None:
        return None
    return (f"storage: {chart(storage)} scrapes Managed Lustre and the checkpoint bucket's request count from the "
            "cloud's monitoring (read-only identity)")


def log_lines(graph: ResourceGraph) -> list[str]:
    if graph.of_type(CLUSTER):
        return ["logs: GKE ships container and system logs to Cloud Logging (loggingConfig; the project's "
                "_Default bucket keeps them 30 days unless changed)"]
    return []


def database(graph: ResourceGraph) -> GraphResource | None:
    return next(iter(graph.of_type(DATABASE)), None)


def database_text(db: GraphResource) -> str:
    return f"Cloud SQL {db.inputs.get('databaseVersion')}"


def registration_taints(graph: ResourceGraph) -> dict[str, set[str]]:
    """Per node group, the taint keys its nodes register with (the readiness gate's preview line)."""
    out: dict[str, set[str]] = {}
    for r in graph.of_type("gcp:container/nodePool:NodePool"):
        config = r.inputs.get("nodeConfig") or {}
        group = str((config.get("labels") or {}).get("gpu-cluster/node-group", ""))
        out[group] = {str(t.get("key")) for t in config.get("taints") or []}
    return out


def named_address(graph: ResourceGraph, name: str) -> str | None:
    """A reserved regional address of the stack by its name (the gke-l7-rilb Gateway's NamedAddress), when fixed."""
    found = [r.inputs.get("address") for r in graph.of_type("gcp:compute/address:Address")
             if r.inputs.get("name") == name and r.inputs.get("address")]
    return str(found[0]) if found else None
