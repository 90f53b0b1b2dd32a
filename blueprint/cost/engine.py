"""Price a ResourceGraph: every cost line is exactly quantity x unit price, from the price catalog.

The engine reads only the graph (offline, ``pulumi preview --json`` or ``pulumi stack export``), so users of
the real CLI get the same figures. It prices what the graph fixes: node-group instance hours (at desired
and at max size), their root volumes, FSx for Lustre capacity, the EKS control plane, NAT gateway hours and
KMS keys. What depends on usage (bucket GB, requests, NAT GB, log volume) is listed as not priced rather
than guessed. A price that was never read leaves its line unpriced (``monthly_usd`` null), never zero.

GCP graphs (``pulumi:providers:gcp``) are priced from ``prices_gcp.yaml`` the same way: GKE node pools by
machine type and provisioning model (on-demand, Spot, flex-start, specific reservation), their boot disks and
Local SSD, the GKE cluster fee, Managed Lustre / Filestore / Parallelstore capacity, Cloud NAT, KMS key
versions and budgets; GCS buckets and NAT traffic from the usage file.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from blueprint.cost.prices import Price, load_aws_prices, load_gcp_prices
from blueprint.cost.usage import USAGE_FIELDS, Usage
from blueprint.graph.model import GraphResource, ResourceGraph

HOURS_PER_MONTH = 730  # the convention of AWS's pricing calculator and Infracost: 8,760 h / 12

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
FSX_LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
NAT_GATEWAY = "aws:ec2/natGateway:NatGateway"
KMS_KEY = "aws:kms/key:Key"
RDS_INSTANCE = "aws:rds/instance:Instance"
BUDGET = "aws:budgets/budget:Budget"
USAGE_PRICED = {  # resource type -> what its cost depends on; not priced without a usage estimate
    "aws:s3/bucketV2:BucketV2": "stored GB and requests",
    "aws:s3/bucket:Bucket": "stored GB and requests",
    "aws:cloudwatch/logGroup:LogGroup": "GB ingested and stored",
    NAT_GATEWAY: "GB processed",
}
_MARKET = {"ON_DEMAND": "ec2_on_demand", "SPOT": "ec2_spot", "CAPACITY_BLOCK": "ec2_capacity_block"}

GKE_NODE_POOL = "gcp:container/nodePool:NodePool"
GKE_CLUSTER = "gcp:container/cluster:Cluster"
GCP_LUSTRE = "gcp:lustre/instance:Instance"
GCP_FILESTORE = "gcp:filestore/instance:Instance"
GCP_PARALLELSTORE = "gcp:parallelstore/instance:Instance"
GCP_NAT = "gcp:compute/routerNat:RouterNat"
GCP_KMS_KEY = "gcp:kms/cryptoKey:CryptoKey"
GCP_BUDGET = "gcp:billing/budget:Budget"
GCS_BUCKET = "gcp:storage/bucket:Bucket"
GCP_USAGE_PRICED = {
    GCS_BUCKET: "stored GiB and operations",
    GCP_NAT: "GiB processed",
}
GKE_OBSERVABILITY = "Cloud Logging GiB ingested and Managed Prometheus samples (no usage quantity or price read)"
LOCAL_SSD_GIB = 375  # every Local SSD disk is 375 GiB (Compute Engine "About Local SSD disks")
NAT_PORTS_PER_IP = 64512  # ports 1024-65535 of one NAT IP address (Cloud NAT "Ports and addresses")
NAT_VM_CAP = 32  # Cloud NAT bills per VM up to 32 VMs, then a flat gateway hour (prices_gcp.yaml cloud_nat)
RESERVATION_BILLING = ("cloud.google.com/batch/docs/create-run-job-reservation: 'A reservation for a VM incurs the "
                       "costs of that VM from when you create and until you delete the reservation'")


@dataclass(frozen=True)
class CostLine:
    """One priced quantity: ``monthly_usd == quantity * unit_price_usd`` (null when the price is unknown)."""

    name: str
    quantity: float
    unit: str
    unit_price_usd: float | None
    price_status: str
    price_key: str
    price_source: str
    price_as_of: str
    one_time: bool = False  # prepaid once (a Capacity Block's window), not a monthly charge

    @property
    def cost_usd(self) -> float | None:
        """``quantity * unit_price_usd``; null when the price is unknown."""
        return None if self.unit_price_usd is None else self.quantity * self.unit_price_usd

    @property
    def monthly_usd(self) -> float | None:
        """The line's cost when it recurs monthly; 0 for a one-time line (see ``cost_usd``)."""
        return 0.0 if self.one_time else self.cost_usd

    @property
    def stale(self) -> bool:
        return self.price_status == "stale"


