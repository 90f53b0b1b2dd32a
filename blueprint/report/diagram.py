"""The report's cluster diagram: the four planes (network, compute, storage, control plane), the teams with their
queues, quotas and Slurm partitions, and the platform's operations, drawn from the graph (what the program would
create) and laid out by Graphviz's ``dot`` as SVG.

The model (:class:`Diagram`) is built first and is plain data, so tests read it without Graphviz; every resource of
the graph has an anchor in it (:meth:`Diagram.anchor_of`): the node that stands for it, else its plane's box, so a
policy finding links to its place in the picture.
"""

from __future__ import annotations

import html
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from blueprint.graph.model import GraphResource, ResourceGraph
from blueprint.preview.platform import (
    flavor_node_groups,
    slurm_accounts,
    slurm_nodeset_groups,
    slurm_partitions,
    team_queues,
)
from components.spec import ClusterSpec

# The boxes of the picture, in the order they are drawn, with their titles.
BOXES = {
    "network": "network & fabric",
    "compute": "compute",
    "storage": "storage",
    "control-plane": "control plane",
    "teams": "teams, queues and quotas",
    "operations": "platform, telemetry and cost",
}
# Graph planes (component type tokens) drawn in each box when no node of their own claims a resource.
PLANE_BOX = {"network": "network", "compute": "compute", "storage": "storage", "control-plane": "control-plane",
             "platform": "operations", "telemetry": "operations", "cost": "operations"}
PLATFORM_COMPONENTS = ("Queues", "Tenancy", "Slurm")  # control-plane type tokens that are the teams' platform

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
SUBNET = "aws:ec2/subnet:Subnet"
VPC = "aws:ec2/vpc:Vpc"
FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
S3_BUCKET = "aws:s3/bucket:Bucket"
EKS = "aws:eks/cluster:Cluster"
RDS = "aws:rds/instance:Instance"
GKE_POOL = "gcp:container/nodePool:NodePool"
GKE = "gcp:container/cluster:Cluster"
GCP_NETWORK = "gcp:compute/network:Network"
GCP_SUBNET = "gcp:compute/subnetwork:Subnetwork"
GCS = "gcp:storage/bucket:Bucket"
GCP_LUSTRE = "gcp:lustre/instance:Instance"
CLOUD_SQL = "gcp:sql/databaseInstance:DatabaseInstance"
PROMETHEUS_RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"


class GraphvizMissingError(RuntimeError):
    """Graphviz's ``dot`` is not installed: the diagram cannot be laid out."""


DOT_MISSING = ("blueprint report lays out its diagram with Graphviz, and its `dot` program is not installed: install "
               "the system package (Debian/Ubuntu: sudo apt-get install --no-install-recommends graphviz; Fedora: "
               "sudo dnf install graphviz; macOS: brew install graphviz) and run again")


@dataclass
class Node:
    """One box of the picture and the resources it stands for."""

    id: str  # the HTML/SVG id the findings link to
    box: str  # a key of BOXES
    title: str
    lines: list[str]
    kind: str  # gpu, cpu, reserved, vpc, subnet, fabric, filesystem, bucket, database, control-plane, team, ...
    keys: set[str]  # the resources drawn (edges follow their dependencies)
    urns: set[str] = field(default_factory=set)  # every resource anchored here (keys included)
    group: str = ""  # a sub-box inside the box: a zone for subnets, the Slurm cluster for partitions
    cloud_ids: set[str] = field(default_factory=set)  # ids of existing resources (not in the graph) it stands for
    findings: list[str] = field(default_factory=list)  # the policies that flag a resource anchored here


@dataclass(frozen=True)
class Edge:
    """A line between two nodes: a dependency, a quota on a node group, a partition's nodes."""

    tail: str
    head: str
    label: str = ""
    style: str = "solid"


@dataclass
class Diagram:
    """The picture's model: its nodes (with what each stands for), edges and the graph they were read from."""

    nodes: list[Node]
    edges: list[Edge]
    graph: ResourceGraph
    _owner: dict[str, str] = field(default_factory=dict)

    def node(self, node_id: str) -> Node:
        """The node with this id."""
        return next(n for n in self.nodes if n.id == node_id)

    def anchor_of(self, urn: str) -> str:
        """The id a finding on this resource links to: the node that stands for it (or for its nearest
        ancestor), else the box of its plane; the stack's own findings go to the control plane."""
        if not self._owner:
            self._owner = {urn: n.id for n in self.nodes for urn in n.urns}
        if urn in self._owner:
            return self._owner[urn]
        res = self.graph.get(urn)
        if res is None:
            return box_id("control-plane")
        for ancestor in self.graph.ancestors(res):
            if ancestor.urn in self._owner:
                return self._owner[ancestor.urn]
        return box_id(_box_of(self.graph, res))


