"""The AWS sub-model: region and zones, network, node groups, storage and the EKS control plane."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Optional

from pydantic import Field, StrictBool, StrictInt, StringConstraints

from components.spec.base import _GROUP_NAME_RE, _REGION_RE, _ZONE_ID_RE, _ZONE_RE, ALL_LOG_TYPES, LogType, _Model, unit


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
    ip_family: Literal["ipv4", "ipv6"] = Field(
        default="ipv4",
        description="ipv6: an IPv6 EKS cluster (pods and services get IPv6 addresses; the VPC is dual-stack with an "
        "egress-only internet gateway). Set at creation only; not with FSx for Lustre (FSx does not support IPv6 "
        "EKS clusters) or an existing VPC.")
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
        json_schema_extra=unit("instances"),
    )


class TaintSpec(_Model):
    """A Kubernetes taint applied to every node of a group."""

    key: str = Field(min_length=1, max_length=253, description="Taint key.")
    value: str = Field(default="", max_length=63, description="Taint value.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        default="NoSchedule", description="Taint effect."
    )


# Kubelet's node-pressure eviction signals on Linux (Kubernetes docs, "Node-pressure Eviction", eviction signals).
EvictionSignal = Literal["memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available",
                         "imagefs.inodesFree", "containerfs.available", "containerfs.inodesFree", "pid.available"]
ReservedResource = Literal["cpu", "memory", "ephemeral-storage", "pid"]
# Kubernetes resource quantities (decimal or binary suffix, or millicores) and thresholds as a quantity or percent.
_QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|Ki|Mi|Gi|Ti)?$"
_THRESHOLD = r"^([0-9]+(\.[0-9]+)?%|[0-9]+(\.[0-9]+)?(k|M|G|T|Ki|Mi|Gi|Ti)?)$"
_DURATION = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"


class KubeletSpec(_Model):
    """Kubelet settings of a group's nodes, in KubeletConfiguration's own names (kubelet.config.k8s.io/v1beta1):
    written into the AL2023 NodeConfig (nodeadm, spec.kubelet.config) or Bottlerocket's settings.kubernetes."""

    max_pods: StrictInt | None = Field(
        default=None, ge=1, le=1000,
        description="Pods per node (default: nodeadm's from the ENI limits, or the AMI's). Raising it without "
        "kubeReserved.memory leaves the reservation sized for the default.", json_schema_extra=unit("pods"))
    kube_reserved: dict[ReservedResource, Annotated[str, StringConstraints(pattern=_QUANTITY)]] = Field(
        default_factory=dict, description="Resources reserved for Kubernetes daemons (cpu, memory, "
        "ephemeral-storage, pid), e.g. {cpu: 500m, memory: 2Gi}.")
    system_reserved: dict[ReservedResource, Annotated[str, StringConstraints(pattern=_QUANTITY)]] = Field(
        default_factory=dict, description="Resources reserved for the OS daemons.")
    eviction_hard: dict[EvictionSignal, Annotated[str, StringConstraints(pattern=_THRESHOLD)]] = Field(
        default_factory=dict, description="Hard eviction thresholds, e.g. {memory.available: 1Gi, "
        "nodefs.available: 10%}.")
    eviction_soft: dict[EvictionSignal, Annotated[str, StringConstraints(pattern=_THRESHOLD)]] = Field(
        default_factory=dict, description="Soft eviction thresholds (each needs a grace period).")
    eviction_soft_grace_period: dict[EvictionSignal, Annotated[str, StringConstraints(pattern=_DURATION)]] = Field(
        default_factory=dict, description="Grace period per soft threshold, e.g. {memory.available: 90s}.")
    eviction_max_pod_grace_period: StrictInt | None = Field(
        default=None, ge=0, le=86400, description="Longest termination grace period given to a pod evicted "
        "by a soft threshold (seconds).", json_schema_extra=unit("s"))

    def kubelet_config(self) -> dict[str, Any]:
        """The settings as KubeletConfiguration fields (only those given)."""
        out: dict[str, Any] = {}
        if self.max_pods is not None:
            out["maxPods"] = self.max_pods
        for key, value in (("kubeReserved", self.kube_reserved), ("systemReserved", self.system_reserved),
                           ("evictionHard", self.eviction_hard), ("evictionSoft", self.eviction_soft),
                           ("evictionSoftGracePeriod", self.eviction_soft_grace_period)):
            if value:
                out[key] = dict(value)
        if self.eviction_max_pod_grace_period is not None:
            out["evictionMaxPodGracePeriod"] = self.eviction_max_pod_grace_period
        return out


