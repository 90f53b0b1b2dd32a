"""The network and fabric plane on AWS: VPC, subnets, NAT, S3 gateway endpoint, EFA security group."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_aws as aws

from components import provenance
from components.spec import NetworkSpec
from components.spec.decisions import ipv6_subnet_index
from components.tags import merge_tags


@dataclass(frozen=True, kw_only=True)
class DeployerPath:
    """The deployer's runners outside this VPC, reached through a Transit Gateway."""

    transit_gateway_id: str
    runner_cidrs: Sequence[str]


class AwsNetwork(pulumi.ComponentResource):
    """A VPC laid out for a GPU cluster.

    Private subnets route to the internet through NAT (one per zone, or a single one), S3 traffic stays
    on the gateway endpoint (checkpoints never cross NAT), and the EFA security group allows all traffic
    between its members, which EFA's SRD transport requires.

    Attributes:
        vpc_id: the VPC.
        subnet_ids: subnet id by the spec's subnet name.
        efa_security_group_id: attach to every EFA interface (and to the Lustre clients).
    """

    vpc_id: pulumi.Output[str]
    subnet_ids: dict[str, pulumi.Output[str]]
    efa_security_group_id: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        spec: NetworkSpec,
        region: str,
        physical_prefix: str,
        labels: Mapping[str, str],
        deployer_path: Optional[DeployerPath] = None,
        opts: Optional[pulumi.ResourceOptions] = None,
    ) -> None:
        super().__init__("gpu-cluster:network:AwsNetwork", name, provenance.props(), opts)
        child = pulumi.ResourceOptions(parent=self)
        self.ipv6_cidr_block: pulumi.Output[str] | None = None  # set with the VPC this stack creates (IPv6 only)

        self.subnet_ids: dict[str, pulumi.Output[str]] = {}
        private_rts: list[pulumi.Output[str]] = []
        if spec.existing is not None:
            # Join the VPC the network team owns: its routing, NAT and endpoints stay theirs.
            vpc_id: pulumi.Output[str] = pulumi.Output.from_input(spec.existing.vpc_id)
            self.subnet_ids = {sn.name: pulumi.Output.from_input(sn.id or "") for sn in spec.subnets}
        else:
            vpc_id, private_rts = self._build_vpc(name, spec, region, physical_prefix, labels)

        efa_sg = aws.ec2.SecurityGroup(
            f"{name}-efa-sg",
            vpc_id=vpc_id,
            description="EFA: all traffic between members (required by the SRD transport)",
            revoke_rules_on_delete=True,
            tags=merge_tags(labels, f"{physical_prefix}-efa"),
            opts=child,
        )
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-efa-ingress-self",
            security_group_id=efa_sg.id,
            referenced_security_group_id=efa_sg.id,
            ip_protocol="-1",
            description="EFA: all traffic from members",
            tags=merge_tags(labels, f"{physical_prefix}-efa-in"),
            opts=child,
        )
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-efa-egress-self",
            security_group_id=efa_sg.id,
            referenced_security_group_id=efa_sg.id,
            ip_protocol="-1",
            description="EFA: all traffic to members",
            tags=merge_tags(labels, f"{physical_prefix}-efa-out"),
            opts=child,
        )

        self.deployer_path: list[pulumi.Resource] = []
        if deployer_path is not None:
            self._connect_deployer(name, spec, vpc_id, private_rts, deployer_path, physical_prefix, labels)

        self.vpc_id = vpc_id
        self.efa_security_group_id = efa_sg.id
        self.register_outputs({"vpcId": vpc_id, "efaSecurityGroupId": efa_sg.id})

    def _build_vpc(self, name: str, spec: NetworkSpec, region: str, physical_prefix: str,
                   labels: Mapping[str, str]) -> tuple[pulumi.Output[str], list[pulumi.Output[str]]]:
        """The VPC, subnets, routing, NAT and S3 endpoint; returns the VPC id and private route tables."""
        child = pulumi.ResourceOptions(parent=self)
        cluster_tag = {f"kubernetes.io/cluster/{physical_prefix}": "shared"}
        ipv6 = spec.ip_family == "ipv6"
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=spec.vpc_cidr,
            # An IPv6 cluster needs a dual-stack VPC: Amazon's /56 (EKS user guide, "IPv6 addresses for clusters,
            # Pods, and services": the VPC and subnets need IPv4 and IPv6 CIDR blocks).
            assign_generated_ipv6_cidr_block=True if ipv6 else None,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags=merge_tags(labels, f"{physical_prefix}-vpc"),
            opts=child,
        )
        # The nodes' IPv6 addresses come from this block (None on an IPv4 cluster): the platform lets Prometheus reach
        # the host-network exporters there.
        self.ipv6_cidr_block = vpc.ipv6_cidr_block if ipv6 else None
        # The default security group of a new VPC allows all traffic between members; strip its rules.
        aws.ec2.DefaultSecurityGroup(
            f"{name}-default-sg",
            vpc_id=vpc.id,
            tags=merge_tags(labels, f"{physical_prefix}-default-deny"),
            opts=child,
        )
        igw = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=vpc.id, tags=merge_tags(labels, f"{physical_prefix}-igw"), opts=child
        )

        public_ids: dict[str, pulumi.Output[str]] = {}
        vpc_net = ipaddress.IPv4Network(spec.vpc_cidr)
        for sn in spec.subnets:
            elb_role = "kubernetes.io/role/elb" if sn.role == "public" else "kubernetes.io/role/internal-elb"
            v6_index = ipv6_subnet_index(vpc_net, ipaddress.IPv4Network(sn.cidr))
            subnet = aws.ec2.Subnet(
                f"{name}-subnet-{sn.name}",
                vpc_id=vpc.id,
                cidr_block=sn.cidr,
                # One /64 of the VPC's /56 per subnet, numbered from the subnet's IPv4 CIDR (never its place in the
                # list, so editing the list moves no other subnet's block; the rules refuse two in one /64),
                # addresses assigned to every interface: EKS places IPv6 nodes only in subnets that auto-assign them
                # (EKS user guide, cni-ipv6: "Otherwise, you can't deploy your nodes").
                ipv6_cidr_block=vpc.ipv6_cidr_block.apply(lambda block, i=v6_index: _ipv6_subnet(block, i))
                if ipv6 else None,
                assign_ipv6_address_on_creation=True if ipv6 else None,
                availability_zone=sn.availability_zone,
                availability_zone_id=sn.availability_zone_id,  # an AZ ID names one physical zone everywhere
                map_public_ip_on_launch=False,
                tags=merge_tags(labels, f"{physical_prefix}-{sn.name}", **cluster_tag,
                                **{elb_role: "1", "subnet-role": sn.role}),
                opts=child,
            )
            self.subnet_ids[sn.name] = subnet.id
            if sn.role == "public" and sn.zone not in public_ids:
                public_ids[sn.zone] = subnet.id

        public_rt = aws.ec2.RouteTable(
            f"{name}-rt-public", vpc_id=vpc.id, tags=merge_tags(labels, f"{physical_prefix}-public"), opts=child
        )
        aws.ec2.Route(
            f"{name}-route-public-igw",
            route_table_id=public_rt.id,
            destination_cidr_block="0.0.0.0/0",
            gateway_id=igw.id,
            opts=child,
        )
        egress_only: pulumi.Output[str] | None = None
        if ipv6:
            aws.ec2.Route(f"{name}-route-public-igw-ipv6", route_table_id=public_rt.id,
                          destination_ipv6_cidr_block="::/0", gateway_id=igw.id, opts=child)
            # Private subnets reach the IPv6 internet outbound only (EKS user guide, cni-ipv6: an egress-only
            # internet gateway route for private subnets).
            egress_only = aws.ec2.EgressOnlyInternetGateway(
                f"{name}-eigw", vpc_id=vpc.id, tags=merge_tags(labels, f"{physical_prefix}-eigw"), opts=child).id
        for sn in spec.subnets:
            if sn.role == "public":
                aws.ec2.RouteTableAssociation(
                    f"{name}-rta-{sn.name}", subnet_id=self.subnet_ids[sn.name],
                    route_table_id=public_rt.id, opts=child,
                )

        nat_zones = sorted(public_ids) if spec.nat_gateways == "per-az" else sorted(public_ids)[:1]
        nat_by_zone: dict[str, pulumi.Output[str]] = {}
        for zone in nat_zones:
            eip = aws.ec2.Eip(
                f"{name}-nat-eip-{zone}", domain="vpc",
                tags=merge_tags(labels, f"{physical_prefix}-nat-{zone}"), opts=child,
            )
            nat = aws.ec2.NatGateway(
                f"{name}-nat-{zone}",
                allocation_id=eip.allocation_id,
                subnet_id=public_ids[zone],
                connectivity_type="public",
                tags=merge_tags(labels, f"{physical_prefix}-nat-{zone}"),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]),
            )
            nat_by_zone[zone] = nat.id

        private_zones = sorted({sn.zone for sn in spec.subnets if sn.role != "public"})
        private_rts: list[pulumi.Output[str]] = []
        for zone in private_zones:
            rt = aws.ec2.RouteTable(
                f"{name}-rt-private-{zone}", vpc_id=vpc.id,
                tags=merge_tags(labels, f"{physical_prefix}-private-{zone}"), opts=child,
            )
            nat_id = nat_by_zone.get(zone, nat_by_zone[nat_zones[0]])
            aws.ec2.Route(
                f"{name}-route-private-nat-{zone}",
                route_table_id=rt.id,
                destination_cidr_block="0.0.0.0/0",
                nat_gateway_id=nat_id,
                opts=child,
            )
            if egress_only is not None:
                aws.ec2.Route(f"{name}-route-private-eigw-{zone}", route_table_id=rt.id,
                              destination_ipv6_cidr_block="::/0", egress_only_gateway_id=egress_only, opts=child)
            for sn in spec.subnets:
                if sn.role != "public" and sn.zone == zone:
                    aws.ec2.RouteTableAssociation(
                        f"{name}-rta-{sn.name}", subnet_id=self.subnet_ids[sn.name],
                        route_table_id=rt.id, opts=child,
                    )
            private_rts.append(rt.id)

        aws.ec2.VpcEndpoint(
            f"{name}-s3-endpoint",
            vpc_id=vpc.id,
            service_name=f"com.amazonaws.{region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=private_rts,
            tags=merge_tags(labels, f"{physical_prefix}-s3"),
            opts=child,
        )
        return vpc.id, private_rts

    def _connect_deployer(self, name: str, spec: NetworkSpec, vpc_id: pulumi.Output[str],
                          private_rts: Sequence[pulumi.Output[str]], path: DeployerPath, physical_prefix: str,
                          labels: Mapping[str, str]) -> None:
        """Let runners in another network reach the private API endpoint (EKS user guide, "Cluster API server
        endpoint", private access from a connected network): a Transit Gateway attachment in one private
        subnet per zone and a route back to the runners from every private route table. No DNS forwarding is
        needed: with private access EKS publishes the endpoint's private addresses in the public DNS name
        (AWS re:Post knowledge center, "eks-private-cluster-endpoint-vpc": "Amazon EKS automatically advertises
        the private IP addresses of the private endpoint through the public DNS name of the API server"), so a
        Route 53 Resolver inbound endpoint would only cost two ENIs. The Transit Gateway's own route tables
        belong to the runners' network, not this stack; the preview lists them."""
        child = pulumi.ResourceOptions(parent=self)
        by_zone: dict[str, str] = {}
        for sn in spec.subnets:
            if sn.role == "system":
                by_zone.setdefault(sn.zone, sn.name)
        for sn in spec.subnets:
            if sn.role != "public":
                by_zone.setdefault(sn.zone, sn.name)
        attachment_subnets = [self.subnet_ids[n] for _, n in sorted(by_zone.items())]
        attachment = aws.ec2transitgateway.VpcAttachment(
            f"{name}-deployer-tgw",
            transit_gateway_id=path.transit_gateway_id,
            vpc_id=vpc_id,
            subnet_ids=attachment_subnets,  # at most one subnet per zone
            dns_support="enable",
            tags=merge_tags(labels, f"{physical_prefix}-deployer-tgw"),
            opts=child,
        )
        self.deployer_path.append(attachment)
        for i, rt in enumerate(private_rts):
            for j, cidr in enumerate(path.runner_cidrs):
                self.deployer_path.append(aws.ec2.Route(
                    f"{name}-route-deployer-{i}-{j}",
                    route_table_id=rt,
                    destination_cidr_block=cidr,
                    transit_gateway_id=path.transit_gateway_id,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[attachment]),
                ))


def _ipv6_subnet(block: str | None, index: int) -> str:
    """The ``index``-th /64 of the VPC's IPv6 block (an unknown block during preview gives an empty string)."""
    if not block:
        return ""
    return str(list(ipaddress.ip_network(block).subnets(new_prefix=64))[index])
