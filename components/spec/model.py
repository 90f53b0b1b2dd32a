"""The whole stack: identity, billing labels, workload, teams and the cloud's planes."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, StrictBool

from components.spec.aws import AwsSpec
from components.spec.base import _NAME_RE, _Model
from components.spec.billing import BillingSpec
from components.spec.gcp import GcpSpec
from components.spec.inference import InferenceSpec
from components.spec.platform import AcceptanceSpec, PlatformSpec
from components.spec.slurm import SchedulerSpec
from components.spec.teams import TeamSpec
from components.spec.upgrades import UpgradesSpec
from components.spec.workload import WorkloadSpec


class ClusterSpec(_Model):
    """The whole stack: identity, billing labels, workload, teams and the cloud's planes."""

    name: str = Field(
        pattern=_NAME_RE.pattern,
        description="Cluster name, 3-24 characters [a-z0-9-] (no default).",
    )
    environment: Literal["dev", "staging", "prod"] = Field(description="Environment (no default).")
    cloud: Literal["aws", "gcp"] = Field(description="Cloud provider: aws (EKS) or gcp (GKE).")
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
    scheduler: SchedulerSpec = Field(
        default_factory=SchedulerSpec, description="Schedulers: Kueue always; Slurm (Slinky) beside it when set.")
    inference: Optional[InferenceSpec] = Field(
        default=None, description="Models served privately (vLLM behind the cluster's internal gateway); absent: none.")
    acceptance: AcceptanceSpec = Field(
        default_factory=AcceptanceSpec, description="The NCCL acceptance MPIJobs (suspended until run)."
    )
    billing: BillingSpec = Field(description="Budget recipients, cost allocation tags and the cost export.")
    deletion_protection: StrictBool = Field(
        default=True,
        description="Protect and retain stateful resources (bucket, filesystem, KMS keys, cluster). "
        "Cannot be turned off in prod.",
    )
    upgrades: UpgradesSpec = Field(
        default_factory=UpgradesSpec, description="Day two: support warnings and the replacements a change may make.")
    aws: AwsSpec | None = Field(default=None, description="AWS settings; required when cloud is aws.")
    gcp: GcpSpec | None = Field(default=None, description="GCP settings; required when cloud is gcp.")

    @property
    def billing_labels(self) -> dict[str, str]:
        """The labels with ``environment`` filled in, as applied to every resource."""
        return {**self.labels, "environment": self.environment}

    @property
    def region(self) -> str:
        """The region the stack deploys to (``aws.region`` or ``gcp.region``)."""
        return self.gcp_spec().region if self.cloud == "gcp" else self.aws_spec().region

    def aws_spec(self) -> AwsSpec:
        """The AWS sub-spec (validated to exist when cloud is aws)."""
        if self.aws is None:  # guarded by _check_cloud; kept for type narrowing
            raise ValueError("aws settings are missing")
        return self.aws

    def gcp_spec(self) -> GcpSpec:
        """The GCP sub-spec (validated to exist when cloud is gcp)."""
        if self.gcp is None:  # guarded by _check_cloud; kept for type narrowing
            raise ValueError("gcp settings are missing")
        return self.gcp
