"""AWS in the changes family: the inputs that replace each AWS resource (``replacements.yaml``), what EKS node groups,
filesystems, buckets, keys, the cluster, the accounting database and named roles hold, how an EKS managed node group
rolls (updateConfig: a surge on open capacity, terminate-then-launch on a Capacity Block or a full reservation), and
the versions of the control plane and the groups."""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from blueprint.changes.cloud import NodeGroupState, TypeRules, load_rules, minor, named_elsewhere, version_input
from blueprint.clouds.aws.pricing import block_window, launch_template
from blueprint.graph.model import GraphResource, ResourceGraph
from components.catalog.instances import load_aws_catalog
from components.clock import utcnow

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
AMI_KUBERNETES_VERSION_TAG = "ami-kubernetes-version"  # components/aws/compute.py
CLUSTER = "aws:eks/cluster:Cluster"
ROLE = "aws:iam/role:Role"
PLATFORM = "EKS"
# A managed node group's version is the control plane's (components/aws/compute.py); a custom AMI's is its own key.
CLUSTER_VERSION_KEY = "aws.controlPlane.kubernetesVersion"
NODE_VERSION_KEY = "aws.nodeGroups[{name}]"
# UpdateClusterVersion: "all of your node groups' Kubernetes versions must match the cluster's Kubernetes version in
# order to update the cluster to a new Kubernetes version" (the EKS API's operation documentation, botocore's EKS
# service model). Read 2026-12-02.
NODES_MATCH_BEFORE_UPGRADE = True
HOLDS = {
    "aws:fsx/lustreFileSystem:LustreFileSystem": "the shared filesystem's data (checkpoints, datasets, team dirs)",
    "aws:s3/bucket:Bucket": "its objects (checkpoints and their versions)",
    "aws:s3/bucketV2:BucketV2": "its objects (checkpoints and their versions)",
    CLUSTER: "the cluster: every Kubernetes object in it, its OIDC issuer and endpoint",
    "aws:kms/key:Key": "the key every object, volume, secret and log it encrypts needs",
    "aws:rds/instance:Instance": "Slurm's accounting database (job history, fair share, limits)",
}
# A template change EKS rolls nodes to: a new template version; its resource tags are not part of a version.
_TEMPLATE_METADATA = ("tags", "tagsAll", "description")


@cache
def replacement_rules() -> Mapping[str, TypeRules]:
    """This folder's replacements.yaml."""
    return load_rules(Path(__file__).with_name("replacements.yaml"))


def holds_data(graph: ResourceGraph, res: GraphResource) -> str | None:
    """Data or identity a replacement loses; an IAM role holds identity when another resource names it (a trust or a
    key policy, a Pod Identity association)."""
    if res.type in HOLDS:
        return HOLDS[res.type]
    if res.type == ROLE:
        name = res.inputs.get("name")
        if isinstance(name, str) and name and named_elsewhere(graph, res, f":role/{name}"):
            return f"an identity other resources name (role {name}: trust, key or access policies)"
    return None


def _reach(res: GraphResource) -> tuple[int, int, str, str]:
    """(nodes running now, maxSize, reserved kind, when it can roll) of a node group."""
    scaling = res.inputs.get("scalingConfig") or {}
    desired, maximum = int(scaling.get("desiredSize") or 0), int(scaling.get("maxSize") or 0)
    if res.inputs.get("capacityType") == "CAPACITY_BLOCK":
        window = block_window(res.inputs.get("tags"))
        now = utcnow()
        inside = window is not None and window[0] <= now < window[1]
        span = f" ({window[0]:%Y-%m-%d %H:%M} to {window[1]:%Y-%m-%d %H:%M} UTC)" if window is not None else ""
        when = ("rolls only with no node: outside the block's window" + span + ", or inside it with the group "
                "scaled to 0 first (EKS asks desiredSize 0 to update a Capacity Block group: aws eks "
                "update-nodegroup-config --scaling-config desiredSize=0), then apply")
        return (maximum if inside else 0), maximum, "capacity block", when
    return desired, maximum, "", ""


