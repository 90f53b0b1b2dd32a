"""AWS in the report: the VPC and its subnets (or the existing ones the stack names), EKS node groups with their GPUs,
EFA, placement and reserved capacity, FSx for Lustre and the S3 checkpoint bucket, the EKS control plane, Slurm's RDS
database, budgets and the CUR export; and the Capacity Block timeline."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from blueprint.graph.model import GraphResource, ResourceGraph
from blueprint.report.charts import Mark, timeline_chart
from blueprint.report.model import Node, component_urns, gib, protection, slug
from blueprint.report.model import escape as _e

if TYPE_CHECKING:  # the spec's models load with a stack, not for a saved graph
    from components.spec import ClusterSpec

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
SUBNET = "aws:ec2/subnet:Subnet"
VPC = "aws:ec2/vpc:Vpc"
FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
S3_BUCKET = "aws:s3/bucket:Bucket"
EKS = "aws:eks/cluster:Cluster"
RDS = "aws:rds/instance:Instance"


def planes(graph: ResourceGraph, spec: ClusterSpec | None) -> list[Node]:
    """Network, compute, storage and control plane, in that order."""
    return _network(graph, spec) + _compute(graph) + _storage(graph, spec) + _control_plane(graph)


def node_group_label(res: GraphResource) -> str | None:
    """The ``gpu-cluster/node-group`` label of an EKS node group (None for any other resource)."""
    if res.type != NODE_GROUP:
        return None
    labels = res.inputs.get("labels")
    return str(labels["gpu-cluster/node-group"]) if isinstance(labels, dict) and "gpu-cluster/node-group" in labels \
        else None


def databases(graph: ResourceGraph) -> list[Node]:
    """Slurm's accounting database, drawn with the storage."""
    return [Node(f"n-{slug(db.name)}", "storage", "Slurm accounting DB", [
        f"RDS {db.inputs.get('engine')} {db.inputs.get('engineVersion')} {db.inputs.get('instanceClass')}",
        "Multi-AZ" if db.inputs.get("multiAz") else "single-AZ",
        f"backups {db.inputs.get('backupRetentionPeriod')} days", protection(db)], "database", {db.urn})
        for db in graph.of_type(RDS)]


def cost_plane(graph: ResourceGraph) -> list[str]:
    """The budgets and the usage export."""
    export = bool(graph.of_type("aws:bcmdata/export:Export"))
    return [f"{len(graph.of_type('aws:budgets/budget:Budget'))} budget(s)"] + (
        ["CUR 2.0 export (split cost allocation)"] if export else [])


def timeline(graph: ResourceGraph, spec: ClusterSpec, now: datetime) -> list[str]:
    """Each Capacity Block's window with the preview's steps, as HTML."""
    from components.aws.summary import capacity_block_plans

    parts = []
    for plan in capacity_block_plans(graph, spec, now):
        w = plan.window
        up = (f"scheduled action scales to {plan.max_size}" if plan.scale_up_scheduled
              else "block starts: scale the group up")
        marks = [Mark(w.start, f"{w.start:%b %d %H:%M}: {up}", "#2f855a"),
                 Mark(w.eks_scaledown_at, f"{w.eks_scaledown_at:%H:%M} EKS scales to 0", "#6b46c1"),
                 Mark(w.scale_to_zero_by, f"{w.scale_to_zero_by:%H:%M} scale to 0 by now", "#b00020"),
                 Mark(w.end, f"{w.end:%H:%M} block ends", "#7b341e")]
        when = (f"now {now:%Y-%m-%d %H:%M} UTC: {w.phase.upper()}"
                + (f", starts in {(w.start - now).days} days" if w.phase == "future" else ""))
        title = (f"Capacity Block {plan.reservation_id} ({plan.group}): {w.instance_count} x {plan.instance_type}, "
                 f"{w.hours:,.0f} h; {when}")
        svg = timeline_chart(title, w.start, w.end, marks, now, graph.stack or "graph")
        steps = "".join(f"<li>{_e(step)}</li>" for step in plan.steps)
        parts.append(f'<div class="block" data-reservation="{_e(plan.reservation_id)}" '
                     f'data-start="{w.start.isoformat()}" data-end="{w.end.isoformat()}">'
                     f'<figure class="chart">{svg}</figure><p>{_e(plan.headline)}</p>'
                     f'<ol class="steps">{steps}</ol></div>')
    return parts


