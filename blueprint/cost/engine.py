"""Price a ResourceGraph: every cost line is exactly quantity x unit price, from the price catalog.

The engine reads only the graph (offline, ``pulumi preview --json`` or ``pulumi stack export``), so users of
the real CLI get the same figures. It prices what the graph fixes: node-group instance hours (at desired
and at max size), their root volumes, FSx for Lustre capacity, the EKS control plane, NAT gateway hours and
KMS keys. What depends on usage (bucket GB, requests, NAT GB, log volume) is listed as not priced rather
than guessed. A price that was never read leaves its line unpriced (``monthly_usd`` null), never zero.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from blueprint.cost.prices import Price, load_aws_prices
from blueprint.cost.usage import USAGE_FIELDS, Usage
from blueprint.graph import GraphResource, ResourceGraph

HOURS_PER_MONTH = 730  # the convention of AWS's pricing calculator and Infracost: 8,760 h / 12

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
FSX_LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
NAT_GATEWAY = "aws:ec2/natGateway:NatGateway"
KMS_KEY = "aws:kms/key:Key"
BUDGET = "aws:budgets/budget:Budget"
USAGE_PRICED = {  # resource type -> what its cost depends on; not priced without a usage estimate
    "aws:s3/bucketV2:BucketV2": "stored GB and requests",
    "aws:s3/bucket:Bucket": "stored GB and requests",
    "aws:cloudwatch/logGroup:LogGroup": "GB ingested and stored",
    NAT_GATEWAY: "GB processed",
}
_MARKET = {"ON_DEMAND": "ec2_on_demand", "SPOT": "ec2_spot", "CAPACITY_BLOCK": "ec2_capacity_block"}


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

    def by_team(self, one_time: bool = False) -> dict[str, float]:
        """Monthly (or one-time) cost per team: GPU node groups split by nominal Kueue GPU quota, the rest by
        ``team`` tag."""
        out: dict[str, float] = {}
        for res in self.resources:
            value = res.one_time_usd if one_time else res.monthly_usd
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


def _region(graph: ResourceGraph) -> str:
    for res in graph.resources:
        if res.type == "pulumi:providers:aws" and isinstance(res.inputs.get("region"), str):
            return str(res.inputs["region"])
    return ""


def _usage_lines(res: GraphResource, usage: Usage, prices: dict[str, Price]) -> tuple[CostLine, ...]:
    """The lines of a resource's estimated usage (a usage file entry), in the order the type lists them."""
    given = usage.get(res.name, {})
    return tuple(_line(f.line, given[key] / f.per, prices, f.price_key, "")
                 for key, f in USAGE_FIELDS.get(res.type, {}).items() if key in given)


def price_graph(graph: ResourceGraph, prices: dict[str, Price] | None = None, usage: Usage | None = None,
                usage_notes: tuple[str, ...] = ()) -> CostReport:
    """The monthly cost of every priced resource of ``graph``, sorted by URN; usage-priced resources are priced
    from ``usage`` (a usage file: logical name -> quantities) when it has them."""
    prices = load_aws_prices() if prices is None else prices
    usage = usage or {}
    costs: list[ResourceCost] = []
    not_estimated: list[tuple[str, str]] = []
    shares = quota_shares(graph)
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
        costs.append(ResourceCost(urn=res.urn, type=res.type, name=res.name, plane=graph.plane_of(res), team=team,
                                  components=now, components_at_max=at_max, note=note,
                                  team_shares=shares.get(str(group_label), ())))
    region = _region(graph)
    notes = []
    off_region = sorted({p.region for c in costs for line in c.components
                         if (p := prices.get(line.price_key)) is not None and p.region not in ("all", region)})
    if off_region:
        notes.append(f"some prices are list prices of {', '.join(off_region)}; this stack is in {region or '?'}")
    notes.extend(usage_notes)
    return CostReport(stack=graph.stack, region=region, resources=tuple(costs),
                      usage_not_priced=tuple(not_estimated), notes=tuple(notes))
