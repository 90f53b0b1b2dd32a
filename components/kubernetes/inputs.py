"""What the platform needs from the cloud and the spec, in cloud-neutral types (each cloud module fills them in)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi

from components.kubernetes import objects as obj
from components.kubernetes.objects import (
    CloudGpuStack,
    EgressRule,
    GpuDirectPodRules,
    Manifest,
    NetworkTopology,
    SharedFilesystem,
)
from components.kubernetes.objects.gateway import ServingGateway
from components.kubernetes.objects.serving import ServedModel
from components.kubernetes.objects.storage_check import StorageCheck
from components.kubernetes.quotas import CpuPool, GpuPool
from components.spec import PlatformSpec, TeamSpec
from components.spec.inference import GatewaySpec

STORAGE_CLASS = "gp3-encrypted"

@dataclass(frozen=True, kw_only=True)
class CloudFabric:
    """The cloud's high-speed fabric as pods see it: the extended resource its device plugin advertises
    (``vpc.amazonaws.com/efa`` on AWS) and that plugin's pinned chart, namespace and values."""

    resource_name: str
    plugin_release: str
    plugin_chart: str  # key in components/catalog/charts.yaml
    plugin_namespace: str
    plugin_values: Manifest


@dataclass(frozen=True, kw_only=True)
class CloudRelease:
    """A controller the cloud runs on the cluster from a pinned chart (EKS: the Cluster Autoscaler): its release name,
    chart (key in components/catalog/charts.yaml), namespace and values, what it waits for (its cloud identity), and
    the stack-file key it comes from."""

    release: str
    chart: str
    namespace: str
    values: Manifest
    ready: tuple[pulumi.Resource, ...] = ()
    spec_path: str = ""
    # Left installed when the stack drops it (retain_on_delete): a chart of CRDs, whose uninstall would delete every
    # object of its kinds in the cluster.
    keep: bool = False


