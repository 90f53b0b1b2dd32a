"""Google Cloud in the changes family: the inputs that replace each GCP resource (``replacements.yaml``), what GKE
clusters, buckets, filesystems, keys, the accounting database and service accounts hold, how a GKE node pool rolls
(its upgradeSettings: surge, or blue-green), and the versions of the control plane and the pinned pools."""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from blueprint.changes.cloud import NodeGroupState, TypeRules, load_rules, minor, named_elsewhere, version_input
from blueprint.changes.replacements import forcing_fields
from blueprint.clouds.gcp.pricing import gke_pool_size
from blueprint.graph.model import GraphResource, ResourceGraph
from components.catalog.gcp_machines import load_gcp_catalog

NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
ACCOUNT = "gcp:serviceaccount/account:Account"
PLATFORM = "GKE"
CLUSTER_VERSION_KEY = "gcp.cluster.minMasterVersion"
NODE_VERSION_KEY = "gcp.nodePools[{name}].version"
NODES_MATCH_BEFORE_UPGRADE = False  # GKE lets pools trail the control plane by two minors (gke_versions.yaml)
HOLDS = {
    "gcp:storage/bucket:Bucket": "its objects (checkpoints and their versions)",
    "gcp:lustre/instance:Instance": "the shared filesystem's data (checkpoints, datasets, team directories)",
    "gcp:filestore/instance:Instance": "the shared filesystem's data",
    "gcp:parallelstore/instance:Instance": "the shared filesystem's data",
    CLUSTER: "the cluster: every Kubernetes object in it, its endpoint and Workload Identity pool",
    "gcp:kms/keyRing:KeyRing": "the key ring of the keys that encrypt the stack's data (a ring cannot be deleted)",
    "gcp:kms/cryptoKey:CryptoKey": "the key every object, disk and secret it encrypts needs",
    "gcp:sql/databaseInstance:DatabaseInstance": "Slurm's accounting database (job history, fair share, limits)",
}


@cache
def replacement_rules() -> Mapping[str, TypeRules]:
    """This folder's replacements.yaml."""
    return load_rules(Path(__file__).with_name("replacements.yaml"))


def holds_data(graph: ResourceGraph, res: GraphResource) -> str | None:
    """Data or identity a replacement loses; a service account holds identity when another resource names it (an IAM
    member, Workload Identity)."""
    if res.type in HOLDS:
        return HOLDS[res.type]
    if res.type == ACCOUNT:
        account = res.inputs.get("accountId")
        if isinstance(account, str) and account and named_elsewhere(graph, res, f"{account}@"):
            return f"an identity other resources name (service account {account}: IAM members, Workload Identity)"
    return None


