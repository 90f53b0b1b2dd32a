"""Rules on the network plane: CIDRs, subnets, zones, NAT, existing VPCs."""

from __future__ import annotations

import ipaddress

from components.spec.aws import AwsSpec
from components.spec.decisions import (
    _gpu_zone_given_once,
    _gpu_zone_key,
    ipv6_slice_prefix,
    ipv6_subnet_index,
    parse_cidr,
)
from components.spec.errors import _Collector
from components.spec.rules.cloud import _check_zone_in_region


def _ipv4_cidr(value: str, where: str, out: _Collector) -> ipaddress.IPv4Network | None:
    net = parse_cidr(value)
    if not isinstance(net, ipaddress.IPv4Network):
        reason = net if isinstance(net, str) else "an IPv6 network"
        out.add(where, "cidr-valid", f"'{value}' is not an IPv4 CIDR (address/prefix, no host bits): {reason}")
        return None
    return net


def _check_network(aws: AwsSpec, out: _Collector) -> None:
    net = aws.network
    vpc = _ipv4_cidr(net.vpc_cidr, ".aws.network.vpcCidr", out)
    if vpc is not None and not 16 <= vpc.prefixlen <= 28:
        out.add(".aws.network.vpcCidr", "vpc-cidr-size",
                f"a VPC CIDR is between /16 and /28 (Amazon VPC user guide, VPC CIDR blocks); got /{vpc.prefixlen}")
    seen: dict[str, int] = {}
    nets: list[tuple[int, ipaddress.IPv4Network]] = []
    for i, sn in enumerate(net.subnets):
        where = f".aws.network.subnets[{i}]"
        if sn.name in seen:
            out.add(f"{where}.name", "unique-names", f"subnet name '{sn.name}' is used twice")
        seen[sn.name] = i
        if (sn.availability_zone is None) == (sn.availability_zone_id is None):
            out.add(f"{where}.availabilityZone", "zone-given-once",
                    "give the subnet's zone once: availabilityZone (a name) or availabilityZoneId (an AZ ID)")
        else:
            key = "availabilityZone" if sn.availability_zone else "availabilityZoneId"
            if (sn.availability_zone_id is not None) != aws.zones_by_id:
                gpu_key = "gpuAvailabilityZoneId" if aws.zones_by_id else "gpuAvailabilityZone"
                out.add(f"{where}.{key}", "zone-form-consistent",
                        f"the stack names its GPU zone with {gpu_key}, so every subnet must use "
                        f"{'availabilityZoneId' if aws.zones_by_id else 'availabilityZone'} too (names and IDs "
                        "cannot be compared before the account maps them)")
            else:
                _check_zone_in_region(aws, sn.zone, f"{where}.{key}", out)
        cidr = _ipv4_cidr(sn.cidr, f"{where}.cidr", out)
        if cidr is None:
            continue
        if cidr.prefixlen > 28:
            out.add(f"{where}.cidr", "subnet-cidr-size",
                    f"a subnet is at least a /28 (Amazon VPC user guide, subnet sizing); got /{cidr.prefixlen}")
        if vpc is not None and not cidr.subnet_of(vpc):
            out.add(f"{where}.cidr", "subnet-inside-vpc",
                    f"subnet CIDR {sn.cidr} must lie inside the VPC CIDR {net.vpc_cidr}")
        for j, other in nets:
            if cidr.overlaps(other):
                out.add(f"{where}.cidr", "cidr-no-overlap",
                        f"subnet CIDR {sn.cidr} overlaps {out.ref(f'.aws.network.subnets[{j}]')} ({other}); "
                        "subnets must not overlap")
        nets.append((i, cidr))
    for i, sn in enumerate(net.subnets):
        if net.existing is not None and sn.id is None:
            out.add(f".aws.network.subnets[{i}].id", "network-existing",
                    f"network.existing uses subnets that already exist: give subnet '{sn.name}' its id (subnet-...)")
        if net.existing is None and sn.id is not None:
            out.add(f".aws.network.subnets[{i}].id", "network-existing",
                    "a subnet id only applies with network.existing (otherwise the program creates the subnet)")
    if net.ip_family == "ipv6":
        # EKS user guide, "IPv6 addresses for clusters, Pods, and services" (considerations) and the FSx API (a
        # Lustre file system has no network type: IPv4 only).
        if net.existing is not None:
            out.add(".aws.network.ipFamily", "ipv6-cluster",
                    "an IPv6 cluster needs a dual-stack VPC with IPv6 subnets that auto-assign addresses, which the "
                    "program builds; with network.existing add those to your VPC yourself (not checked here): use "
                    "ipv4, or let the program create the network")
        if len(net.subnets) > 256:
            out.add(".aws.network.subnets", "ipv6-cluster",
                    f"an IPv6 VPC's /56 holds 256 /64 subnets, and the stack lists {len(net.subnets)}")
        if vpc is not None:
            _check_ipv6_indexes(vpc, [(i, c) for i, c in nets if c.subnet_of(vpc)], out)
        if aws.storage.filesystem is not None:
            out.add(".aws.network.ipFamily", "ipv6-cluster",
                    "FSx for Lustre is not supported on IPv6 EKS clusters (EKS user guide, cni-ipv6 considerations; "
                    "a Lustre file system has no IPv6 network type): remove storage.filesystem (checkpoints through "
                    "the bucket) or use ipv4")
    roles = {sn.role for sn in net.subnets}
    for role in ("gpu", "system"):
        if role not in roles:
            out.add(".aws.network.subnets", "subnet-roles",
                    f"at least one subnet with role '{role}' is required")
    private_zones = {sn.zone for sn in net.subnets if sn.role != "public"}
    if len(private_zones) < 2:
        out.add(".aws.network.subnets", "eks-two-zones",
                "EKS needs private (gpu or system) subnets in at least two availability zones: the control plane's "
                "network interfaces go in the cluster's subnets, which must span two zones (EKS CreateCluster, "
                "network requirements); a single-zone GPU group is fine, add a small system subnet in a second zone")
    for i, sn in enumerate(net.subnets):
        if sn.role == "gpu" and _gpu_zone_given_once(aws) and sn.zone != aws.gpu_zone:
            key = "availabilityZoneId" if aws.zones_by_id else "availabilityZone"
            out.add(f".aws.network.subnets[{i}].{key}", "gpu-subnet-in-gpu-zone",
                    f"gpu subnet '{sn.name}' must be in {_gpu_zone_key(aws)} '{aws.gpu_zone}', not '{sn.zone}'")
    if net.existing is not None:
        return  # NAT and public subnets are the existing VPC's
    if "public" not in roles:
        out.add(".aws.network.subnets", "subnet-roles",
                "at least one subnet with role 'public' is required for the NAT gateway")
    elif net.nat_gateways == "per-az" and all((sn.availability_zone_id is not None) == aws.zones_by_id
                                              for sn in net.subnets):
        public_zones = {sn.zone for sn in net.subnets if sn.role == "public"}
        missing = sorted(z for z in private_zones if z not in public_zones)
        if missing:
            out.add(".aws.network.natGateways", "nat-per-az",
                    f"natGateways per-az puts a NAT gateway in a public subnet of each zone with private subnets, and "
                    f"{', '.join(missing)} has no public subnet; add one there, or use natGateways: single")


def _check_ipv6_indexes(vpc: ipaddress.IPv4Network, nets: list[tuple[int, ipaddress.IPv4Network]],
                        out: _Collector) -> None:
    """No two subnets of an IPv6 VPC get the same /64 (:func:`ipv6_subnet_index`: the slice of vpcCidr a subnet's
    IPv4 CIDR starts in)."""
    first: dict[int, tuple[int, ipaddress.IPv4Network]] = {}
    slice_prefix = ipv6_slice_prefix(vpc)
    for i, cidr in nets:
        index = ipv6_subnet_index(vpc, cidr)
        if index in first and not cidr.overlaps(first[index][1]):  # an overlap is cidr-no-overlap's
            j, other = first[index]
            out.add(f".aws.network.subnets[{i}].cidr", "ipv6-subnet-index",
                    f"each subnet of an IPv6 VPC gets the /64 numbered by the /{slice_prefix} of vpcCidr its cidr "
                    f"starts in (one of 256, so that editing the subnet list moves no other subnet's IPv6 block), and "
                    f"{cidr} starts in the same /{slice_prefix} as {out.ref(f'.aws.network.subnets[{j}]')} ({other}): "
                    f"start it in another /{slice_prefix}")
        else:
            first[index] = (i, cidr)
