"""The GCP sub-model: project, region and GPU zone, network, GKE node pools, storage and the GKE cluster.

Field names follow the AWS sub-model where the idea is the same (``minSize``/``maxSize``, ``capacity``,
``placement``, ``deployer``) so that a platform team reads both stacks the same way; the values are GCP's
(machine types, reservations by name, Managed Lustre tiers, release channels).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal, Optional

from pydantic import Field, StrictBool, StrictInt

from components.catalog.gke_versions import GKE_EXACT_VERSION_PATTERN, GKE_VERSION_PATTERN
from components.spec.aws import TaintSpec
from components.spec.base import _GROUP_NAME_RE, _Model, unit

# Project IDs: 6-30 characters, lowercase letters, digits and hyphens, starting with a letter, not ending with a
# hyphen (Resource Manager, "Creating and managing projects").
_PROJECT_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
_GCP_REGION_RE = re.compile(r"^[a-z]+-[a-z]+\d+$")
_GCP_ZONE_RE = re.compile(r"^[a-z]+-[a-z]+\d+-[a-z]$")
# Reservation names are RFC 1035 resource names (1-63 chars); a block of a reservation is addressed as
# <reservation>/reservationBlocks/<block> (GKE "Consume reserved zonal resources", reservation blocks).
_RFC1035 = r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
_RESERVATION_NAME_RE = re.compile(rf"^{_RFC1035}$")
_SERVICE_ACCOUNT_RE = re.compile(
    r"^[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z][a-z0-9-]{4,28}[a-z0-9]\.iam\.gserviceaccount\.com$")
_MEMBER_RE = re.compile(r"^(user|group|serviceAccount):[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$")
_BILLING_ACCOUNT_RE = re.compile(r"^[0-9A-F]{6}-[0-9A-F]{6}-[0-9A-F]{6}$")


class GcpNetworkSpec(_Model):
    """The cluster's VPC (nodes, pods, services, the control plane's range) and the GPU networks' address space."""

    node_cidr: str = Field(description="Primary range of the cluster subnet (nodes); no default.")
    pods_cidr: str = Field(description="Secondary range for pods (VPC-native); no default.")
    services_cidr: str = Field(description="Secondary range for services; no default.")
    control_plane_cidr: str = Field(
        description="The /28 the private control plane's endpoint takes (master_ipv4_cidr_block); no default.")
    gpu_networks_cidr: str | None = Field(
        default=None,
        description="Address space of the extra GPU networks a GPUDirect machine type needs (one subnet per network, "
        "in order, each of gpuSubnetPrefixLength): required when a node pool's machine type has GPU NICs.",
    )
    gpu_subnet_prefix_length: StrictInt | None = Field(
        default=None,
        description="Prefix length of each GPU network's subnet. Default 24: 252 nodes (GCP reserves four addresses "
        "of a subnet), what every stack had before this setting. A stack whose GPUDirect pools reach more nodes sets "
        "it (23: 508 nodes, 20: 4,092), and gpuNetworksCidr must hold one such subnet per GPU network. Choose it "
        "before the first apply: a change moves the subnets, which replaces them and the GPU pools wired to them.",
        json_schema_extra=unit("bits"),
    )
    gvnic_subnet_prefix_length: StrictInt | None = Field(
        default=None,
        description="RDMA machine types (A3 Ultra, A4) only: prefix length of the second gVNIC network's subnet, sized "
        "apart from the RDMA subnets (cluster-toolkit's A3 Ultra blueprint gives it a /18 beside a /18 split into 8 "
        "RDMA subnets). The gVNIC subnet then takes the first /N of gpuNetworksCidr and the 8 RDMA subnets of "
        "gpuSubnetPrefixLength the first ranges after it. Default: none, the gVNIC subnet is the first of nine subnets "
        "of gpuSubnetPrefixLength (the layout every stack had before this setting). Choose it before the first apply: "
        "a change moves the subnets, which replaces them and the GPU pools wired to them.",
        json_schema_extra=unit("bits"),
    )
    proxy_only_cidr: str | None = Field(
        default=None,
        description="The proxy-only subnet (purpose REGIONAL_MANAGED_PROXY) of the served models' private gateway: "
        "GKE's internal Application Load Balancer (GatewayClass gke-l7-rilb) runs its Envoy proxies on these "
        "addresses, and they reach the replicas from them. Required with inference.gateway. At least a /26 ('64 or "
        "more IP addresses', Cloud Load Balancing, 'Proxy-only subnets'); a /23 leaves the proxies room to scale; "
        "it must not overlap the other ranges. Only one active proxy-only subnet may exist per region and VPC: the "
        "stack's VPC is its own, so this is it.",
    )
    nat_log: Literal["ERRORS_ONLY", "TRANSLATIONS_ONLY", "ALL", "OFF"] = Field(
        default="ERRORS_ONLY", description="Cloud NAT logging filter (OFF: no logging).")