def node_groups(graph: ResourceGraph) -> list[NodeGroupState]:
    """Every GKE node pool: its nodes, GPUs, reservation, and how its upgradeSettings roll it."""
    catalog = load_gcp_catalog()
    out = []
    for res in graph.of_type(NODE_POOL):
        config = res.inputs.get("nodeConfig") or {}
        size = gke_pool_size(res.inputs)
        accelerators = [a for a in config.get("guestAccelerators") or [] if isinstance(a, dict)]
        facts = catalog.get(str(config.get("machineType") or ""))
        gpus = sum(int(a.get("count") or 0) for a in accelerators) or (facts.gpu_count if facts is not None else 0)
        affinity = config.get("reservationAffinity") or {}
        reserved = "reservation" if affinity.get("consumeReservationType") == "SPECIFIC_RESERVATION" else ""
        settings = res.inputs.get("upgradeSettings") or {}
        nodes = size.desired
        if not settings and (res.inputs.get("queuedProvisioning") or {}).get("enabled"):
            waves = 0  # flex-start: nodes are not upgraded in place; the next request gets the new version
            how = "GKE short-lived upgrades: running flex-start nodes are left to end; new ones come at the new version"
        elif settings.get("strategy") == "BLUE_GREEN":
            # The green nodes come up first; the blue ones are drained in batches (standardRolloutPolicy).
            policy = (settings.get("blueGreenSettings") or {}).get("standardRolloutPolicy") or {}
            count, share = policy.get("batchNodeCount"), policy.get("batchPercentage")
            per_batch = int(count) if count else max(1, math.ceil(nodes * float(share))) if share else max(nodes, 1)
            waves = math.ceil(nodes / per_batch) if nodes else 0
            how = (f"GKE blue-green: a second pool's worth of nodes first, then the old ones drained {per_batch} at "
                   "a time and deleted after the soak")
        else:
            surge, unavailable = int(settings.get("maxSurge") or 0), int(settings.get("maxUnavailable") or 0)
            per_wave = max(1, surge + unavailable)
            waves = math.ceil(nodes / per_wave) if nodes else 0
            how = (f"GKE surge: {surge} new node(s) first, {unavailable} drained at a time" if surge else
                   f"GKE replaces {unavailable or 1} node(s) at a time in place (maxSurge 0: no spare VM needed)")
        when = ("the reservation holds the pool's nodes (upgrade nodes come out of it): the pool carries the "
                "end-of-support maintenance exclusion, so GKE does not upgrade it on its own; roll it between runs"
                if reserved else "")
        labels = config.get("labels") or {}
        name = str(labels.get("gpu-cluster/node-group") or res.inputs.get("name") or res.name)
        out.append(NodeGroupState(name=name, urn=res.urn, nodes=nodes, max_nodes=size.maximum, gpus_per_node=gpus,
                                  reserved=reserved, waves=waves, how=how, when=when))
    return sorted(out, key=lambda g: g.name)


def roll_reasons(old: ResourceGraph, new: ResourceGraph, before: GraphResource, after: GraphResource) -> list[str]:
    """A new version, or a node configuration change GKE applies by recreating the nodes (one that replaces the
    pool is counted by the replacements instead)."""
    reasons = []
    plane = cluster_version(old), cluster_version(new)
    held = any((p.get("exclusionUntilEndOfSupports") or [{}])[0].get("enabled")
               for p in after.inputs.get("maintenancePolicies") or [] if isinstance(p, dict))
    if not after.inputs.get("version") and not held and None not in plane and plane[0] != plane[1]:
        # An unpinned pool on a release channel follows the control plane: GKE's node auto-upgrade (which a channel
        # cannot turn off) moves it after the control plane, in a maintenance window, not during this apply.
        reasons.append(f"the control plane moves {plane[0]} -> {plane[1]}: GKE auto-upgrades this pool to it after "
                       "the control plane, in a maintenance window (release channel), not in this apply")
    if before.inputs.get("version") != after.inputs.get("version"):
        reasons.append(f"version {before.inputs.get('version') or '(the control plane`s)'} -> "
                       f"{after.inputs.get('version') or '(the control plane`s)'}")
    rules = replacement_rules().get(NODE_POOL)
    replacing = set(forcing_fields(rules, before.inputs, after.inputs, after.ignore_changes or ())[0]) \
        if rules is not None else set()
    old_config, new_config = before.inputs.get("nodeConfig") or {}, after.inputs.get("nodeConfig") or {}
    changed = sorted(k for k in {*old_config, *new_config} if old_config.get(k) != new_config.get(k)
                     and f"nodeConfig.{k}" not in replacing)
    if changed:
        reasons.append(f"nodeConfig {', '.join(changed)} change (GKE recreates the nodes to apply it)")
    return reasons


def cluster_version(graph: ResourceGraph) -> str | None:
    """The cluster's ``minMasterVersion`` minor (None on a channel's default)."""
    return version_input(graph, CLUSTER, "minMasterVersion")


def node_versions(graph: ResourceGraph) -> Mapping[str, str]:
    """Each pinned pool's ``version``."""
    out = {}
    for res in graph.of_type(NODE_POOL):
        version = res.inputs.get("version")
        if isinstance(version, str) and version[:1].isdigit():
            labels = (res.inputs.get("nodeConfig") or {}).get("labels") or {}
            out[str(labels.get("gpu-cluster/node-group") or res.inputs.get("name") or res.name)] = minor(version)
    return out