class SshSpec(_Model):
    """SSH to a group's nodes (Session Manager is always on): an existing EC2 key pair by name and the networks
    that may reach port 22, never the internet."""

    key_name: str = Field(min_length=1, max_length=255, pattern=r"^[ -~]+$",
                          description="Name of an existing EC2 key pair in the region (not created here).")
    source_cidrs: list[str] = Field(min_length=1, max_length=20,
                                    description="CIDRs allowed to port 22 (a bastion's or VPN's network).")


class NodeGroupSpec(_Model):
    """One EKS managed node group."""

    name: str = Field(pattern=_GROUP_NAME_RE.pattern, description="Unique node group name.")
    instance_type: str = Field(description="EC2 instance type; must be in the instance catalog.")
    min_size: StrictInt = Field(ge=0, le=1000, description="Minimum nodes.", json_schema_extra=unit("nodes"))
    desired_size: StrictInt = Field(ge=0, le=1000, description="Desired nodes at creation.",
                                    json_schema_extra=unit("nodes"))
    max_size: StrictInt = Field(ge=1, le=1000, description="Maximum nodes.", json_schema_extra=unit("nodes"))
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
        description="EKS AMI type; default derived from the instance: AL2023, x86_64 or ARM_64, NVIDIA for GPUs. "
        "The Bottlerocket NVIDIA types are refused: their own device plugin would run beside the GPU Operator's.",
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
    team: Optional[str] = Field(
        default=None,
        description="Dedicate the group to one team: its nodes are billed under the team's team and cost-center tags "
        "(labels on GCP), so the team's cloud budget sees them. Only that team may have a quota on it, and it lends "
        "none (lendingLimitGpus 0), so no other team's work is billed to it. Default: shared, billed to the stack.",
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Extra Kubernetes node labels.")
    local_nvme: Literal["auto", "raid0", "none"] = Field(
        default="auto",
        description="auto: RAID0 the instance-store NVMe disks when the catalog confirms the type "
        "has them; raid0: require it; none: leave them unused.",
    )
    root_volume_gib: StrictInt = Field(
        alias="rootVolumeGiB",
        default=200, ge=20, le=16384,
        description="Encrypted gp3 volume for the OS, kubelet and images (GiB); on Bottlerocket the data volume "
        "/dev/xvdb (the OS volume keeps the AMI's size).",
        json_schema_extra=unit("GiB"),
    )
    ami_id: str | None = Field(
        default=None, pattern=r"^ami-[0-9a-f]{8,17}$",
        description="A custom AMI (launch template ImageId): EKS then merges no bootstrap data, so the user data "
        "carries the cluster's NodeConfig (AL2023) or settings (Bottlerocket); amiType says which the AMI is built "
        "from. The AMI must hold the NVIDIA driver and the EFA installer for GPU and EFA types.")
    ami_kubernetes_version: str | None = Field(
        default=None, pattern=r"^1\.\d{1,2}$",
        description="The Kubernetes minor the custom AMI (amiId) is built for (its kubelet): required with amiId, "
        "since EKS takes no version for such a group; checked against the control plane's at load.")
    ami_release_version: str | None = Field(
        default=None, pattern=r"^\d+\.\d+\.\d+-([0-9]{8}|[0-9a-f]{8})$",
        description="The EKS-optimized AMI release this group runs (releaseVersion, e.g. 1.35.8-20260930), instead of "
        "the catalog's pin for the cluster's minor (components/catalog/eks_node_releases.yaml): for a group already "
        "on a newer release than the pin, since EKS cannot roll a group back to an older AMI.")
    kubelet: KubeletSpec | None = Field(default=None, description="Kubelet settings of the group's nodes.")
    pre_bootstrap_commands: list[Annotated[str, StringConstraints(min_length=1, max_length=4096)]] = Field(
        default_factory=list, max_length=50,
        description="Shell commands run as root before kubelet starts (AL2023 only; never secrets: user data is "
        "readable through the EC2 API).")
    post_bootstrap_commands: list[Annotated[str, StringConstraints(min_length=1, max_length=4096)]] = Field(
        default_factory=list, max_length=50,
        description="Shell commands run as root once kubelet has started (a systemd unit ordered after nodeadm's "
        "run; AL2023 only).")
    ssh: SshSpec | None = Field(
        default=None, description="SSH access with an existing key pair from the listed networks (default: none; "
        "Session Manager always works).")
    efa_interfaces: StrictInt | None = Field(
        default=None, ge=1, le=64,
        description="EFA interfaces to wire (default: every one the type has); fewer needs efaInterfacesReason.",
        json_schema_extra=unit("interfaces per node"))
    efa_interfaces_reason: str | None = Field(
        default=None, min_length=1, max_length=200,
        description="Why the group wires fewer EFA interfaces than its type offers (shown in the preview and "
        "tagged on the launch template).")


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
        json_schema_extra=unit("days"),
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
        description="Storage capacity in GiB: 1200, 2400, then steps of 2400.", ge=1,
        json_schema_extra=unit("GiB"),
    )
    per_unit_storage_throughput: StrictInt | None = Field(
        default=None,
        description="MB/s per TiB for PERSISTENT_2: 125, 250, 500 or 1000. Not set for SCRATCH_2.",
        json_schema_extra=unit("MB/s per TiB"),
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
        "stack attaches the VPC to it and routes runnerCidrs through it (the private endpoint's name resolves "
        "through public DNS, so no resolver endpoint is needed).",
    )