def window_text(tags: Any) -> str | None:
    """A Capacity Block's window from the tags the program puts on its node group."""
    if not isinstance(tags, dict) or "capacity-block-window" not in tags:
        return None
    start, _, end = str(tags["capacity-block-window"]).partition("/")
    shown = [datetime.fromisoformat(t.replace("Z", "+00:00")).strftime("%Y-%m-%d %H:%M") for t in (start, end)]
    return f"window {shown[0]} -> {shown[1]} UTC, {tags.get('capacity-block-instances', '?')} instances"


def _network(graph: ResourceGraph, spec: ClusterSpec | None) -> list[Node]:
    nodes = []
    nats = len(graph.of_type("aws:ec2/natGateway:NatGateway"))
    extra = []
    if graph.of_type("aws:ec2transitgateway/vpcAttachment:VpcAttachment"):
        extra.append("deployer: Transit Gateway attachment")
    if any(r.name.endswith("efa-ingress-self") for r in
           graph.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")):
        extra.append("EFA security group: all traffic within itself")
    for vpc in graph.of_type(VPC):
        lines = [f"CIDR {vpc.inputs.get('cidrBlock')}", f"{nats} NAT gateway(s)"]
        if vpc.inputs.get("assignGeneratedIpv6CidrBlock"):
            lines.append("dual-stack (IPv6 /56)")
        nodes.append(Node(f"n-{slug(vpc.name)}", "network", "VPC", lines + extra, "vpc", {vpc.urn}))
    if not nodes:
        existing = spec.aws_spec().network.existing if spec is not None and spec.cloud == "aws" else None
        title = f"existing VPC {existing.vpc_id}" if existing is not None else "existing VPC"
        nodes.append(Node("n-existing-vpc", "network", title, ["not created by this stack", *extra], "vpc", set()))
        if spec is not None and spec.cloud == "aws":
            for given in spec.aws_spec().network.subnets:
                zone = given.availability_zone_id or given.availability_zone or "?"
                nodes.append(Node(f"n-subnet-{slug(given.name)}", "network", f"subnet {given.name}",
                                  [f"{given.id or ''} {given.cidr}".strip(), f"role {given.role}", "existing"],
                                  "subnet", set(), group=f"zone {zone}", cloud_ids={given.id} if given.id else set()))
    for sub in graph.of_type(SUBNET):
        tags = sub.inputs.get("tags") or {}
        zone = sub.inputs.get("availabilityZoneId") or sub.inputs.get("availabilityZone") or "?"
        name = sub.name.removeprefix("network-subnet-")
        nodes.append(Node(f"n-{slug(sub.name)}", "network", f"subnet {name}",
                          [f"{sub.inputs.get('cidrBlock')}", f"role {tags.get('subnet-role', '?')}"], "subnet",
                          {sub.urn}, group=f"zone {zone}"))
    return nodes


def _compute(graph: ResourceGraph) -> list[Node]:
    from components.aws.figures import node_group_figures

    groups = {str(r.inputs.get("nodeGroupName", r.name)): r for r in graph.of_type(NODE_GROUP)}
    nodes = []
    for f in node_group_figures(graph):
        res = groups[f.name]
        gpus = f"{f.gpus_per_node} x {f.gpu_model} per node" if f.gpus_per_node else "no GPU"
        lines = [f.instance_type, gpus, f"nodes {f.min_size}-{f.max_size} (desired {f.desired_size})"]
        if f.gpus_per_node:
            lines.append(f"{f.gpus_per_node * f.max_size} GPUs at max size")
        if f.efa_catalog:
            lines.append(f"EFA {f.efa_per_node} of {f.efa_catalog} interfaces per node")
        if f.gpus_per_node:
            placement = "cluster placement group" if f.placement_group else "no placement group"
            if f.existing_placement_group:
                placement = f"existing placement group {f.existing_placement_group}"
            if not f.placement_group and f.reservation_id:
                placement += " (reserved capacity is placed)"
            lines.append(placement)
        reserved = f.capacity_type == "CAPACITY_BLOCK" or bool(f.reservation_id)
        if f.capacity_type == "CAPACITY_BLOCK":
            lines.append(f"RESERVED: Capacity Block {f.reservation_id or ''}".rstrip())
            window = window_text(res.inputs.get("tags"))
            lines.append(window or "window unknown (no capacity-block-window tag)")
        elif f.reservation_id:
            lines.append(f"RESERVED: {f.reservation_id.rsplit('/', 1)[-1]} (ODCR, paid whether nodes run or not)")
        else:
            lines.append(f"capacity {f.capacity_type.lower().replace('_', '-')}")
        kind = "reserved" if reserved else "gpu" if f.gpus_per_node else "cpu"
        nodes.append(Node(f"n-{slug(res.name)}", "compute", f.name, lines, kind, {res.urn},
                          component_urns(graph, res)))
    return nodes


def _storage(graph: ResourceGraph, spec: ClusterSpec | None) -> list[Node]:
    nodes = []
    for fs in graph.of_type(FSX):
        cap = gib(fs.inputs.get("storageCapacity"))
        dtype = str(fs.inputs.get("deploymentType"))
        per_tib = gib(fs.inputs.get("perUnitStorageThroughput")) or (200 if dtype == "SCRATCH_2" else 0)
        name = str((fs.inputs.get("tags") or {}).get("Name") or fs.name)
        nodes.append(Node(f"n-{slug(fs.name)}", "storage", name, [
            f"FSx for Lustre {dtype}", f"{cap:,} GiB x {per_tib} MB/s/TiB", f"= {cap / 1024 * per_tib:,.0f} MB/s",
            protection(fs), "KMS-encrypted" if fs.inputs.get("kmsKeyId") else "AWS-managed key"],
            "filesystem", {fs.urn}))
    storage = spec.aws_spec().storage if spec is not None and spec.cloud == "aws" else None
    fs_spec = storage.filesystem if storage is not None else None
    if not graph.of_type(FSX) and fs_spec is not None and fs_spec.existing is not None:
        per_tib = fs_spec.per_unit_storage_throughput or (200 if fs_spec.deployment_type == "SCRATCH_2" else 0)
        nodes.append(Node(f"n-fs-{slug(fs_spec.existing.file_system_id)}", "storage",
                          fs_spec.existing.file_system_id, [
                              f"existing FSx for Lustre {fs_spec.deployment_type}",
                              f"{fs_spec.capacity_gib:,} GiB x {per_tib} MB/s/TiB",
                              f"= {fs_spec.capacity_gib / 1024 * per_tib:,.0f} MB/s", "not managed by this stack"],
                          "filesystem", set()))
    versioning = {v.name: v for v in graph.of_type("aws:s3/bucketVersioning:BucketVersioning")}
    sse = {v.name: v for v in graph.of_type(
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")}
    for b in graph.of_type(S3_BUCKET):
        if not b.name.endswith("-checkpoints"):
            continue  # the cost export's bucket is the cost plane's
        ver = versioning.get(f"{b.name}-versioning")
        on = ver is not None and (ver.inputs.get("versioningConfiguration") or {}).get("status") == "Enabled"
        rules = (sse[f"{b.name}-sse"].inputs.get("rules") or []) if f"{b.name}-sse" in sse else []
        algo = {str((r.get("applyServerSideEncryptionByDefault") or {}).get("sseAlgorithm")) for r in rules}
        nodes.append(Node(f"n-{slug(b.name)}", "storage", f"{b.inputs.get('bucketPrefix', b.name)}*", [
            "S3 checkpoint bucket", "versioned" if on else "NOT versioned",
            "SSE-KMS" if "aws:kms" in algo else "SSE-S3" if algo else "no default encryption",
            protection(b)], "bucket", {b.urn}))
    if storage is not None and storage.checkpoint_bucket.existing_name:
        nodes.append(Node(f"n-bucket-{slug(storage.checkpoint_bucket.existing_name)}", "storage",
                          storage.checkpoint_bucket.existing_name, [
                              "existing S3 checkpoint bucket",
                              "SSE-KMS (existing key)" if storage.checkpoint_bucket.existing_kms_key_arn
                              else "no KMS key given", "not managed by this stack"], "bucket", set()))
    return nodes


def _control_plane(graph: ResourceGraph) -> list[Node]:
    nodes = []
    for c in graph.of_type(EKS):
        vpc = c.inputs.get("vpcConfig") or {}
        access = "endpoint: private only" if not vpc.get("endpointPublicAccess") else \
            f"endpoint: public from {', '.join(vpc.get('publicAccessCidrs') or [])}"
        if vpc.get("endpointPublicAccess") and vpc.get("endpointPrivateAccess"):
            access += " and private"
        logs = len(c.inputs.get("enabledClusterLogTypes") or [])
        nodes.append(Node(f"n-{slug(c.name)}", "control-plane", f"EKS {c.inputs.get('name')}", [
            f"Kubernetes {c.inputs.get('version')}", access,
            "KMS-encrypted secrets" if c.inputs.get("encryptionConfig") else "secrets NOT encrypted",
            f"{logs} of 5 log types", protection(c)], "control-plane", {c.urn}))
    return nodes