@dataclass(frozen=True)
class ResourceCost:
    """The cost lines of one resource, at desired size and (for node groups) at max size."""

    urn: str
    type: str
    name: str
    plane: str
    team: str
    components: tuple[CostLine, ...]
    components_at_max: tuple[CostLine, ...]
    note: str = ""
    team_shares: tuple[tuple[str, float], ...] = ()  # GPU node groups: each team's nominal Kueue quota share
    # Node groups and pools: (desired, max) nodes, GPUs per node, and whether the capacity is paid whether nodes
    # run or not (a Capacity Block or reservation): the unit cost prices GPUs at the capacity paid for.
    nodes: tuple[int, int] | None = None
    gpus_per_node: int = 0
    paid_regardless: bool = False
    min_nodes: int = 0  # what the group never scales below

    @property
    def monthly_usd(self) -> float:
        """Known monthly lines at desired size (see ``priced_fully``)."""
        return sum(c.monthly_usd or 0.0 for c in self.components)

    @property
    def monthly_usd_at_max(self) -> float:
        return sum(c.monthly_usd or 0.0 for c in self.components_at_max)

    @property
    def one_time_usd(self) -> float:
        """Prepaid once (Capacity Blocks), the same at any size."""
        return sum(c.cost_usd or 0.0 for c in self.components if c.one_time)

    @property
    def priced_fully(self) -> bool:
        """Every line has a price; otherwise the figures are lower bounds."""
        return all(c.unit_price_usd is not None for c in (*self.components, *self.components_at_max))

    def signature(self) -> tuple[tuple[str, float, str], ...]:
        """What the resource buys, priced or not: a change here is a cost change even without a price."""
        return tuple((c.name, c.quantity, c.price_key) for c in (*self.components, *self.components_at_max))


@dataclass(frozen=True)
class CostReport:
    """A stack's monthly cost, what could not be priced and why, and which prices may be stale."""

    stack: str
    region: str
    resources: tuple[ResourceCost, ...]
    usage_not_priced: tuple[tuple[str, str], ...]  # (urn, what it depends on)
    notes: tuple[str, ...] = field(default=())
    currency: str = "USD"

    @property
    def total_monthly_usd(self) -> float:
        return sum(r.monthly_usd for r in self.resources)

    @property
    def total_monthly_usd_at_max(self) -> float:
        return sum(r.monthly_usd_at_max for r in self.resources)

    @property
    def total_one_time_usd(self) -> float:
        return sum(r.one_time_usd for r in self.resources)

    def by_team(self, one_time: bool = False, at_max: bool = False) -> dict[str, float]:
        """Monthly (or one-time) cost per team, at desired size (or at max size): GPU node groups split by nominal
        Kueue GPU quota, the rest by ``team`` tag."""
        out: dict[str, float] = {}
        for res in self.resources:
            value = res.one_time_usd if one_time else res.monthly_usd_at_max if at_max else res.monthly_usd
            for team, share in res.team_shares or ((res.team or "(untagged)", 1.0),):
                out[team] = out.get(team, 0.0) + share * value
        return dict(sorted(out.items()))

    def lines(self) -> Iterable[CostLine]:
        for res in self.resources:
            yield from res.components
            yield from res.components_at_max

    @property
    def unpriced(self) -> list[str]:
        """Price keys with no known figure that a line of this stack needed."""
        return sorted({c.price_key for c in self.lines() if c.unit_price_usd is None})

    @property
    def stale_prices(self) -> list[str]:
        return sorted({c.price_key for c in self.lines() if c.stale})


def _line(name: str, quantity: float, prices: dict[str, Price], key: str, unit: str) -> CostLine:
    price = prices.get(key)
    if price is None:
        return CostLine(name, quantity, unit, None, "unconfirmed", key, "", "")
    return CostLine(name, quantity, price.unit, price.usd, price.status, key, price.source, price.as_of)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _dict(value: Any) -> dict[str, Any]:
    """A mapping input, or an empty one: the engine prices what it can read and never crashes on the rest."""
    return value if isinstance(value, dict) else {}


def _launch_template(graph: ResourceGraph, group: GraphResource) -> dict[str, Any]:
    """The launch template created beside a node group (the same component), or an empty mapping."""
    if group.parent is None:
        return {}
    for sibling in graph.children(group.parent):
        if sibling.type == LAUNCH_TEMPLATE:
            return sibling.inputs
    return {}


def _block_window(tags: Any) -> tuple[datetime, datetime, int] | None:
    """A Capacity Block's window and instance count, from the tags the program puts on its node group."""
    if not isinstance(tags, dict):
        return None
    try:
        start_text, end_text = str(tags["capacity-block-window"]).split("/")
        start, end = datetime.fromisoformat(start_text), datetime.fromisoformat(end_text)
        instances = int(str(tags["capacity-block-instances"]))
    except (KeyError, ValueError):
        return None
    if start.tzinfo is None or end.tzinfo is None:
        return None  # the program writes UTC with Z; a window without a zone is not ours
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    return (start, end, instances) if end > start and instances > 0 else None