# CloudWatch Logs retention values (PutRetentionPolicy).
LogRetentionDays = Literal[1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557,
                           2922, 3288, 3653]


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
    log_retention_days: LogRetentionDays = Field(
        default=365, description="CloudWatch retention of control-plane logs (days).", json_schema_extra=unit("days"))
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


class ContainerLogsSpec(_Model):
    """Container and node logs shipped to CloudWatch Logs by Fluent Bit (aws-for-fluent-bit), into log groups the
    stack creates with a KMS key of their own and this retention."""

    enabled: StrictBool = Field(default=True, description="Ship container logs (and node logs) to CloudWatch.")
    retention_days: Optional[LogRetentionDays] = Field(
        default=None, description="CloudWatch retention of the container and node log groups (days); default: "
        "aws.controlPlane.logRetentionDays.", json_schema_extra=unit("days"))
    node_logs: StrictBool = Field(default=True, description="Also ship the nodes' kubelet and containerd journal.")


class AwsTelemetrySpec(_Model):
    """What the platform's Prometheus reads from AWS beyond the cluster (fabric and storage), and where logs go."""

    efa_exporter_image: Optional[str] = Field(
        default=None, max_length=512,
        description="The EFA node exporter (awsome-distributed-training 4.validation_and_observability/"
        "3.efa-node-exporter: node_exporter with its amazonefa collector) by digest, <repository>@sha256:<64 hex>; "
        "it runs on every EFA node group and Prometheus scrapes each device's hw_counters. No image is published "
        "with a digest: build it and give yours.")
    storage_metrics: StrictBool = Field(
        default=True, description="Scrape the filesystem's and the checkpoint bucket's CloudWatch metrics (FSx for "
        "Lustre, S3 request metrics) into Prometheus with yet-another-cloudwatch-exporter, read-only through Pod "
        "Identity; turns on S3 request metrics on a bucket the stack creates.")
    container_logs: ContainerLogsSpec = Field(default_factory=ContainerLogsSpec,
                                              description="Container and node logs in CloudWatch Logs.")


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
    telemetry: AwsTelemetrySpec = Field(default_factory=AwsTelemetrySpec,
                                        description="Fabric and storage metrics, container and node logs.")

    @property
    def log_retention_days(self) -> int:
        """The container and node logs' retention: their own setting, else the control plane's."""
        return self.telemetry.container_logs.retention_days or self.control_plane.log_retention_days

    @property
    def gpu_zone(self) -> str:
        """The GPU zone as written: its name or its AZ ID."""
        return self.gpu_availability_zone or self.gpu_availability_zone_id or ""

    @property
    def zones_by_id(self) -> bool:
        """True when the stack names zones by AZ ID (use1-az4) rather than by name (us-east-1a)."""
        return self.gpu_availability_zone_id is not None