def box_id(box: str) -> str:
    """The id of a box (a Graphviz cluster)."""
    return f"box-{box}"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def _box_of(graph: ResourceGraph, res: GraphResource) -> str:
    comp = res if res.is_component else graph.component_of(res)
    if comp is not None and comp.type.rsplit(":", 1)[-1] in PLATFORM_COMPONENTS:
        return "teams"
    return PLANE_BOX.get(graph.plane_of(res), "control-plane")


def _descendants(graph: ResourceGraph, urn: str) -> set[str]:
    out: set[str] = set()
    todo = [urn]
    while todo:
        for child in graph.children(todo.pop()):
            if child.urn not in out:
                out.add(child.urn)
                todo.append(child.urn)
    return out


def _component_urns(graph: ResourceGraph, res: GraphResource) -> set[str]:
    """The resource, and everything under the component that holds it when that component holds nothing else of
    its kind (a node group's launch template, placement group, schedules)."""
    comp = graph.get(res.parent) if res.parent else None
    if comp is None or not comp.is_component or sum(1 for c in graph.children(comp.urn) if c.type == res.type) > 1:
        return {res.urn}
    return {res.urn, comp.urn, *_descendants(graph, comp.urn)}


def _gib(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def _window_text(tags: Any) -> str | None:
    """A Capacity Block's window from the tags the program puts on its node group."""
    if not isinstance(tags, dict) or "capacity-block-window" not in tags:
        return None
    start, _, end = str(tags["capacity-block-window"]).partition("/")
    shown = [datetime.fromisoformat(t.replace("Z", "+00:00")).strftime("%Y-%m-%d %H:%M") for t in (start, end)]
    return f"window {shown[0]} -> {shown[1]} UTC, {tags.get('capacity-block-instances', '?')} instances"


# --- the planes -----------------------------------------------------------------------------------------------------


def _aws_network(graph: ResourceGraph, spec: ClusterSpec | None) -> list[Node]:
    nodes = []
    nats = len(graph.of_type("aws:ec2/natGateway:NatGateway"))
    extra = []
    if graph.of_type("aws:ec2transitgateway/vpcAttachment:VpcAttachment"):
        extra.append("deployer: Transit Gateway attachment + Route 53 Resolver")
    if any(r.name.endswith("efa-ingress-self") for r in
           graph.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")):
        extra.append("EFA security group: all traffic within itself")
    for vpc in graph.of_type(VPC):
        lines = [f"CIDR {vpc.inputs.get('cidrBlock')}", f"{nats} NAT gateway(s)"]
        if vpc.inputs.get("assignGeneratedIpv6CidrBlock"):
            lines.append("dual-stack (IPv6 /56)")
        nodes.append(Node(f"n-{_slug(vpc.name)}", "network", "VPC", lines + extra, "vpc", {vpc.urn}))
    if not nodes:
        existing = spec.aws_spec().network.existing if spec is not None and spec.cloud == "aws" else None
        title = f"existing VPC {existing.vpc_id}" if existing is not None else "existing VPC"
        nodes.append(Node("n-existing-vpc", "network", title, ["not created by this stack", *extra], "vpc", set()))
        if spec is not None and spec.cloud == "aws":
            for given in spec.aws_spec().network.subnets:
                zone = given.availability_zone_id or given.availability_zone or "?"
                nodes.append(Node(f"n-subnet-{_slug(given.name)}", "network", f"subnet {given.name}",
                                  [f"{given.id or ''} {given.cidr}".strip(), f"role {given.role}", "existing"],
                                  "subnet", set(), group=f"zone {zone}", cloud_ids={given.id} if given.id else set()))
    for sub in graph.of_type(SUBNET):
        tags = sub.inputs.get("tags") or {}
        zone = sub.inputs.get("availabilityZoneId") or sub.inputs.get("availabilityZone") or "?"
        name = sub.name.removeprefix("network-subnet-")
        nodes.append(Node(f"n-{_slug(sub.name)}", "network", f"subnet {name}",
                          [f"{sub.inputs.get('cidrBlock')}", f"role {tags.get('subnet-role', '?')}"], "subnet",
                          {sub.urn}, group=f"zone {zone}"))
    return nodes


def _aws_compute(graph: ResourceGraph) -> list[Node]:
    from components.aws.summary import node_group_figures

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
            window = _window_text(res.inputs.get("tags"))
            lines.append(window or "window unknown (no capacity-block-window tag)")
        elif f.reservation_id:
            lines.append(f"RESERVED: {f.reservation_id.rsplit('/', 1)[-1]} (ODCR, paid whether nodes run or not)")
        else:
            lines.append(f"capacity {f.capacity_type.lower().replace('_', '-')}")
        kind = "reserved" if reserved else "gpu" if f.gpus_per_node else "cpu"
        nodes.append(Node(f"n-{_slug(res.name)}", "compute", f.name, lines, kind, {res.urn},
                          _component_urns(graph, res)))
    return nodes


def _aws_storage(graph: ResourceGraph, spec: ClusterSpec | None) -> list[Node]:
    nodes = []
    for fs in graph.of_type(FSX):
        cap = _gib(fs.inputs.get("storageCapacity"))
        dtype = str(fs.inputs.get("deploymentType"))
        per_tib = _gib(fs.inputs.get("perUnitStorageThroughput")) or (200 if dtype == "SCRATCH_2" else 0)
        name = str((fs.inputs.get("tags") or {}).get("Name") or fs.name)
        nodes.append(Node(f"n-{_slug(fs.name)}", "storage", name, [
            f"FSx for Lustre {dtype}", f"{cap:,} GiB x {per_tib} MB/s/TiB", f"= {cap / 1024 * per_tib:,.0f} MB/s",
            _protection(fs), "KMS-encrypted" if fs.inputs.get("kmsKeyId") else "AWS-managed key"],
            "filesystem", {fs.urn}))
    storage = spec.aws_spec().storage if spec is not None and spec.cloud == "aws" else None
    fs_spec = storage.filesystem if storage is not None else None
    if not graph.of_type(FSX) and fs_spec is not None and fs_spec.existing is not None:
        per_tib = fs_spec.per_unit_storage_throughput or (200 if fs_spec.deployment_type == "SCRATCH_2" else 0)
        nodes.append(Node(f"n-fs-{_slug(fs_spec.existing.file_system_id)}", "storage",
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
        nodes.append(Node(f"n-{_slug(b.name)}", "storage", f"{b.inputs.get('bucketPrefix', b.name)}*", [
            "S3 checkpoint bucket", "versioned" if on else "NOT versioned",
            "SSE-KMS" if "aws:kms" in algo else "SSE-S3" if algo else "no default encryption",
            _protection(b)], "bucket", {b.urn}))
    if storage is not None and storage.checkpoint_bucket.existing_name:
        nodes.append(Node(f"n-bucket-{_slug(storage.checkpoint_bucket.existing_name)}", "storage",
                          storage.checkpoint_bucket.existing_name, [
                              "existing S3 checkpoint bucket",
                              "SSE-KMS (existing key)" if storage.checkpoint_bucket.existing_kms_key_arn
                              else "no KMS key given", "not managed by this stack"], "bucket", set()))
    return nodes


def _protection(res: GraphResource) -> str:
    if res.protect and res.retain_on_delete:
        return "protected, retained on delete"
    return "protected" if res.protect else "NOT protected"


def _aws_control_plane(graph: ResourceGraph) -> list[Node]:
    nodes = []
    for c in graph.of_type(EKS):
        vpc = c.inputs.get("vpcConfig") or {}
        access = "endpoint: private only" if not vpc.get("endpointPublicAccess") else \
            f"endpoint: public from {', '.join(vpc.get('publicAccessCidrs') or [])}"
        if vpc.get("endpointPublicAccess") and vpc.get("endpointPrivateAccess"):
            access += " and private"
        logs = len(c.inputs.get("enabledClusterLogTypes") or [])
        nodes.append(Node(f"n-{_slug(c.name)}", "control-plane", f"EKS {c.inputs.get('name')}", [
            f"Kubernetes {c.inputs.get('version')}", access,
            "KMS-encrypted secrets" if c.inputs.get("encryptionConfig") else "secrets NOT encrypted",
            f"{logs} of 5 log types", _protection(c)], "control-plane", {c.urn}))
    return nodes


def _gcp_network(graph: ResourceGraph) -> list[Node]:
    nodes = []
    nets = graph.of_type(GCP_NETWORK)
    gpu_nets = [v for v in nets if "gpunet" in str(v.inputs.get("name")) or v.inputs.get("networkProfile")
                or v.name.startswith("network-gpu-")]
    names = {str(v.inputs.get("name")) for v in gpu_nets}
    subnets = graph.of_type(GCP_SUBNET)
    gpu_subnets = [s for s in subnets if str(s.inputs.get("network", "")).rsplit("/", 1)[-1] in names
                   or s.name.startswith("network-gpu-")]
    nats = len(graph.of_type("gcp:compute/routerNat:RouterNat"))
    for vpc in nets:
        if vpc in gpu_nets:
            continue
        lines = [f"{nats} Cloud NAT"]
        if graph.of_type("gcp:servicenetworking/connection:Connection"):
            lines.append("private service access (filesystem)")
        nodes.append(Node(f"n-{_slug(vpc.name)}", "network", f"VPC {vpc.inputs.get('name')}", lines, "vpc",
                          {vpc.urn}))
    for sub in subnets:
        if sub in gpu_subnets:
            continue
        ranges = [f"{r.get('rangeName')} {r.get('ipCidrRange')}" for r in sub.inputs.get("secondaryIpRanges") or []]
        nodes.append(Node(f"n-{_slug(sub.name)}", "network", f"subnet {sub.inputs.get('name')}",
                          [f"{sub.inputs.get('ipCidrRange')} (nodes)", *ranges], "subnet", {sub.urn},
                          group=f"region {sub.inputs.get('region', '?')}"))
    if gpu_nets:
        mtus = sorted({str(v.inputs.get("mtu")) for v in gpu_nets})
        prefixes = sorted({str(s.inputs.get("ipCidrRange", "?/?")).rsplit("/", 1)[-1] for s in gpu_subnets})
        profile = next((str(v.inputs["networkProfile"]).rsplit("/", 1)[-1] for v in gpu_nets
                        if v.inputs.get("networkProfile")), None)
        lines = [f"MTU {'/'.join(mtus)}", f"{len(gpu_subnets)} subnets of /{', /'.join(prefixes)}"]
        if profile:
            lines.append(f"RoCE profile {profile}")
        keys = {v.urn for v in gpu_nets} | {s.urn for s in gpu_subnets}
        nodes.append(Node("n-gpu-vpcs", "network", f"GPU VPCs x{len(gpu_nets)}", lines, "fabric", keys))
    return nodes


def _gcp_compute(graph: ResourceGraph) -> list[Node]:
    from components.gcp.summary import pool_figures

    pools = {str(r.inputs.get("name")): r for r in graph.of_type(GKE_POOL)}
    nodes = []
    for f in pool_figures(graph):
        res = pools[f.name]
        gpus = f"{f.gpus_per_node} x {f.gpu_model} per node" if f.gpus_per_node else "no GPU"
        lines = [f.machine_type, gpus, f"nodes {f.min_size}-{f.max_size} (initial {f.initial_size})"]
        if f.gpus_per_node:
            lines.append(f"{f.gpus_per_node * f.max_size} GPUs at max size")
        if f.gpu_networks:
            lines.append(f"{f.gpu_networks} GPU NICs per node" + (f" ({f.gpudirect})" if f.gpudirect else ""))
        if f.gpus_per_node:
            lines.append(f"placement {f.placement}" if f.placement else "no compact placement policy")
        lines.append(f"zones {', '.join(f.zones)}")
        if f.reservations:
            lines.append(f"RESERVED: {', '.join(f.reservations)} (specific reservation, billed while it exists)")
        else:
            lines.append(f.capacity.split(" (", 1)[0])
        kind = "reserved" if f.reservations else "gpu" if f.gpus_per_node else "cpu"
        nodes.append(Node(f"n-{_slug(res.name)}", "compute", f.name, lines, kind, {res.urn},
                          _component_urns(graph, res)))
    return nodes


def _gcp_storage(graph: ResourceGraph) -> list[Node]:
    nodes = []
    for fs in graph.of_type(GCP_LUSTRE):
        cap, tier = _gib(fs.inputs.get("capacityGib")), _gib(fs.inputs.get("perUnitStorageThroughput"))
        nodes.append(Node(f"n-{_slug(fs.name)}", "storage", str(fs.inputs.get("instanceId") or fs.name), [
            f"Managed Lustre in {fs.inputs.get('location')}", f"{cap:,} GiB x {tier} MB/s/TiB",
            f"= {cap / 1024 * tier / 1000:,.1f} GB/s", _protection(fs),
            "CMEK" if fs.inputs.get("kmsKey") else "Google-managed keys"], "filesystem", {fs.urn}))
    for fs in graph.of_type("gcp:filestore/instance:Instance"):
        nodes.append(Node(f"n-{_slug(fs.name)}", "storage", str(fs.inputs.get("name") or fs.name),
                          [f"Filestore {fs.inputs.get('tier')}", _protection(fs)], "filesystem", {fs.urn}))
    for fs in graph.of_type("gcp:parallelstore/instance:Instance"):
        nodes.append(Node(f"n-{_slug(fs.name)}", "storage", str(fs.inputs.get("instanceId") or fs.name),
                          [f"Parallelstore {fs.inputs.get('capacityGib')} GiB", _protection(fs)], "filesystem",
                          {fs.urn}))
    for b in graph.of_type(GCS):
        soft = _gib((b.inputs.get("softDeletePolicy") or {}).get("retentionDurationSeconds", 0)) // 86400
        nodes.append(Node(f"n-{_slug(b.name)}", "storage", str(b.inputs.get("name") or b.name), [
            "GCS bucket", f"versioning {'on' if (b.inputs.get('versioning') or {}).get('enabled') else 'OFF'}",
            f"soft delete {soft} days", "CMEK" if (b.inputs.get("encryption") or {}).get("defaultKmsKeyName")
            else "Google-managed keys", _protection(b)], "bucket", {b.urn}))
    return nodes


def _gcp_control_plane(graph: ResourceGraph) -> list[Node]:
    nodes = []
    for c in graph.of_type(GKE):
        priv = c.inputs.get("privateClusterConfig") or {}
        nets = [str(b.get("cidrBlock")) for b in (c.inputs.get("masterAuthorizedNetworksConfig") or {}).get(
            "cidrBlocks", [])]
        dns = ((c.inputs.get("controlPlaneEndpointsConfig") or {}).get("dnsEndpointConfig") or {}).get(
            "allowExternalTraffic")
        lines = [f"{c.inputs.get('location')}, channel {(c.inputs.get('releaseChannel') or {}).get('channel')}",
                 "endpoint: private IP" if priv.get("enablePrivateEndpoint") else "endpoint: public IP",
                 f"authorized: {', '.join(nets) or 'the VPC only'}"]
        if dns:
            lines.append("DNS endpoint (IAM-authorized)")
        lines += ["secrets: CMEK" if c.inputs.get("databaseEncryption") else "secrets: Google-managed keys",
                  _protection(c)]
        nodes.append(Node(f"n-{_slug(c.name)}", "control-plane", f"GKE {c.inputs.get('name')}", lines,
                          "control-plane", {c.urn}))
    return nodes


def _databases(graph: ResourceGraph) -> list[Node]:
    """Slurm's accounting database (RDS or Cloud SQL), drawn with the storage."""
    nodes = []
    for db in graph.of_type(RDS):
        nodes.append(Node(f"n-{_slug(db.name)}", "storage", "Slurm accounting DB", [
            f"RDS {db.inputs.get('engine')} {db.inputs.get('engineVersion')} {db.inputs.get('instanceClass')}",
            "Multi-AZ" if db.inputs.get("multiAz") else "single-AZ",
            f"backups {db.inputs.get('backupRetentionPeriod')} days", _protection(db)], "database", {db.urn}))
    for db in graph.of_type(CLOUD_SQL):
        nodes.append(Node(f"n-{_slug(db.name)}", "storage", "Slurm accounting DB", [
            f"Cloud SQL {db.inputs.get('databaseVersion')}", _protection(db)], "database", {db.urn}))
    return nodes


def _teams(graph: ResourceGraph) -> tuple[list[Node], list[Edge]]:
    nodes: list[Node] = []
    edges: list[Edge] = []
    accounts = {a.name: a for a in slurm_accounts(graph)}
    groups = flavor_node_groups(graph)
    namespaced: dict[str, set[str]] = {}
    for res in graph.resources:
        meta = res.inputs.get("metadata") if res.type.startswith("kubernetes:") else None
        if isinstance(meta, dict):
            for key in (str(meta.get("namespace") or ""), str(meta.get("name") or "")
                        if res.type == "kubernetes:core/v1:Namespace" else ""):
                if key:
                    namespaced.setdefault(key, set()).add(res.urn)
    for queue in team_queues(graph):
        lines = []
        for f in queue.flavors:
            lines.append(f"Kueue {f.flavor}: {f.describe(lends='lends <=')}")
            if f.flavor in groups:
                edges.append(Edge(f"n-team-{_slug(queue.team)}", f"n-ng:{groups[f.flavor]}", f"{f.gpus} GPUs"))
        if queue.acceptance:
            lines.append("held (stopPolicy Hold)" if queue.held else "admitting")
            nodes.append(Node(f"n-team-{_slug(queue.team)}", "teams", f"acceptance queue {queue.team}", lines,
                              "acceptance", {queue.urn}, {queue.urn} | namespaced.get(queue.team, set())))
            continue
        if not queue.flavors:
            lines.append("no Kueue GPU quota")
        lines.append(f"namespace GPU ceiling {queue.gpu_ceiling}")
        account = accounts.get(queue.team)
        if account is not None:
            budget = f", {int(account.budget_gpu_minutes):,} GPU-min/month" if account.budget_gpu_minutes else ""
            lines.append(f"Slurm account: GPU limit {account.gpu_limit}{budget}")
        nodes.append(Node(f"n-team-{_slug(queue.team)}", "teams", f"team {queue.team}", lines, "team", {queue.urn},
                          {queue.urn} | namespaced.get(queue.team, set())))
    nodesets = slurm_nodeset_groups(graph)
    controllers = graph.of_type("kubernetes:slinky.slurm.net/v1beta1:Controller")
    cluster = str(controllers[0].inputs["spec"].get("clusterName")) if controllers else ""
    for part in slurm_partitions(graph):
        fields = part.fields
        lines = [f"nodes {fields.get('Nodes', '?')}", f"max time {fields.get('MaxTime', '?')}"]
        if "MaxNodes" in fields:
            lines.append(f"max {fields['MaxNodes']} nodes per job")
        if fields.get("Default") == "YES":
            lines.append("default partition")
        node_id = f"n-partition-{_slug(part.name)}"
        nodes.append(Node(node_id, "teams", f"partition {part.name}", lines, "slurm", set(),
                          group=f"Slurm {cluster}"))
        for nodeset in fields.get("Nodes", "").split(","):
            if nodeset in nodesets:
                edges.append(Edge(node_id, f"n-ng:{nodesets[nodeset]}", "slurmd"))
        for allowed in part.accounts:
            if f"n-team-{_slug(allowed)}" in {n.id for n in nodes}:
                edges.append(Edge(f"n-team-{_slug(allowed)}", node_id, "", "dashed"))
    return nodes, edges


def _operations(graph: ResourceGraph) -> list[Node]:
    """The platform's GPU stack and job controllers, telemetry and the cost plane, compactly."""
    rules = graph.of_type(PROMETHEUS_RULE)
    alerts = sum(1 for r in rules for g in r.inputs.get("spec", {}).get("groups", []) for rule in g.get("rules", [])
                 if "alert" in rule)
    releases = sorted(str(r.inputs.get("name")) for r in graph.of_type("kubernetes:helm.sh/v3:Release"))
    budgets = len(graph.of_type("aws:budgets/budget:Budget")) + len(graph.of_type("gcp:billing/budget:Budget"))
    export = bool(graph.of_type("aws:bcmdata/export:Export"))
    nodes = [
        Node("n-platform", "operations", "GPU stack and job controllers",
             [", ".join(releases[i:i + 3]) for i in range(0, len(releases), 3)] or ["no Helm release"], "ops", set()),
        Node("n-telemetry", "operations", "telemetry",
             [f"{alerts} alerts, {len(rules)} rule groups", "runbooks: docs/runbooks.md"], "ops", set()),
        Node("n-cost-plane", "operations", "cost plane",
             [f"{budgets} budget(s)"] + (["CUR 2.0 export (split cost allocation)"] if export else []), "ops", set()),
    ]
    return nodes


def build_diagram(graph: ResourceGraph, spec: ClusterSpec | None = None) -> Diagram:
    """The picture's model, read from the graph (the spec adds what an existing network, filesystem or bucket is,
    which the graph cannot carry)."""
    gcp = any(r.type == "pulumi:providers:gcp" for r in graph.resources)
    if gcp:
        nodes = _gcp_network(graph) + _gcp_compute(graph) + _gcp_storage(graph) + _gcp_control_plane(graph)
    else:
        nodes = _aws_network(graph, spec) + _aws_compute(graph) + _aws_storage(graph, spec) + \
            _aws_control_plane(graph)
    nodes += _databases(graph)
    team_nodes, edges = _teams(graph)
    nodes += team_nodes + _operations(graph)
    # Node groups by their gpu-cluster/node-group label, for the teams' and partitions' edges.
    by_label: dict[str, str] = {}
    for n in nodes:
        for urn in sorted(n.keys):
            res = graph.get(urn)
            if res is not None and res.type in (NODE_GROUP, GKE_POOL):
                labels = res.inputs.get("labels") if res.type == NODE_GROUP else (
                    res.inputs.get("nodeConfig") or {}).get("labels")
                if isinstance(labels, dict) and "gpu-cluster/node-group" in labels:
                    by_label[str(labels["gpu-cluster/node-group"])] = n.id
    edges = [Edge(e.tail, by_label[e.head.removeprefix("n-ng:")], e.label, e.style) if e.head.startswith("n-ng:")
             else e for e in edges if not e.head.startswith("n-ng:") or e.head.removeprefix("n-ng:") in by_label]
    for n in nodes:
        n.urns |= n.keys
    edges += _dependency_edges(graph, nodes) + _existing_edges(graph, nodes)
    _claim_the_rest(graph, nodes)
    return Diagram(nodes, _unique(edges), graph)


def _dependency_edges(graph: ResourceGraph, nodes: list[Node]) -> list[Edge]:
    """A line from a node to each node whose drawn resource one of its own depends on."""
    key_owner = {urn: n.id for n in nodes for urn in n.keys}
    out = []
    for n in nodes:
        if n.box in ("teams", "operations"):
            continue
        for urn in sorted(n.keys):  # sets iterate in a per-process order: edges are numbered in this order
            res = graph.get(urn)
            for dep in sorted(res.dependencies) if res is not None else []:
                other = key_owner.get(dep)
                if other is not None and other != n.id:
                    out.append(Edge(n.id, other))
    return out


def _existing_edges(graph: ResourceGraph, nodes: list[Node]) -> list[Edge]:
    """Lines to existing subnets (not in the graph, so no dependency names them), from the resources that list
    their ids in ``subnetIds``."""
    by_cloud_id = {cid: n.id for n in nodes for cid in n.cloud_ids}
    if not by_cloud_id:
        return []
    out = []
    for n in nodes:
        for urn in sorted(n.keys):
            res = graph.get(urn)
            listed = res.inputs.get("subnetIds") if res is not None else None
            for sid in listed if isinstance(listed, list) else [listed] if isinstance(listed, str) else []:
                if str(sid) in by_cloud_id:
                    out.append(Edge(n.id, by_cloud_id[str(sid)]))
    return out


def _claim_the_rest(graph: ResourceGraph, nodes: list[Node]) -> None:
    """Anchor the resources no node stands for: a drawn resource's own configuration (``<name>-versioning`` beside
    a bucket, ``<name>-sg`` beside a filesystem) to it, network resources to the VPC, the control plane's to the
    cluster, telemetry and cost to their nodes, the platform's GPU stack and controllers to theirs (the rest anchor
    to their plane's box)."""
    claimed = {urn for n in nodes for urn in n.urns}
    by_id = {n.id: n for n in nodes}
    vpc = next((n for n in nodes if n.kind == "vpc"), None)
    cluster = next((n for n in nodes if n.kind == "control-plane"), None)
    prefixes: list[tuple[str, str, Node]] = []
    for n in nodes:
        for urn in sorted(n.keys):
            res = graph.get(urn)
            if res is not None and res.parent:
                prefixes.append((res.parent, f"{res.name}-", n))
    for res in sorted(graph.resources, key=lambda r: r.urn):
        if res.urn in claimed or res.is_provider or res.type == "pulumi:pulumi:Stack":
            continue
        plane = graph.plane_of(res)
        comp = res if res.is_component else graph.component_of(res)
        token = comp.type.rsplit(":", 1)[-1] if comp is not None else ""
        target = next((n for parent, prefix, n in prefixes if res.parent == parent and res.name.startswith(prefix)),
                      None)
        if target is not None:
            pass
        elif plane == "network" and vpc is not None:
            target = vpc
        elif plane == "control-plane" and token not in (*PLATFORM_COMPONENTS, "GpuStack") and cluster is not None:
            target = cluster
        elif plane == "telemetry":
            target = by_id.get("n-telemetry")
        elif plane == "cost":
            target = by_id.get("n-cost-plane")
        elif plane == "platform" or token == "GpuStack":
            target = by_id.get("n-platform")
        if target is not None:
            target.urns.add(res.urn)


def _unique(edges: Iterable[Edge]) -> list[Edge]:
    seen: dict[tuple[str, str], Edge] = {}
    for e in edges:
        if (e.tail, e.head) not in seen and (e.head, e.tail) not in seen:
            seen[(e.tail, e.head)] = e
    return list(seen.values())


# --- layout and SVG -------------------------------------------------------------------------------------------------

FILL = {"gpu": "#e3f0fb", "cpu": "#f2f2f2", "reserved": "#fff1c7", "vpc": "#eaf6ea", "subnet": "#f5fbf5",
        "fabric": "#dff3f1", "filesystem": "#f3e8fb", "bucket": "#f8eefb", "database": "#f8eefb",
        "control-plane": "#fde9e1", "team": "#eef0ff", "acceptance": "#f4f4f4", "slurm": "#e9f4ff", "ops": "#f7f7f7"}
BOX_FILL = {"network": "#fbfefb", "compute": "#fafcff", "storage": "#fdfaff", "control-plane": "#fffaf8",
            "teams": "#fbfbff", "operations": "#fcfcfc"}
FONT = "Helvetica,Arial,sans-serif"


def _label(node: Node) -> str:
    """An HTML-like Graphviz label: the title in bold, then one line per figure; findings in red."""
    rows = [f'<TR><TD ALIGN="LEFT"><B>{html.escape(node.title)}</B></TD></TR>']
    rows += [f'<TR><TD ALIGN="LEFT"><FONT POINT-SIZE="10">{html.escape(line)}</FONT></TD></TR>' for line in node.lines]
    if node.findings:
        text = f"policy: {len(node.findings)} finding(s): {', '.join(sorted(set(node.findings)))}"
        rows.append(f'<TR><TD ALIGN="LEFT"><FONT POINT-SIZE="10" COLOR="#b00020">{html.escape(text)}</FONT></TD></TR>')
    return f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="1">{"".join(rows)}</TABLE>>'


def dot_source(diagram: Diagram, title: str) -> Any:
    """The Graphviz graph (``graphviz.Digraph``) of the diagram: one cluster per box, sub-clusters per zone or Slurm
    cluster; every node and box carries its id, so the SVG keeps it."""
    import graphviz

    dot = graphviz.Digraph("cluster", graph_attr={
        "rankdir": "LR", "fontname": FONT, "fontsize": "12", "labelloc": "t", "label": title, "nodesep": "0.25",
        "ranksep": "0.6", "compound": "true", "newrank": "true", "id": "diagram-root", "bgcolor": "white"},
        node_attr={"shape": "box", "style": "rounded,filled", "fontname": FONT, "fontsize": "11",
                   "color": "#7a869a", "margin": "0.12,0.06"},
        edge_attr={"color": "#8895a7", "fontname": FONT, "fontsize": "9", "arrowsize": "0.6"})
    for box, box_title in BOXES.items():
        members = [n for n in diagram.nodes if n.box == box]
        if not members:
            continue
        with dot.subgraph(name=f"cluster_{_slug(box)}") as sub:
            sub.attr(label=box_title, id=box_id(box), style="rounded,filled", fillcolor=BOX_FILL[box],
                     color="#c3cad5", fontsize="13", fontname=FONT, margin="12")
            groups = sorted({n.group for n in members if n.group})
            for group in groups:
                with sub.subgraph(name=f"cluster_{_slug(box)}_{_slug(group)}") as inner:
                    inner.attr(label=group, id=f"{box_id(box)}-{_slug(group)}", style="rounded,dashed",
                               color="#a9b3c1", fillcolor="none", fontsize="10")
                    for n in members:
                        if n.group == group:
                            _add_node(inner, n)
            for n in members:
                if not n.group:
                    _add_node(sub, n)
    for e in diagram.edges:
        dot.edge(e.tail, e.head, label=e.label, style=e.style)
    return dot


def _add_node(graph: Any, node: Node) -> None:
    attrs = {"id": node.id, "class": f"kind-{node.kind}" + (" has-finding" if node.findings else ""),
             "fillcolor": FILL.get(node.kind, "#ffffff")}
    if node.kind == "reserved":
        attrs.update(peripheries="2", color="#b7791f", penwidth="1.4")
    if node.findings:
        attrs.update(color="#b00020", penwidth="2.2")
    graph.node(node.id, label=_label(node), **attrs)


def dot_available() -> bool:
    """Whether Graphviz's ``dot`` is on the PATH."""
    return shutil.which("dot") is not None


def render_svg(diagram: Diagram, title: str) -> str:
    """The diagram as an SVG element (no XML declaration or doctype), laid out by ``dot``;
    :class:`GraphvizMissingError` when ``dot`` is not installed."""
    if not dot_available():
        raise GraphvizMissingError(DOT_MISSING)
    import graphviz

    try:
        svg = dot_source(diagram, title).pipe(format="svg", encoding="utf-8")
    except graphviz.ExecutableNotFound:
        raise GraphvizMissingError(DOT_MISSING) from None
    # dot writes every hyphen as the character reference &#45;: the same character, kept plain so the page's text
    # and ids read as they are.
    return str(svg[svg.index("<svg"):]).replace("&#45;", "-")
