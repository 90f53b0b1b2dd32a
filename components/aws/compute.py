"""The compute plane on AWS: one EKS managed node group per spec group, with its launch template."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Optional

import pulumi
import pulumi_aws as aws

from components import provenance
from components.aws.capacity_block import BlockWindow, utc_text
from components.aws.launch import efa_layout
from components.bootstrap import (
    ClusterConnection,
    block_devices,
    efa_interfaces,
    encode_user_data,
    node_bootstrap,
    node_labels,
    node_taints,
    render_user_data,
)
from components.catalog import InstanceFacts
from components.node_template import autoscaler_tags as autoscaler_tags
from components.node_template import template_resources as template_resources
from components.spec import NodeGroupSpec, derive_ami_type, is_autoscaled, uses_placement_group
from components.tags import merge_tags

CAPACITY_TYPES = {
    "on-demand": "ON_DEMAND",
    "spot": "SPOT",
    "capacity-block": "CAPACITY_BLOCK",
    "reserved": "ON_DEMAND",
}


def update_config(group: NodeGroupSpec) -> dict[str, Any]:
    """How EKS replaces nodes when the launch template or AMI changes.

    Open capacity: one node at a time, EKS's default surge-first strategy. A Capacity Block has no spare
    instance to surge into, and its multi-node jobs are admitted all-or-nothing (losing one node stops
    the job like losing all), so the MINIMAL strategy (terminate, then launch; the EKS API's choice for
    accelerated nodes) replaces every node in one wave: the shortest time the paid block is degraded.
    EKS still asks for desiredSize 0 to upgrade such a group (EKS user guide, capacity-blocks-mng).
    """
    if group.capacity.type == "capacity-block":
        return {"update_strategy": "MINIMAL", "max_unavailable_percentage": 100}
    if group.capacity.type == "reserved":
        # A full ODCR has no instance to surge into either: terminate first, one node at a time.
        return {"update_strategy": "MINIMAL", "max_unavailable": 1}
    return {"max_unavailable": 1}


def desired_size_ignored(group: NodeGroupSpec, facts: InstanceFacts) -> list[str]:
    """``ignore_changes`` of the node group: its desiredSize where something else sets it after creation (the Cluster
    Autoscaler on a group it manages, a Capacity Block's scheduled action and EKS's scale-down at the block's end), so
    that ``pulumi up`` never undoes it; on every other group the stack's desiredSize applies.

    Pulumi then sends the desiredSize in its state with every scaling update, and EKS refuses minSize above it or
    maxSize below it: on such a group, bring the desired size into the new range first (``aws eks
    update-nodegroup-config --scaling-config desiredSize=N``), then ``pulumi refresh`` and ``pulumi up`` (README).
    """
    if is_autoscaled(group, facts) or group.capacity.type == "capacity-block":
        return ["scalingConfig.desiredSize"]
    return []


# The tag that says which Kubernetes minor a custom AMI is built for (blueprint/clouds/aws/changes.py reads it).
AMI_KUBERNETES_VERSION_TAG = "ami-kubernetes-version"
# What rolls a group's nodes: held on a Capacity Block group while its block runs (node_group_ignored).
ROLLING_INPUTS = ["version", "releaseVersion", "launchTemplate.version"]


def node_group_ignored(group: NodeGroupSpec, facts: InstanceFacts, block: BlockWindow | None) -> list[str]:
    """``ignore_changes`` of the node group: :func:`desired_size_ignored`, and, on a Capacity Block group while its
    block runs, what would roll its nodes (the Kubernetes version, the AMI release, the launch template version).
    MINIMAL terminates every node of such a group at once, and EKS's guide asks for desiredSize 0 to upgrade it
    (capacity-blocks-mng): an apply inside the window updates the rest of the cluster and leaves the group as it is;
    the first apply after the block ends (the group at 0) rolls it. Kubelet may trail the control plane by three
    minors, and EKS refuses the next control-plane update until the group matches (docs/upgrades.md)."""
    held = ROLLING_INPUTS if block is not None and block.running else []
    return desired_size_ignored(group, facts) + held


class AwsNodeGroup(pulumi.ComponentResource):
    """A managed node group and the launch template that makes its nodes production-grade.

    The launch template requires IMDSv2 with a hop limit of 1: a pod outside the node's network namespace cannot
    get a token, so it cannot read the node role (every component that needs AWS uses Pod Identity; host-network
    agents such as the VPC CNI and the Pod Identity agent are one hop away). It encrypts the root volume,
    declares no key pair, wires every EFA interface of the instance type, tags instances, volumes and interfaces
    for cost attribution, and targets the capacity reservation or Capacity Block when the spec uses one.
    Multi-node EFA groups on open capacity get a cluster placement group. A Capacity Block group starts at size 0
    and gets a scheduled action on its Auto Scaling group that scales it to the block when the block starts.
    A group the Cluster Autoscaler manages (open capacity, minSize < maxSize) gets the opt-in and node-template
    tags on its Auto Scaling group.

    The group carries the cluster's Kubernetes ``version`` and a pinned AMI ``release_version``, so that it follows
    the control plane in the same update and every group runs the same AMI (a custom AMI carries neither: EKS refuses
    them beside a launch template's ImageId). ``depends_on`` orders the group's rollout: after the control plane's
    add-ons, and a GPU group after the system groups and their add-ons (docs/upgrades.md).

    Attributes:
        node_group_name: the EKS node group's name.
        node_group: the EKS node group resource (what waits for its nodes waits for it).
    """

    node_group_name: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        group: NodeGroupSpec,
        facts: InstanceFacts,
        eks_cluster_name: pulumi.Input[str],
        physical_prefix: str,
        node_role_arn: pulumi.Input[str],
        subnet_ids: Sequence[pulumi.Input[str]],
        node_security_group_ids: Sequence[pulumi.Input[str]],
        efa_security_group_id: pulumi.Input[str],
        labels: Mapping[str, str],
        block: Optional[BlockWindow] = None,
        instance_tags: Mapping[str, str] = MappingProxyType({}),
        connection: Optional[pulumi.Output[ClusterConnection]] = None,
        vpc_id: Optional[pulumi.Input[str]] = None,
        ipv6: bool = False,
        gpu_units_per_gpu: int = 1,
        hugepages_2mi_gib: int = 0,
        team_cpu: bool = False,
        kubernetes_version: Optional[str] = None,
        release_version: Optional[str] = None,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: Optional[pulumi.ResourceOptions] = None,
    ) -> None:
        super().__init__("gpu-cluster:compute:AwsNodeGroup", name, provenance.props(), opts)
        child = pulumi.ResourceOptions(parent=self)
        physical = f"{physical_prefix}-{group.name}"
        tags = merge_tags(labels, physical, **{"node-group": group.name})
        # Instances, volumes and interfaces launched by the Auto Scaling group get no provider default
        # tags: their tag specifications carry the stack's other tags and the cluster tag too.
        launched_tags = merge_tags(labels, physical, **{**instance_tags, "node-group": group.name})

        placement = None
        if group.placement_group_name is not None:
            # An existing placement group (an ODCR created inside one): launched into, never created here.
            placement = {"group_name": group.placement_group_name}
        elif uses_placement_group(group, facts):
            pg = aws.ec2.PlacementGroup(
                f"{name}-placement", name=physical, strategy="cluster", tags=tags, opts=child
            )
            placement = {"group_name": pg.name}

        node_groups_sgs: list[pulumi.Input[str]] = list(node_security_group_ids)
        if group.ssh is not None:
            # SSH only from the listed networks, with a key pair that exists outside the stack. A launch template
            # names the key itself: EKS refuses remoteAccess beside a launch template, and remoteAccess without
            # source security groups opens port 22 to 0.0.0.0/0 (EKS API CreateNodegroup remoteAccess).
            # The description is fixed: EC2 has no API to change a group's description, so the provider replaces the
            # group when it changes, and a replacement under the same name in the VPC fails (InvalidGroup.Duplicate)
            # while the nodes still use the old one. The networks are in the rules' descriptions, which update.
            ssh_sg = aws.ec2.SecurityGroup(
                f"{name}-ssh", name=f"{physical}-ssh", vpc_id=vpc_id, description=f"SSH to {physical} nodes",
                tags=merge_tags(labels, f"{physical}-ssh"), opts=child)
            for i, cidr in enumerate(group.ssh.source_cidrs):
                v6 = ":" in cidr
                aws.vpc.SecurityGroupIngressRule(
                    f"{name}-ssh-{i}", security_group_id=ssh_sg.id, ip_protocol="tcp", from_port=22, to_port=22,
                    cidr_ipv4=None if v6 else cidr, cidr_ipv6=cidr if v6 else None,
                    description=f"SSH from {cidr}", tags=merge_tags(labels, f"{physical}-ssh-{i}"), opts=child)
            node_groups_sgs.append(ssh_sg.id)

        interfaces = efa_layout(facts, efa_interfaces(group, facts))
        network_interfaces = None
        vpc_security_group_ids: Optional[list[pulumi.Input[str]]] = node_groups_sgs
        if interfaces:
            groups = [*node_groups_sgs, efa_security_group_id]
            network_interfaces = [
                {
                    "network_card_index": ni.network_card_index,
                    "device_index": ni.device_index,
                    "security_groups": groups,
                    "delete_on_termination": "true",
                    # the primary ENA interface leaves interface_type unset ("interface")
                    **({"interface_type": ni.interface_type} if ni.interface_type else {}),
                    # On an IPv6 cluster the node's primary interface needs an IPv6 address (the subnet's
                    # auto-assign does not apply to interfaces a launch template declares; Karpenter sets
                    # Ipv6AddressCount 1 on them); EFA-only interfaces carry no IP address at all.
                    **({"ipv6_address_count": 1} if ipv6 and ni.interface_type is None else {}),
                }
                for ni in interfaces
            ]
            vpc_security_group_ids = None  # security groups go on each interface instead

        capacity_reservation: Optional[dict[str, Any]] = None
        market = None
        if group.capacity.reservation_resource_group_arn is not None:
            # Several ODCRs targeted together through a resource group (terraform's targeted-odcr pattern).
            # Reservations only: without it EC2 falls back to full-price On-Demand when no reservation has room
            # (EC2 user guide, launching into a Capacity Reservation group).
            capacity_reservation = {
                "capacity_reservation_preference": "capacity-reservations-only",
                "capacity_reservation_target": {
                    "capacity_reservation_resource_group_arn": group.capacity.reservation_resource_group_arn}}
        elif group.capacity.type == "reserved":
            capacity_reservation = {
                "capacity_reservation_preference": "capacity-reservations-only",
                "capacity_reservation_target": {"capacity_reservation_id": group.capacity.reservation_id},
            }
        elif group.capacity.type == "capacity-block":
            capacity_reservation = {
                "capacity_reservation_target": {"capacity_reservation_id": group.capacity.reservation_id}
            }
        if group.capacity.type == "capacity-block":
            market = {"market_type": "capacity-block"}

        boot = node_bootstrap(group, facts, hugepages_2mi_gib, team_cpu)
        user_data: pulumi.Input[str] | None
        if group.ami_id is not None:
            # A custom AMI: EKS merges nothing, so the user data joins the node to the cluster itself.
            assert connection is not None, "a custom AMI needs the cluster's connection details"
            user_data = connection.apply(lambda c: encode_user_data(render_user_data(boot, c)) or "")
        else:
            user_data = encode_user_data(render_user_data(boot))
        reduced_efa = bool(facts.efa_count) and efa_interfaces(group, facts) < facts.efa_count

        launch_template = aws.ec2.LaunchTemplate(
            f"{name}-lt",
            name=physical,
            description=f"{group.instance_type} nodes of {physical}",
            update_default_version=True,
            metadata_options={
                "http_endpoint": "enabled",
                "http_tokens": "required",
                # 1, as the EKS Best Practices Guide ("Restrict access to the instance profile assigned to the
                # worker node") advises when pods get credentials another way; docs/aws.md, "Instance metadata
                # and egress", lists the components checked against it.
                "http_put_response_hop_limit": 1,
                "instance_metadata_tags": "disabled",
            },
            block_device_mappings=block_devices(group, facts),
            network_interfaces=network_interfaces,
            vpc_security_group_ids=vpc_security_group_ids,
            placement=placement,
            capacity_reservation_specification=capacity_reservation,
            instance_market_options=market,
            # EKS requires a Capacity Block node group's instance type in its launch template (and then
            # not on the node group); other capacity types name it on the node group.
            instance_type=group.instance_type if group.capacity.type == "capacity-block" else None,
            user_data=user_data,
            image_id=group.ami_id,
            key_name=group.ssh.key_name if group.ssh is not None else None,
            tag_specifications=[
                {"resource_type": kind, "tags": launched_tags} for kind in ("instance", "volume", "network-interface")
            ],
            tags=tags if not reduced_efa else {**tags, "efa-interfaces-reason": str(group.efa_interfaces_reason)},
            opts=child,
        )

        node_group = aws.eks.NodeGroup(
            f"{name}-ng",
            cluster_name=eks_cluster_name,
            node_group_name=physical,
            node_role_arn=node_role_arn,
            subnet_ids=list(subnet_ids),
            instance_types=None if group.capacity.type == "capacity-block"
            else list(group.instance_types or [group.instance_type]),
            # A custom AMI is type CUSTOM to EKS, which refuses amiType (and releaseVersion) beside a launch
            # template ImageId (EKS API CreateNodegroup).
            ami_type=None if group.ami_id is not None else derive_ami_type(group, facts),
            # The cluster's minor and the pinned AMI release (EKS API CreateNodegroup, UpdateNodegroupVersion): a
            # Kubernetes bump rolls the group to the new minor in the same update, after the control plane.
            version=None if group.ami_id is not None else kubernetes_version,
            release_version=None if group.ami_id is not None else release_version,
            capacity_type=CAPACITY_TYPES[group.capacity.type],
            scaling_config={
                "min_size": group.min_size,
                "desired_size": group.desired_size,
                "max_size": group.max_size,
            },
            update_config=update_config(group),
            node_repair_config={"enabled": True},
            launch_template={"id": launch_template.id, "version": launch_template.latest_version.apply(str)},
            labels=node_labels(group, facts),
            # A team CPU group's taint (``team_cpu``, bootstrap.node_taints) changes in place: taints are not among
            # the fields that replace an EKS node group (blueprint/clouds/aws/replacements.yaml, read from the
            # Terraform provider's aws_eks_node_group; EKS API UpdateNodegroupConfig takes taints). NoSchedule leaves
            # the pods already running there in place; new ones keep off. A node group holds no data either way. With
            # a custom AMI the taint is in the user data too (node_bootstrap), so the launch template's new version
            # rolls every node of the group (docs/limits.md).
            taints=node_taints(group, facts, team_cpu) or None,
            # A Capacity Block's window and size go on its node group, so that the graph alone prices the
            # block (it is paid for the whole window, nodes or not) and finance sees it in the console.
            # An ISO 8601 interval; ':' '/' '-' are valid in AWS tag values. No more tags than a subnet gets.
            # A custom AMI's group carries no version (EKS takes none): the minor its AMI is built for goes on a
            # tag, so the pull-request check sees it lag the control plane as it sees the other groups.
            tags={**tags,
                  **({} if block is None else {
                      "capacity-block-window": f"{utc_text(block.start)}/{utc_text(block.end)}",
                      "capacity-block-instances": str(block.instance_count)}),
                  **({} if group.ami_kubernetes_version is None else {
                      AMI_KUBERNETES_VERSION_TAG: group.ami_kubernetes_version})},
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=node_group_ignored(group, facts, block),
                                        depends_on=list(depends_on)),
        )
        # The Auto Scaling group EKS made for the node group (pulumi-eks has no input for its tags, issue #658).
        asg_name = node_group.resources.apply(
            lambda rs: rs[0].autoscaling_groups[0].name if rs and rs[0].autoscaling_groups else "")
        for key, value in autoscaler_tags(group, facts, gpu_units_per_gpu, team_cpu).items():
            # On the group only (propagate_at_launch False: the instances keep the launch template's tags). The
            # Cluster Autoscaler reads them; the opt-in is what its discovery and its IAM grant both require.
            suffix = "autoscale" if "/node-template/" not in key else key.split("/node-template/", 1)[1]
            aws.autoscaling.Tag(
                f"{name}-asg-{suffix}",
                autoscaling_group_name=asg_name,
                tag={"key": key, "value": value, "propagate_at_launch": False},
                opts=child,
            )
        if block is not None and block.schedule_scale_up:
            # Scale up when the block starts; EKS scales the group back to 0 before the block ends.
            aws.autoscaling.Schedule(
                f"{name}-block-start",
                scheduled_action_name=f"{physical}-capacity-block-start",
                autoscaling_group_name=asg_name,
                start_time=utc_text(block.start),
                min_size=0,
                max_size=group.max_size,
                desired_capacity=group.max_size,
                opts=child,
            )
        self.node_group = node_group
        self.node_group_name = node_group.node_group_name
        self.register_outputs({"nodeGroupName": node_group.node_group_name})
