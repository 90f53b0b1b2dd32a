"""Fabric: multi-node GPU groups get every EFA interface, one zone, and the right placement; reserved capacity stays
with its reservation's schedule, out of the node autoscaler's reach."""

from __future__ import annotations

from typing import Any

from pulumi_policy import EnforcementLevel, PolicyResource, ResourceValidationArgs, Severity, StackValidationArgs

from gpu_policies.common import (
    ABSENT,
    GKE_CLUSTER,
    GKE_NODE_POOL,
    Knob,
    Reporter,
    get,
    of_type,
    path,
    resource_policy,
    seen,
    stack_policy,
)

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
SUBNET = "aws:ec2/subnet:Subnet"
ASG_TAG = "aws:autoscaling/tag:Tag"
# The tag that opts an Auto Scaling group in to the Cluster Autoscaler's discovery and IAM grant
# (components/aws/autoscaler.py AUTOSCALE_TAG; a test keeps the two equal).
AUTOSCALE_TAG = "gpu-cluster/autoscale"
# EC2 MaximumEfaInterfaces per instance type (sources and dates in components/catalog/aws_instances.yaml;
# the pack keeps its own copy because it runs standalone, and a test keeps the two equal).
# A type without EFA is left out rather than listed at 0 (0 would exempt it), and an empty table would check nothing.
EFA_INTERFACES = Knob("efaInterfaces", {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1},
                                        "minProperties": 1}, {
    "p4d.24xlarge": 4, "p4de.24xlarge": 4, "p5.48xlarge": 32, "p5e.48xlarge": 32, "p5en.48xlarge": 16,
    "p6-b200.48xlarge": 8, "p5.4xlarge": 1, "g5.48xlarge": 1, "g6e.48xlarge": 4, "g6e.24xlarge": 2,
    "g4dn.8xlarge": 1, "g4dn.12xlarge": 1, "g4dn.metal": 1,
    "g5.8xlarge": 1, "g5.12xlarge": 1, "g5.16xlarge": 1, "g5.24xlarge": 1,
    "g6.8xlarge": 1, "g6.12xlarge": 1, "g6.16xlarge": 1, "g6.24xlarge": 1, "g6.48xlarge": 1,
    "g6e.8xlarge": 1, "g6e.12xlarge": 1, "g6e.16xlarge": 1,
    "m5zn.12xlarge": 1,
})


def _launch_template(ng: PolicyResource) -> PolicyResource | None:
    return next((d for d in ng.dependencies if d.resource_type == LAUNCH_TEMPLATE), None)


def _instance_type(ng: PolicyResource, lt: PolicyResource | None) -> str:
    types = ng.props.get("instanceTypes") or []
    if types:
        return str(types[0])
    return str(lt.props.get("instanceType", "")) if lt is not None else ""


def _efa_indexes(lt: PolicyResource | None) -> list[int]:
    """The positions of the EFA interfaces in the launch template's networkInterfaces."""
    if lt is None:
        return []
    return [i for i, ni in enumerate(lt.props.get("networkInterfaces") or [])
            if ni.get("interfaceType") in ("efa", "efa-only")]


def _efa_interfaces(lt: PolicyResource | None) -> int:
    """How many EFA interfaces the launch template declares."""
    return len(_efa_indexes(lt))


def _count_field(items: Any, wanted: int, counted: list[int], *at: str) -> tuple[str, Any]:
    """The field of a list that holds the wrong number of entries: with too few, the next entry (which should
    exist, so nothing is seen); with too many, the first entry beyond ``wanted`` (of those ``counted``)."""
    if len(counted) < wanted:
        return path(*at, len(items or [])), ABSENT
    return path(*at, counted[wanted]), seen(items, counted[wanted])