class GcpCapacitySpec(_Model):
    """How a node pool's VMs are obtained."""

    type: Literal["on-demand", "spot", "reservation", "flex-start"] = Field(
        default="on-demand",
        description="on-demand; spot (preemptible, Spot VMs); reservation (a specific Compute Engine reservation "
        "by name); flex-start (Dynamic Workload Scheduler queued provisioning, admitted through Kueue's "
        "ProvisioningRequest check).",
    )
    reservation: str | None = Field(
        default=None, pattern=_RESERVATION_NAME_RE.pattern,
        description="reservation only: the reservation's name (SPECIFIC_RESERVATION affinity).",
    )
    reservation_block: str | None = Field(
        default=None, pattern=_RESERVATION_NAME_RE.pattern,
        description="reservation only: one block of the reservation (<reservation>/reservationBlocks/<block>).",
    )
    reservation_project: str | None = Field(
        default=None, pattern=_PROJECT_RE.pattern,
        description="reservation only: the project that owns a shared reservation (default: the stack's).",
    )
    max_run_hours: StrictInt | None = Field(
        default=None, ge=1, le=168,
        description="flex-start only: the longest a flex-start node lives (DWS runs at most 7 days).",
        json_schema_extra=unit("hours"),
    )


# A protobuf Duration (google-cloud-sdk container v1 BlueGreenSettings.nodePoolSoakDuration and
# StandardRolloutPolicy.batchSoakDuration are such strings): "A duration in seconds with up to nine fractional
# digits, ending with 's'. Example: "3.5s"" (pulumi_gcp 10.2.0, container/_inputs.py, the same field of node
# auto-provisioning's blue-green settings; NodePool's own docstring gives no format).
_DURATION_RE = re.compile(r"^\d{1,9}(\.\d{1,9})?s$")


class GkeBlueGreenSpec(_Model):
    """GKE blue-green upgrade: a second (green) set of nodes, then the old (blue) ones drained in batches and deleted
    after a soak (pulumi_gcp NodePoolUpgradeSettingsBlueGreenSettingsArgs and its standard_rollout_policy)."""

    batch_percentage: float | None = Field(
        default=None, gt=0, le=1,
        description="The share of blue nodes drained per batch, in (0, 1] (GKE API StandardRolloutPolicy: "
        "batchPercentage 'should be (0.0, 1.0]'). One of batchPercentage and batchNodeCount.",
        json_schema_extra=unit("fraction (0-1)"))
    batch_node_count: StrictInt | None = Field(
        default=None, ge=1, le=1000, description="Blue nodes drained per batch. One of batchPercentage and "
        "batchNodeCount.", json_schema_extra=unit("nodes"))
    batch_soak_duration: str | None = Field(
        default=None, pattern=_DURATION_RE.pattern,
        description="Wait after each batch (e.g. 300s); GKE's default is zero.")
    node_pool_soak_duration: str | None = Field(
        default=None, pattern=_DURATION_RE.pattern,
        description="Wait after the whole blue pool is drained before it is deleted (a rollback window, e.g. "
        "3600s); GKE's default applies when omitted.")


