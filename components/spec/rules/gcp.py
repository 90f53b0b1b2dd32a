"""Rules on a GCP stack: project and zone, network ranges, node pools, GPU networks, storage and the GKE cluster.

Each rule encodes a refusal GCP would otherwise make at apply time (or a production default the blueprint
insists on); the source is named beside it.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import re
from collections.abc import Sequence

from components.catalog.gcp_machines import MachineFacts, gcp_storage_limits, load_gcp_catalog
from components.catalog.gke_versions import VersionFloor, load_gke_versions, parse_gke_version
from components.catalog.regions import known_gcp_regions
from components.spec.base import GPU_TAINT_KEY
from components.spec.decisions import (
    covers_everything,
    gcs_bucket_name,
    gcs_checkpoint_bucket_name,
    gke_checked_version,
    gke_version_floors,
    gpudirect_pools,
    mount_path_problem,
    parse_cidr,
)
from components.spec.errors import _Collector
from components.spec.gcp import GcpNodePoolSpec, GcpSpec
from components.spec.model import ClusterSpec
from components.spec.rules.gcp_gateway import check_serving_gateway, gateway_version_floors
from components.spec.rules.gcp_lustre import check_existing_lustre
from components.spec.rules.gcp_networks import check_gpu_networks
from components.spec.rules.gcp_pools import check_lustre_images, check_pool_accounts, check_pool_images
from components.spec.rules.gke_maintenance import check_exclusions
from components.spec.rules.network import _ipv4_cidr
from components.spec.rules.node_groups import check_labels_and_taints
from components.spec.rules.rxdm import check_rxdm

# GKE: a Standard cluster's control-plane range for private nodes is a /28 (GKE "Creating a private cluster",
# master_ipv4_cidr_block).
_CONTROL_PLANE_PREFIX = 28
# GKE maintenance windows: "at least 48 hours of availability in a 32-day rolling window", each window at least
# 4 hours (GKE "Maintenance windows and exclusions"); exclusions: components/spec/rules/gke_maintenance.py.
_WINDOW_HOURS_PER_32_DAYS = 48
# Budgets on a billing account send email through Cloud Monitoring notification channels: at most 5 per budget
# (Cloud Billing Budget API, NotificationsRule.monitoringNotificationChannels).
MAX_GCP_BUDGET_CHANNELS = 5


def check_gcp(spec: ClusterSpec, gcp: GcpSpec, out: _Collector) -> None:
    """Every GCP rule."""
    if gcp.region not in known_gcp_regions():
        close = difflib.get_close_matches(gcp.region, known_gcp_regions(), n=3)
        out.add(".gcp.region", "region-known",
                f"'{gcp.region}' is not a Google Cloud region of the catalog (components/catalog/gcp_regions.yaml, "
                f"{len(known_gcp_regions())} regions, with its source)" + (f"; closest: {', '.join(close)}" if close
                                                                           else ""))
    if not gcp.gpu_zone.startswith(f"{gcp.region}-"):
        out.add(".gcp.gpuZone", "zone-in-region", f"zone '{gcp.gpu_zone}' is not in region '{gcp.region}'")
    _check_ranges(gcp, out)
    _check_pools(spec, gcp, out)
    check_pool_accounts(spec.name, gcp, out)
    check_pool_images(gcp, out)
    check_lustre_images(gcp, load_gcp_catalog(), out)
    _check_storage(gcp, out)
    check_existing_lustre(gcp, out)
    _check_buckets(spec, gcp, out)
    _check_cluster(spec, gcp, out)
    _check_gke_version(gcp, out, gateway_version_floors(spec))
    _check_node_versions(gcp, out)
    check_rxdm(spec, gcp, out)
    check_serving_gateway(spec, gcp, out)
    for i, team in enumerate(spec.teams):
        if team.role_arns:
            out.add(f".teams[{i}].roleArns", "team-access-per-cloud",
                    "roleArns are AWS IAM roles; on GKE a team's members reach the cluster through its group "
                    "(a Google Group with Google Groups for RBAC) and IAM")
        # IAM takes a group only as group:<email> (IAM "Principal identifiers"); GKE puts a Google Group in a
        # member's identity only when the cluster has Google Groups for RBAC and the group is nested in
        # gke-security-groups@<domain> (GKE "Configure Google Groups for RBAC"); without it the team's RoleBinding
        # never matches anyone.
        if team.group is not None and not _EMAIL.fullmatch(team.group):
            out.add(f".teams[{i}].group", "gke-team-group-email",
                    f"'{team.group}' is not a Google Group's email: on GKE the team's group is granted IAM as "
                    "group:<email> and bound by RBAC through Google Groups for RBAC (e.g. research@example.com)")
        elif team.group is not None and gcp.cluster.rbac_security_group is None:
            out.add(".gcp.cluster.rbacSecurityGroup", "gke-groups-for-rbac",
                    f"team {team.name} is reached through the Google Group {team.group}, which GKE passes to RBAC "
                    "only with Google Groups for RBAC: set rbacSecurityGroup to gke-security-groups@<your domain> "
                    "and nest the team groups in it")
        if team.budget is not None and gcp.billing_account is not None:
            recipients = set(team.budget.notify) | set(spec.billing.notify)
            if len(recipients) > MAX_GCP_BUDGET_CHANNELS:
                out.add(f".teams[{i}].budget.notify", "gcp-budget-recipients",
                        f"a GCP budget notifies at most {MAX_GCP_BUDGET_CHANNELS} monitoring channels; the team's "
                        f"and billing.notify's addresses make {len(recipients)}")
    if gcp.billing_account is not None and len(set(spec.billing.notify)) > MAX_GCP_BUDGET_CHANNELS:
        out.add(".billing.notify", "gcp-budget-recipients",
                f"a GCP budget notifies at most {MAX_GCP_BUDGET_CHANNELS} monitoring channels")


_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")


def _check_ranges(gcp: GcpSpec, out: _Collector) -> None:
    net = gcp.network
    ranges: list[tuple[str, ipaddress.IPv4Network]] = []
    for key in ("nodeCidr", "podsCidr", "servicesCidr", "controlPlaneCidr", "gpuNetworksCidr", "proxyOnlyCidr"):
        attr = re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()
        value = getattr(net, attr)
        if value is None:
            continue
        parsed = _ipv4_cidr(value, f".gcp.network.{key}", out)
        if parsed is None:
            continue
        if not parsed.is_private:
            out.add(f".gcp.network.{key}", "cidr-private", f"'{value}' is not a private (RFC 1918 or shared) range")
        for other_key, other in ranges:
            if parsed.overlaps(other):
                out.add(f".gcp.network.{key}", "cidr-no-overlap", f"'{value}' overlaps {other_key} '{other}'")
        ranges.append((key, parsed))
        if key == "controlPlaneCidr" and parsed.prefixlen != _CONTROL_PLANE_PREFIX:
            out.add(".gcp.network.controlPlaneCidr", "control-plane-cidr-28",
                    f"GKE takes a /28 for the private control plane (master_ipv4_cidr_block); got /{parsed.prefixlen}")


def _check_pools(spec: ClusterSpec, gcp: GcpSpec, out: _Collector) -> None:
    catalog = load_gcp_catalog()
    names: set[str] = set()
    for i, pool in enumerate(gcp.node_pools):
        where = f".gcp.nodePools[{i}]"
        if pool.name in names:
            out.add(f"{where}.name", "unique-names", f"node pool name '{pool.name}' is used twice")
        names.add(pool.name)
        if not pool.min_size <= pool.desired_size <= pool.max_size:
            out.add(f"{where}.desiredSize", "node-group-size-order",
                    f"sizes must satisfy minSize ({pool.min_size}) <= desiredSize ({pool.desired_size}) "
                    f"<= maxSize ({pool.max_size})")
        facts = catalog.get(pool.machine_type)
        if facts is None:
            close = difflib.get_close_matches(pool.machine_type, list(catalog), n=3)
            out.add(f"{where}.machineType", "machine-type-in-catalog",
                    f"'{pool.machine_type}' is not in the machine catalog (components/catalog/gcp_machines.yaml, "
                    f"{len(catalog)} types)" + (f"; closest: {', '.join(close)}" if close else ""))
            continue
        if facts.gpu_count and facts.zones is not None and gcp.gpu_zone not in facts.zones:
            out.add(f"{where}.machineType", "machine-type-in-zone",
                    f"{pool.machine_type} ({facts.accelerator}) is not offered in {gcp.gpu_zone} (catalog: "
                    f"{facts.zones_source}); offered in {', '.join(facts.zones)}")
        _check_capacity(pool, facts, where, out)
        # GKE's GPU taint value is "present" (cluster-toolkit gke-node-pool)
        check_labels_and_taints(pool.labels, pool.taints, facts.gpu_count > 0, "present", where, out)
        if pool.local_ssd == "ephemeral" and not facts.has_local_nvme:
            out.add(f"{where}.localSsd", "local-ssd-exists",
                    f"localSsd ephemeral needs the machine type's local SSDs, and the catalog "
                    f"{'has none' if facts.has_local_nvme is False else 'does not confirm them'} for "
                    f"{pool.machine_type}; use auto or none")
        if facts.boot_disk_types is not None and pool.disk_type not in facts.boot_disk_types:
            out.add(f"{where}.diskType", "boot-disk-type-supported",
                    f"{pool.machine_type} boots from {' or '.join(facts.boot_disk_types)} only, not {pool.disk_type} "
                    f"(catalog: {facts.boot_disk_source})")
        if not facts.gpu_count and pool.gpu_driver != "gke-latest":
            out.add(f"{where}.gpuDriver", "gpu-driver-gpu-only", "gpuDriver only applies to GPU machine types")
    known = [(p, catalog[p.machine_type]) for p in gcp.node_pools if p.machine_type in catalog]
    if len(known) < len(gcp.node_pools):
        return
    gpu = [(p, f) for p, f in known if f.gpu_count]
    if not gpu:
        out.add(".gcp.nodePools", "gpu-node-group", "at least one node pool with GPUs is required")
    if any(p.gpu_taint for p, _ in gpu) and all(f.gpu_count for _, f in known):
        out.add(".gcp.nodePools", "system-node-group",
                f"a node pool without GPUs is required for system pods (GPU nodes carry the {GPU_TAINT_KEY} taint)")
    owners = sorted({p.gpu_driver == "operator" for p, _ in gpu})
    if len(owners) > 1:
        out.add(".gcp.nodePools", "gpu-driver-one-owner",
                "every GPU pool must leave drivers to the same owner: GKE (gke-latest or gke-default) on all, or the "
                "GPU Operator (operator) on all; the GPU Operator's driver setting is cluster-wide")
    max_gpus = sum(p.max_size * f.gpu_count for p, f in known)
    if spec.workload.peak_gpus > max_gpus:
        out.add(".workload.peakGpus", "peak-gpus-fit",
                f"peakGpus ({spec.workload.peak_gpus}) exceeds the {max_gpus} GPUs the node pools provide at maxSize")
    check_gpu_networks(gcp, gpu, out)
    if spec.acceptance.enabled:
        for pool, facts in gpudirect_pools(gpu):
            if facts.gpudirect == "TCPX":
                i = next(k for k, p in enumerate(gcp.node_pools) if p is pool)
                out.add(".acceptance.enabled", "acceptance-fabric-built",
                        f"the acceptance jobs are built for GPUDirect-TCPXO and -RDMA pools, not for "
                        f"{pool.machine_type} (gcp.nodePools[{i}], GPUDirect-TCPX: its daemon shares a socket "
                        "directory with the workload and needs IPC_LOCK there, a pod shape not built here): turn "
                        "acceptance off and run container-engine-accelerators' gpudirect-tcpx NCCL test by hand")


def _check_capacity(pool: GcpNodePoolSpec, facts: MachineFacts, where: str, out: _Collector) -> None:
    cap = pool.capacity
    if cap.type == "reservation" and cap.reservation is None:
        out.add(f"{where}.capacity.reservation", "reservation-name",
                "capacity type reservation needs the reservation's name (SPECIFIC_RESERVATION affinity)")
    if cap.type != "reservation":
        for key, value in (("reservation", cap.reservation), ("reservationBlock", cap.reservation_block),
                           ("reservationProject", cap.reservation_project)):
            if value is not None:
                out.add(f"{where}.capacity.{key}", "reservation-name",
                        f"{key} only applies to capacity type reservation, not '{cap.type}'")
    if cap.max_run_hours is not None and cap.type != "flex-start":
        out.add(f"{where}.capacity.maxRunHours", "flex-start-pool-shape",
                f"maxRunHours only applies to flex-start, not '{cap.type}'")
    if cap.type == "reservation" and pool.placement == "compact":
        out.add(f"{where}.placement", "compact-placement-not-on-reservation",
                "a compact placement policy must not be forced onto a reservation: the reservation already places "
                "its VMs (its own placement or blocks), and a second policy makes GKE refuse or fail to find "
                "capacity; use auto or none")
    if cap.type == "flex-start":
        if not facts.gpu_count:
            out.add(f"{where}.capacity.type", "flex-start-pool-shape",
                    "flex-start (queued provisioning) is for GPU pools")
        if pool.min_size or pool.desired_size:
            out.add(f"{where}.minSize", "flex-start-pool-shape",
                    "a flex-start pool starts empty: minSize and desiredSize must be 0 (nodes arrive when Kueue's "
                    "ProvisioningRequest is granted, all at once, and leave when the job ends)")
        if pool.placement == "compact":
            out.add(f"{where}.placement", "flex-start-pool-shape",
                    "flex-start pools get their VMs from the Dynamic Workload Scheduler; do not force compact "
                    "placement")
    if cap.type in facts.not_offered:
        out.add(f"{where}.capacity.type", "provisioning-model-offered",
                f"{pool.machine_type} is not sold {cap.type} (catalog: {facts.provisioning_source}); use "
                + ", ".join(m for m in (facts.provisioning or ()) if m not in facts.not_offered))


def _check_soft_delete(where: str, days: int, hierarchical: bool, what: str, out: _Collector) -> None:
    limits = gcp_storage_limits()
    if days and not limits.soft_delete_min_days <= days:
        out.add(f"{where}.softDeleteDays", "soft-delete-range",
                f"soft delete is off (0) or {limits.soft_delete_min_days} to {limits.soft_delete_max_days} days")
    if hierarchical and not days:
        out.add(f"{where}.softDeleteDays", "hns-needs-soft-delete",
                "a hierarchical-namespace bucket has no object versioning, so soft delete is the only protection "
                f"of overwritten {what}: keep softDeleteDays >= 7")


# Claims every team namespace already has (components/gcp/platform.py checkpoint_volume; the shared filesystem's
# claim, components/kubernetes/objects/storage.py): a bucket's claim takes its name, so these are taken.
_TAKEN_CLAIMS = {"checkpoints": "the checkpoint bucket's claim", "shared-fs": "the shared filesystem's claim"}


def _check_buckets(spec: ClusterSpec, gcp: GcpSpec, out: _Collector) -> None:
    """gcp.storage.buckets: names unique and free in team namespaces; once composed (<project>-<cluster>-<name>)
    apart from the checkpoint bucket and a name Cloud Storage accepts; access for teams of the stack; no version
    retention on a hierarchical namespace; soft delete as for the checkpoint bucket."""
    limits = gcp_storage_limits()
    teams = [t.name for t in spec.teams]
    existing = gcp.storage.checkpoint_bucket.existing_name
    checkpoint = existing or gcs_checkpoint_bucket_name(gcp.project, spec.name)
    room = limits.bucket_name_max - len(gcs_bucket_name(gcp.project, spec.name, ""))
    names: set[str] = set()
    # A claim is the Pulumi resource <platform>-persistentvolumeclaim-<team>-<claim>: two (team, claim) pairs that
    # join to the same words would be one resource.
    claims = {f"{t}-{c}": f"team {t}'s claim {c}" for t in teams for c in _TAKEN_CLAIMS}
    for i, bucket in enumerate(gcp.storage.buckets):
        where = f".gcp.storage.buckets[{i}]"
        full = gcs_bucket_name(gcp.project, spec.name, bucket.name)
        if bucket.name in names:
            out.add(f"{where}.name", "unique-names", f"bucket name '{bucket.name}' is used twice")
            continue
        names.add(bucket.name)
        if bucket.name in _TAKEN_CLAIMS:
            out.add(f"{where}.name", "bucket-name-taken",
                    f"every team namespace already has a claim named '{bucket.name}' ({_TAKEN_CLAIMS[bucket.name]}), "
                    "and a bucket's claim takes the bucket's name: choose another")
        elif full == checkpoint:
            out.add(f"{where}.name", "bucket-name-taken",
                    f"the bucket would be {full}, the checkpoint bucket"
                    + (" (checkpointBucket.existingName)" if existing else "") + ": choose another name")
        problem = limits.bucket_name_problem(full)
        if len(full) > limits.bucket_name_max:
            out.add(f"{where}.name", "bucket-name-length",
                    f"the bucket would be {full} (<project>-<cluster>-<name>), {problem}: use a name of at most "
                    f"{room} characters")
        elif problem is not None:
            out.add(f"{where}.name", "bucket-name-valid",
                    f"the bucket would be {full} (<project>-<cluster>-<name>), and {problem} "
                    f"(components/catalog/gcp_storage.yaml: {limits.bucket_name_source}): choose another name")
        for team in bucket.access:
            if team not in teams:
                out.add(f"{where}.access[{json.dumps(team)}]", "bucket-access-team",
                        f"'{team}' is not a team of the stack ({', '.join(teams) or 'none'}): a bucket is granted to "
                        "a team's Workload Identity principal and mounted in its namespace")
                continue
            key = f"{team}-{bucket.name}"
            if key in claims and bucket.name not in _TAKEN_CLAIMS:
                out.add(f"{where}.name", "unique-names",
                        f"team {team}'s claim {bucket.name} and {claims[key]} would be one Pulumi resource "
                        f"(persistentvolumeclaim-{key}): choose another bucket name")
            claims[key] = f"team {team}'s claim {bucket.name}"
        if bucket.hierarchical_namespace and bucket.noncurrent_version_retention_days is not None:
            out.add(f"{where}.noncurrentVersionRetentionDays", "hns-no-versioning",
                    "a hierarchical-namespace bucket cannot be versioned (Cloud Storage 'Hierarchical namespace'), so "
                    "it keeps no noncurrent versions to retain: remove noncurrentVersionRetentionDays (soft delete "
                    "keeps its overwritten and deleted objects)")
        _check_soft_delete(where, bucket.soft_delete_days, bucket.hierarchical_namespace, "objects", out)


def _check_storage(gcp: GcpSpec, out: _Collector) -> None:
    limits = gcp_storage_limits()
    bucket = gcp.storage.checkpoint_bucket
    _check_soft_delete(".gcp.storage.checkpointBucket", bucket.soft_delete_days,
                       bucket.hierarchical_namespace and bucket.existing_name is None, "checkpoints", out)
    fs = gcp.storage.filesystem
    if fs is None:
        return
    where = ".gcp.storage.filesystem"
    if (problem := mount_path_problem(fs.mount_path)) is not None:
        out.add(f"{where}.mountPath", "mount-path-allowed", f"'{fs.mount_path}' cannot be the filesystem's path in "
                f"pods: {problem}")
    if fs.type == "managed-lustre":
        tier = fs.per_unit_storage_throughput
        tiers = limits.lustre_tiers
        if tier is None or tier not in tiers:
            out.add(f"{where}.perUnitStorageThroughput", "lustre-tier",
                    f"Managed Lustre needs perUnitStorageThroughput, one of {', '.join(map(str, sorted(tiers)))} "
                    f"MB/s per TiB (got {tier})")
        else:
            problem = tiers[tier].problem(fs.capacity_gib)
            if problem:
                out.add(f"{where}.capacityGiB", "lustre-capacity",
                        f"capacityGiB {fs.capacity_gib:,} at {tier} MB/s per TiB {problem} ({limits.lustre_source})")
    elif fs.per_unit_storage_throughput is not None:
        out.add(f"{where}.perUnitStorageThroughput", "lustre-tier",
                f"perUnitStorageThroughput only applies to managed-lustre, not {fs.type}")
    if fs.filestore_tier is not None and fs.type != "filestore":
        out.add(f"{where}.filestoreTier", "filestore-tier", f"filestoreTier only applies to filestore, not {fs.type}")


def _check_gke_version(gcp: GcpSpec, out: _Collector,
                       extra: Sequence[tuple[VersionFloor, list[str]]] = ()) -> None:
    """The GKE version what the stack builds needs: GPUDirect per machine family and Managed Lustre on the port its
    instances serve (components/catalog/gke_versions.yaml, each floor with its source). Checked against
    cluster.minMasterVersion; without it, against the release channel's default version as a dated GKE release note
    gives it (defaults only move forward, so a new cluster in the channel gets at least that)."""
    floors = load_gke_versions().gpudirect_floors
    catalog = load_gcp_catalog()
    for i, pool in enumerate(gcp.node_pools):
        facts = catalog.get(pool.machine_type)
        if facts is not None and facts.gpu_count and facts.gpudirect != "none" and facts.accelerator not in floors:
            out.add(f".gcp.nodePools[{i}].machineType", "gke-version-floor",
                    f"{pool.machine_type} uses GPUDirect-{facts.gpudirect}, and components/catalog/gke_versions.yaml "
                    f"has no GKE version floor for {facts.accelerator}: add the version GKE documents for it")
    needs = [*gke_version_floors(gcp), *extra]
    if not needs:
        return
    checked = gke_checked_version(gcp)
    if checked is None:
        out.add(".gcp.cluster.releaseChannel", "gke-version-floor",
                f"components/catalog/gke_versions.yaml has no default version for the {gcp.cluster.release_channel} "
                "channel to check the GKE versions this stack needs against: set minMasterVersion")
        return
    version, basis = checked
    if gcp.cluster.min_master_version is not None:
        key, against = ".gcp.cluster.minMasterVersion", f"minMasterVersion {version} is"
        fix = "raise minMasterVersion to it or later (a version the release channel offers)"
    else:
        key = ".gcp.cluster.releaseChannel"
        against = f"without minMasterVersion the cluster gets {basis}, {version}, which is"
        fix = "set minMasterVersion to it or later, or choose a channel whose default meets it"
    for floor, users in needs:
        needed = floor.unmet(version)
        if needed is not None:
            out.add(key, "gke-version-floor",
                    f"{against} below {needed}, which {floor.what} ({'; '.join(users)}) needs: GKE "
                    f"{floor.describe()} (components/catalog/gke_versions.yaml); {fix}")


def _check_node_versions(gcp: GcpSpec, out: _Collector) -> None:
    """A pinned pool (nodePools[].version) runs no newer than the control plane and at most the skew GKE allows
    older (components/catalog/gke_versions.yaml node_skew), and at least the GKE version its GPUDirect family needs:
    the floors are checked on the nodes, not only on minMasterVersion."""
    versions = load_gke_versions()
    catalog = load_gcp_catalog()
    plane = gcp.cluster.min_master_version
    for i, pool in enumerate(gcp.node_pools):
        if pool.version is None:
            continue
        where = f".gcp.nodePools[{i}].version"
        if plane is None:
            out.add(where, "gke-node-version",
                    f"a pinned node version needs cluster.minMasterVersion at or above it: nodes never run newer than "
                    f"the control plane (Kubernetes version skew policy), whose version is otherwise the "
                    f"{gcp.cluster.release_channel} channel's; set minMasterVersion to {pool.version} or later")
        else:
            # minMasterVersion "1.35" is the newest 1.35 patch (GKE's alias); a pool's pin is exact.
            node, cp = parse_gke_version(pool.version), parse_gke_version(plane, newest=True)
            if node > cp:
                out.add(where, "gke-node-version",
                        f"{pool.version} is newer than minMasterVersion {plane}: nodes never run newer than the "
                        "control plane (Kubernetes version skew policy); raise minMasterVersion first, or pin "
                        "an older version")
            elif node[:2] < (cp[0], cp[1] - versions.node_skew_minors):
                out.add(where, "gke-node-version",
                        f"{pool.version} is {cp[1] - node[1]} minor versions older than minMasterVersion {plane}, and "
                        f"GKE nodes trail the control plane by at most {versions.node_skew_minors} "
                        "(components/catalog/gke_versions.yaml node_skew, with its source); pin "
                        f"1.{cp[1] - versions.node_skew_minors} or later")
        facts = catalog.get(pool.machine_type)
        floor = versions.gpudirect_floors.get(facts.accelerator or "") \
            if facts is not None and facts.gpu_count and facts.gpudirect != "none" else None
        needed = floor.unmet(pool.version) if floor is not None else None
        if floor is not None and needed is not None:
            out.add(where, "gke-version-floor",
                    f"{pool.version} is below {needed}, which {floor.what} (node pool {pool.name}, "
                    f"{pool.machine_type}) needs: GKE {floor.describe()} (components/catalog/gke_versions.yaml); pin "
                    "it or later")


def _check_cluster(spec: ClusterSpec, gcp: GcpSpec, out: _Collector) -> None:
    gke = gcp.cluster
    where = ".gcp.cluster"
    nets: list[ipaddress.IPv4Network] = []
    for i, cidr in enumerate(gke.authorized_networks):
        parsed = _ipv4_cidr(cidr, f"{where}.authorizedNetworks[{i}]", out)
        if parsed is None:
            continue
        if parsed.prefixlen == 0:
            out.add(f"{where}.authorizedNetworks[{i}]", "authorized-networks-not-open",
                    "0.0.0.0/0 opens the control plane to the internet; list the networks that need it")
        nets.append(parsed)
    if nets and covers_everything(nets) and not any(n.prefixlen == 0 for n in nets):
        out.add(f"{where}.authorizedNetworks", "authorized-networks-not-open",
                f"authorizedNetworks ({', '.join(gke.authorized_networks)}) together cover the whole internet; list "
                "the networks that need the control plane")
    if gke.endpoint == "authorized-networks" and not gke.authorized_networks:
        out.add(f"{where}.authorizedNetworks", "authorized-networks-not-open",
                "endpoint authorized-networks needs the networks allowed to the public endpoint")
    deployer = gke.deployer
    runner_nets = [n for c in deployer.runner_cidrs if isinstance(n := parse_cidr(c), ipaddress.IPv4Network)]
    if runner_nets and covers_everything(runner_nets) and not any(n.prefixlen == 0 for n in runner_nets):
        out.add(f"{where}.deployer.runnerCidrs", "authorized-networks-not-open",
                f"runnerCidrs ({', '.join(deployer.runner_cidrs)}) together cover the whole internet; list the "
                "networks the CI runners are in")
    for j, cidr in enumerate(deployer.runner_cidrs):
        parsed = _ipv4_cidr(cidr, f"{where}.deployer.runnerCidrs[{j}]", out)
        if parsed is None:
            continue
        if parsed.prefixlen == 0:
            out.add(f"{where}.deployer.runnerCidrs[{j}]", "authorized-networks-not-open",
                    "the deployer's networks are allowed to the control plane; 0.0.0.0/0 would open it")
        elif deployer.api_access == "authorized-networks" and not any(parsed.subnet_of(n) for n in nets):
            out.add(f"{where}.deployer.runnerCidrs[{j}]", "deployer-reaches-api",
                    f"the deployer reaches the public endpoint from '{cidr}', which is not inside "
                    "cluster.authorizedNetworks")
    if deployer.api_access != "dns-endpoint" and not deployer.runner_cidrs:
        out.add(f"{where}.deployer.runnerCidrs", "deployer-reaches-api",
                f"apiAccess {deployer.api_access} needs the runners' CIDRs (they are added to the authorized networks)")
    if deployer.api_access == "authorized-networks" and gke.endpoint != "authorized-networks":
        out.add(f"{where}.deployer.apiAccess", "deployer-reaches-api",
                "the deployer uses the public endpoint, and cluster.endpoint is private: run it in-vpc or use "
                "endpoint authorized-networks")
    if spec.environment == "prod":
        if gke.location != "regional":
            out.add(f"{where}.location", "prod-regional-control-plane",
                    "prod clusters keep a regional control plane (three replicas; a zonal one is down during "
                    "its upgrades)")
        if not gke.database_encryption:
            out.add(f"{where}.databaseEncryption", "prod-secrets-encryption",
                    "prod clusters encrypt Kubernetes secrets with a Cloud KMS key")
        missing = [c for c in ("SYSTEM_COMPONENTS", "WORKLOADS", "APISERVER") if c not in gke.log_components]
        if missing:
            out.add(f"{where}.logComponents", "prod-log-types", f"prod clusters log {', '.join(missing)} too")
    mw = gke.maintenance
    days = mw.recurrence.split("BYDAY=")[1].split(",") if "BYDAY=" in mw.recurrence else []
    weekly = 4 * len(set(days)) * mw.duration_hours
    per_32 = 32 * mw.duration_hours if mw.recurrence.startswith("FREQ=DAILY") else weekly
    if mw.recurrence.startswith("FREQ=WEEKLY") and not days:
        per_32 = 4 * mw.duration_hours
    if per_32 < _WINDOW_HOURS_PER_32_DAYS:
        out.add(f"{where}.maintenance", "maintenance-window-availability",
                f"GKE needs at least {_WINDOW_HOURS_PER_32_DAYS} hours of maintenance windows in any 32 days; "
                f"'{mw.recurrence}' for {mw.duration_hours} h gives as little as {per_32} h")
    check_exclusions(gcp, out)
