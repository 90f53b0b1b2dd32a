"""The stack's configuration as one typed model tree: ``ClusterSpec``.

Everything the program builds is decided here, from the ``gpu-cluster:spec`` key of a stack file
(``stacks/Pulumi.<env>.yaml``). All validation happens in :func:`parse_spec`, before any resource is
registered, and every problem is reported with the stack file, the key path and the rule it breaks:

    stacks/Pulumi.prod-aws.yaml: gpu-cluster:spec.aws.nodeGroups[1].desiredSize: desiredSize (20) must
    be <= maxSize (16) [rule: node-group-size-order]

Field-level rules (types, enums, ranges, unknown keys) are pydantic's; rules that relate fields to each
other or to the instance catalog live in ``_check_*`` functions so that each has a stable key path, a
rule name and a message that states the requirement. Environment-specific values (region, zones,
CIDRs, account role ARNs, cluster name) have no defaults; everything else defaults to the secure,
production-grade choice.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, ValidationError
from pydantic.alias_generators import to_camel

from components.catalog import (
    InstanceFacts,
    addon_names,
    known_regions,
    load_addon_pins,
    load_aws_catalog,
    load_eks_versions,
    zone_id_prefix,
)
from components.clock import utcnow

SPEC_KEY = "gpu-cluster:spec"
REQUIRED_LABEL_KEYS: tuple[str, ...] = ("team", "cost-center", "environment", "owner")
LogType = Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]
ALL_LOG_TYPES: tuple[LogType, ...] = ("api", "audit", "authenticator", "controllerManager", "scheduler")
PROD_REQUIRED_LOG_TYPES: tuple[str, ...] = ("api", "audit", "authenticator")
GPU_TAINT_KEY = "nvidia.com/gpu"
MAX_PUBLIC_ACCESS_CIDRS = 40  # EKS API, VpcConfigRequest.publicAccessCidrs
MAX_TAINTS = 50  # EKS API, CreateNodegroup taints
MAX_TAGS = 50  # AWS: user tags per resource
# Namespaces whose pods may run privileged (node agents: GPU Operator, EFA plugin, node exporter).
PRIVILEGED_NAMESPACES: tuple[str, ...] = ("kube-system", "gpu-operator", "monitoring")
# Names no team may take: Kubernetes' own namespaces and the platform components'.
SYSTEM_NAMESPACES: tuple[str, ...] = (
    *PRIVILEGED_NAMESPACES, "kube-public", "kube-node-lease", "default", "kueue-system", "opencost",
)

# FSx for Lustre figures (AWS FSx API reference, CreateFileSystemLustreConfiguration; summarised with
# sources in ../shared/reference/gpu_facts.yaml, storage.fsx_lustre).
FSX_THROUGHPUT_TIERS: dict[str, tuple[int, ...]] = {"PERSISTENT_2": (125, 250, 500, 1000)}
FSX_MIN_CAPACITY_GIB = 1200
FSX_CAPACITY_STEP_GIB = 2400

_LABEL_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE_RE = re.compile(r"^[a-z0-9_-]{1,63}$")
_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{1,22}[a-z0-9]$")
_GROUP_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")
_ROLE_ARN_RE = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
_RESERVATION_RE = re.compile(r"^cr-[0-9a-f]{8,17}$")
_ZONE_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d[a-z]$")
_REGION_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")
_ZONE_ID_RE = re.compile(r"^[a-z]{2,5}\d-az\d{1,2}$")
# AWS tag syntax (AWS General Reference, "Tagging best practices": letters, digits, spaces, + - = . _ : / @).
_AWS_TAG_KEY = re.compile(r"^[\w\s+=.:/@-]{1,128}$")
_AWS_TAG_VALUE = re.compile(r"^[\w\s+=.:/@-]{0,256}$")


class _Model(BaseModel):
    """Base: camelCase keys in YAML, unknown keys rejected, immutable after validation. Integers and
    booleans are strict (``maxSize: true`` is refused, not read as 1); numbers are finite."""

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True, allow_inf_nan=False
    )


class WorkloadSpec(_Model):
    """The one-page workload summary the seed asks for before any capacity is bought.

    Later layers use it for sizing and unit cost; the program itself only reports it.
    """

    kind: Literal["training", "inference", "both"] = Field(
        description="What the cluster is for: training, inference or both."
    )
    model_parameters_billions: StrictFloat = Field(
        gt=0, le=100_000, description="Largest model trained or served, in billions of parameters."
    )
    target_work_per_month: StrictFloat = Field(
        gt=0, description="Work the cluster must complete each month, in workUnit."
    )
    work_unit: str = Field(
        min_length=1,
        max_length=64,
        description="Unit of useful work (completed training runs, accepted tokens, ...).",
    )
    peak_gpus: StrictInt = Field(ge=1, description="GPUs the workload needs at its peak.")
    acceptance_metric: str = Field(
        min_length=1, max_length=256, description="How a unit of work is accepted as useful."
    )


class SubnetSpec(_Model):
    """One subnet of the VPC. ``gpu`` subnets hold GPU node groups and the shared filesystem."""

    name: str = Field(pattern=_GROUP_NAME_RE.pattern, description="Unique subnet name.")
    cidr: str = Field(description="IPv4 CIDR inside the VPC CIDR (also for an existing subnet: the rules check it).")
    id: str | None = Field(
        default=None, pattern=r"^subnet-[0-9a-f]{8,17}$",
        description="An existing subnet's id (network.existing only); the subnet is used, never created.",
    )
    availability_zone: str | None = Field(
        default=None, pattern=_ZONE_RE.pattern,
        description="Availability zone name, e.g. us-east-1a; or give availabilityZoneId.",
    )
    availability_zone_id: str | None = Field(
        default=None, pattern=_ZONE_ID_RE.pattern,
        description="Availability zone ID, e.g. use1-az4: the same physical zone in every account "
        "(zone names are shuffled per account). One of availabilityZone and availabilityZoneId.",
    )
    role: Literal["gpu", "system", "public"] = Field(
        description="gpu: GPU nodes and storage; system: control-plane ENIs and system nodes; "
        "public: NAT gateways and internet-facing load balancers."
    )

    @property
    def zone(self) -> str:
        """The zone as written in the spec: its name or its ID (a stack uses one form throughout)."""
        return self.availability_zone or self.availability_zone_id or ""


class ExistingNetworkSpec(_Model):
    """A VPC the cluster joins instead of creating one (routing, NAT and endpoints are its owner's)."""

    vpc_id: str = Field(pattern=r"^vpc-[0-9a-f]{8,17}$", description="The existing VPC's id.")


class NetworkSpec(_Model):
    """The VPC: address space, subnets and NAT layout, or an existing VPC and its subnets."""

    existing: ExistingNetworkSpec | None = Field(
        default=None,
        description="Use this VPC and the subnets' ids; nothing of the network plane is created (the EFA "
        "security group is, inside it). Ids are taken as given offline; preflight checks them.",
    )
    vpc_cidr: str = Field(description="IPv4 CIDR of the VPC (no default: environment-specific).")
    subnets: list[SubnetSpec] = Field(min_length=1, max_length=2000, description="Every subnet of the VPC.")
    nat_gateways: Literal["single", "per-az"] = Field(
        default="per-az",
        description="One NAT gateway for the VPC, or one per availability zone (default, no "
        "cross-AZ single point of failure).",
    )


class CapacitySpec(_Model):
    """How a node group's instances are bought."""

    type: Literal["on-demand", "spot", "capacity-block", "reserved"] = Field(
        default="on-demand",
        description="on-demand, spot, an EC2 Capacity Block for ML, or a targeted On-Demand "
        "Capacity Reservation.",
    )
    reservation_id: str | None = Field(
        default=None,
        description="Capacity Reservation id (cr-...) for capacity-block and reserved.",
    )
    reservation_resource_group_arn: str | None = Field(
        default=None, pattern=r"^arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:\d{12}:group/[A-Za-z0-9._-]+$",
        description="reserved only, instead of reservationId: a resource group of On-Demand Capacity Reservations "
        "(AWS::EC2::CapacityReservationPool), how several ODCRs are targeted together.",
    )
    start: datetime | None = Field(
        default=None,
        description="capacity-block only: when the block starts, in UTC (ISO 8601 with Z, e.g. "
        "2027-01-04T11:30:00Z). A block is paid whether nodes run or not.",
    )
    end: datetime | None = Field(
        default=None,
        description="capacity-block only: when the block ends, in UTC. EC2 reclaims the instances before it; "
        "the node group is scaled to 0 in time (see the preview).",
    )
    instance_count: StrictInt | None = Field(
        default=None, ge=1, le=1000,
        description="capacity-block only: the instances the block holds (the node group's maxSize at most).",
    )


class TaintSpec(_Model):
    """A Kubernetes taint applied to every node of a group."""

    key: str = Field(min_length=1, max_length=253, description="Taint key.")
    value: str = Field(default="", max_length=63, description="Taint value.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        default="NoSchedule", description="Taint effect."
    )


class NodeGroupSpec(_Model):
    """One EKS managed node group."""

    name: str = Field(pattern=_GROUP_NAME_RE.pattern, description="Unique node group name.")
    instance_type: str = Field(description="EC2 instance type; must be in the instance catalog.")
    min_size: StrictInt = Field(ge=0, le=1000, description="Minimum nodes.")
    desired_size: StrictInt = Field(ge=0, le=1000, description="Desired nodes at creation.")
    max_size: StrictInt = Field(ge=1, le=1000, description="Maximum nodes.")
    capacity: CapacitySpec = Field(
        default_factory=CapacitySpec, description="Purchase option (default on-demand)."
    )
    placement_group_name: str | None = Field(
        default=None, pattern=r"^[A-Za-z0-9._-]{1,255}$",
        description="An existing cluster placement group to launch into (an ODCR created inside one); not "
        "created by the program. Not with capacity-block capacity.",
    )
    gpu_taint: StrictBool = Field(
        default=True,
        description="GPU types get nvidia.com/gpu=true:NoSchedule (default); false for GPU-only clusters, where "
        "no system node group is then required.",
    )
    instance_types: list[str] | None = Field(
        default=None, min_length=1, max_length=20,
        description="CPU groups only: more instance types for the group (spot groups should list several); "
        "instanceType is the first.",
    )
    ami_type: Literal[
        "AL2023_x86_64_STANDARD", "AL2023_ARM_64_STANDARD", "AL2023_x86_64_NVIDIA", "AL2023_ARM_64_NVIDIA",
        "BOTTLEROCKET_x86_64", "BOTTLEROCKET_ARM_64", "BOTTLEROCKET_x86_64_NVIDIA", "BOTTLEROCKET_ARM_64_NVIDIA",
    ] | None = Field(
        default=None,
        description="EKS AMI type; default derived from the instance: AL2023, x86_64 or ARM_64, NVIDIA for GPUs.",
    )
    placement: Literal["auto", "cluster", "none"] = Field(
        default="auto",
        description="auto: a cluster placement group for multi-node EFA groups, except on "
        "reserved capacity (which AWS already places); cluster: always; none: never.",
    )
    subnets: list[str] | None = Field(
        default=None,
        description="Subnet names; default: the gpu subnets for GPU types, the system subnets "
        "otherwise.",
    )
    taints: list[TaintSpec] = Field(
        default_factory=list,
        description="Extra taints; GPU types always get nvidia.com/gpu=true:NoSchedule.",
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Extra Kubernetes node labels.")
    local_nvme: Literal["auto", "raid0", "none"] = Field(
        default="auto",
        description="auto: RAID0 the instance-store NVMe disks when the catalog confirms the type "
        "has them; raid0: require it; none: leave them unused.",
    )
    root_volume_gib: StrictInt = Field(
        alias="rootVolumeGiB",
        default=200, ge=20, le=16384, description="Encrypted gp3 root volume size (GiB)."
    )


class BucketSpec(_Model):
    """The checkpoint bucket: versioned, KMS-encrypted, private; or an existing bucket by name."""

    existing_name: str | None = Field(
        default=None, pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
        description="An existing bucket to use instead of creating one; its settings stay its owner's.",
    )
    existing_kms_key_arn: str | None = Field(
        default=None, pattern=r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[0-9a-f-]{36}$",
        description="The KMS key that encrypts the existing bucket (SSE-KMS), so team roles may use it.",
    )

    noncurrent_version_retention_days: StrictInt = Field(
        default=30,
        ge=1,
        le=3650,
        description="Days a replaced or deleted checkpoint object is kept before it expires. "
        "Current versions never expire.",
    )


class ExistingFilesystemSpec(_Model):
    """An FSx for Lustre filesystem that already exists: the cluster mounts it, nothing is created."""

    file_system_id: str = Field(pattern=r"^fs-[0-9a-f]{8,17}$", description="Its id.")
    mount_name: str = Field(pattern=r"^[a-z0-9]{1,8}$", description="Its Lustre mount name.")
    dns_name: str = Field(min_length=1, max_length=253, description="Its DNS name.")
    security_group_id: str = Field(pattern=r"^sg-[0-9a-f]{8,17}$",
                                   description="Its security group: LNet from the nodes is allowed on it.")


class FilesystemSpec(_Model):
    """The shared FSx for Lustre filesystem in the GPU subnet (its figures describe an existing one)."""

    existing: ExistingFilesystemSpec | None = Field(
        default=None, description="Use this filesystem; deploymentType, capacity and tier describe it.")

    deployment_type: Literal["PERSISTENT_2", "SCRATCH_2"] = Field(
        default="PERSISTENT_2",
        description="PERSISTENT_2 (replicated, for production) or SCRATCH_2 (cheap, no "
        "replication, for development).",
    )
    capacity_gib: StrictInt = Field(
        alias="capacityGiB",
        description="Storage capacity in GiB: 1200, 2400, then steps of 2400.", ge=1
    )
    per_unit_storage_throughput: StrictInt | None = Field(
        default=None,
        description="MB/s per TiB for PERSISTENT_2: 125, 250, 500 or 1000. Not set for SCRATCH_2.",
    )
    link_checkpoint_bucket: StrictBool = Field(
        default=True,
        description="Link the filesystem to the checkpoint bucket (data repository association "
        "on PERSISTENT_2, import/export path on SCRATCH_2).",
    )
    mount_path: str = Field(
        default="/checkpoints",
        pattern=r"^/[a-z0-9/_-]+$",
        description="Filesystem path linked to the bucket.",
    )


class StorageSpec(_Model):
    """Checkpoint bucket and optional shared filesystem."""

    checkpoint_bucket: BucketSpec = Field(
        default_factory=BucketSpec, description="Checkpoint bucket settings."
    )
    filesystem: FilesystemSpec | None = Field(
        default=None, description="Shared FSx for Lustre filesystem; none when omitted."
    )


class DeployerSpec(_Model):
    """Who runs ``pulumi up`` and how it reaches the Kubernetes API.

    Everything above the cloud resources (namespaces, Helm releases, queues) is applied through the
    cluster's API with this role's credentials, so the role gets a cluster-admin access entry before any
    Kubernetes resource is created, and the program's kubeconfig assumes it.
    """

    role_arn: str = Field(
        description="IAM role that runs pulumi up (the CI runner's or Pulumi Deployments' role); no default."
    )
    api_access: Literal["in-vpc", "public-endpoint"] = Field(
        description="in-vpc: the deployer runs inside the VPC or a network routed to it (a self-hosted CI "
        "runner or a Pulumi Deployments agent); public-endpoint: it reaches the public endpoint from "
        "publicAccessCidrs. No default: it depends on where your CI runs.",
    )
    runner_cidrs: list[str] = Field(
        min_length=1, max_length=20,
        description="Where the deployer's requests come from. in-vpc: allowed to HTTPS (443) on the "
        "cluster security group; public-endpoint: must lie inside publicAccessCidrs.",
    )
    transit_gateway_id: str | None = Field(
        default=None, pattern=r"^tgw-[0-9a-f]{8,17}$",
        description="in-vpc with runners outside this VPC: the Transit Gateway that connects their network. The "
        "stack attaches the VPC to it, routes runnerCidrs through it and opens a Route 53 Resolver inbound "
        "endpoint so the runners resolve the private API endpoint.",
    )


class ControlPlaneSpec(_Model):
    """The EKS control plane."""

    kubernetes_version: str = Field(
        default="1.35", pattern=r"^1\.\d{2}$",
        description="Kubernetes minor version; one EKS supports (components/catalog/eks_versions.yaml)."
    )
    endpoint_access: Literal["private", "public"] = Field(
        default="private",
        description="private: API reachable only inside the VPC; public: also from "
        "publicAccessCidrs.",
    )
    public_access_cidrs: list[str] = Field(
        default_factory=list, description="CIDRs allowed to the public endpoint."
    )
    log_types: list[LogType] = Field(
        default_factory=lambda: list(ALL_LOG_TYPES),
        description="Control-plane log types sent to CloudWatch (default: all five).",
    )
    log_retention_days: Literal[
        1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557,
        2922, 3288, 3653,
    ] = Field(default=365, description="CloudWatch retention of control-plane logs (days).")
    secrets_encryption: StrictBool = Field(
        default=True, description="Envelope-encrypt Kubernetes secrets with a KMS key."
    )
    admin_role_arns: list[str] = Field(
        min_length=1,
        description="IAM roles granted cluster-admin through EKS access entries "
        "(no default: account-specific).",
    )
    deployer: DeployerSpec = Field(
        description="The identity and network path of whoever runs pulumi up (no default: account-specific)."
    )


class AwsSpec(_Model):
    """Everything specific to AWS: region, zones, network, node groups, storage, control plane."""

    region: str = Field(pattern=_REGION_RE.pattern, description="AWS region (no default).")
    gpu_availability_zone: str | None = Field(
        default=None, pattern=_ZONE_RE.pattern,
        description="The zone of the GPU subnet, the capacity and the filesystem, by name (no default); or "
        "give gpuAvailabilityZoneId.",
    )
    gpu_availability_zone_id: str | None = Field(
        default=None, pattern=_ZONE_ID_RE.pattern,
        description="The GPU zone by AZ ID (e.g. use1-az4), as Capacity Blocks and ODCRs are sold; the program "
        "resolves it to this account's zone name. One of gpuAvailabilityZone and gpuAvailabilityZoneId.",
    )
    network: NetworkSpec = Field(description="VPC and subnets.")
    node_groups: list[NodeGroupSpec] = Field(min_length=1, max_length=2000, description="EKS managed node groups.")
    storage: StorageSpec = Field(default_factory=StorageSpec, description="Storage plane.")
    control_plane: ControlPlaneSpec = Field(description="EKS control plane.")

    @property
    def gpu_zone(self) -> str:
        """The GPU zone as written: its name or its AZ ID."""
        return self.gpu_availability_zone or self.gpu_availability_zone_id or ""

    @property
    def zones_by_id(self) -> bool:
        """True when the stack names zones by AZ ID (use1-az4) rather than by name (us-east-1a)."""
        return self.gpu_availability_zone_id is not None


class QuotaSpec(_Model):
    """A team's nominal share of one GPU node group, in the Kueue ClusterQueue of the team."""

    node_group: str = Field(description="A GPU node group of the stack (one Kueue ResourceFlavor each).")
    gpus: StrictInt = Field(ge=0, le=100_000, description="Nominal nvidia.com/gpu quota (GPUs, or shares when "
                      "time-slicing).")
    borrowing_limit_gpus: StrictInt | None = Field(
        default=None, ge=0, description="Most GPUs the team may borrow from the cohort (default: no limit)."
    )
    lending_limit_gpus: StrictInt | None = Field(
        default=None, ge=0, description="Most of its nominal GPUs the team lends to the cohort (default: all)."
    )
    cpu: StrictInt | None = Field(
        default=None, ge=0, description="Nominal CPU cores; default: the node's vCPUs per GPU x gpus."
    )
    memory_gib: StrictInt | None = Field(
        default=None, alias="memoryGiB", ge=0,
        description="Nominal memory (GiB); default: the node's memory per GPU x gpus.",
    )


class TeamSpec(_Model):
    """A team that runs work on the cluster: a namespace, a queue, a quota and an access group."""

    name: str = Field(pattern=_GROUP_NAME_RE.pattern, description="Team name (its namespace name).")
    cost_center: str = Field(
        pattern=_LABEL_VALUE_RE.pattern, description="The team's cost-center label value."
    )
    group: str | None = Field(
        default=None, pattern=r"^[a-z0-9][a-z0-9:._-]{0,62}$",
        description="Kubernetes group bound to the team's Role (default: gpu-cluster:<name>).",
    )
    role_arns: list[str] = Field(
        default_factory=list, description="IAM roles mapped to the team's group through EKS access entries."
    )
    quotas: list[QuotaSpec] = Field(default_factory=list, description="GPU quotas, one per node group.")

    @property
    def k8s_group(self) -> str:
        """The Kubernetes group the team's RoleBinding names."""
        return self.group or f"gpu-cluster:{self.name}"

    @property
    def gpu_quota(self) -> int:
        """Nominal GPUs over all node groups."""
        return sum(q.gpus for q in self.quotas)


class GpuSharingSpec(_Model):
    """How GPUs are handed to pods: whole GPUs (default), time-slicing or MIG."""

    mode: Literal["none", "time-slicing", "mig"] = Field(
        default="none", description="none: whole GPUs; time-slicing: replicas per GPU; mig: MIG partitions."
    )
    replicas: StrictInt = Field(default=1, ge=1, le=48, description="Time-slicing replicas per GPU (2-48).")
    mig_strategy: Literal["single", "mixed"] = Field(
        default="single", description="MIG strategy of the GPU Operator when mode is mig."
    )


class MonitoringSpec(_Model):
    """Prometheus retention and storage."""

    retention_days: StrictInt = Field(default=15, ge=1, le=365, description="Prometheus retention (days).")
    storage_gib: StrictInt = Field(default=200, alias="storageGiB", ge=10, le=16384,
                             description="Prometheus volume size (GiB, encrypted gp3).")


class PlatformSpec(_Model):
    """The Kubernetes platform on top of the cluster: GPU stack, queues, tenancy and telemetry."""

    gpu_sharing: GpuSharingSpec = Field(default_factory=GpuSharingSpec, description="GPU sharing policy.")
    cohort: StrictBool = Field(
        default=True, description="Put every team's ClusterQueue in one Kueue Cohort so idle quota is lent."
    )
    allowed_registries: list[str] = Field(
        default_factory=lambda: ["nvcr.io/", "public.ecr.aws/", "registry.k8s.io/"],
        min_length=1,
        description="Image prefixes team pods may pull from (enforced by a ValidatingAdmissionPolicy).",
    )
    allow_https_egress: StrictBool = Field(
        default=True, description="Let team pods reach HTTPS endpoints (S3 checkpoints, package mirrors)."
    )
    monitoring: MonitoringSpec = Field(default_factory=MonitoringSpec, description="Prometheus settings.")


class ClusterSpec(_Model):
    """The whole stack: identity, billing labels, workload, teams and the cloud's planes."""

    name: str = Field(
        pattern=_NAME_RE.pattern,
        description="Cluster name, 3-24 characters [a-z0-9-] (no default).",
    )
    environment: Literal["dev", "staging", "prod"] = Field(description="Environment (no default).")
    cloud: Literal["aws"] = Field(description="Cloud provider; gcp comes later.")
    labels: dict[str, str] = Field(
        description="Billing labels, merged into every taggable resource; must include team, "
        "cost-center and owner (environment is added from the environment key)."
    )
    tags: dict[str, str] = Field(
        default_factory=dict,
        description="Other AWS tags for every resource (e.g. GithubRepo: github.com/org/repo), under AWS's own tag "
        "rules; unlike labels they are not GCP labels and not billing keys.",
    )
    workload: WorkloadSpec = Field(description="The workload one-pager.")
    teams: list[TeamSpec] = Field(default_factory=list, max_length=2000, description="Teams using the cluster.")
    platform: PlatformSpec = Field(
        default_factory=PlatformSpec, description="GPU stack, queues, tenancy and telemetry on the cluster."
    )
    deletion_protection: StrictBool = Field(
        default=True,
        description="Protect and retain stateful resources (bucket, filesystem, KMS keys, cluster). "
        "Cannot be turned off in prod.",
    )
    aws: AwsSpec | None = Field(default=None, description="AWS settings; required when cloud is aws.")

    @property
    def billing_labels(self) -> dict[str, str]:
        """The labels with ``environment`` filled in, as applied to every resource."""
        return {**self.labels, "environment": self.environment}

    def aws_spec(self) -> AwsSpec:
        """The AWS sub-spec (validated to exist when cloud is aws)."""
        if self.aws is None:  # guarded by _check_cloud; kept for type narrowing
            raise ValueError("aws settings are missing")
        return self.aws


# --- errors -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpecIssue:
    """One broken rule: where (key path), which rule, and the requirement in words."""

    path: str
    rule: str
    message: str


# What an error may echo: a line is at most this long, a rule repeats at most this often, and the whole
# report has at most this many lines (1,000 copies of one subnet would otherwise print 100 MB).
MAX_LINE = 500
MAX_PER_RULE = 10
MAX_LINES = 60


class SpecError(Exception):
    """A stack file that cannot be built; ``str()`` lists the issues, one per line, within the caps above."""

    def __init__(self, stack_file: str, issues: list[SpecIssue], totals: Mapping[str, int] | None = None) -> None:
        self.stack_file = stack_file
        self.issues = issues
        self.totals = dict(totals or {})
        super().__init__(self.render())

    def render(self) -> str:
        """One line per issue: ``<file>: <key path>: <message> [rule: <rule>]``; repeats are summarised."""
        lines: list[str] = []
        shown: dict[str, int] = {}
        hidden: dict[str, int] = {}
        for i in self.issues:
            if shown.get(i.rule, 0) >= MAX_PER_RULE or len(lines) >= MAX_LINES:
                hidden[i.rule] = hidden.get(i.rule, 0) + 1
                continue
            shown[i.rule] = shown.get(i.rule, 0) + 1
            lines.append(_clip(_one_line(f"{self.stack_file}: {i.path}: {i.message}"), MAX_LINE)
                         + f" [rule: {i.rule}]")
        for rule in self.totals:
            if self.totals[rule] > shown.get(rule, 0):
                hidden[rule] = self.totals[rule] - shown.get(rule, 0)
        for rule, count in hidden.items():
            lines.append(f"{self.stack_file}: {SPEC_KEY}: {count} more problem(s) of this rule not shown "
                         f"[rule: {rule}]")
        return "\n".join(lines)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _path(loc: Iterable[int | str], root: str = SPEC_KEY) -> str:
    """``root.key[0].other``; keys that are not plain identifiers are quoted: ``labels["a b"]``."""
    out = root
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            out += f".{part}"
        else:
            out += "[" + json.dumps(part) + "]"
    return out


def _one_line(text: str) -> str:
    """Escape control characters from user input so that each issue stays on one line."""
    return _CONTROL.sub(lambda m: json.dumps(m.group())[1:-1], text)


_PYDANTIC_RULES = {
    "missing": ("schema-required-key", "required key is missing"),
    "extra_forbidden": ("schema-unknown-key", "unknown key"),
}


def _issues_from_validation(err: ValidationError) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    for e in err.errors(include_url=False):
        rule, message = _PYDANTIC_RULES.get(e["type"], ("schema-type", e["msg"]))
        if e["type"] == "value_error":
            message = str(e["ctx"]["error"]) if "ctx" in e else e["msg"]
        # pydantic tags union/literal members in the location; keep only real keys and indices
        loc = [p for p in e["loc"] if isinstance(p, int) or not str(p).startswith(("function-", "literal["))]
        issues.append(SpecIssue(_path(loc), rule, message))
    return issues


# --- cross-field rules --------------------------------------------------------------------------


class _Collector:
    """Issues of the cross-field rules; keeps the first few of each rule, counts the rest."""

    def __init__(self) -> None:
        self.issues: list[SpecIssue] = []
        self._per_rule: dict[str, int] = {}

    @property
    def totals(self) -> dict[str, int]:
        """How many issues each rule found, shown or not."""
        return dict(self._per_rule)

    def add(self, path: str, rule: str, message: str) -> None:
        seen = self._per_rule[rule] = self._per_rule.get(rule, 0) + 1
        if seen <= MAX_PER_RULE + 1:  # one more than shown, so the summary line knows there are more
            self.issues.append(SpecIssue(_path([]) + path, rule, message))


def _check_labels(spec: ClusterSpec, out: _Collector) -> None:
    for key, value in spec.labels.items():
        if not _LABEL_RE.match(key):
            out.add(_path(["labels", key], root=""), "label-syntax",
                    "label keys must be 1-63 characters of lowercase letters, digits, '-' or '_', "
                    "starting with a letter (valid as AWS tags and GCP labels alike)")
        if not _LABEL_VALUE_RE.match(value):
            out.add(_path(["labels", key], root=""), "label-syntax",
                    f"label value '{value}' must be 1-63 characters of lowercase letters, digits, "
                    "'-' or '_' (valid as AWS tags and GCP labels alike)")
    for key in REQUIRED_LABEL_KEYS:
        if key == "environment":
            continue
        if key not in spec.labels:
            out.add(".labels", "billing-labels-required",
                    f"billing label '{key}' is required (required keys: {', '.join(REQUIRED_LABEL_KEYS)})")
    # Subnets carry the most tags: the billing labels, Name, the provider's cluster tag and three
    # Kubernetes tags (kubernetes.io/cluster/<name>, the load-balancer role, subnet-role).
    added = {"Name", "cluster", f"kubernetes.io/cluster/{spec.name}", "kubernetes.io/role/internal-elb",
             "subnet-role"}
    total = len(set(spec.billing_labels) | set(spec.tags) | added)
    if total > MAX_TAGS:
        extra = f" and {len(spec.tags)} tags" if spec.tags else ""
        out.add(".labels", "tag-limit",
                f"the {len(spec.billing_labels)} billing labels{extra} and the {len(added)} tags the program adds "
                f"make {total} tags on a subnet; AWS allows {MAX_TAGS} per resource")
    for key, value in spec.tags.items():
        if not _AWS_TAG_KEY.match(key) or key.lower().startswith("aws:") or not _AWS_TAG_VALUE.match(value):
            out.add(_path(["tags", key], root=""), "aws-tag-syntax",
                    "AWS tags have keys of 1-128 and values of 0-256 letters, digits, spaces and + - = . _ : / @ "
                    "(keys may not start with aws:)")
        if key in spec.billing_labels:
            out.add(_path(["tags", key], root=""), "aws-tag-syntax",
                    f"'{key}' is a billing label; set it under labels, not tags")
    env = spec.labels.get("environment")
    if env is not None and env != spec.environment:
        out.add(".labels.environment", "billing-labels-required",
                f"label environment '{env}' must equal the environment key '{spec.environment}' "
                "(it is filled in from it; leave it out)")


def _check_cloud(spec: ClusterSpec, provider_region: str | None, out: _Collector) -> None:
    if spec.cloud == "aws" and spec.aws is None:
        out.add(".aws", "cloud-settings-required", "cloud is aws, so the aws settings are required")
        return
    aws = spec.aws
    if aws is None:
        return
    if aws.region not in known_regions():
        out.add(".aws.region", "region-known",
                f"'{aws.region}' is not a region of the catalog (components/catalog/aws_regions.yaml, with sources); "
                f"known: {', '.join(known_regions())}")
    if provider_region is not None and provider_region != aws.region:
        out.add(".aws.region", "region-matches-provider",
                f"aws.region '{aws.region}' must equal the stack's aws:region '{provider_region}'")
    if not _gpu_zone_given_once(aws):
        out.add(".aws.gpuAvailabilityZone", "zone-given-once",
                "give the GPU zone once: gpuAvailabilityZone (a name, e.g. us-east-1a) or gpuAvailabilityZoneId "
                "(an AZ ID, e.g. use1-az4, as Capacity Blocks and ODCRs are sold)")
        return
    key = "gpuAvailabilityZone" if aws.gpu_availability_zone else "gpuAvailabilityZoneId"
    _check_zone_in_region(aws, aws.gpu_zone, f".aws.{key}", out)


def _check_zone_in_region(aws: AwsSpec, zone: str, where: str, out: _Collector) -> None:
    if _ZONE_RE.match(zone):
        if not zone.startswith(aws.region):
            out.add(where, "zone-in-region", f"zone '{zone}' is not in region '{aws.region}'")
        return
    prefix = zone_id_prefix(aws.region)
    if prefix is None:
        out.add(where, "zone-in-region",
                f"the region catalog (components/catalog/aws_regions.yaml) has no AZ ID prefix for region "
                f"'{aws.region}', so zone '{zone}' cannot be checked; name the zone instead (e.g. {aws.region}a)")
    elif not zone.startswith(f"{prefix}-az"):
        out.add(where, "zone-in-region",
                f"zone ID '{zone}' is not in region '{aws.region}' (its zone IDs are {prefix}-az<N>)")


_PREFIX_NOTATION = re.compile(r"^[0-9A-Fa-f.:]+/\d{1,3}$")


def parse_cidr(value: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | str:
    """A CIDR in prefix notation (``10.0.0.0/16``) without host bits, or the reason it is not one.

    Python also reads ``10.0.0.0/255.255.0.0`` and a bare address; AWS APIs take prefix notation only.
    """
    if not _PREFIX_NOTATION.match(value):
        return "not in prefix notation"
    try:
        return ipaddress.ip_network(value, strict=True)
    except ValueError as err:
        return str(err)


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
                        f"subnet CIDR {sn.cidr} overlaps subnets[{j}] ({other}); subnets must not overlap")
        nets.append((i, cidr))
    for i, sn in enumerate(net.subnets):
        if net.existing is not None and sn.id is None:
            out.add(f".aws.network.subnets[{i}].id", "network-existing",
                    f"network.existing uses subnets that already exist: give subnet '{sn.name}' its id (subnet-...)")
        if net.existing is None and sn.id is not None:
            out.add(f".aws.network.subnets[{i}].id", "network-existing",
                    "a subnet id only applies with network.existing (otherwise the program creates the subnet)")
    roles = {sn.role for sn in net.subnets}
    for role in ("gpu", "system"):
        if role not in roles:
            out.add(".aws.network.subnets", "subnet-roles",
                    f"at least one subnet with role '{role}' is required")
    private_zones = {sn.zone for sn in net.subnets if sn.role != "public"}
    if len(private_zones) < 2:
        out.add(".aws.network.subnets", "eks-two-zones",
                "EKS needs private (gpu or system) subnets in at least two availability zones")
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


def _gpu_zone_given_once(aws: AwsSpec) -> bool:
    return (aws.gpu_availability_zone is None) != (aws.gpu_availability_zone_id is None)


def _gpu_zone_key(aws: AwsSpec) -> str:
    return "gpuAvailabilityZoneId" if aws.zones_by_id else "gpuAvailabilityZone"


def default_subnets(aws: AwsSpec, facts: InstanceFacts) -> list[str]:
    """The subnets a node group uses when it names none: gpu subnets for GPU types, system otherwise."""
    role = "gpu" if facts.gpu_count > 0 else "system"
    return [sn.name for sn in aws.network.subnets if sn.role == role]


def uses_placement_group(group: NodeGroupSpec, facts: InstanceFacts) -> bool:
    """Whether the group gets a cluster placement group (validated specs only)."""
    if group.placement == "cluster":
        return True
    if group.placement == "none":
        return False
    reserved = group.capacity.type in ("capacity-block", "reserved")
    return facts.efa_capable and group.max_size > 1 and not reserved and group.placement_group_name is None


def _check_capacity_block(ng: NodeGroupSpec, where: str, out: _Collector) -> None:
    """A Capacity Block is a dated window of a fixed number of instances: the spec records it, and the
    node group is sized so that it can be created, updated and left outside the window."""
    cap = ng.capacity
    given = {"start": cap.start, "end": cap.end, "instanceCount": cap.instance_count}
    if cap.type != "capacity-block":
        for key, value in given.items():
            if value is not None:
                out.add(f"{where}.capacity.{key}", "capacity-block-window",
                        f"{key} only applies to capacity-block capacity, not '{cap.type}'")
        return
    for key, value in given.items():
        if value is None:
            out.add(f"{where}.capacity.{key}", "capacity-block-window",
                    f"capacity-block capacity needs the block's {key} (start and end in UTC, and the instance "
                    "count, as shown by `aws ec2 describe-capacity-reservations`): the preview shows the window "
                    "and the node group is scaled for it")
    for key, value in (("start", cap.start), ("end", cap.end)):
        if value is not None and value.utcoffset() != timedelta(0):
            out.add(f"{where}.capacity.{key}", "capacity-block-window",
                    f"{key} must be given in UTC with a Z suffix (e.g. 2027-01-04T11:30:00Z), got "
                    f"'{value.isoformat()}'")
    if cap.start is not None and cap.end is not None and cap.start.utcoffset() is not None \
            and cap.end.utcoffset() is not None and cap.end <= cap.start:
        out.add(f"{where}.capacity.end", "capacity-block-window",
                f"end ({_utc(cap.end)}) must be after start ({_utc(cap.start)})")
    if ng.min_size > 0 or ng.desired_size > 0:
        field = "minSize" if ng.min_size > 0 else "desiredSize"
        out.add(f"{where}.{field}", "capacity-block-scales-from-zero",
                f"a capacity-block node group is created with minSize 0 and desiredSize 0 (got {ng.min_size} and "
                f"{ng.desired_size}): no instance can launch before the block starts or after it ends, and EKS "
                "needs desiredSize 0 to update such a group; its scheduled actions scale it to the block for the "
                "window (EKS user guide, capacity-blocks-mng)")
    if cap.instance_count is not None and ng.max_size > cap.instance_count:
        out.add(f"{where}.maxSize", "capacity-block-size",
                f"maxSize ({ng.max_size}) must be <= the block's instanceCount ({cap.instance_count}): nodes beyond "
                "the block cannot launch")


_QUALIFIED = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def k8s_key_problem(key: str) -> str | None:
    """Why ``key`` is not a Kubernetes label or taint key (``[prefix/]name``), or None."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return "its prefix must be a DNS subdomain (lowercase, at most 253 characters)"
    if not _QUALIFIED.match(name):
        return ("its name must be 1-63 characters of letters, digits, '-', '_' or '.', starting and ending with a "
                "letter or digit")
    return None


def k8s_value_problem(value: str) -> str | None:
    """Why ``value`` is not a Kubernetes label (or taint) value, or None; empty is allowed."""
    if value and not _QUALIFIED.match(value):
        return ("a value is empty or 1-63 characters of letters, digits, '-', '_' or '.', starting and ending with a "
                "letter or digit")
    return None


def _check_node_labels(ng: NodeGroupSpec, facts: InstanceFacts, where: str, out: _Collector) -> None:
    """Labels and taints EKS and Kubernetes accept; GPU nodes keep repelling pods that ask for no GPU."""
    for key, value in ng.labels.items():
        problem = k8s_key_problem(key) or k8s_value_problem(value)
        if problem:
            out.add(f"{where}{_path(['labels', key], root='')}", "k8s-label-syntax",
                    f"'{key}: {value}' is not a valid Kubernetes label: {problem}")
    if len(ng.taints) > MAX_TAINTS:
        out.add(f"{where}.taints", "taint-limit", f"EKS accepts at most {MAX_TAINTS} taints per node group, "
                f"got {len(ng.taints)}")
    seen: set[tuple[str, str]] = set()
    for j, taint in enumerate(ng.taints):
        problem = k8s_key_problem(taint.key) or k8s_value_problem(taint.value)
        if problem:
            out.add(f"{where}.taints[{j}]", "k8s-taint-syntax", f"taint '{taint.key}={taint.value}' is not valid: "
                    f"{problem}")
        if (taint.key, taint.effect) in seen:
            out.add(f"{where}.taints[{j}]", "taint-unique", f"taint {taint.key}:{taint.effect} is listed twice")
        seen.add((taint.key, taint.effect))
        if facts.gpu_count and taint.key == GPU_TAINT_KEY and taint.effect != "NoSchedule":
            out.add(f"{where}.taints[{j}].effect", "gpu-taint-noschedule",
                    f"GPU nodes keep {GPU_TAINT_KEY}=true:NoSchedule so that pods without GPU requests stay off them; "
                    f"remove this taint or make it NoSchedule (got {taint.effect})")


def _check_instance_types(ng: NodeGroupSpec, facts: InstanceFacts, catalog: Mapping[str, InstanceFacts],
                          where: str, out: _Collector) -> None:
    """Several instance types for one group: CPU groups only, all known, one architecture; the AMI type
    fits the architecture and the GPUs; GPU-only options stay on GPU types."""
    if ng.instance_types is not None and facts.gpu_count:
        out.add(f"{where}.instanceTypes", "instance-types-cpu-only",
                "instanceTypes (several types) is for CPU groups; a GPU group's quotas and EFA layout need one "
                "instance type")
    elif ng.instance_types is not None:
        if ng.instance_types[0] != ng.instance_type:
            out.add(f"{where}.instanceTypes", "instance-types-cpu-only",
                    f"instanceTypes must start with instanceType ({ng.instance_type})")
        for j, other in enumerate(ng.instance_types):
            known = catalog.get(other)
            if known is None:
                out.add(f"{where}.instanceTypes[{j}]", "instance-type-in-catalog",
                        f"'{other}' is not in the instance catalog (components/catalog/aws_instances.yaml)")
            elif known.arch != facts.arch or known.gpu_count:
                out.add(f"{where}.instanceTypes[{j}]", "instance-types-cpu-only",
                        f"'{other}' ({known.arch}, {known.gpu_count} GPUs) does not match {ng.instance_type} "
                        f"({facts.arch}, CPU only): a group's types share one architecture and AMI")
    if ng.ami_type is not None:
        arch_ok = ("ARM_64" in ng.ami_type) == (facts.arch == "arm64")
        gpu_ok = ng.ami_type.endswith("_NVIDIA") == bool(facts.gpu_count)
        if not (arch_ok and gpu_ok):
            out.add(f"{where}.amiType", "ami-type-fits",
                    f"{ng.ami_type} does not fit {ng.instance_type} ({facts.arch}, "
                    f"{'GPUs' if facts.gpu_count else 'no GPU'}); use {default_ami_type(facts)}")
        if ng.ami_type.startswith("BOTTLEROCKET") and ng.local_nvme == "raid0":
            out.add(f"{where}.localNvme", "ami-type-fits",
                    "localNvme raid0 is written as AL2023 nodeadm user data; Bottlerocket nodes are not configured "
                    "by it: use an AL2023 AMI type or localNvme none")
    if not ng.gpu_taint and not facts.gpu_count:
        out.add(f"{where}.gpuTaint", "gpu-taint-noschedule", "gpuTaint applies to GPU node groups only")


def derive_ami_type(ng: NodeGroupSpec, facts: InstanceFacts) -> str:
    """The EKS AMI type of a group: the spec's, else :func:`default_ami_type`."""
    return ng.ami_type if ng.ami_type is not None else default_ami_type(facts)


def default_ami_type(facts: InstanceFacts) -> str:
    """AL2023 for the instance's architecture, NVIDIA where it has GPUs (EKS AMITypes values)."""
    arch = "ARM_64" if facts.arch == "arm64" else "x86_64"
    return f"AL2023_{arch}_{'NVIDIA' if facts.gpu_count else 'STANDARD'}"


def _utc(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_node_groups(spec: ClusterSpec, aws: AwsSpec, out: _Collector) -> None:
    catalog = load_aws_catalog()
    subnets = {sn.name: sn for sn in aws.network.subnets}
    names: set[str] = set()
    for i, ng in enumerate(aws.node_groups):
        where = f".aws.nodeGroups[{i}]"
        if ng.name in names:
            out.add(f"{where}.name", "unique-names", f"node group name '{ng.name}' is used twice")
        names.add(ng.name)
        if not ng.min_size <= ng.desired_size:
            out.add(f"{where}.desiredSize", "node-group-size-order",
                    f"desiredSize ({ng.desired_size}) must be >= minSize ({ng.min_size}); "
                    "sizes must satisfy minSize <= desiredSize <= maxSize")
        if not ng.desired_size <= ng.max_size:
            out.add(f"{where}.desiredSize", "node-group-size-order",
                    f"desiredSize ({ng.desired_size}) must be <= maxSize ({ng.max_size}); "
                    "sizes must satisfy minSize <= desiredSize <= maxSize")
        cap = ng.capacity
        reserved = cap.type in ("capacity-block", "reserved")
        by_group = cap.reservation_resource_group_arn is not None
        if by_group and cap.type != "reserved":
            out.add(f"{where}.capacity.reservationResourceGroupArn", "reservation-id",
                    f"a reservation resource group only applies to reserved (ODCR) capacity, not '{cap.type}'")
        if by_group and cap.reservation_id is not None:
            out.add(f"{where}.capacity.reservationId", "reservation-id",
                    "give reservationId or reservationResourceGroupArn, not both")
        if reserved and cap.reservation_id is None and not (by_group and cap.type == "reserved"):
            out.add(f"{where}.capacity.reservationId", "reservation-id",
                    f"capacity type '{cap.type}' needs the Capacity Reservation id (cr-...)"
                    + (" or, for reserved, reservationResourceGroupArn" if cap.type == "reserved" else ""))
        if cap.reservation_id is not None and not reserved:
            out.add(f"{where}.capacity.reservationId", "reservation-id",
                    f"reservationId only applies to capacity-block and reserved, not '{cap.type}'")
        if cap.reservation_id is not None and not _RESERVATION_RE.match(cap.reservation_id):
            out.add(f"{where}.capacity.reservationId", "reservation-id",
                    f"'{cap.reservation_id}' is not a Capacity Reservation id (cr- and 8-17 hex digits)")
        _check_capacity_block(ng, where, out)
        if reserved and ng.placement == "cluster":
            out.add(f"{where}.placement", "no-placement-group-on-reserved-capacity",
                    f"a cluster placement group must not be forced onto {cap.type} capacity: the "
                    "reservation is already placed and a placement group causes "
                    "InsufficientInstanceCapacity (terraform-aws-eks PR #3730); use auto or none")
        if ng.placement_group_name is not None:
            if cap.type == "capacity-block":
                out.add(f"{where}.placementGroupName", "no-placement-group-on-reserved-capacity",
                        "a placement group must not be forced onto capacity-block capacity: the block is already "
                        "placed (terraform-aws-eks PR #3730)")
            if ng.placement == "none":
                out.add(f"{where}.placementGroupName", "placement-group-existing",
                        "placementGroupName and placement: none contradict each other")
        facts = catalog.get(ng.instance_type)
        if facts is None:
            close = difflib.get_close_matches(ng.instance_type, list(catalog), n=3)
            out.add(f"{where}.instanceType", "instance-type-in-catalog",
                    f"'{ng.instance_type}' is not in the instance catalog (components/catalog/aws_instances.yaml, "
                    f"{len(catalog)} types)" + (f"; closest: {', '.join(close)}" if close else ""))
            continue
        _check_instance_types(ng, facts, catalog, where, out)
        if cap.type == "capacity-block" and not facts.capacity_blocks.value:
            out.add(f"{where}.capacity.type", "capacity-block-instance-type",
                    f"{ng.instance_type} is not sold as an EC2 Capacity Block for ML (catalog: "
                    f"{facts.capacity_blocks.source}); use on-demand, spot or a reserved ODCR")
        _check_node_labels(ng, facts, where, out)
        if ng.local_nvme == "raid0" and not facts.has_local_nvme:
            known = "has no" if facts.has_local_nvme is False else "has no confirmed"
            out.add(f"{where}.localNvme", "local-nvme-exists",
                    f"localNvme raid0 needs instance-store NVMe, and the catalog {known} local NVMe "
                    f"for {ng.instance_type}; use auto or none")
        group_subnets = ng.subnets if ng.subnets is not None else default_subnets(aws, facts)
        missing = [s for s in group_subnets if s not in subnets]
        if missing:
            out.add(f"{where}.subnets", "subnet-exists",
                    f"unknown subnet(s) {', '.join(missing)}; known: {', '.join(subnets)}")
            continue
        public = [s for s in group_subnets if subnets[s].role == "public"]
        if public:
            out.add(f"{where}.subnets", "nodes-in-private-subnets",
                    f"nodes must run in private subnets, not public {', '.join(public)}")
        zones = sorted({subnets[s].zone for s in group_subnets})
        if facts.efa_capable and ng.max_size > 1 and len(zones) > 1:
            out.add(f"{where}.subnets", "efa-group-single-az",
                    f"{ng.instance_type} is EFA-capable and the group spans nodes (maxSize "
                    f"{ng.max_size}), so its subnets must be in one availability zone; got "
                    f"{', '.join(zones)}")
        if reserved and _gpu_zone_given_once(aws) and zones != [aws.gpu_zone]:
            out.add(f"{where}.subnets", "reserved-capacity-in-gpu-zone",
                    f"{cap.type} capacity is bound to one zone; the group's subnets must all be in "
                    f"{_gpu_zone_key(aws)} '{aws.gpu_zone}'")
    if any(ng.instance_type not in catalog for ng in aws.node_groups):
        return  # the fleet-wide rules below need every group's facts; the unknown type is reported
    catalog_groups = [(ng, catalog[ng.instance_type]) for ng in aws.node_groups]
    tainted = any(f.gpu_count and ng.gpu_taint for ng, f in catalog_groups)
    if catalog_groups and tainted and not any(f.gpu_count == 0 for _, f in catalog_groups):
        out.add(".aws.nodeGroups", "system-node-group",
                "a node group without GPUs is required for system pods (GPU nodes carry the "
                f"{GPU_TAINT_KEY}=true:NoSchedule taint)")
    if catalog_groups and not any(f.gpu_count > 0 for _, f in catalog_groups):
        out.add(".aws.nodeGroups", "gpu-node-group", "at least one node group with GPUs is required")
    max_gpus = sum(ng.max_size * f.gpu_count for ng, f in catalog_groups)
    if catalog_groups and spec.workload.peak_gpus > max_gpus:
        out.add(".workload.peakGpus", "peak-gpus-fit",
                f"peakGpus ({spec.workload.peak_gpus}) exceeds the {max_gpus} GPUs the node groups "
                "provide at maxSize")


def _check_storage(aws: AwsSpec, out: _Collector) -> None:
    fs = aws.storage.filesystem
    if fs is None:
        return
    where = ".aws.storage.filesystem"
    cap = fs.capacity_gib
    if cap not in (FSX_MIN_CAPACITY_GIB,) and (cap < FSX_CAPACITY_STEP_GIB or cap % FSX_CAPACITY_STEP_GIB):
        out.add(f"{where}.capacityGiB", "fsx-capacity-valid",
                f"capacityGiB {cap} is not a size FSx for Lustre {fs.deployment_type} accepts: "
                f"{FSX_MIN_CAPACITY_GIB}, {FSX_CAPACITY_STEP_GIB}, or a multiple of {FSX_CAPACITY_STEP_GIB}")
    tiers = FSX_THROUGHPUT_TIERS.get(fs.deployment_type)
    if tiers is None and fs.per_unit_storage_throughput is not None:
        out.add(f"{where}.perUnitStorageThroughput", "fsx-throughput-tier-valid",
                f"perUnitStorageThroughput does not apply to {fs.deployment_type}; remove it")
    if tiers is not None and fs.per_unit_storage_throughput not in tiers:
        out.add(f"{where}.perUnitStorageThroughput", "fsx-throughput-tier-valid",
                f"perUnitStorageThroughput must be one of {', '.join(map(str, tiers))} MB/s/TiB for "
                f"{fs.deployment_type}, got {fs.per_unit_storage_throughput}")


def _check_control_plane(spec: ClusterSpec, aws: AwsSpec, now: datetime, out: _Collector) -> None:
    cp = aws.control_plane
    where = ".aws.controlPlane"
    for i, arn in enumerate(cp.admin_role_arns):
        if not _ROLE_ARN_RE.match(arn):
            out.add(f"{where}.adminRoleArns[{i}]", "admin-role-arn",
                    f"'{arn}' is not an IAM role ARN (arn:aws:iam::<12 digits>:role/<name>)")
    public_nets: list[ipaddress.IPv4Network] = []
    for i, cidr in enumerate(cp.public_access_cidrs):
        net = parse_cidr(cidr)
        if not isinstance(net, ipaddress.IPv4Network):
            reason = net if isinstance(net, str) else "an IPv6 network"
            out.add(f"{where}.publicAccessCidrs[{i}]", "cidr-valid",
                    f"'{cidr}' is not an IPv4 CIDR (address/prefix, no host bits): {reason}")
            continue
        if net.prefixlen == 0:
            out.add(f"{where}.publicAccessCidrs[{i}]", "endpoint-not-open",
                    f"{cidr} opens the API endpoint to the whole internet; list the networks that "
                    "need access")
        else:
            public_nets.append(net)
    if any(n.prefixlen == 0 for n in ipaddress.collapse_addresses(public_nets)):
        out.add(f"{where}.publicAccessCidrs", "endpoint-not-open",
                "publicAccessCidrs together cover the whole internet (e.g. 0.0.0.0/1 and 128.0.0.0/1); list the "
                "networks that need access")
    if len(cp.public_access_cidrs) > MAX_PUBLIC_ACCESS_CIDRS:
        out.add(f"{where}.publicAccessCidrs", "endpoint-cidr-limit",
                f"EKS accepts at most {MAX_PUBLIC_ACCESS_CIDRS} publicAccessCidrs, got {len(cp.public_access_cidrs)}")
    principals: dict[str, str] = {}
    for i, arn in enumerate(cp.admin_role_arns):
        if arn in principals:
            out.add(f"{where}.adminRoleArns[{i}]", "unique-principals",
                    f"'{arn}' is already {principals[arn]}; EKS allows one access entry per principal")
        principals.setdefault(arn, f"adminRoleArns[{i}]")
    for t, team in enumerate(spec.teams):
        for j, arn in enumerate(team.role_arns):
            if arn in principals:
                out.add(f".teams[{t}].roleArns[{j}]", "unique-principals",
                        f"'{arn}' is already {principals[arn]}; EKS allows one access entry per principal")
            principals.setdefault(arn, f"teams[{t}].roleArns[{j}]")
    if cp.endpoint_access == "public" and not cp.public_access_cidrs:
        out.add(f"{where}.publicAccessCidrs", "endpoint-not-open",
                "a public endpoint needs publicAccessCidrs restricted to listed networks")
    if cp.endpoint_access == "private" and cp.public_access_cidrs:
        out.add(f"{where}.publicAccessCidrs", "endpoint-not-open",
                "publicAccessCidrs only applies when endpointAccess is public")
    _check_deployer(spec, aws, out)
    release = load_eks_versions().get(cp.kubernetes_version)
    if release is None:
        out.add(f"{where}.kubernetesVersion", "kubernetes-version-supported",
                f"Kubernetes {cp.kubernetes_version} is not a version of the EKS catalog "
                f"(components/catalog/eks_versions.yaml); known: {', '.join(load_eks_versions())}")
    elif now >= release.end_of_standard_support:
        current = [v for v, r in load_eks_versions().items() if now < r.end_of_standard_support]
        out.add(f"{where}.kubernetesVersion", "kubernetes-version-supported",
                f"Kubernetes {cp.kubernetes_version} left EKS standard support on "
                f"{release.end_of_standard_support:%Y-%m-%d}; this blueprint keeps clusters on standard support "
                f"(no extended-support charges): use {', '.join(current) or 'a newer version'}")
    needed = [n for n in addon_names() if n != "aws-fsx-csi-driver" or aws.storage.filesystem is not None]
    unpinned = [n for n in needed if n not in load_addon_pins(cp.kubernetes_version)]
    if unpinned:
        out.add(f"{where}.kubernetesVersion", "addon-versions-pinned",
                f"no pinned EKS add-on version for Kubernetes {cp.kubernetes_version}: {', '.join(unpinned)}; pin "
                "them under eksAddons in components/catalog/charts.yaml (aws eks describe-addon-versions "
                f"--kubernetes-version {cp.kubernetes_version}) or use a version that has pins")
    if len(set(cp.log_types)) != len(cp.log_types):
        out.add(f"{where}.logTypes", "unique-names", "log types are listed twice")
    if spec.environment == "prod":
        missing = [t for t in PROD_REQUIRED_LOG_TYPES if t not in cp.log_types]
        if missing:
            out.add(f"{where}.logTypes", "prod-audit-logs",
                    f"prod clusters must log {', '.join(PROD_REQUIRED_LOG_TYPES)}; missing "
                    f"{', '.join(missing)}")
        if not cp.secrets_encryption:
            out.add(f"{where}.secretsEncryption", "prod-secrets-encryption",
                    "prod clusters must encrypt Kubernetes secrets with KMS")


def _check_deployer(spec: ClusterSpec, aws: AwsSpec, out: _Collector) -> None:
    """The deployer must be able to reach the API it applies the platform through, as an admin."""
    cp = aws.control_plane
    dep = cp.deployer
    where = ".aws.controlPlane.deployer"
    if not _ROLE_ARN_RE.match(dep.role_arn):
        out.add(f"{where}.roleArn", "admin-role-arn",
                f"'{dep.role_arn}' is not an IAM role ARN (arn:aws:iam::<12 digits>:role/<name>)")
    others = {*cp.admin_role_arns, *(arn for t in spec.teams for arn in t.role_arns)}
    if dep.role_arn in others:
        out.add(f"{where}.roleArn", "deployer-access-entry",
                f"'{dep.role_arn}' is also listed as an admin or team role; the deployer gets its own cluster-admin "
                "access entry and EKS allows one access entry per principal: list it only as the deployer")
    runners = []
    for i, cidr in enumerate(dep.runner_cidrs):
        net = parse_cidr(cidr)
        if isinstance(net, str):
            out.add(f"{where}.runnerCidrs[{i}]", "cidr-valid",
                    f"'{cidr}' is not a CIDR (address/prefix, no host bits): {net}")
        else:
            runners.append((i, net))
    if cp.endpoint_access == "private" and dep.api_access != "in-vpc":
        out.add(f"{where}.apiAccess", "deployer-reaches-api",
                "the API endpoint is private, so a deployer outside the VPC cannot apply the Kubernetes platform "
                "(every namespace and Helm release would time out); either run pulumi up inside the VPC (a "
                "self-hosted CI runner or Pulumi Deployments agent) and set apiAccess: in-vpc with its runnerCidrs, "
                "or set endpointAccess: public with publicAccessCidrs that include the runner and apiAccess: "
                "public-endpoint")
    vpc = parse_cidr(aws.network.vpc_cidr)
    outside = [str(r) for _, r in runners if not isinstance(vpc, str) and not (
        r.version == vpc.version and r.subnet_of(vpc))]  # type: ignore[arg-type]
    if dep.api_access == "in-vpc" and outside and dep.transit_gateway_id is None:
        out.add(f"{where}.transitGatewayId", "deployer-reaches-api",
                f"runner CIDR(s) {', '.join(outside)} are outside the VPC ({aws.network.vpc_cidr}): give the Transit "
                "Gateway that connects them (transitGatewayId), so the stack attaches the VPC, routes their traffic "
                "back and lets them resolve the private endpoint; or run the deployer inside the VPC")
    if dep.transit_gateway_id is not None and aws.network.existing is not None:
        out.add(f"{where}.transitGatewayId", "deployer-reaches-api",
                "with network.existing the VPC's route tables are its owner's: connect the runners there and leave "
                "transitGatewayId out")
    if dep.api_access != "in-vpc" and dep.transit_gateway_id is not None:
        out.add(f"{where}.transitGatewayId", "deployer-reaches-api",
                "transitGatewayId only applies to apiAccess: in-vpc")
    if dep.api_access == "public-endpoint" and cp.endpoint_access == "public":
        allowed = []
        for cidr in cp.public_access_cidrs:
            net = parse_cidr(cidr)
            if not isinstance(net, str):  # a bad one is reported on publicAccessCidrs
                allowed.append(net)
        for i, runner in runners:
            if not any(runner.version == a.version and runner.subnet_of(a) for a in allowed):  # type: ignore[arg-type]
                out.add(f"{where}.runnerCidrs[{i}]", "deployer-reaches-api",
                        f"runner CIDR {runner} is not inside publicAccessCidrs, so the deployer cannot reach the "
                        "public endpoint; add it to publicAccessCidrs")


def _check_teams(spec: ClusterSpec, out: _Collector) -> None:
    seen: set[str] = set()
    groups = {ng.name: ng for ng in spec.aws.node_groups} if spec.aws else {}
    catalog = load_aws_catalog()
    for i, team in enumerate(spec.teams):
        where = f".teams[{i}]"
        if team.name in seen:
            out.add(f"{where}.name", "unique-names", f"team name '{team.name}' is used twice")
        seen.add(team.name)
        if team.name in SYSTEM_NAMESPACES:
            out.add(f"{where}.name", "team-namespace-free",
                    f"'{team.name}' is a system namespace; choose another team name")
        for j, arn in enumerate(team.role_arns):
            if not _ROLE_ARN_RE.match(arn):
                out.add(f"{where}.roleArns[{j}]", "admin-role-arn",
                        f"'{arn}' is not an IAM role ARN (arn:aws:iam::<12 digits>:role/<name>)")
        if team.k8s_group.startswith("system:"):
            out.add(f"{where}.group", "team-group-not-system",
                    f"'{team.k8s_group}' is a reserved Kubernetes group (system:masters is cluster-admin, past every "
                    "RoleBinding); EKS access entries refuse groups that start with system:")
        if not team.quotas:
            out.add(f"{where}.quotas", "team-quota-required",
                    f"team '{team.name}' has no quota; every team needs a GPU quota on at least one node group")
        used: set[str] = set()
        for j, q in enumerate(team.quotas):
            qwhere = f"{where}.quotas[{j}]"
            if q.node_group in used:
                out.add(f"{qwhere}.nodeGroup", "unique-names",
                        f"team '{team.name}' lists node group '{q.node_group}' twice")
            used.add(q.node_group)
            group = groups.get(q.node_group)
            facts = catalog.get(group.instance_type) if group else None
            if group is not None and facts is None:
                continue  # the unknown instance type is reported on the node group
            if group is None or facts is None or facts.gpu_count == 0:
                out.add(f"{qwhere}.nodeGroup", "quota-node-group-exists",
                        f"'{q.node_group}' is not a GPU node group of this stack; known: "
                        + ", ".join(n for n, g in groups.items()
                                    if (f := catalog.get(g.instance_type)) and f.gpu_count))
                continue
            if q.borrowing_limit_gpus is not None and not spec.platform.cohort:
                out.add(f"{qwhere}.borrowingLimitGpus", "borrowing-limit-needs-cohort",
                        "a borrowing limit needs a cohort to borrow from; set platform.cohort: true or remove it")
            if q.lending_limit_gpus is not None and q.lending_limit_gpus > q.gpus:
                out.add(f"{qwhere}.lendingLimitGpus", "lending-limit-within-quota",
                        f"lendingLimitGpus ({q.lending_limit_gpus}) must be <= the nominal gpus ({q.gpus})")
            for field, known in (("cpu", facts.vcpu.value), ("memoryGiB", facts.memory_gib.value)):
                given = q.cpu if field == "cpu" else q.memory_gib
                if given is None and known is None:
                    out.add(f"{qwhere}.{field}", "quota-resources-known",
                            f"the catalog has no confirmed {'vCPU' if field == 'cpu' else 'memory'} figure for "
                            f"{group.instance_type}; set {field} for this quota")
    shares = gpu_units_per_gpu(spec.platform.gpu_sharing)
    by_group: dict[str, list[tuple[str, int]]] = {}  # one pass over the quotas, not one per node group
    for t in spec.teams:
        for q in t.quotas:
            by_group.setdefault(q.node_group, []).append((t.name, q.gpus))
    for name, group in groups.items():
        facts = catalog.get(group.instance_type)
        if facts is None or not facts.gpu_count:
            continue
        takers = by_group.get(name, [])
        total = sum(g for _, g in takers)
        capacity = group.max_size * facts.gpu_count * shares
        if total > capacity:
            out.add(".teams", "quota-fits-node-groups",
                    f"nominal GPU quotas on node group '{name}' add up to {total} ("
                    + ", ".join(f"{t} {g}" for t, g in takers)
                    + f") but the group provides at most {capacity} at maxSize {group.max_size}")


def _check_platform(spec: ClusterSpec, out: _Collector) -> None:
    sharing = spec.platform.gpu_sharing
    if sharing.mode == "mig" and spec.aws is not None:
        catalog = load_aws_catalog()
        for ng in spec.aws.node_groups:
            facts = catalog.get(ng.instance_type)
            if facts is not None and facts.gpu_count and not facts.mig.value:
                out.add(".platform.gpuSharing.mode", "mig-supported",
                        f"MIG needs GPUs that support it, and {ng.instance_type} ({facts.gpu_model}) does not "
                        f"(catalog: {facts.mig.source}); use time-slicing or none")
    if sharing.mode == "time-slicing" and sharing.replicas < 2:
        out.add(".platform.gpuSharing.replicas", "time-slicing-replicas",
                "time-slicing needs replicas >= 2 (1 replica is whole-GPU allocation: use mode none)")
    if sharing.mode != "time-slicing" and sharing.replicas != 1:
        out.add(".platform.gpuSharing.replicas", "time-slicing-replicas",
                f"replicas only applies to time-slicing, not '{sharing.mode}'")
    for i, prefix in enumerate(spec.platform.allowed_registries):
        if not re.match(r"^[a-z0-9][a-z0-9.-]*(:\d+)?(/[a-z0-9._/-]*)?/$", prefix):
            out.add(f".platform.allowedRegistries[{i}]", "registry-prefix",
                    f"'{prefix}' must be a registry host (and optional path) ending in '/', e.g. nvcr.io/nvidia/")


def gpu_units_per_gpu(sharing: GpuSharingSpec) -> int:
    """nvidia.com/gpu units one physical GPU advertises (time-slicing replicas, else 1)."""
    return sharing.replicas if sharing.mode == "time-slicing" else 1


def _validate(spec: ClusterSpec, provider_region: str | None, now: datetime) -> _Collector:
    out = _Collector()
    _check_labels(spec, out)
    _check_cloud(spec, provider_region, out)
    _check_teams(spec, out)
    _check_platform(spec, out)
    if spec.environment == "prod" and not spec.deletion_protection:
        out.add(".deletionProtection", "prod-deletion-protection",
                "prod stacks cannot turn off deletion protection of stateful resources")
    if spec.aws is not None:
        _check_network(spec.aws, out)
        _check_node_groups(spec, spec.aws, out)
        _check_storage(spec.aws, out)
        _check_control_plane(spec, spec.aws, now, out)
    return out


def parse_spec(
    raw: Any, stack_file: str, provider_region: str | None = None, now: datetime | None = None
) -> ClusterSpec:
    """Parse and validate the ``gpu-cluster:spec`` object of a stack file.

    Args:
        raw: the decoded YAML/JSON value of the key.
        stack_file: the file it came from, named in every error.
        provider_region: the stack's ``aws:region`` when set, which must agree with the spec.
        now: the moment support windows are compared with (default: :func:`components.clock.utcnow`).

    Raises:
        SpecError: listing every broken rule; nothing else escapes for any input.
    """
    if not isinstance(raw, Mapping):
        raise SpecError(stack_file, [SpecIssue(SPEC_KEY, "schema-type",
                                               f"must be a mapping of keys, got {type(raw).__name__}")])
    try:
        spec = ClusterSpec.model_validate(dict(raw))
    except ValidationError as err:
        raise SpecError(stack_file, _issues_from_validation(err)) from None
    found = _validate(spec, provider_region, now or utcnow())
    if found.issues:
        raise SpecError(stack_file, found.issues, found.totals)
    return spec
