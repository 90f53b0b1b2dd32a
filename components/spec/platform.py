"""The Kubernetes platform on the cluster: GPU sharing, queues, tenancy and telemetry settings."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, StrictBool, StrictFloat, StrictInt

from components.spec.base import _Model, unit


class GpuSharingSpec(_Model):
    """How GPUs are handed to pods: whole GPUs (default), time-slicing or MIG."""

    mode: Literal["none", "time-slicing", "mig"] = Field(
        default="none", description="none: whole GPUs; time-slicing: replicas per GPU; mig: MIG partitions."
    )
    replicas: StrictInt = Field(default=1, ge=1, le=48, description="Time-slicing replicas per GPU (2-48).",
                                json_schema_extra=unit("replicas per GPU"))
    mig_strategy: Literal["single", "mixed"] = Field(
        default="single", description="MIG strategy of the GPU Operator when mode is mig."
    )


_SECRET_NAME = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"  # a Kubernetes object name (DNS subdomain)
_SECRET_KEY = r"^[-._a-zA-Z0-9]{1,253}$"  # a Secret data key (Kubernetes: [-._a-zA-Z0-9]+)


class AlertReceiverSpec(_Model):
    """Where alerts go. The credential (a Slack webhook URL, a PagerDuty routing key, an SMTP password, a webhook
    URL) is never written here: ``secret`` and ``key`` name a Kubernetes Secret in the monitoring namespace that holds
    it (created with kubectl or an external-secrets operator); the Prometheus operator reads it when it builds
    Alertmanager's configuration."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$", description="Receiver name (routes refer to it).")
    type: Literal["slack", "pagerduty", "email", "webhook"] = Field(description="How alerts are sent.")
    secret: str = Field(pattern=_SECRET_NAME, description="The Secret (monitoring namespace) holding the credential.")
    key: str = Field(pattern=_SECRET_KEY, description="Its key: the Slack webhook URL, the PagerDuty Events v2 "
                     "routing key, the SMTP password, or the webhook URL.")
    channel: Optional[str] = Field(default=None, max_length=80, description="slack: the channel (#name).")
    to: list[str] = Field(default_factory=list, max_length=20, description="email: recipients.")
    sender: Optional[str] = Field(default=None, alias="from", description="email: the From address.")
    smarthost: Optional[str] = Field(default=None, pattern=r"^[A-Za-z0-9.-]+:\d{1,5}$",
                                     description="email: the SMTP server, host:port.")
    username: Optional[str] = Field(default=None, max_length=254, description="email: the SMTP user.")


class AlertRouteSpec(_Model):
    """Which alerts a receiver gets: by severity, by team (the alert's namespace or ClusterQueue), or both."""

    receiver: str = Field(description="A receiver's name.")
    severity: list[Literal["critical", "warning", "info"]] = Field(
        default_factory=list, description="Severities routed (default: all).")
    teams: list[str] = Field(default_factory=list, description="Teams routed (default: all).")


class AlertsSpec(_Model):
    """Alert routing (Alertmanager through one AlertmanagerConfig per receiver, so that a missing Secret silences only
    the receivers that read it) and the runbook every alert links to."""

    runbook_url: str = Field(
        default="docs/runbooks.md", max_length=512,
        description="Where the runbook (this project's docs/runbooks.md) is published; every alert's runbook_url is "
        "this plus #<section>. Default: the repository path, readable in a checkout.")
    receivers: list[AlertReceiverSpec] = Field(default_factory=list, description="Receivers.")
    routes: list[AlertRouteSpec] = Field(default_factory=list, description="Routes, first match first; every "
                                         "matching route is notified.")
    default_receiver: Optional[str] = Field(default=None, description="Receives what no route takes, and every "
                                            "critical alert besides (default: none).")


class MonitoringSpec(_Model):
    """Prometheus retention and storage, alert routing, and the checkpoint-duration metric jobs push."""

    retention_days: StrictInt = Field(default=15, ge=1, le=365, description="Prometheus retention (days).",
                                      json_schema_extra=unit("days"))
    storage_gib: StrictInt = Field(default=200, alias="storageGiB", ge=10, le=16384,
                             description="Prometheus volume size (GiB, encrypted gp3).", json_schema_extra=unit("GiB"))
    alerts: AlertsSpec = Field(default_factory=AlertsSpec, description="Receivers, routes and the runbook.")
    checkpoint_metrics: StrictBool = Field(
        default=True, description="A Prometheus Pushgateway per team (pushgateway-<team> in the monitoring namespace, "
        "reachable from the team's namespace only) that its jobs push their checkpoint durations to (named in the "
        "team's checkpoint-policy ConfigMap), and an alert when a checkpoint takes longer than the goodput model "
        "allows; only with workload.goodput.")


