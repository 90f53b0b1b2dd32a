"""AWS in the cost family: node-group instance hours (at desired and at max size; a Capacity Block by its window,
a reservation at the group's reach), their EBS volumes, FSx for Lustre capacity, the EKS control plane, NAT gateway
hours, KMS keys, Slurm's RDS database and budgets, from ``prices_aws.yaml``; buckets, NAT traffic and log volume from
the usage file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from blueprint.cost.cloud import Shares
from blueprint.cost.lines import (
    HOURS_PER_MONTH,
    CostLine,
    ResourceCost,
    Usage,
    UsageField,
    UsageFields,
    usage_lines,
)
from blueprint.cost.lines import dict_input as _dict
from blueprint.cost.lines import int_input as _int
from blueprint.cost.lines import line as _line
from blueprint.cost.prices import Price
from blueprint.graph.model import GraphResource, ResourceGraph

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
FSX_LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
NAT_GATEWAY = "aws:ec2/natGateway:NatGateway"
KMS_KEY = "aws:kms/key:Key"
RDS_INSTANCE = "aws:rds/instance:Instance"
BUDGET = "aws:budgets/budget:Budget"
ASG_TAG = "aws:autoscaling/tag:Tag"
USAGE_PRICED = {  # resource type -> what its cost depends on; not priced without a usage estimate
    "aws:s3/bucketV2:BucketV2": "stored GB and requests",
    "aws:s3/bucket:Bucket": "stored GB and requests",
    "aws:cloudwatch/logGroup:LogGroup": "GB ingested and stored",
    NAT_GATEWAY: "GB processed",
}
_MARKET = {"ON_DEMAND": "ec2_on_demand", "SPOT": "ec2_spot", "CAPACITY_BLOCK": "ec2_capacity_block"}


_BUCKET = {
    "storageGB": UsageField("GB-months stored (S3 Standard)", "s3.standard_storage"),
    "putRequests": UsageField("PUT, COPY, POST, LIST requests (thousands)", "s3.put_requests", 1000.0),
    "getRequests": UsageField("GET, HEAD requests (thousands)", "s3.get_requests", 1000.0),
}
USAGE_FIELDS: UsageFields = {
    "aws:s3/bucket:Bucket": _BUCKET,
    "aws:s3/bucketV2:BucketV2": _BUCKET,
    "aws:ec2/natGateway:NatGateway": {
        "processedGB": UsageField("GB processed", "vpc.nat_gateway_processed"),
        "internetEgressGB": UsageField("GB out to the internet (first 10 TB tier)", "vpc.internet_egress_first_10tb"),
    },
    "aws:cloudwatch/logGroup:LogGroup": {
        "ingestedGB": UsageField("GB ingested (standard class)", "cloudwatch_logs.standard_ingestion"),
        "storedGB": UsageField("GB-months stored", "cloudwatch_logs.standard_storage"),
    },
}


def launch_template(graph: ResourceGraph, group: GraphResource) -> dict[str, Any]:
    """The launch template created beside a node group (the same component), or an empty mapping."""
    if group.parent is None:
        return {}
    for sibling in graph.children(group.parent):
        if sibling.type == LAUNCH_TEMPLATE:
            return sibling.inputs
    return {}


def block_window(tags: Any) -> tuple[datetime, datetime, int] | None:
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


def _root_volumes(count: int, volume_gb: dict[str, int], prices: Mapping[str, Price],
                  months: float = 1.0) -> tuple[CostLine, ...]:
    """The nodes' EBS volumes for ``months`` of a month; a type without a price read is listed unpriced."""
    return tuple(_line(f"node volumes ({kind})" + (f" for {months * HOURS_PER_MONTH:g} h" if months < 1 else ""),
                       count * gb * months, prices, f"ebs.{kind}_storage", "GB-month")
                 for kind, gb in volume_gb.items())


def _node_group(graph: ResourceGraph, res: GraphResource, prices: Mapping[str, Price]) -> tuple[
        tuple[CostLine, ...], tuple[CostLine, ...], str]:
    """A node group's lines at desired and at max size, and a note on how it was priced."""
    inputs = res.inputs
    template = launch_template(graph, res)
    listed = inputs.get("instanceTypes")
    types = [str(t) for t in listed] if isinstance(listed, list) and listed else [str(template.get("instanceType")
                                                                                       or "unknown-type")]
    instance_type = types[0]
    capacity = str(inputs.get("capacityType") or "ON_DEMAND")
    scaling = _dict(inputs.get("scalingConfig"))
    desired, maximum = _int(scaling.get("desiredSize")), _int(scaling.get("maxSize"))
    market = _MARKET.get(capacity, "ec2_on_demand")
    root_gb = _volume_gb(template)
    block = block_window(inputs.get("tags")) if capacity == "CAPACITY_BLOCK" else None
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


def _fsx(res: GraphResource, prices: Mapping[str, Price]) -> tuple[CostLine, ...]:
    inputs = res.inputs
    deployment = str(inputs.get("deploymentType") or "")
    tier = _int(inputs.get("perUnitStorageThroughput"))
    key = deployment if deployment.startswith("SCRATCH") else f"{deployment}_{tier}"
    return (_line(f"{key} storage", float(_int(inputs.get("storageCapacity"))), prices, f"fsx_lustre.{key}",
                  "GB-month"),)



def _aws_nodes(graph: ResourceGraph, res: GraphResource) -> tuple[tuple[int, int], int, bool]:
    """A node group's (desired, max) nodes, GPUs per node (the instance catalog) and whether it is paid regardless
    of running nodes (a Capacity Block, or a launch template that targets a reservation)."""
    from components.catalog import load_aws_catalog

    scaling = _dict(res.inputs.get("scalingConfig"))
    template = launch_template(graph, res)
    listed = res.inputs.get("instanceTypes")
    instance = str(listed[0]) if isinstance(listed, list) and listed else str(template.get("instanceType") or "")
    facts = load_aws_catalog().get(instance)
    paid = str(res.inputs.get("capacityType") or "") == "CAPACITY_BLOCK" or bool(
        template.get("capacityReservationSpecification"))
    return (_int(scaling.get("desiredSize")), _int(scaling.get("maxSize"))), facts.gpu_count if facts else 0, paid


def _aws_autoscaled(graph: ResourceGraph, group: GraphResource) -> bool:
    """Whether the Cluster Autoscaler may scale the node group: its Auto Scaling group carries the opt-in tag the
    program writes only on a group it manages (``components/node_template.py``, ``is_autoscaled``)."""
    from components.aws.names import AUTOSCALE_TAG

    siblings = graph.children(group.parent) if group.parent else []
    return any(_dict(t.inputs.get("tag")).get("key") == AUTOSCALE_TAG
               and str(_dict(t.inputs.get("tag")).get("value")) == "true" for t in siblings if t.type == ASG_TAG)


def _aws_min_nodes(res: GraphResource) -> int:
    return _int(_dict(res.inputs.get("scalingConfig")).get("minSize"))


def price(graph: ResourceGraph, prices: Mapping[str, Price], usage: Usage,
          shares: Shares) -> tuple[list[ResourceCost], list[tuple[str, str]]]:
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
                            *usage_lines(res, USAGE_FIELDS, usage, prices))
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
            now = at_max = usage_lines(res, USAGE_FIELDS, usage, prices)
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
                                  min_nodes=_aws_min_nodes(res) if res.type == NODE_GROUP else 0,
                                  autoscaled=_aws_autoscaled(graph, res) if res.type == NODE_GROUP else None))
    return costs, not_estimated