def _volume_gb(template: dict[str, Any]) -> dict[str, int]:
    """GB of EBS volumes per node by volume type (gp3 when the template leaves it to the default)."""
    mappings = template.get("blockDeviceMappings")
    ebs = [_dict(m.get("ebs")) for m in (mappings if isinstance(mappings, list) else []) if isinstance(m, dict)]
    out: dict[str, int] = {}
    for e in ebs:
        kind = str(e.get("volumeType") or "gp3")
        out[kind] = out.get(kind, 0) + _int(e.get("volumeSize"))
    return {k: v for k, v in sorted(out.items()) if v}


def _root_volumes(count: int, volume_gb: dict[str, int], prices: dict[str, Price],
                  months: float = 1.0) -> tuple[CostLine, ...]:
    """The nodes' EBS volumes for ``months`` of a month; a type without a price read is listed unpriced."""
    return tuple(_line(f"node volumes ({kind})" + (f" for {months * HOURS_PER_MONTH:g} h" if months < 1 else ""),
                       count * gb * months, prices, f"ebs.{kind}_storage", "GB-month")
                 for kind, gb in volume_gb.items())


def _node_group(graph: ResourceGraph, res: GraphResource, prices: dict[str, Price]) -> tuple[
        tuple[CostLine, ...], tuple[CostLine, ...], str]:
    """A node group's lines at desired and at max size, and a note on how it was priced."""
    inputs = res.inputs
    template = _launch_template(graph, res)
    listed = inputs.get("instanceTypes")
    types = [str(t) for t in listed] if isinstance(listed, list) and listed else [str(template.get("instanceType")
                                                                                       or "unknown-type")]
    instance_type = types[0]
    capacity = str(inputs.get("capacityType") or "ON_DEMAND")
    scaling = _dict(inputs.get("scalingConfig"))
    desired, maximum = _int(scaling.get("desiredSize")), _int(scaling.get("maxSize"))
    market = _MARKET.get(capacity, "ec2_on_demand")
    root_gb = _volume_gb(template)
    block = _block_window(inputs.get("tags")) if capacity == "CAPACITY_BLOCK" else None
    if block is not None:
        # A Capacity Block is prepaid for its whole window, nodes or not: one charge, the same at any size.
        start, end, instances = block
        hours = (end - start).total_seconds() / 3600
        reach = f"the group reaches {maximum} of them at max size" if maximum < instances else "all used at max size"
        block_line = _line(f"{instance_type} capacity block {start:%Y-%m-%d %H:%M}-{end:%Y-%m-%d %H:%M} UTC, "
                           f"{instances} instances x {hours:g} h (prepaid once)", instances * hours, prices,
                           f"{market}.{instance_type}", "hour")
        charge = (replace(block_line, one_time=True),)
        note = (f"capacity block of {instances} instances ({reach}); prepaid once for the window, kept out of the "
                "monthly totals")
        # Nodes (and their volumes) exist only inside the window: at most its hours in a month.
        in_window = min(hours, HOURS_PER_MONTH) / HOURS_PER_MONTH
        return (charge + _root_volumes(desired, root_gb, prices, in_window),
                charge + _root_volumes(maximum, root_gb, prices, in_window), note)
    note = f"priced as {instance_type}, the first of {len(types)} instance types" if len(types) > 1 else ""
    reserved = capacity == "CAPACITY_BLOCK" or bool(template.get("capacityReservationSpecification"))
    if reserved:
        # A reservation is paid whether nodes run or not; the reserved count is not in the graph, so the
        # group's reach (maxSize never exceeds it) is priced at both sizes. Volumes exist only on running nodes.
        note = f"reserved capacity: paid whether nodes run or not, priced at maxSize ({maximum}) for a full month"
        if capacity == "CAPACITY_BLOCK":
            note = (f"Capacity Block window unknown (no valid capacity-block-window tag): priced as if reserved "
                    f"for a full month at maxSize ({maximum}), an upper bound")

    def lines(count: int) -> tuple[CostLine, ...]:
        paid = maximum if reserved else count
        hours = _line(f"{instance_type} instance hours ({capacity.lower()})", paid * HOURS_PER_MONTH, prices,
                      f"{market}.{instance_type}", "hour")
        return (hours, *_root_volumes(count, root_gb, prices))

    return lines(desired), lines(maximum), note


def _fsx(res: GraphResource, prices: dict[str, Price]) -> tuple[CostLine, ...]:
    inputs = res.inputs
    deployment = str(inputs.get("deploymentType") or "")
    tier = _int(inputs.get("perUnitStorageThroughput"))
    key = deployment if deployment.startswith("SCRATCH") else f"{deployment}_{tier}"
    return (_line(f"{key} storage", float(_int(inputs.get("storageCapacity"))), prices, f"fsx_lustre.{key}",
                  "GB-month"),)


GPU_RESOURCE = "nvidia.com/gpu"


def _quantity(value: Any) -> float:
    try:
        return float(str(value))
    except ValueError:
        return 0.0