class GkeUpgradeSpec(_Model):
    """How GKE replaces a pool's nodes for a version or node-configuration change (NodePool upgradeSettings)."""

    strategy: Literal["surge", "blue-green"] = Field(
        default="surge", description="surge: maxSurge new nodes first and maxUnavailable drained at a time; "
        "blue-green: a second pool's worth of nodes first (needs that capacity: refused on a reservation).")
    max_surge: StrictInt | None = Field(
        default=None, ge=0, le=1000,
        description="surge: extra nodes created before old ones are drained. Default: 1 on open capacity, 0 on a "
        "reservation (no spare VM).", json_schema_extra=unit("nodes"))
    max_unavailable: StrictInt | None = Field(
        default=None, ge=0, le=1000,
        description="surge: nodes drained at the same time. Default: 0 with a surge, else 1 (at least one of "
        "maxSurge and maxUnavailable is above 0: pulumi_gcp NodePoolUpgradeSettingsArgs).",
        json_schema_extra=unit("nodes"))
    blue_green: GkeBlueGreenSpec | None = Field(
        default=None, description="blue-green only: the rollout policy (required with strategy blue-green).")


# A service account's ID: 6-30 characters, lowercase letters, digits and hyphens, starting with a letter (IAM "Create
# service accounts": account_id; pulumi_gcp serviceaccount.Account account_id "must be 6-30 characters long, and match
# the regular expression [a-z]([-a-z0-9]*[a-z0-9])").
_ACCOUNT_ID_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")


# What a node's own service account needs (components/gcp/security.py, GKE "Configure node service accounts"): GKE's
# node role (logs, metrics, autoscaler metrics) and image pulls from the project's Artifact Registry.
NODE_MINIMUM_ROLES = ("roles/container.defaultNodeServiceAccount", "roles/artifactregistry.reader")


class GcpNodeServiceAccountSpec(_Model):
    """The service account a node pool's VMs run as, instead of the stack's node account: one the stack creates with
    the project roles listed (cluster-toolkit's A3 Mega and A3 Ultra blueprints give their pools such an account), or
    an existing one."""

    account_id: str | None = Field(
        default=None, pattern=_ACCOUNT_ID_RE.pattern,
        description="Create this service account (<accountId>@<project>.iam.gserviceaccount.com) and grant it "
        "roles. Pools that name the same accountId share it (and must list the same roles). One of accountId and "
        "existing.")
    roles: list[str] = Field(
        default_factory=list, max_length=50,
        description="accountId only: the project roles the account is granted (roles/<service>.<role>, or a custom "
        "role projects/<project>/roles/<id> or organizations/<number>/roles/<id>). GKE wants at least "
        "roles/container.defaultNodeServiceAccount on a node account.")
    existing: str | None = Field(
        default=None, pattern=_SERVICE_ACCOUNT_RE.pattern,
        description="An existing service account's email: the pool runs as it and the stack grants it nothing. One "
        "of accountId and existing.")


