"""AWS in the preview: the EFA device plugin on the GPU Operator's line, the EFA node exporter, the CloudWatch
exporter for FSx and S3, container logs through aws-for-fluent-bit, and Slurm's RDS database."""

from __future__ import annotations

import re

from blueprint.graph.model import GraphResource, ResourceGraph
from blueprint.preview.platform import chart, release

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
CLUSTER = "aws:eks/cluster:Cluster"
DATABASE = "aws:rds/instance:Instance"


def gpu_fabric(graph: ResourceGraph) -> str:
    return f"EFA device plugin: {chart(release(graph, 'aws-efa-k8s-device-plugin'))}"


def gpu_stack_without_operator(graph: ResourceGraph) -> str | None:
    return None  # EKS GPU nodes get their stack from the GPU Operator (or the node image's driver with it)


def fabric_telemetry(graph: ResourceGraph) -> list[str]:
    efa_templates = [lt for lt in graph.of_type(LAUNCH_TEMPLATE)
                     if any(str(n.get("interfaceType")) in ("efa", "efa-only")
                            for n in lt.inputs.get("networkInterfaces") or [])]
    efa = release(graph, "efa-node-exporter")
    if efa is not None:
        groups = efa.inputs["values"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
        return [f"fabric: EFA node exporter ({chart(efa)}, image by digest) on {', '.join(groups)}: each EFA "
                "device's hw_counters (retransmits, timeouts, impaired connections, drops) into Prometheus"]
    if efa_templates:
        return ["warning: fabric: EFA node groups without fabric metrics (give aws.telemetry.efaExporterImage); "
                "the pack refuses this in production (aws-fabric-metrics-in-production)"]
    return []


def storage_telemetry(graph: ResourceGraph) -> str | None:
    storage = release(graph, "cloudwatch-exporter")
    if storage is None:
        return None
    return (f"storage: {chart(storage)} scrapes FSx and the checkpoint bucket's S3 request metrics from the cloud's "
            "monitoring (read-only identity)")


def log_lines(graph: ResourceGraph) -> list[str]:
    shipper = release(graph, "aws-for-fluent-bit")
    groups_by_name = {str(g.inputs.get("name")): g.inputs for g in graph.of_type(LOG_GROUP)}
    if shipper is not None:
        values = shipper.inputs["values"]
        shipped = [values["cloudWatchLogs"]["logGroupName"]]
        if "additionalOutputs" in values:
            shipped += re.findall(r"log_group_name (\S+)", values["additionalOutputs"])
        described = ", ".join(f"{g} ({groups_by_name.get(g, {}).get('retentionInDays', '?')} days, KMS)"
                              for g in shipped)
        return [f"logs: {chart(shipper)} ships container{' and node' if len(shipped) > 1 else ''} logs to "
                f"{described}"]
    if graph.of_type(CLUSTER):
        return ["warning: logs: container logs are not shipped (aws.telemetry.containerLogs.enabled false)"]
    return []


def database(graph: ResourceGraph) -> GraphResource | None:
    return next(iter(graph.of_type(DATABASE)), None)


def database_text(db: GraphResource) -> str:
    inputs = db.inputs
    return (f"RDS {inputs.get('engine')} {inputs.get('engineVersion')} {inputs.get('instanceClass')}, "
            f"{'Multi-AZ' if inputs.get('multiAz') else 'single-AZ'}, backups {inputs.get('backupRetentionPeriod')} "
            f"days, deletion protection {'on' if inputs.get('deletionProtection') else 'off'}")


def registration_taints(graph: ResourceGraph) -> dict[str, set[str]]:
    """Per node group, the taint keys its nodes register with (the readiness gate's preview line)."""
    out: dict[str, set[str]] = {}
    for r in graph.of_type("aws:eks/nodeGroup:NodeGroup"):
        group = str((r.inputs.get("labels") or {}).get("gpu-cluster/node-group", ""))
        out[group] = {str(t.get("key")) for t in r.inputs.get("taints") or []}
    return out


def named_address(graph: ResourceGraph, name: str) -> str | None:
    """EKS's gateway is a ClusterIP Service: no address reserved by name."""
    return None