def quota_shares(graph: ResourceGraph) -> dict[str, tuple[tuple[str, float], ...]]:
    """Per node group (its ``gpu-cluster/node-group`` label), each ClusterQueue's share of the nominal GPU quota
    on the flavor that selects it. Nominal, not measured use: a team that borrows pays nothing here."""
    flavor_group: dict[str, str] = {}
    for res in graph.resources:
        if res.type.startswith("kubernetes:kueue.x-k8s.io/") and res.type.endswith(":ResourceFlavor"):
            labels = _dict(_dict(res.inputs.get("spec")).get("nodeLabels"))
            name = _dict(res.inputs.get("metadata")).get("name")
            if isinstance(labels, dict) and labels.get("gpu-cluster/node-group") and name:
                flavor_group[str(name)] = str(labels["gpu-cluster/node-group"])
    quota: dict[str, dict[str, float]] = {}
    for res in graph.resources:
        if not (res.type.startswith("kubernetes:kueue.x-k8s.io/") and res.type.endswith(":ClusterQueue")):
            continue
        meta = _dict(res.inputs.get("metadata"))
        if _dict(meta.get("labels")).get("gpu-cluster/acceptance") == "true":
            continue  # the acceptance gate's queue runs on purpose, on idle capacity: no team pays through it
        team = str(meta.get("name") or res.name)
        groups = _dict(res.inputs.get("spec")).get("resourceGroups")
        for group in groups if isinstance(groups, list) else []:
            flavors = _dict(group).get("flavors")
            for flavor in map(_dict, flavors if isinstance(flavors, list) else []):
                node_group = flavor_group.get(str(flavor.get("name")))
                items = flavor.get("resources")
                for item in map(_dict, items if isinstance(items, list) else []):
                    if node_group and item.get("name") == GPU_RESOURCE:
                        by_team = quota.setdefault(node_group, {})
                        by_team[team] = by_team.get(team, 0.0) + _quantity(item.get("nominalQuota"))
    shares: dict[str, tuple[tuple[str, float], ...]] = {}
    for node_group, by_team in quota.items():
        total = sum(by_team.values())
        if total > 0:
            shares[node_group] = tuple((team, q / total) for team, q in sorted(by_team.items()) if q > 0)
    return shares


def _cloud(graph: ResourceGraph) -> str:
    """"gcp" when the graph has a GCP provider or GCP resources, else "aws"."""
    for res in graph.resources:
        if res.type == "pulumi:providers:gcp" or res.type.startswith("gcp:"):
            return "gcp"
    return "aws"


def _number(value: Any) -> float:
    """A number input, also as the string GCP providers send for int64 fields ("18000"); 0 when unreadable."""
    if isinstance(value, bool):
        return 0.0
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return 0.0


@dataclass(frozen=True)
class GkePoolSize:
    """A GKE node pool's node counts and how they were read."""

    desired: int
    maximum: int
    note: str = ""
    minimum: int = 0


def gke_pool_size(inputs: dict[str, Any]) -> GkePoolSize:
    """Nodes at desired and max size. ``nodeCount`` and ``initialNodeCount`` are per zone (GKE multiplies them by
    the pool's zones); ``autoscaling.totalMin/MaxNodeCount`` are totals, ``min/maxNodeCount`` per zone."""
    locations = inputs.get("nodeLocations")
    zones = len(locations) if isinstance(locations, list) and locations else 1
    note = ""
    if not (isinstance(locations, list) and locations) and str(inputs.get("location") or "").count("-") == 1:
        note = ("nodeLocations not set on a regional pool: priced as one zone, but its node counts apply in every "
                "zone of the cluster (usually 3)")
    scaling = _dict(inputs.get("autoscaling"))
    if scaling:
        if "totalMaxNodeCount" in scaling:
            maximum = _int(scaling.get("totalMaxNodeCount"))
        else:
            maximum = _int(scaling.get("maxNodeCount")) * zones
        desired = min(_int(inputs.get("initialNodeCount")) * zones, maximum)
        minimum = _int(scaling.get("totalMinNodeCount")) if "totalMinNodeCount" in scaling else \
            _int(scaling.get("minNodeCount")) * zones
        return GkePoolSize(desired, maximum, note, min(minimum, maximum))
    count = _int(inputs.get("nodeCount")) * zones
    return GkePoolSize(count, count, note, count)


def _local_ssd_count(config: dict[str, Any]) -> int:
    for key in ("ephemeralStorageLocalSsdConfig", "localNvmeSsdBlockConfig"):
        count = _int(_dict(config.get(key)).get("localSsdCount"))
        if count:
            return count
    return _int(config.get("localSsdCount"))