def _held(res: GraphResource) -> str:
    """Why this apply leaves the group's nodes alone: the program holds a Capacity Block group's version, AMI release
    and launch template version (ignoreChanges) while its block runs (components/aws/compute.py)."""
    if "version" not in (res.ignore_changes or []):
        return ""
    window = block_window(res.inputs.get("tags"))
    after = f" after {window[1]:%Y-%m-%d %H:%M} UTC" if window is not None else ""
    return (f"held while its Capacity Block runs (this apply sends none of it: ignoreChanges); it rolls at the first "
            f"apply{after}, with the group at 0 nodes, and EKS refuses the next control-plane update until it has")


def node_groups(graph: ResourceGraph) -> list[NodeGroupState]:
    """Every EKS managed node group: its nodes, GPUs, reserved capacity, and how updateConfig rolls it."""
    catalog = load_aws_catalog()
    out = []
    for res in graph.of_type(NODE_GROUP):
        inputs = res.inputs
        template = launch_template(graph, res)
        listed = inputs.get("instanceTypes")
        instance = str(listed[0]) if isinstance(listed, list) and listed else str(template.get("instanceType") or "")
        facts = catalog.get(instance)
        nodes, maximum, reserved, when = _reach(res)
        if not reserved and template.get("capacityReservationSpecification"):
            reserved = "reservation"
            when = ("the reservation has no spare instance to surge into: each node is terminated before its "
                    "replacement launches; roll between runs")
        update = inputs.get("updateConfig") or {}
        strategy = str(update.get("updateStrategy") or "DEFAULT")
        pct, count = update.get("maxUnavailablePercentage"), update.get("maxUnavailable")
        per_wave = max(1, math.ceil(nodes * int(pct) / 100)) if pct else max(1, int(count or 1))
        waves = math.ceil(nodes / per_wave) if nodes else 0
        if strategy == "MINIMAL":
            how = ("EKS terminates, then launches (updateStrategy MINIMAL), "
                   + ("every node in one wave" if pct == 100 else f"{per_wave} node(s) at a time"))
        else:
            how = f"EKS surges: new nodes first, then drains and terminates {per_wave} node(s) at a time"
        labels = inputs.get("labels") or {}
        name = str(labels.get("gpu-cluster/node-group") or inputs.get("nodeGroupName") or res.name)
        out.append(NodeGroupState(name=name, urn=res.urn, nodes=nodes, max_nodes=maximum,
                                  gpus_per_node=facts.gpu_count if facts is not None else 0, reserved=reserved,
                                  waves=waves, how=how, when=when, held=_held(res)))
    return sorted(out, key=lambda g: g.name)


def _template_data(graph: ResourceGraph, group: GraphResource) -> dict[str, Any]:
    return {k: v for k, v in launch_template(graph, group).items() if k not in _TEMPLATE_METADATA}


def roll_reasons(old: ResourceGraph, new: ResourceGraph, before: GraphResource, after: GraphResource) -> list[str]:
    """A new Kubernetes minor, AMI release or AMI type, or a launch template change (a new template version EKS
    rolls the nodes to: UpdateNodegroupVersion)."""
    reasons = []
    for key, what in (("version", "Kubernetes version"), ("releaseVersion", "AMI release"), ("amiType", "AMI type")):
        a, b = before.inputs.get(key), after.inputs.get(key)
        if a != b:
            reasons.append(f"{what} {a or '(EKS default)'} -> {b or '(EKS default)'}")
    was, now = _template_data(old, before), _template_data(new, after)
    if was != now:
        changed = sorted(k for k in {*was, *now} if was.get(k) != now.get(k))
        reasons.append(f"its launch template changes ({', '.join(changed)}): a new version the nodes roll to")
    return reasons


def cluster_version(graph: ResourceGraph) -> str | None:
    """The EKS cluster's ``version``."""
    return version_input(graph, CLUSTER, "version")


def node_versions(graph: ResourceGraph) -> Mapping[str, str]:
    """Each managed node group's ``version``; a custom-AMI group, which has none, by the minor its AMI is built for
    (its ``ami-kubernetes-version`` tag, from amiKubernetesVersion)."""
    out = {}
    for res in graph.of_type(NODE_GROUP):
        version = res.inputs.get("version") or (res.inputs.get("tags") or {}).get(AMI_KUBERNETES_VERSION_TAG)
        if isinstance(version, str) and version[:1].isdigit():
            labels = res.inputs.get("labels") or {}
            out[str(labels.get("gpu-cluster/node-group") or res.name)] = minor(version)
    return out
