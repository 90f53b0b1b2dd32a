"""The Kubernetes platform on the cluster: GPU sharing, queues, tenancy and telemetry settings."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, StrictBool, StrictInt

from components.spec.base import _Model


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


class AcceptanceSpec(_Model):
    """The NCCL acceptance gate: an all_reduce_perf MPIJob per multi-node EFA node group (and a single-node
    NVLink variant), admitted through Kueue, created suspended so that pulumi up never starts a benchmark."""

    enabled: StrictBool = Field(default=False, description="Create the acceptance MPIJobs and the MPI Operator.")
    image: Optional[str] = Field(
        default=None, max_length=512,
        description="The nccl-tests image (EFA installer, aws-ofi-nccl, OpenMPI) by digest: "
        "<repository>@sha256:<64 hex>.")