def _gke_pool(res: GraphResource, prices: dict[str, Price]) -> tuple[tuple[CostLine, ...], tuple[CostLine, ...], str]:
    """A GKE node pool's lines at desired and at max size, and a note on how it was priced."""
    config = _dict(res.inputs.get("nodeConfig"))
    machine = str(config.get("machineType") or "e2-medium")  # GKE's default machine type
    size = gke_pool_size(res.inputs)
    affinity = _dict(config.get("reservationAffinity"))
    reserved = affinity.get("consumeReservationType") == "SPECIFIC_RESERVATION"
    notes = [size.note] if size.note else []
    if config.get("flexStart"):
        section, model = "compute_flex_start", "flex-start"
        notes.append("flex-start (DWS): billed only while nodes run, at a discounted rate Google publishes per SKU; "
                     "no figure read, so the VM hours are unpriced (not zero, not on-demand)")
    elif config.get("spot") or config.get("preemptible"):
        section, model = "compute_spot", "spot" if config.get("spot") else "preemptible"
        notes.append("Spot prices change up to once a day: the figure is indicative (stale)")
    else:
        section, model = "compute_on_demand", "on-demand"
    if reserved and section == "compute_on_demand":
        model = "specific reservation"
        values = affinity.get("values")
        names = ", ".join(map(str, values)) if isinstance(values, list) else "?"
        notes.append(f"specific reservation {names}: billed at the on-demand rate whether VMs run or not "
                     f"({RESERVATION_BILLING}); priced at the pool's reach ({size.maximum} nodes) for a full month "
                     "at both sizes (the reservation's own count is not in the graph and may be larger). A "
                     "committed-use discount attached to the reservation is not in the graph and not applied")
    else:
        reserved = False
    disk_type = str(config.get("diskType") or "pd-balanced")  # GKE's defaults: pd-balanced, 100 GB
    disk_gb = _int(config.get("diskSizeGb")) or 100
    ssd = _local_ssd_count(config)
    machine_price = prices.get(f"{section}.{machine}")
    ssd_included = machine_price is not None and "local-ssd" in machine_price.includes
    if ssd and ssd_included:
        notes.append(f"the {machine} price includes its bundled Local SSD ({ssd} x {LOCAL_SSD_GIB} GiB)")

    def lines(count: int) -> tuple[CostLine, ...]:
        paid = size.maximum if reserved else count
        out = [_line(f"{machine} VM hours ({model})", paid * HOURS_PER_MONTH, prices, f"{section}.{machine}", "hour"),
               _line(f"boot disks ({disk_type}, {disk_gb} GiB per node)", count * disk_gb, prices,
                     f"persistent_disk.{disk_type}", "GB-month")]
        if ssd and not ssd_included:  # Local SSD is held (and billed) with the VM, reserved or running
            out.append(_line(f"Local SSD ({ssd} x {LOCAL_SSD_GIB} GiB per node)", paid * ssd * LOCAL_SSD_GIB, prices,
                             "local_ssd.capacity", "GB-month"))
        return tuple(out)

    return lines(size.desired), lines(size.maximum), "; ".join(notes)


def _gke_cluster(res: GraphResource, prices: dict[str, Price]) -> tuple[tuple[CostLine, ...], str]:
    location = str(res.inputs.get("location") or "")
    zonal = location.count("-") >= 2
    note = ("zonal cluster: the GKE free tier ($74.40 a month per billing account) covers one zonal or Autopilot "
            "cluster's fee; not subtracted here, since it is per billing account, not per stack" if zonal else
            "regional cluster: the GKE free tier credit does not apply to it")
    return (_line("cluster management fee", HOURS_PER_MONTH, prices, "gke.cluster_fee", "hour"),), note


def _gcp_filesystem(res: GraphResource, prices: dict[str, Price]) -> tuple[CostLine, ...]:
    inputs = res.inputs
    if res.type == GCP_LUSTRE:
        tier = f"tier-{_number(inputs.get('perUnitStorageThroughput')):g}"
        return (_line(f"Managed Lustre {tier} ({tier[5:]} MB/s per TiB) capacity", _number(inputs.get("capacityGib")),
                      prices, f"managed_lustre.{tier}", "GB-month"),)
    if res.type == GCP_FILESTORE:
        tier = str(inputs.get("tier") or "BASIC_HDD").lower()
        shares = inputs.get("fileShares")
        share = _dict(shares[0] if isinstance(shares, list) and shares else shares)
        return (_line(f"Filestore {tier} capacity", _number(share.get("capacityGb")), prices, f"filestore.{tier}",
                      "GB-month"),)
    return (_line("Parallelstore capacity", _number(inputs.get("capacityGib")), prices, "parallelstore.capacity",
                  "GB-month"),)