@dataclass(frozen=True, kw_only=True)
class CloudTelemetry:
    """What the cloud adds to the platform's telemetry (issue 27): its exporters and log shipper from pinned charts
    (installed after Prometheus, each after the identity it reads the cloud with), the signals the alerts and
    dashboards read (fabric, storage, logs), and what its telemetry cannot see (said in the preview)."""

    releases: tuple[CloudRelease, ...] = ()
    fabric: obj.FabricSignals | None = None
    storage: obj.StorageSignals | None = None
    logs: obj.LogSignals | None = None
    not_visible: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlatformInputs:
    """What the platform needs from the cluster and the spec (no cloud types): each cloud module fills in
    its fabric, network topology, storage class and the egress its node agents need."""

    cluster_name: str
    labels: Mapping[str, str]
    teams: Sequence[TeamSpec]
    platform: PlatformSpec
    pools: Sequence[GpuPool]
    driver_on_host: bool
    storage_provisioner: str
    storage_parameters: Mapping[str, str]
    fabric: CloudFabric | None = None
    topology: NetworkTopology | None = None  # for placed pools (topology-aware scheduling)
    extra_egress: tuple[EgressRule, ...] = ()
    anywhere: tuple[str, ...] = ("0.0.0.0/0",)  # what "any address" is for pods (with ::/0 on an IPv6 cluster)
    # The nodes' addresses (VPC, node subnet): Prometheus in monitoring scrapes host-network exporters there.
    node_cidrs: tuple[Any, ...] = ()
    retain_data: bool = False  # deletion protection: metrics volumes retained, their namespace and release protected
    # The node groups without GPUs that teams have CPU quota on (teams[].cpuQuotas): one Kueue flavor each, first in
    # the teams' queues, so pods that ask for no GPU land there and not on GPU nodes.
    cpu_pools: Sequence[CpuPool] = ()
    checkpoint_service_account: str | None = None  # per team namespace: read/write of <team>/ in the bucket
    checkpoint_policy: Mapping[str, str] | None = None  # the goodput model's figures, for each team's jobs
    acceptance_image: str | None = None  # the nccl-tests image by digest: the acceptance MPIJobs are created
    acceptance_tests_dir: str = obj.NCCL_TESTS_DIR  # where nccl-tests is built in that image
    # Per GPU pool, how a benchmark pod reaches the cloud's GPU fabric when it is not the extended resource of
    # ``fabric`` (GKE GPUDirect: the pod's networks, the receive-datapath sidecar, the NCCL plugin's profile).
    acceptance_fabrics: Mapping[str, obj.PodFabric] | None = None
    bucket_scheme: str = "s3"  # how the checkpoint bucket's URLs start (s3, gs), in descriptions
    cloud_objects: tuple[Manifest, ...] = ()  # cluster objects the cloud needs (GKE: GPU networks, storage classes)
    cloud_manifests: tuple[tuple[str, str], ...] = ()  # (name, pinned URL or file) of the cloud's node agents
    team_objects: Mapping[str, tuple[Manifest, ...]] | None = None  # per team namespace (GKE: checkpoint volume)
    gpu_operator_overrides: Manifest | None = None  # the cloud's GPU Operator values (GKE: driver and toolkit paths)
    # A GPU stack the cloud runs itself (GKE-managed driver, device plugin and DCGM): no GPU Operator is installed.
    cloud_gpu_stack: CloudGpuStack | None = None
    system_registries: tuple[str, ...] = ()  # registries the cloud injects containers from (GKE: its CSI sidecars)
    storage_class_name: str = STORAGE_CLASS  # the platform volumes' StorageClass
    # Pod Security level of team namespaces: baseline, or privileged where the cloud's GPU networking needs host
    # paths and NET_ADMIN in every training pod (GKE GPUDirect sidecars); the no-privileged-pods policy still applies.
    tenant_pod_security: str = "baseline"
    # With tenant_pod_security privileged: what each container of a GPUDirect pod may do (an admission policy).
    gpudirect_pod_rules: GpuDirectPodRules | None = None
    cloud_namespaces: tuple[str, ...] = ()  # namespaces the cloud manages (its agents may run privileged there)
    # Resources the GPU agents wait for (GKE: the GPU pools), when the Kubernetes provider itself does not.
    gpu_node_dependencies: tuple[pulumi.Resource, ...] = ()
    # The shared filesystem as pods mount it (a shared-fs claim per team), or None when the stack has none or the
    # cloud's CSI volume format for it is not known.
    shared_filesystem: SharedFilesystem | None = None
    # Requests of a container the cloud injects into team pods after Kueue admitted them (GKE's GCS FUSE sidecar):
    # (millicores, MiB). Kueue does not count it and the ResourceQuota does, so each namespace's quota gets it once
    # per node its queue can reach, or the quota would refuse pods Kueue admitted.
    injected_sidecar: tuple[int, int] | None = None
    # Who else gets every team's budget alert (billing.notify: platform and finance), as on the cloud budgets.
    platform_budget_notify: tuple[str, ...] = ()
    # The cloud's node autoscaler when it runs on the cluster (EKS: the Cluster Autoscaler, for the groups that are not
    # reserved); None where the cloud scales nodes itself (GKE) or nothing autoscales.
    node_autoscaler: CloudRelease | None = None
    # Slurm (Slinky) beside Kueue: its objects' inputs, and the accounting database's password (a secret Input) when
    # the cloud created one; None without scheduler.slurm.
    slurm: obj.SlurmCluster | None = None
    slurm_db_password: Any = None
    # sssd.conf from the cloud's secret store (scheduler.slurm.login.sssdConfFrom): External Secrets' SecretStore
    # provider (AWS Secrets Manager, GCP Secret Manager) and the cloud identity its controller waits for.
    slurm_secret_store: Manifest | None = None
    slurm_secret_ready: tuple[pulumi.Resource, ...] = ()
    # The cloud's fabric, storage and log telemetry (exporters, log shipper, what the alerts read); None: none.
    telemetry: CloudTelemetry | None = None
    # Where the acceptance gate's per-node runs write their records (the bucket, the cloud's CLI image).
    acceptance_recorder: obj.AcceptanceRecorder | None = None
    # The per-node NVLink figure the stack gives where the catalog has none (acceptance.expected, nodes 1): per
    # pool, (GB/s, source); each node's check judges its all_reduce against it.
    node_check_expected: Mapping[str, tuple[float, str]] = field(default_factory=dict)
    # Pods of the system-*-critical priority classes need a quota in their namespace (GKE: objects/tenancy.py
    # critical_priority_quota).
    critical_priority_quota: bool = False
    # The storage acceptance check (objects/storage_check.py), from the spec's goodput model: filled in by
    # components/cluster.py for every cloud, None without one.
    storage_check: StorageCheck | None = None
    # What the storage check's bucket leg waits for: the cloud's binding of its service account (EKS Pod Identity
    # association, GCS managed-folder grant); empty where the stack has no bucket leg.
    storage_check_ready: tuple[pulumi.Resource, ...] = ()
    # Where in the stack file the shared filesystem and the cloud's cluster objects are configured (provenance).
    filesystem_spec_path: str = ""
    cloud_objects_spec_path: str = ""
    # The served models (inference.models), with what the cloud decides for each (bucket, scheme, identity).
    serving: tuple[ServedModel, ...] = ()
    # How the cloud fronts them privately (objects/gateway.py): its Gateway class, address, controller and the network
    # paths from its proxies; None without served models.
    serving_gateway: ServingGateway | None = None
    # inference.gateway (the endpoint picker's image): filled in by components/cluster.py for every cloud.
    gateway_spec: GatewaySpec | None = None

    @property
    def pools_by_name(self) -> dict[str, GpuPool]:
        """GPU pools by node group name."""
        return {p.name: p for p in self.pools}

    @property
    def cpu_pools_by_name(self) -> dict[str, CpuPool]:
        """Team CPU pools by node group name."""
        return {p.name: p for p in self.cpu_pools}

    @property
    def checkpoint_metrics(self) -> bool:
        """Jobs push checkpoint durations to the Pushgateway: on in the spec, and a goodput model to judge them by."""
        return self.platform.monitoring.checkpoint_metrics and self.checkpoint_policy is not None

    @property
    def checkpoint_allowed_s(self) -> float | None:
        """The longest checkpoint write the goodput model allows (its ConfigMap's figure), when jobs push durations."""
        if not self.checkpoint_metrics or self.checkpoint_policy is None:
            return None
        value = self.checkpoint_policy.get("CHECKPOINT_WRITE_ALLOWED_SECONDS")
        return float(value) if value else None
