"""AWS in the graph family: input limits of graph documents, and the offline engine's answers for AWS resources and
invokes (ids in AWS's formats, ARNs in the offline account, the cluster endpoint and CA, the OIDC issuer, bucket and
filesystem names)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from blueprint.clouds.aws.values import refused_values as refused_values
from blueprint.graph.cloud import MAX_GIB, MAX_NODES, Quantities, stable_id

OFFLINE_ACCOUNT = "123456789012"  # placeholder account id in offline ARNs; never a real account
_NODES = ("a node count", MAX_NODES)
_GIB = ("a capacity in GiB", MAX_GIB)
QUANTITIES: Quantities = {
    "aws:eks/nodeGroup:NodeGroup": tuple((("scalingConfig", key), _NODES) for key in ("desiredSize", "minSize",
                                                                                       "maxSize")),
    "aws:fsx/lustreFileSystem:LustreFileSystem": ((("storageCapacity",), _GIB),
                                                  (("perUnitStorageThroughput",), ("a throughput in MB/s per TiB",
                                                                                   100_000))),
}
NUMERIC_STRINGS = False
ID_PREFIXES = {
    "aws:ec2/vpc:Vpc": "vpc-",
    "aws:ec2/subnet:Subnet": "subnet-",
    "aws:ec2/securityGroup:SecurityGroup": "sg-",
    "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup": "sg-",
    "aws:ec2/internetGateway:InternetGateway": "igw-",
    "aws:ec2/natGateway:NatGateway": "nat-",
    "aws:ec2/eip:Eip": "eipalloc-",
    "aws:ec2/routeTable:RouteTable": "rtb-",
    "aws:ec2/vpcEndpoint:VpcEndpoint": "vpce-",
    "aws:ec2/launchTemplate:LaunchTemplate": "lt-",
    "aws:fsx/lustreFileSystem:LustreFileSystem": "fs-",
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": "dra-",
}


def new_resource(typ: str, name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    """Echo the inputs and add the computed outputs the program reads."""
    rid = ID_PREFIXES.get(typ, "") + stable_id(typ, name)
    state: dict[str, Any] = dict(inputs)
    service = typ.split(":")[1].split("/")[0]
    state.setdefault("arn", f"arn:aws:{service}:{region}:{OFFLINE_ACCOUNT}:{name}")
    if typ == "aws:eks/cluster:Cluster":
        oidc_id = stable_id("oidc", name, length=32).upper()
        state.update(
            endpoint=f"https://{oidc_id}.gr7.{region}.eks.amazonaws.com",
            certificateAuthority={"data": "T0ZGTElORS1DQQ=="},
            identities=[{"oidcs": [{"issuer": f"https://oidc.eks.{region}.amazonaws.com/id/{oidc_id}"}]}],
            vpcConfig={**inputs.get("vpcConfig", {}), "clusterSecurityGroupId": "sg-" + stable_id("eks-sg", name)},
            arn=f"arn:aws:eks:{region}:{OFFLINE_ACCOUNT}:cluster/{inputs.get('name', name)}",
        )
        network = dict(inputs.get("kubernetesNetworkConfig") or {})
        if network.get("ipFamily") == "ipv6":
            # EKS picks an IPv6 cluster's service block itself, a /108 of the unique local range fc00::/7 (EKS user
            # guide, "IPv6 addresses to clusters, Pods, and services"); the program reads it for a custom AMI's
            # cluster DNS address.
            word = stable_id("svc6", name, length=8)
            network["serviceIpv6Cidr"] = f"fd{word[:2]}:{word[2:6]}:{word[6:8]}00::/108"
            state["kubernetesNetworkConfig"] = network
        rid = str(inputs.get("name", name))
    elif typ == "aws:s3/bucket:Bucket":
        bucket = inputs.get("bucket") or f"{inputs.get('bucketPrefix', name)}{stable_id('bucket', name, length=26)}"
        state.update(bucket=bucket, arn=f"arn:aws:s3:::{bucket}")
        rid = bucket
    elif typ == "aws:fsx/lustreFileSystem:LustreFileSystem":
        state.update(dnsName=f"{rid}.fsx.{region}.amazonaws.com", mountName=stable_id("mount", name, length=8))
    elif typ == "aws:kms/key:Key":
        key_id = str(uuid.UUID(stable_id("kms", name, length=32)))
        state.update(keyId=key_id, arn=f"arn:aws:kms:{region}:{OFFLINE_ACCOUNT}:key/{key_id}")
        rid = key_id
    elif typ == "aws:iam/role:Role":
        state["arn"] = f"arn:aws:iam::{OFFLINE_ACCOUNT}:role/{inputs.get('name', name)}"
        rid = str(inputs.get("name", name))
    elif typ == "aws:iam/openIdConnectProvider:OpenIdConnectProvider":
        url = str(inputs.get("url", "")).removeprefix("https://")
        state["arn"] = f"arn:aws:iam::{OFFLINE_ACCOUNT}:oidc-provider/{url}"
    elif typ == "aws:ec2/launchTemplate:LaunchTemplate":
        state.update(latestVersion=1, defaultVersion=1)
    elif typ == "aws:ec2/vpc:Vpc" and inputs.get("assignGeneratedIpv6CidrBlock"):
        # Amazon's /56, from the documentation prefix 2001:db8::/32, so subnets' /64s are known offline.
        block = stable_id("ipv6", name, length=6)
        state["ipv6CidrBlock"] = f"2001:db8:{block[:4]}:{block[4:]}00::/56"
    elif typ == "aws:ec2/eip:Eip":
        state["allocationId"] = rid
    elif typ == "aws:ec2/placementGroup:PlacementGroup":
        rid = str(inputs.get("name", name))
    elif typ == "aws:eks/nodeGroup:NodeGroup":
        # EKS names the node group's Auto Scaling group eks-<node group>-<uuid>.
        asg = f"eks-{inputs.get('nodeGroupName', name)}-{uuid.UUID(stable_id('asg', name, length=32))}"
        state["resources"] = [{"autoscalingGroups": [{"name": asg}]}]
    return rid, state


def call(token: str, args: Mapping[str, Any], region: str) -> dict[str, Any] | None:
    """The offline account, partition and region, and zone names for AZ IDs."""
    if token == "aws:index/getCallerIdentity:getCallerIdentity":
        return {"accountId": OFFLINE_ACCOUNT, "arn": f"arn:aws:iam::{OFFLINE_ACCOUNT}:root", "userId": OFFLINE_ACCOUNT}
    if token == "aws:index/getPartition:getPartition":
        return {"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}
    if token == "aws:index/getRegion:getRegion":
        return {"name": region, "region": region}
    if token == "aws:index/getAvailabilityZones:getAvailabilityZones":
        ids = [str(v) for f in args.get("filters") or [] if f.get("name") == "zone-id" for v in f.get("values") or []]
        return {"zoneIds": ids, "names": [offline_zone_name(region, i) for i in ids]}
    return None


def offline_zone_name(region: str, zone_id: str) -> str:
    """A placeholder zone name for an AZ ID offline (``use1-az4`` -> ``us-east-1d``).

    Real accounts map IDs to names differently; only ``aws.get_availability_zones`` in a real run knows.
    """
    number = zone_id.rsplit("-az", 1)[-1]
    return region + (chr(ord("a") + int(number) - 1) if number.isdigit() and 0 < int(number) <= 26 else "?")


def phase_boundaries(spec: Any) -> list[datetime]:
    """The instants where a Capacity Block of the spec changes phase: its start, the EC2 shutdown lead before its end,
    its end (:class:`components.aws.capacity_block.BlockWindow`, which the program compares with the clock)."""
    from components.aws.capacity_block import EC2_SHUTDOWN_LEAD

    out: list[datetime] = []
    for group in spec.aws_spec().node_groups:
        cap = group.capacity
        if cap.type == "capacity-block" and cap.start and cap.end:
            out += [cap.start, cap.end - EC2_SHUTDOWN_LEAD, cap.end]
    return sorted(out)