def _nat_lines(res: GraphResource, vms: int, prices: dict[str, Price]) -> tuple[CostLine, ...]:
    """Cloud NAT at ``vms`` nodes: $0.0014 per VM-hour up to 32 VMs, the flat gateway hour above; its IPs."""
    if vms > NAT_VM_CAP:
        gateway = _line(f"NAT gateway hours ({vms} VMs, above {NAT_VM_CAP}: flat rate)", HOURS_PER_MONTH, prices,
                        "cloud_nat.gateway_hour", "hour")
    else:
        gateway = _line(f"NAT gateway VM-hours ({vms} VMs)", vms * HOURS_PER_MONTH, prices,
                        "cloud_nat.gateway_vm_hour", "hour")
    inputs = res.inputs
    if inputs.get("natIpAllocateOption") == "MANUAL_ONLY":
        listed = inputs.get("natIps")
        ips = len(listed) if isinstance(listed, list) else 0
    else:  # AUTO_ONLY: enough addresses for every VM's minimum ports (more if dynamic allocation grows them)
        ports = _int(inputs.get("minPortsPerVm")) or 64
        ips = -(-vms * ports // NAT_PORTS_PER_IP)
    addresses = f"{ips} address" + ("" if ips == 1 else "es")
    return (gateway, _line(f"NAT external IP address hours ({addresses})", ips * HOURS_PER_MONTH, prices,
                           "cloud_nat.external_ip_hour", "hour"))


def _nat_note(res: GraphResource) -> str:
    note = "every node counts as a VM using the gateway (private nodes)"
    if res.inputs.get("natIpAllocateOption") != "MANUAL_ONLY":
        note += ("; auto-allocated IPs priced for each node's minPortsPerVm, a lower bound: dynamic port allocation "
                 "(up to maxPortsPerVm) can add addresses")
    return note


def _kms_key(res: GraphResource, prices: dict[str, Price]) -> tuple[tuple[CostLine, ...], str]:
    level = str(_dict(res.inputs.get("versionTemplate")).get("protectionLevel") or "SOFTWARE")
    key = "kms.key_version" if level == "SOFTWARE" else f"kms.key_version_{level.lower()}"
    note = ""
    period = str(res.inputs.get("rotationPeriod") or "")
    if period.endswith("s") and _number(period[:-1]) > 0:
        days = _number(period[:-1]) / 86400
        note = (f"priced at 1 active version; rotation every {days:g} days adds a billed version each time (old "
                f"versions stay enabled until destroyed): about {1 + int(365 // days)} after a year")
    return (_line(f"active key version ({level})", 1, prices, key, "key-month"),), note


_GCS_CLASSES = {"STANDARD": "standard", "NEARLINE": "nearline", "COLDLINE": "coldline", "ARCHIVE": "archive"}


def _gcs_keys(res: GraphResource) -> dict[str, str]:
    """The price keys of a bucket's usage: its storage class and location type (regional, dual- or multi-region)."""
    cls = _GCS_CLASSES.get(str(res.inputs.get("storageClass") or "STANDARD").upper(), "standard")
    location = str(res.inputs.get("location") or "")
    if "-" in location:  # a region: US-CENTRAL1
        kind = "regional"
    elif _dict(res.inputs.get("customPlacementConfig")) or any(ch.isdigit() for ch in location):
        kind = "dual_region"  # configurable, or predefined (NAM4, EUR4, ASIA1)
    else:
        kind = "multi_region"  # US, EU, ASIA
    ops = "" if cls == "standard" else f"{cls}_"
    return {"gcs.standard_regional_storage": f"gcs.{cls}_{kind}_storage",
            "gcs.class_a_operations": f"gcs.{ops}class_a_operations",
            "gcs.class_b_operations": f"gcs.{ops}class_b_operations"}


def _gcs_note(res: GraphResource) -> str:
    parts = []
    if _dict(res.inputs.get("versioning")).get("enabled"):
        parts.append("versioning on: noncurrent versions are billed as stored data until deleted")
    soft = _number(_dict(res.inputs.get("softDeletePolicy")).get("retentionDurationSeconds"))
    if soft:
        parts.append(f"soft delete keeps deleted objects (billed) for {soft / 86400:g} days")
    return "; ".join(parts) + ("; include them in storageGB" if parts else "")


def _gcp_team(graph: ResourceGraph, res: GraphResource) -> str:
    """The ``team`` label: the resource's labels (node pools: nodeConfig.resourceLabels), else the provider's
    ``defaultLabels`` (which GCP applies to every labelled resource)."""
    for labels in (res.inputs.get("labels"), res.inputs.get("resourceLabels"),
                   _dict(res.inputs.get("nodeConfig")).get("resourceLabels")):
        if isinstance(labels, dict) and labels.get("team"):
            return str(labels["team"])
    prov = graph.get(res.provider_urn) if res.provider_urn else None
    defaults = prov.inputs.get("defaultLabels") if prov else None
    if isinstance(defaults, str):
        try:
            defaults = json.loads(defaults)
        except ValueError:
            defaults = None
    return str(defaults.get("team", "")) if isinstance(defaults, dict) else ""


def _gke_nodes(res: GraphResource) -> tuple[tuple[int, int], int, bool]:
    """A pool's (desired, max) nodes, GPUs per node (the machine catalog) and whether a specific reservation is paid
    whether nodes run or not."""
    from components.catalog.gcp_machines import load_gcp_catalog

    size = gke_pool_size(res.inputs)
    config = _dict(res.inputs.get("nodeConfig"))
    facts = load_gcp_catalog().get(str(config.get("machineType") or ""))
    paid = _dict(config.get("reservationAffinity")).get("consumeReservationType") == "SPECIFIC_RESERVATION"
    return (size.desired, size.maximum), facts.gpu_count if facts else 0, paid


def _price_gcp(graph: ResourceGraph, prices: dict[str, Price], usage: Usage,
               shares: dict[str, tuple[tuple[str, float], ...]]) -> tuple[list[ResourceCost], list[tuple[str, str]]]:
    """The cost of every priced GCP resource of ``graph`` and the usage-priced ones not estimated."""
    costs: list[ResourceCost] = []
    not_estimated: list[tuple[str, str]] = []
    sizes = [gke_pool_size(r.inputs) for r in graph.resources if r.type == GKE_NODE_POOL]
    vms_now, vms_max = sum(s.desired for s in sizes), sum(s.maximum for s in sizes)
    for res in sorted(graph.resources, key=lambda r: r.urn):
        note, label = "", None
        nodes: tuple[int, int] | None = None
        gpus, paid = 0, False
        if res.type == GKE_NODE_POOL:
            now, at_max, note = _gke_pool(res, prices)
            label = _dict(_dict(res.inputs.get("nodeConfig")).get("labels")).get("gpu-cluster/node-group")
            nodes, gpus, paid = _gke_nodes(res)
        elif res.type == GKE_CLUSTER:
            lines, note = _gke_cluster(res, prices)
            now = at_max = lines
            if res.inputs.get("loggingConfig") or res.inputs.get("monitoringConfig"):
                not_estimated.append((res.urn, GKE_OBSERVABILITY))
        elif res.type in (GCP_LUSTRE, GCP_FILESTORE, GCP_PARALLELSTORE):
            now = at_max = _gcp_filesystem(res, prices)
        elif res.type == GCP_NAT:
            traffic = _usage_lines(res, usage, prices)
            now, at_max = (*_nat_lines(res, vms_now, prices), *traffic), (*_nat_lines(res, vms_max, prices), *traffic)
            note = _nat_note(res)
        elif res.type == GCP_KMS_KEY:
            lines, note = _kms_key(res, prices)
            now = at_max = lines
        elif res.type == GCP_BUDGET:
            now = at_max = (_line("budget days", HOURS_PER_MONTH / 24, prices, "billing.budget", "budget-day"),)
        elif res.type == GCS_BUCKET:
            if res.name not in usage:
                not_estimated.append((res.urn, GCP_USAGE_PRICED[res.type]))
                continue
            now = at_max = _usage_lines(res, usage, prices, _gcs_keys(res))
            note = _gcs_note(res)
        else:
            continue
        if res.type in GCP_USAGE_PRICED and res.type != GCS_BUCKET and res.name not in usage:
            not_estimated.append((res.urn, GCP_USAGE_PRICED[res.type]))
        costs.append(ResourceCost(urn=res.urn, type=res.type, name=res.name, plane=graph.plane_of(res),
                                  team=_gcp_team(graph, res), components=now, components_at_max=at_max, note=note,
                                  team_shares=shares.get(str(label), ()) if label else (), nodes=nodes,
                                  gpus_per_node=gpus, paid_regardless=paid,
                                  min_nodes=gke_pool_size(res.inputs).minimum if res.type == GKE_NODE_POOL else 0))
    return costs, not_estimated


def _region(graph: ResourceGraph) -> str:
    """The stack's region: that of the cloud provider most resources use (a second provider, such as the billing
    one in us-east-1, serves a few), ties broken by URN; registration order changes from run to run."""
    providers = [r for r in graph.resources if r.type in ("pulumi:providers:aws", "pulumi:providers:gcp")
                 and isinstance(r.inputs.get("region"), str)]
    if not providers:
        return ""
    users = Counter(r.provider_urn for r in graph.resources if r.provider_urn)
    return str(min(providers, key=lambda p: (-users[p.urn], p.urn)).inputs["region"])


def _usage_lines(res: GraphResource, usage: Usage, prices: dict[str, Price],
                 keys: dict[str, str] | None = None) -> tuple[CostLine, ...]:
    """The lines of a resource's estimated usage (a usage file entry), in the order the type lists them;
    ``keys`` swaps a field's price key for another (a bucket's storage class)."""
    given = usage.get(res.name, {})
    keys = keys or {}
    return tuple(_line(f.line, given[key] / f.per, prices, keys.get(f.price_key, f.price_key), "")
                 for key, f in USAGE_FIELDS.get(res.type, {}).items() if key in given)


def _aws_nodes(graph: ResourceGraph, res: GraphResource) -> tuple[tuple[int, int], int, bool]:
    """A node group's (desired, max) nodes, GPUs per node (the instance catalog) and whether it is paid regardless
    of running nodes (a Capacity Block, or a launch template that targets a reservation)."""
    from components.catalog import load_aws_catalog

    scaling = _dict(res.inputs.get("scalingConfig"))
    template = _launch_template(graph, res)
    listed = res.inputs.get("instanceTypes")
    instance = str(listed[0]) if isinstance(listed, list) and listed else str(template.get("instanceType") or "")
    facts = load_aws_catalog().get(instance)
    paid = str(res.inputs.get("capacityType") or "") == "CAPACITY_BLOCK" or bool(
        template.get("capacityReservationSpecification"))
    return (_int(scaling.get("desiredSize")), _int(scaling.get("maxSize"))), facts.gpu_count if facts else 0, paid


def _aws_min_nodes(res: GraphResource) -> int:
    return _int(_dict(res.inputs.get("scalingConfig")).get("minSize"))


def _price_aws(graph: ResourceGraph, prices: dict[str, Price], usage: Usage,
               shares: dict[str, tuple[tuple[str, float], ...]]) -> tuple[list[ResourceCost], list[tuple[str, str]]]:
    """The cost of every priced AWS resource of ``graph`` and the usage-priced ones not estimated."""
    costs: list[ResourceCost] = []
    not_estimated: list[tuple[str, str]] = []
    for res in sorted(graph.resources, key=lambda r: r.urn):
        note = ""
        if res.type == NODE_GROUP:
            now, at_max, note = _node_group(graph, res, prices)
        elif res.type == FSX_LUSTRE:
            now = at_max = _fsx(res, prices)
        elif res.type == EKS_CLUSTER:
            now = at_max = (_line("cluster hours (standard support)", HOURS_PER_MONTH, prices,
                                  "eks.cluster_standard_support", "hour"),)
        elif res.type == NAT_GATEWAY:
            now = at_max = (_line("NAT gateway hours", HOURS_PER_MONTH, prices, "vpc.nat_gateway_hour", "hour"),
                            *_usage_lines(res, usage, prices))
        elif res.type == KMS_KEY:
            now = at_max = (_line("customer managed key", 1, prices, "kms.customer_managed_key", "key-month"),)
        elif res.type == RDS_INSTANCE:  # Slurm's accounting database: instance hours and storage, Multi-AZ doubled
            az = "multi_az" if res.inputs.get("multiAz") else "single_az"
            cls = str(res.inputs.get("instanceClass") or "?")
            now = at_max = (
                _line(f"RDS {res.inputs.get('engine')} {cls} instance hours ({az})", HOURS_PER_MONTH, prices,
                      f"rds_mysql.{cls}.{az}", "hour"),
                _line(f"RDS gp3 storage ({az})", float(_int(res.inputs.get("allocatedStorage"))), prices,
                      f"rds_mysql.gp3_storage.{az}", "GB-month"))
        elif res.type == BUDGET:
            now = at_max = (_line("budget days", HOURS_PER_MONTH / 24, prices, "budgets.budget_day", "budget-day"),)
        elif res.type in USAGE_PRICED and res.name in usage:
            now = at_max = _usage_lines(res, usage, prices)
        else:
            if res.type in USAGE_PRICED:
                not_estimated.append((res.urn, USAGE_PRICED[res.type]))
            continue
        if res.type in USAGE_PRICED and res.name not in usage:
            not_estimated.append((res.urn, USAGE_PRICED[res.type]))
        tags = graph.effective_inputs(res).get("tags") or {}
        team = str(tags.get("team", "")) if isinstance(tags, dict) else ""
        group_label = _dict(res.inputs.get("labels")).get("gpu-cluster/node-group") if res.type == NODE_GROUP else None
        nodes, gpus, paid = _aws_nodes(graph, res) if res.type == NODE_GROUP else (None, 0, False)
        costs.append(ResourceCost(urn=res.urn, type=res.type, name=res.name, plane=graph.plane_of(res), team=team,
                                  components=now, components_at_max=at_max, note=note,
                                  team_shares=shares.get(str(group_label), ()), nodes=nodes, gpus_per_node=gpus,
                                  paid_regardless=paid,
                                  min_nodes=_aws_min_nodes(res) if res.type == NODE_GROUP else 0))
    return costs, not_estimated


def price_graph(graph: ResourceGraph, prices: dict[str, Price] | None = None, usage: Usage | None = None,
                usage_notes: tuple[str, ...] = ()) -> CostReport:
    """The monthly cost of every priced resource of ``graph``, sorted by URN; usage-priced resources are priced
    from ``usage`` (a usage file: logical name -> quantities) when it has them."""
    cloud = _cloud(graph)
    if prices is None:
        prices = load_gcp_prices() if cloud == "gcp" else load_aws_prices()
    usage = usage or {}
    price_cloud = _price_gcp if cloud == "gcp" else _price_aws
    costs, not_estimated = price_cloud(graph, prices, usage, quota_shares(graph))
    region = _region(graph)
    notes = []
    off_region = sorted({p.region for c in costs for line in c.components
                         if (p := prices.get(line.price_key)) is not None and p.region not in ("all", region)})
    if off_region:
        notes.append(f"some prices are list prices of {', '.join(off_region)}; this stack is in {region or '?'}")
    notes.extend(usage_notes)
    return CostReport(stack=graph.stack, region=region, resources=tuple(costs),
                      usage_not_priced=tuple(not_estimated), notes=tuple(notes))