class NodeChecksSpec(_Model):
    """What each GPU node runs before it takes jobs, and what happens to one that goes bad
    (components/kubernetes/objects/node_check.py; docs/capacity.md, "When every node proves itself")."""

    dcgm_level: Literal[1, 2, 3] = Field(
        default=2, description="The DCGM diagnostics level every GPU node runs before it takes a job (dcgmi diag -r): "
        "1 deployment checks (seconds), 2 medium validation (about two minutes, the default), 3 long hardware "
        "diagnostics (about 15 minutes) (NVIDIA dcgmi-diag reference).", json_schema_extra=unit("DCGM run level"))
    unhealthy_effect: Literal["NoSchedule", "NoExecute"] = Field(
        default="NoSchedule", description="The health taint's effect on a node whose DCGM health, fabric devices or "
        "re-check fail: NoSchedule keeps new pods away and lets running jobs finish; NoExecute also evicts the "
        "running pods (their job restarts from its checkpoint elsewhere). A change replaces each group's health rule "
        "(the controller's CRD makes the effect immutable).")


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
    node_checks: NodeChecksSpec = Field(default_factory=NodeChecksSpec,
                                        description="GPU node checks and health (the readiness gate).")


class ExpectedBusbwSpec(_Model):
    """What an acceptance run of one node group should reach, where the catalog has no published figure."""

    node_group: str = Field(description="The node group (or GKE node pool) tested.")
    nodes: StrictInt = Field(ge=1, le=2000, description="1: the per-node NVLink run. More: the all_reduce over the "
                             "group; the figure stands for runs on at least this many nodes (bus bandwidth does not "
                             "depend on the rank count).",
                             json_schema_extra=unit("nodes"))
    busbw_gbps: StrictFloat = Field(gt=0, le=100000,
                              description="Expected all_reduce bus bandwidth at large messages (nccl-tests GB/s).",
                              json_schema_extra=unit("GB/s"))
    source: str = Field(min_length=3, max_length=300,
                        description="Where the figure comes from (your measured baseline, a vendor's page, a date).")


class AcceptanceSpec(_Model):
    """The NCCL acceptance gate: an all_reduce_perf MPIJob per multi-node fabric node group (EFA on AWS,
    GPUDirect-TCPXO or -RDMA on GKE) and a single-node NVLink variant, admitted through Kueue, created suspended so
    that pulumi up never starts a benchmark."""

    enabled: StrictBool = Field(default=False, description="Create the acceptance MPIJobs and the MPI Operator.")
    image: Optional[str] = Field(
        default=None, max_length=512,
        description="The nccl-tests image by digest: <repository>@sha256:<64 hex>. It serves SSH as root for the "
        "MPI Operator and has OpenMPI; on AWS the EFA installer and aws-ofi-nccl, on GKE nccl-tests linked to "
        "libnccl.so.2 (the node's GPUDirect NCCL is loaded from /usr/local/nvidia/lib64) and glibc 2.35 or later.")
    tests_dir: str = Field(
        default="/opt/nccl-tests/build", max_length=256, pattern=r"^/[A-Za-z0-9._/-]*$",
        description="Where the image has the nccl-tests binaries (all_reduce_perf); Google's GPUDirect images "
        "use /third_party/nccl-tests/build.")
    expected: list[ExpectedBusbwSpec] = Field(
        default_factory=list, max_length=100,
        description="Expected bus bandwidth where components/catalog/acceptance.yaml publishes none for a node "
        "group's type and node count (the per-node run is nodes 1); required for every run without a catalog figure.")
    record_retention_days: StrictInt = Field(
        default=730, ge=1, le=3650,
        description="Days each run's record (JSON and raw log, acceptance/<group>/<run>/ in the checkpoint bucket) "
        "is kept; a lifecycle rule expires it then.", json_schema_extra=unit("days"))
    recorder_image: Optional[str] = Field(
        default=None, max_length=512,
        description="The image that uploads each node's record to the bucket (the AWS CLI on AWS, the Google Cloud "
        "CLI on GKE); default: the one components/catalog/charts.yaml pins. Give your mirror's copy by digest.")
    storage_image: Optional[str] = Field(
        default=None, max_length=512, pattern=r"^[^@\s]+@sha256:[0-9a-f]{64}$",
        description="The fio image of the storage acceptance Job, by digest: <repository>@sha256:<64 hex>, with fio "
        "3.x, a POSIX shell and GNU coreutils (date +%s.%N, timeout). With it, and a shared filesystem and "
        "workload.goodput, a held Job writes and reads back a checkpoint of the model's size from the nodes the "
        "goodput model counts and records the times under acceptance/storage/<run>/ (docs/sizing.md). No fio image "
        "with a digest this blueprint could verify is pinned, so it is the stack's input.")