def _wired(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    table = cfg["efaInterfaces"]
    for ng in of_type(args.resources, NODE_GROUP):
        lt = _launch_template(ng)
        itype = _instance_type(ng, lt)
        expected = int(table.get(itype, 0))
        # Fewer on purpose: the launch template says why (the spec's efaInterfacesReason, tagged by the program).
        reason = str(get(lt.props, "tags", "efa-interfaces-reason", default="") or "") if lt is not None else ""
        if expected and reason.strip() and 1 <= _efa_interfaces(lt) <= expected:
            continue
        if expected and _efa_interfaces(lt) != expected:
            message = (f"Node group {ng.props.get('nodeGroupName', ng.name)} ({itype}) must wire all {expected} EFA "
                       f"interfaces of its instance type in its launch template; it wires {_efa_interfaces(lt)}.")
            if lt is None:  # no field: the node group has no launch template of the stack's to wire them in
                report(message, ng.urn)
                continue
            # The launch template is what to edit: its networkInterfaces.
            items = lt.props.get("networkInterfaces")
            field, value = _count_field(items, expected, _efa_indexes(lt), "networkInterfaces")
            report(message, lt.urn, field=field, value=value)


efa_wired = stack_policy(
    "aws-efa-node-groups-wire-all-interfaces", "fabric",
    "An EFA-capable node group's launch template declares every EFA interface the instance type has, or says why "
    "not (tag efa-interfaces-reason).",
    "Let the program derive the interfaces from the instance catalog (components/aws/launch.py efa_layout); to wire "
    "fewer, set efaInterfaces with efaInterfacesReason on the node group.",
    Severity.HIGH, _wired, [EFA_INTERFACES],
)


def _reserved(ng: PolicyResource, lt: PolicyResource | None) -> bool:
    if ng.props.get("capacityType") == "CAPACITY_BLOCK":
        return True
    return lt is not None and bool(get(lt.props, "capacityReservationSpecification", "capacityReservationTarget"))


def _opt_in_tags(args: StackValidationArgs) -> list[PolicyResource]:
    """The Auto Scaling group tags that opt a node group in to the Cluster Autoscaler (gpu-cluster/autoscale=true)."""
    return [tag for tag in of_type(args.resources, ASG_TAG)
            if get(tag.props, "tag", "key") == AUTOSCALE_TAG and str(get(tag.props, "tag", "value")).lower() == "true"]


def _autoscaled(args: StackValidationArgs) -> set[str]:
    """URNs of the node groups the Cluster Autoscaler manages: those whose Auto Scaling group is opted in."""
    return {d.urn for tag in _opt_in_tags(args) for d in tag.dependencies if d.resource_type == NODE_GROUP}


def _placed(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    table = cfg["efaInterfaces"]
    autoscaled = _autoscaled(args)
    for ng in of_type(args.resources, NODE_GROUP):
        lt = _launch_template(ng)
        if not table.get(_instance_type(ng, lt)) or float(get(ng.props, "scalingConfig", "maxSize", default=1)) <= 1:
            continue
        name = ng.props.get("nodeGroupName", ng.name)
        # A subnet names its zone (availabilityZone) or the zone's ID (availabilityZoneId), as the stack's spec does.
        zones = sorted({str(d.props.get("availabilityZone") or d.props.get("availabilityZoneId"))
                        for d in ng.dependencies if d.resource_type == SUBNET})
        if len(zones) > 1:
            report(f"Multi-node EFA node group {name} must sit in one availability zone; its subnets span "
                   f"{', '.join(zones)}.", ng.urn, field="subnetIds", value=seen(ng.props, "subnetIds"))
        in_group = lt is not None and bool(get(lt.props, "placement", "groupName"))
        # A group the Cluster Autoscaler manages is left unplaced on purpose: a placed group gets a topology-aware
        # Kueue flavor, and Kueue assigns a topology over the nodes that exist, so CA would never grow it from zero
        # (components/spec/decisions.py is_autoscaled).
        if not in_group and not _reserved(ng, lt) and ng.urn not in autoscaled:
            message = (f"Multi-node EFA node group {name} must run in a cluster placement group unless its capacity "
                       "is reserved (Capacity Block or capacity reservation).")
            if lt is None:  # no field: the node group has no launch template of the stack's to place
                report(message, ng.urn)
            else:  # the launch template is what to edit: its placement group
                report(message, lt.urn, field="placement.groupName", value=seen(lt.props, "placement", "groupName"))


efa_placed = stack_policy(
    "aws-efa-node-groups-single-az-and-placed", "fabric",
    "A multi-node EFA group sits in one zone, in a cluster placement group unless its capacity is reserved or the "
    "Cluster Autoscaler manages it (a placed group is not autoscaled: Kueue places its jobs on existing nodes).",
    "Use the GPU subnets (one zone) and placement: auto for the node group, or let the Cluster Autoscaler manage it "
    "(placement: none, open capacity, minSize < maxSize).",
    Severity.HIGH, _placed, [EFA_INTERFACES],
)


def _no_pg_on_reserved(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    for lt in of_type(args.resources, LAUNCH_TEMPLATE):
        if not get(lt.props, "placement", "groupName"):
            continue
        block = get(lt.props, "instanceMarketOptions", "marketType") == "capacity-block"
        odcr = bool(get(lt.props, "capacityReservationSpecification", "capacityReservationTarget"))
        # A placement group created by this stack is a dependency; an existing one (the group an ODCR was
        # created in) is named only, and is where that reservation's capacity is.
        created = any(d.resource_type == "aws:ec2/placementGroup:PlacementGroup" for d in lt.dependencies)
        if block or (odcr and created):
            report(f"Launch template {lt.props.get('name', lt.name)} must not force a cluster placement group onto "
                   "reserved capacity: the reservation is already placed and the group causes "
                   "InsufficientInstanceCapacity.", lt.urn, field="placement.groupName",
                   value=seen(lt.props, "placement", "groupName"))


no_pg_on_reserved = stack_policy(
    "aws-no-placement-group-on-reserved-capacity", "fabric",
    "Capacity Blocks never get a cluster placement group; ODCRs only the existing one they were created in.",
    "Set placement: auto (or none); for an ODCR created in a placement group, name it with placementGroupName.",
    Severity.HIGH, _no_pg_on_reserved,
)



def _autoscaler_off_reserved(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    for tag in _opt_in_tags(args):
        for ng in (d for d in tag.dependencies if d.resource_type == NODE_GROUP):
            lt = _launch_template(ng)
            if not _reserved(ng, lt):
                continue
            kind = "a Capacity Block" if ng.props.get("capacityType") == "CAPACITY_BLOCK" else "a capacity reservation"
            report(f"The Auto Scaling group of node group {ng.props.get('nodeGroupName', ng.name)} runs on {kind} and "
                   f"must not be opted in to the Cluster Autoscaler ({AUTOSCALE_TAG}=true): a block's instances launch "
                   "only in its window and EKS scales the group to 0 before it ends; a reservation holds only what was "
                   "reserved.", tag.urn, field="tag.value", value=seen(tag.props, "tag", "value"))


autoscaler_off_reserved = stack_policy(
    "aws-autoscaler-off-reserved-capacity", "fabric",
    "The Cluster Autoscaler's opt-in tag is never on the Auto Scaling group of a Capacity Block or ODCR node group.",
    "Leave reserved groups to their schedule (Capacity Block) or the operator (ODCR); the program tags only on-demand "
    "and spot groups with minSize < maxSize.",
    Severity.HIGH, _autoscaler_off_reserved,
)


def _self_rules(args: StackValidationArgs, type_: str) -> set[str]:
    """URNs of the security groups that a rule of ``type_`` opens to all protocols from or to themselves."""
    out: set[str] = set()
    for rule in of_type(args.resources, type_):
        deps = [d for d in rule.dependencies if d.resource_type == "aws:ec2/securityGroup:SecurityGroup"]
        if str(rule.props.get("ipProtocol")) != "-1" or len(deps) != 1:
            continue
        if rule.props.get("securityGroupId") == rule.props.get("referencedSecurityGroupId"):
            out.add(deps[0].urn)
    return out


def _efa_sg(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    ingress = _self_rules(args, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    egress = _self_rules(args, "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")
    for lt in of_type(args.resources, LAUNCH_TEMPLATE):
        if not _efa_interfaces(lt):
            continue
        groups = [d for d in lt.dependencies if d.resource_type == "aws:ec2/securityGroup:SecurityGroup"]
        ok = any(sg.urn in ingress and sg.urn in egress for sg in groups)
        if not ok:
            # No field: what is missing are whole resources (the group's self-referencing rules).
            report(f"The EFA interfaces of launch template {lt.props.get('name', lt.name)} must join a security "
                   "group that allows all traffic from and to itself (EFA's SRD transport needs it).", lt.urn)


efa_security_group = stack_policy(
    "aws-efa-security-group-allows-self", "fabric",
    "The security group on EFA interfaces allows all protocols from and to itself.",
    "Keep the EFA security group and its self-referencing ingress and egress rules (components/aws/network.py).",
    Severity.HIGH, _efa_sg,
)

# --- GCP -----------------------------------------------------------------------------------------

# Additional node networks a GPUDirect machine type needs on GKE: its GPU NICs, plus the second gVNIC of the RDMA
# types (A3 Ultra, A4: 1 gVNIC + 8 RDMA). Source: components/catalog/gcp_machines.yaml (gpu_nics, gpudirect); the
# pack keeps its own copy because it runs standalone, and tests/policy/test_policies_gcp.py keeps the two equal.
GPU_NETWORKS = Knob("gpuNetworks", {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1},
                                     "minProperties": 1}, {
    "a3-highgpu-8g": 4, "a3-megagpu-8g": 8, "a3-ultragpu-8g": 9, "a4-highgpu-8g": 9,
})


def _gke_cluster_of(args: StackValidationArgs, pool: PolicyResource) -> list[PolicyResource]:
    """The cluster a node pool belongs to: its dependency (the one cluster of the stack if it records none)."""
    linked = [d for d in pool.dependencies if d.resource_type == GKE_CLUSTER]
    clusters = of_type(args.resources, GKE_CLUSTER)
    return linked or (clusters if len(clusters) == 1 else [])


def _gpu_networks(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    table = cfg["gpuNetworks"]
    for pool in of_type(args.resources, GKE_NODE_POOL):
        machine = str(get(pool.props, "nodeConfig", "machineType", default=""))
        expected = int(table.get(machine, 0))
        if not expected:
            continue
        name = pool.props.get("name", pool.name)
        networks = get(pool.props, "networkConfig", "additionalNodeNetworkConfigs", default=[]) or []
        wired = len(networks)
        if wired != expected:
            field, value = _count_field(networks, expected, list(range(wired)), "networkConfig",
                                        "additionalNodeNetworkConfigs")
            report(f"GKE node pool {name} ({machine}) must attach all {expected} GPU networks of its machine type "
                   f"(networkConfig.additionalNodeNetworkConfigs); it attaches {wired}.", pool.urn, field=field,
                   value=value)
        for cluster in _gke_cluster_of(args, pool):
            multi = cluster.props.get("enableMultiNetworking") is True
            if not multi or cluster.props.get("datapathProvider") != "ADVANCED_DATAPATH":
                key = "datapathProvider" if multi else "enableMultiNetworking"
                report(f"GKE cluster {cluster.props.get('name', cluster.name)} runs GPUDirect node pool {name}, so "
                       "it must enable multi-networking (enableMultiNetworking: true) on GKE Dataplane V2 "
                       "(datapathProvider: ADVANCED_DATAPATH).", cluster.urn, field=key,
                       value=seen(cluster.props, key))


gpu_networks_wired = stack_policy(
    "gcp-gpudirect-node-pools-wire-all-networks", "fabric",
    "A GPUDirect node pool attaches every GPU network its machine type has, on a multi-network Dataplane V2 cluster.",
    "Let the program derive the GPU networks from the machine catalog (components/gcp/network.py and gke.py).",
    Severity.HIGH, _gpu_networks, [GPU_NETWORKS], enforcement=EnforcementLevel.MANDATORY,
)


def _compact_on_reservation(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if args.resource_type != GKE_NODE_POOL:
        return
    reserved = get(args.props, "nodeConfig", "reservationAffinity", "consumeReservationType") == "SPECIFIC_RESERVATION"
    if reserved and get(args.props, "placementPolicy", "type") == "COMPACT":
        report(f"GKE node pool {args.props.get('name', args.name)} consumes a specific reservation and must not add a "
               "COMPACT placement policy: the reservation already fixes where its VMs are, and the pool cannot "
               "create nodes.", field="placementPolicy.type", value="COMPACT")


no_compact_on_reservation = resource_policy(
    "gcp-no-compact-placement-on-reservation", "fabric",
    "A GKE node pool that consumes a specific reservation has no COMPACT placement policy of its own.",
    "Set placement: auto (or none) for a reservation pool; reserve the capacity with a compact placement instead.",
    Severity.HIGH, _compact_on_reservation, enforcement=EnforcementLevel.MANDATORY,
)

POLICIES = [efa_wired, efa_placed, no_pg_on_reserved, autoscaler_off_reserved, efa_security_group, gpu_networks_wired,
            no_compact_on_reservation]
