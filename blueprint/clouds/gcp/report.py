"""Google Cloud in the report: the VPC, its subnets and the GPU VPCs, GKE node pools with their GPUs, GPU NICs,
placement and reservations, Managed Lustre, Filestore, Parallelstore and the GCS bucket, the GKE control plane,
Slurm's Cloud SQL database and budgets; and the specific reservations on the timeline."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from blueprint.graph.model import GraphResource, ResourceGraph
from blueprint.report.model import Node, component_urns, gib, protection, slug
from blueprint.report.model import escape as _e

if TYPE_CHECKING:  # the spec's models load with a stack, not for a saved graph
    from components.spec import ClusterSpec

GKE_POOL = "gcp:container/nodePool:NodePool"
GKE = "gcp:container/cluster:Cluster"
GCP_NETWORK = "gcp:compute/network:Network"
GCP_SUBNET = "gcp:compute/subnetwork:Subnetwork"
GCS = "gcp:storage/bucket:Bucket"
GCP_LUSTRE = "gcp:lustre/instance:Instance"
CLOUD_SQL = "gcp:sql/databaseInstance:DatabaseInstance"


def planes(graph: ResourceGraph, spec: ClusterSpec | None) -> list[Node]:
    """Network, compute, storage and control plane, in that order."""
    return _network(graph) + _compute(graph) + _storage(graph, spec) + _control_plane(graph)


def node_group_label(res: GraphResource) -> str | None:
    """The ``gpu-cluster/node-group`` label of a GKE node pool (None for any other resource)."""
    if res.type != GKE_POOL:
        return None
    labels = (res.inputs.get("nodeConfig") or {}).get("labels")
    return str(labels["gpu-cluster/node-group"]) if isinstance(labels, dict) and "gpu-cluster/node-group" in labels \
        else None


def databases(graph: ResourceGraph) -> list[Node]:
    """Slurm's accounting database, drawn with the storage."""
    return [Node(f"n-{slug(db.name)}", "storage", "Slurm accounting DB", [
        f"Cloud SQL {db.inputs.get('databaseVersion')}", protection(db)], "database", {db.urn})
        for db in graph.of_type(CLOUD_SQL)]


def cost_plane(graph: ResourceGraph) -> list[str]:
    """The budgets."""
    return [f"{len(graph.of_type('gcp:billing/budget:Budget'))} budget(s)"]


def timeline(graph: ResourceGraph, spec: ClusterSpec, now: datetime) -> list[str]:
    """The pools that consume a specific reservation: no window, billed while the reservation exists."""
    from components.gcp.figures import pool_figures

    return [f"<p>{_e(pool.name)} consumes the specific reservation(s) {_e(', '.join(pool.reservations))}: no window; "
            "a reservation is billed from its creation until it is deleted, nodes or not.</p>"
            for pool in pool_figures(graph) if pool.reservations]


def _network(graph: ResourceGraph) -> list[Node]:
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
        nodes.append(Node(f"n-{slug(vpc.name)}", "network", f"VPC {vpc.inputs.get('name')}", lines, "vpc",
                          {vpc.urn}))
    for sub in subnets:
        if sub in gpu_subnets:
            continue
        ranges = [f"{r.get('rangeName')} {r.get('ipCidrRange')}" for r in sub.inputs.get("secondaryIpRanges") or []]
        nodes.append(Node(f"n-{slug(sub.name)}", "network", f"subnet {sub.inputs.get('name')}",
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


def _compute(graph: ResourceGraph) -> list[Node]:
    from components.gcp.figures import pool_figures

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
        nodes.append(Node(f"n-{slug(res.name)}", "compute", f.name, lines, kind, {res.urn},
                          component_urns(graph, res)))
    return nodes


def _storage(graph: ResourceGraph, spec: ClusterSpec | None) -> list[Node]:
    nodes = []
    fs_spec = spec.gcp.storage.filesystem if spec is not None and spec.gcp is not None else None
    if fs_spec is not None and fs_spec.existing is not None:  # mounted, not registered: drawn from the spec
        ex, tier = fs_spec.existing, fs_spec.per_unit_storage_throughput or 0
        nodes.append(Node(f"n-lustre-{slug(ex.name)}", "storage", ex.name, [
            f"existing Managed Lustre in {ex.location}", f"{fs_spec.capacity_gib:,} GiB x {tier} MB/s/TiB",
            f"{ex.ip}@tcp:/{ex.filesystem}", "not managed by this stack"], "filesystem", set()))
    for fs in graph.of_type(GCP_LUSTRE):
        cap, tier = gib(fs.inputs.get("capacityGib")), gib(fs.inputs.get("perUnitStorageThroughput"))
        nodes.append(Node(f"n-{slug(fs.name)}", "storage", str(fs.inputs.get("instanceId") or fs.name), [
            f"Managed Lustre in {fs.inputs.get('location')}", f"{cap:,} GiB x {tier} MB/s/TiB",
            f"= {cap / 1024 * tier / 1000:,.1f} GB/s", protection(fs),
            "CMEK" if fs.inputs.get("kmsKey") else "Google-managed keys"], "filesystem", {fs.urn}))
    for fs in graph.of_type("gcp:filestore/instance:Instance"):
        nodes.append(Node(f"n-{slug(fs.name)}", "storage", str(fs.inputs.get("name") or fs.name),
                          [f"Filestore {fs.inputs.get('tier')}", protection(fs)], "filesystem", {fs.urn}))
    for fs in graph.of_type("gcp:parallelstore/instance:Instance"):
        nodes.append(Node(f"n-{slug(fs.name)}", "storage", str(fs.inputs.get("instanceId") or fs.name),
                          [f"Parallelstore {fs.inputs.get('capacityGib')} GiB", protection(fs)], "filesystem",
                          {fs.urn}))
    for b in graph.of_type(GCS):
        soft = gib((b.inputs.get("softDeletePolicy") or {}).get("retentionDurationSeconds", 0)) // 86400
        nodes.append(Node(f"n-{slug(b.name)}", "storage", str(b.inputs.get("name") or b.name), [
            "GCS bucket", f"versioning {'on' if (b.inputs.get('versioning') or {}).get('enabled') else 'OFF'}",
            f"soft delete {soft} days", "CMEK" if (b.inputs.get("encryption") or {}).get("defaultKmsKeyName")
            else "Google-managed keys", protection(b)], "bucket", {b.urn}))
    return nodes


def _control_plane(graph: ResourceGraph) -> list[Node]:
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
                  protection(c)]
        nodes.append(Node(f"n-{slug(c.name)}", "control-plane", f"GKE {c.inputs.get('name')}", lines,
                          "control-plane", {c.urn}))
    return nodes