class GcpNodePoolSpec(_Model):
    """One GKE node pool, in the GPU zone for GPU machine types."""

    name: str = Field(pattern=_GROUP_NAME_RE.pattern, description="Unique node pool name.")
    machine_type: str = Field(
        description="Compute Engine machine type; must be in components/catalog/gcp_machines.yaml.")
    min_size: StrictInt = Field(ge=0, le=1000, description="Minimum nodes (autoscaling lower bound).",
                                json_schema_extra=unit("nodes"))
    desired_size: StrictInt = Field(ge=0, le=1000, description="Nodes at creation (initial node count).",
                                    json_schema_extra=unit("nodes"))
    max_size: StrictInt = Field(ge=1, le=1000, description="Maximum nodes; equal to minSize for a static pool.",
                                json_schema_extra=unit("nodes"))
    capacity: GcpCapacitySpec = Field(default_factory=GcpCapacitySpec, description="Provisioning model.")
    placement: Literal["auto", "compact", "none"] = Field(
        default="auto",
        description="auto: a compact placement policy for multi-node GPUDirect pools on on-demand or Spot "
        "capacity, never on a reservation (the reservation places its VMs) or flex-start; compact: always "
        "(refused on a reservation); none: never.",
    )
    gpu_driver: Literal["gke-latest", "gke-default", "operator"] = Field(
        default="gke-latest",
        description="The GPU stack: GKE's own (gke-latest/gke-default: GKE's driver LATEST or DEFAULT, its device "
        "plugin and DCGM exporter; no GPU Operator), or the NVIDIA GPU Operator on Ubuntu nodes (operator: GKE's "
        "driver installation and device plugin off; known containerd problems on GKE 1.33+). Never both.",
    )
    local_ssd: Literal["auto", "ephemeral", "none"] = Field(
        default="auto",
        description="auto/ephemeral: the machine type's local SSDs back the node's ephemeral storage (emptyDir, "
        "image layers); ephemeral requires the catalog to confirm them; none: not attached.",
    )
    disk_type: Literal["pd-balanced", "pd-ssd", "hyperdisk-balanced"] = Field(
        default="pd-balanced", description="Boot disk type (A3 Ultra, A4 take Hyperdisk only).")
    image_type: str | None = Field(
        default=None, max_length=64,
        description="The node image (node_config image_type): COS_CONTAINERD or UBUNTU_CONTAINERD, the Linux images "
        "GKE offers (GKE 'Node images'). Default: UBUNTU_CONTAINERD for GPU pools whose drivers the GPU Operator "
        "installs, COS_CONTAINERD otherwise. A change replaces the pool's nodes.")
    disk_size_gb: StrictInt = Field(alias="diskSizeGb", default=200, ge=50, le=65536, description="Boot disk size.",
                                    json_schema_extra=unit("GB"))
    gpu_taint: StrictBool = Field(default=True, description="GPU pools get nvidia.com/gpu=present:NoSchedule.")
    taints: list[TaintSpec] = Field(default_factory=list, max_length=50, description="Extra taints.")
    team: Optional[str] = Field(
        default=None,
        description="Dedicate the group to one team: its nodes are billed under the team's team and cost-center tags "
        "(labels on GCP), so the team's cloud budget sees them. Only that team may have a quota on it, and it lends "
        "none (lendingLimitGpus 0), so no other team's work is billed to it. Default: shared, billed to the stack.",
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Extra Kubernetes node labels.")
    service_account: GcpNodeServiceAccountSpec | None = Field(
        default=None,
        description="The pool's own service account (created with its roles, or existing). Default: the stack's node "
        "account (roles/container.defaultNodeServiceAccount and roles/artifactregistry.reader). A change replaces the "
        "pool: it is deleted and created again, so all its nodes go at once (roll it between runs).")
    upgrade: GkeUpgradeSpec | None = Field(
        default=None,
        description="How GKE rolls the pool's nodes (upgradeSettings). Default: surge, 1 node first, 0 drained "
        "ahead, on open capacity; on a reservation or flex-start 0 surge and 1 node at a time in place (a "
        "reservation has no spare VM for a surge node or a green pool).")
    version: str | None = Field(
        default=None, pattern=GKE_EXACT_VERSION_PATTERN,
        description="Pin the pool's GKE version (exact, 1.X.Y-gke.N): the pool is created at it and carries GKE's "
        "per-pool maintenance exclusion, so GKE does not auto-upgrade it until the version's end of support; change "
        "it to upgrade the pool (one node at a time). Needs cluster.minMasterVersion at or above it, at most two "
        "minor versions newer (nodes never run newer than the control plane). GKE sets the exclusion only when a "
        "pool is created: a pool created without a pin is pinned only until GKE next upgrades it. Default: none, the "
        "pool follows the release channel (a reserved GPU pool is held all the same, README).",
    )

    @property
    def instance_type(self) -> str:
        """The machine type, under the name the cloud-neutral rules use."""
        return self.machine_type


class GcsBucketSpec(_Model):
    """The checkpoint bucket: uniform access, no public access, versioned, CMEK; or an existing bucket."""

    existing_name: str | None = Field(
        default=None, pattern=r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$",
        description="An existing bucket to use instead of creating one; its settings stay its owner's.",
    )
    noncurrent_version_retention_days: StrictInt = Field(
        default=30, ge=1, le=3650,
        description="Days a replaced or deleted checkpoint object version is kept (lifecycle on noncurrent "
        "versions). Live objects never expire.",
        json_schema_extra=unit("days"),
    )
    soft_delete_days: StrictInt = Field(
        default=7, ge=0, le=90,
        description="Soft delete retention (0 turns it off; otherwise 7 to 90 days), on top of versioning.",
        json_schema_extra=unit("days"),
    )
    hierarchical_namespace: StrictBool = Field(
        default=False,
        description="Hierarchical namespace (folders, atomic renames: faster checkpoint commits through GCS FUSE). "
        "Set at creation only, and it excludes object versioning: soft delete then protects checkpoints.",
    )


DEFAULT_NONCURRENT_DAYS = 30


class GcsDataBucketSpec(_Model):
    """A bucket besides the checkpoint bucket (datasets, models, eval results), built like it (uniform access, no
    public access, versioned, soft delete, CMEK with the stack's key, protected in prod) with its own team access."""

    name: str = Field(
        pattern=_GROUP_NAME_RE.pattern,
        description="What the bucket holds, e.g. data: the bucket is <project>-<cluster>-<name> (63 characters at "
        "most), and each team with access gets a GCS FUSE claim of this name in its namespace. The name is the "
        "bucket: a new name is a new, empty bucket (in production the old one is protected, so the update stops).",
    )
    access: dict[str, Literal["read", "read-write"]] = Field(
        default_factory=dict,
        description="Each team's access by team name: read (roles/storage.objectViewer; its claim is read-only) or "
        "read-write (roles/storage.objectUser), granted to the team's checkpoints service account through Workload "
        "Identity. Teams not listed get none.",
    )
    noncurrent_version_retention_days: StrictInt | None = Field(
        default=None, ge=1, le=3650,
        description="Days a replaced or deleted object version is kept (default 30). Live objects never expire. Not "
        "with hierarchicalNamespace, which has no versions.",
        json_schema_extra=unit("days"),
    )
    soft_delete_days: StrictInt = Field(
        default=7, ge=0, le=90,
        description="Soft delete retention (0 turns it off; otherwise 7 to 90 days), on top of versioning.",
        json_schema_extra=unit("days"),
    )
    hierarchical_namespace: StrictBool = Field(
        default=False,
        description="Hierarchical namespace (set at creation only; excludes object versioning, so soft delete then "
        "protects overwritten objects).",
    )

    @property
    def version_retention_days(self) -> int:
        """Days noncurrent versions are kept: as given, else 30 (the checkpoint bucket's default)."""
        return self.noncurrent_version_retention_days or DEFAULT_NONCURRENT_DAYS


class ExistingLustreSpec(_Model):
    """A Managed Lustre instance the stack does not create: GKE's Managed Lustre CSI driver mounts it through a static
    PersistentVolume (volume handle <project>/<location>/<name>, volume attributes ip and filesystem). Nothing reads
    the instance at preview, so its mount IP and filesystem name are given here (`gcloud lustre instances describe`:
    mountPoint is <ip>@tcp:/<filesystem>). It must be connected to this stack's VPC (its network is the stack's,
    reached over the private service access peering the stack makes) and serve LNet on port 988 (created without
    gke-support-enabled)."""

    name: str = Field(pattern=r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$",
                      description="The instance's id (lowercase letters, digits and hyphens, 1 to 63, starting with a "
                      "letter), in gcp.project.")
    location: str = Field(pattern=r"^[a-z]+-[a-z]+[0-9]+-[a-z]$",
                          description="The instance's zone, in gcp.region (Managed Lustre instances are zonal).")
    ip: str = Field(min_length=1, max_length=64,
                    description="The IPv4 address of its mount point (the part before @tcp): an address of the stack's "
                    "private service access range.")
    filesystem: str = Field(min_length=1, max_length=64,
                            description="Its Lustre filesystem name (the part after @tcp:/): up to 8 letters and "
                            "digits, starting with a letter.")


class GcpFilesystemSpec(_Model):
    """The shared filesystem in the GPU zone: Managed Lustre, or Filestore or Parallelstore."""

    type: Literal["managed-lustre", "filestore", "parallelstore"] = Field(
        default="managed-lustre", description="Which service.")
    existing: ExistingLustreSpec | None = Field(
        default=None,
        description="managed-lustre only: mount this existing instance instead of creating one; capacityGiB and "
        "perUnitStorageThroughput describe it (the volume's size, the sizing model). It is not priced, protected or "
        "labelled here. Switching a stack that created its instance to `existing` removes that instance from the "
        "program: in prod it is protected, so the update stops, and `blueprint cost diff` fails on the removal; "
        "to keep it, run `pulumi state delete` on it first (docs/gcp.md).")
    capacity_gib: StrictInt = Field(alias="capacityGiB", ge=1, description="Provisioned capacity in GiB.",
                                    json_schema_extra=unit("GiB"))
    per_unit_storage_throughput: StrictInt | None = Field(
        default=None,
        description="managed-lustre only: MB/s per TiB (125, 250, 500 or 1000).",
        json_schema_extra=unit("MB/s per TiB"),
    )
    filestore_tier: Literal["ZONAL", "REGIONAL", "ENTERPRISE", "BASIC_SSD"] | None = Field(
        default=None, description="filestore only: the tier (default ZONAL).")
    mount_path: str = Field(default="/checkpoints", pattern=r"^/[a-z0-9/_-]+$",
                            description="Where pods mount it.")


class GcpStorageSpec(_Model):
    """Checkpoint bucket, more buckets and optional shared filesystem."""

    checkpoint_bucket: GcsBucketSpec = Field(default_factory=GcsBucketSpec, description="Checkpoint bucket.")
    buckets: list[GcsDataBucketSpec] = Field(
        default_factory=list, max_length=20,
        description="More buckets, each with its own team access (e.g. a data bucket every team reads and one "
        "writes). The checkpoint bucket stays as it is.")
    filesystem: GcpFilesystemSpec | None = Field(default=None, description="Shared filesystem; none when omitted.")


class MaintenanceExclusionSpec(_Model):
    """A window in which GKE does not upgrade (a training run, a launch)."""

    name: str = Field(min_length=1, max_length=1024,
                      description="Exclusion name, unique in the cluster (letters, digits, spaces, '.', '_', '-'; at "
                      "most 63 characters), e.g. cluster-toolkit's no-minor-or-node-upgrades-indefinite.")
    start: datetime = Field(description="UTC start (ISO 8601 with Z).")
    end: datetime | None = Field(
        default=None, description="UTC end. NO_UPGRADES: at most 30 days after start; NO_MINOR_UPGRADES and "
        "NO_MINOR_OR_NODE_UPGRADES: at most the end of support of the minor version. One of end and "
        "untilEndOfSupport.")
    until_end_of_support: StrictBool = Field(
        default=False, description="End at the end of support of the cluster's minor version, however it moves "
        "(GKE's exclusion end time behavior UNTIL_END_OF_SUPPORT, as cluster-toolkit's A3 Ultra blueprint holds "
        "its nodes); NO_MINOR_UPGRADES and NO_MINOR_OR_NODE_UPGRADES only. One of end and untilEndOfSupport.")
    scope: Literal["NO_UPGRADES", "NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES"] = Field(
        default="NO_MINOR_OR_NODE_UPGRADES", description="What is held back.")


class MaintenanceSpec(_Model):
    """When GKE may upgrade the control plane and nodes."""

    start: datetime = Field(description="First window's UTC start (ISO 8601 with Z); the window repeats.")
    duration_hours: StrictInt = Field(
        default=8, ge=4, le=24,
        description="Window length in hours. GKE wants windows of >= 4 h adding up to >= 48 h in any 32 days.",
        json_schema_extra=unit("hours"))
    recurrence: str = Field(default="FREQ=WEEKLY;BYDAY=SA,SU", pattern=r"^FREQ=(DAILY|WEEKLY)(;BYDAY=[A-Z,]+)?$",
                            description="RFC 5545 RRULE of the window.")
    exclusions: list[MaintenanceExclusionSpec] = Field(default_factory=list, max_length=20,
                                                       description="No-upgrade windows.")


class GcpDeployerSpec(_Model):
    """Who runs ``pulumi up`` and how it reaches the GKE API (the Kubernetes objects go through it)."""

    service_account: str = Field(
        pattern=_SERVICE_ACCOUNT_RE.pattern,
        description="The service account that runs pulumi up (the CI runner impersonates it); no default. It needs "
        "roles/container.admin and the rights to create the stack; the program grants it nothing.",
    )
    api_access: Literal["dns-endpoint", "in-vpc", "authorized-networks"] = Field(
        description="dns-endpoint: the control plane's DNS-based endpoint, authorized by IAM and reachable wherever "
        "Google APIs are (no network path to build; works on the first apply, when the VPC is new); in-vpc: the "
        "runner is in the VPC or a network connected to it by Cloud VPN/Interconnect with the control plane's range "
        "advertised (outside this stack); authorized-networks: the public IP endpoint from runnerCidrs. No default.",
    )
    runner_cidrs: list[str] = Field(default_factory=list, max_length=20,
                                    description="Where the deployer's requests come from (in-vpc and "
                                    "authorized-networks: added to the authorized networks).")


GkeLogComponent = Literal["SYSTEM_COMPONENTS", "WORKLOADS", "APISERVER", "CONTROLLER_MANAGER", "SCHEDULER"]
ALL_GKE_LOG_COMPONENTS: tuple[GkeLogComponent, ...] = (
    "SYSTEM_COMPONENTS", "WORKLOADS", "APISERVER", "CONTROLLER_MANAGER", "SCHEDULER")


class GkeSpec(_Model):
    """The GKE Standard cluster."""

    location: Literal["regional", "zonal"] = Field(
        default="regional", description="regional: three control-plane replicas (production); zonal: one, in the "
        "GPU zone (cheaper; the API is down during its upgrades).")
    release_channel: Literal["RAPID", "REGULAR", "STABLE", "EXTENDED"] = Field(
        default="REGULAR",
        description="GKE release channel; versions follow it (EXTENDED: up to 24 months on a minor version). No "
        "channel (UNSPECIFIED) is not offered: GKE deprecated it, new clusters cannot use it and it is removed on "
        "2027-06-14; hold a pool with nodePools[].version instead.")
    min_master_version: str | None = Field(
        default=None, pattern=GKE_VERSION_PATTERN,
        description="The least GKE version of the control plane (min_master_version: GKE upgrades it to at least "
        "this; new node pools start at the control plane's version), e.g. 1.35.8-gke.1036000, available in the "
        "release channel. The GKE versions GPUDirect and the Managed Lustre port need "
        "(components/catalog/gke_versions.yaml) are checked against it; without it, against the channel's default "
        "version as a dated GKE release note gives it (the version a new cluster in the channel gets at least).",
    )
    endpoint: Literal["private", "authorized-networks"] = Field(
        default="private",
        description="private: the control plane's private endpoint only; authorized-networks: also its public "
        "endpoint, from authorizedNetworks (never 0.0.0.0/0).",
    )
    authorized_networks: list[str] = Field(default_factory=list, max_length=100,
                                           description="CIDRs allowed to the endpoint(s).")
    database_encryption: StrictBool = Field(default=True, description="Encrypt etcd secrets with a Cloud KMS key.")
    log_components: list[GkeLogComponent] = Field(
        default_factory=lambda: list(ALL_GKE_LOG_COMPONENTS), description="Cloud Logging components.")
    admin_members: list[str] = Field(
        min_length=1, description="IAM principals (group:..., user:...) granted roles/container.admin; no default.")
    rbac_security_group: str | None = Field(
        default=None, pattern=r"^gke-security-groups@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$",
        description="Google Groups for RBAC: the gke-security-groups@<domain> group, so team groups (Google "
        "Groups' emails) can be bound by RoleBindings.",
    )
    maintenance: MaintenanceSpec = Field(description="Maintenance window and exclusions (no default).")
    deployer: GcpDeployerSpec = Field(description="Who runs pulumi up and from where (no default).")


class GcpTelemetrySpec(_Model):
    """What the platform's Prometheus reads from Cloud Monitoring beyond the cluster."""

    storage_metrics: StrictBool = Field(
        default=True, description="Scrape Managed Lustre's and the checkpoint bucket's Cloud Monitoring metrics into "
        "Prometheus with the stackdriver exporter (read-only: Monitoring Viewer through Workload Identity).")


# An image reference by digest (<repository>@sha256:<64 hex>) or by tag (<repository>:<tag>), as the acceptance image's
# rule reads one (components/spec/rules/platform.py).
_IMAGE_REF_RE = re.compile(r"^[a-z0-9][a-z0-9.-]*(:\d+)?(/[a-z0-9._-]+)+"
                           r"(@sha256:[0-9a-f]{64}|:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})$")


class RxdmImageSpec(_Model):
    """A copy of an accepted RxDM release the stack's pods may run instead of Google's image: a mirror in the
    project's registry, or the release by digest."""

    release: str = Field(pattern=r"^v[0-9][A-Za-z0-9._-]{0,63}$",
                         description="The release it is a copy of (a tag of gcp.rxdm.releases, e.g. v1.0.21).")
    image: str = Field(
        max_length=512, pattern=_IMAGE_REF_RE.pattern,
        description="The image: <repository>@sha256:<64 hex>, or <repository>:<release> (a mirror keeps the tag). "
        "It must pass platform.allowedRegistries; the container runs the release's command, args and env.")


class GcpRxdmSpec(_Model):
    """Which RxDM (receive-datapath-manager) releases the GPUDirect sidecar of team pods may run
    (components/catalog/gke_manifests.yaml, rxdm: each release with the command, args, env and host mounts upstream
    runs it with, and their sources)."""

    releases: list[str] | None = Field(
        default=None, min_length=1, max_length=10,
        description="Release tags of the catalog's rxdm list for the stack's GPUDirect flavour. Default: the release "
        "the pinned NCCL plugin installer is coupled with (TCPXO: v1.0.21 with plugin v1.0.15). List the previous one "
        "too while pods that name it still run through an installer upgrade.")
    images: list[RxdmImageSpec] = Field(
        default_factory=list, max_length=20,
        description="Mirror or digest forms of listed releases, accepted beside Google's image.")


class GcpSpec(_Model):
    """Everything specific to GCP."""

    project: str = Field(pattern=_PROJECT_RE.pattern, description="Project ID (no default).")
    region: str = Field(pattern=_GCP_REGION_RE.pattern, description="Region, e.g. us-central1 (no default).")
    gpu_zone: str = Field(pattern=_GCP_ZONE_RE.pattern,
                          description="Zone of the GPU node pools, their reservation and the filesystem.")
    billing_account: str | None = Field(
        default=None, pattern=_BILLING_ACCOUNT_RE.pattern,
        description="The billing account (XXXXXX-XXXXXX-XXXXXX): team and cluster budgets are created on it.")
    network: GcpNetworkSpec = Field(description="VPC, ranges and GPU networks.")
    node_pools: list[GcpNodePoolSpec] = Field(min_length=1, max_length=1000, description="GKE node pools.")
    storage: GcpStorageSpec = Field(default_factory=GcpStorageSpec, description="Storage plane.")
    cluster: GkeSpec = Field(description="The GKE cluster.")
    telemetry: GcpTelemetrySpec = Field(default_factory=GcpTelemetrySpec, description="Storage metrics.")
    rxdm: GcpRxdmSpec = Field(default_factory=GcpRxdmSpec,
                              description="The RxDM releases (and mirrors) GPUDirect-TCPX/TCPXO team pods may run.")

    @property
    def node_groups(self) -> list[GcpNodePoolSpec]:
        """The node pools, under the name the cloud-neutral rules use."""
        return list(self.node_pools)
