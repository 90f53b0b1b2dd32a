"""Teams: their namespaces, queues, quotas and access groups."""

from __future__ import annotations

import zlib

from pydantic import Field, StrictInt

from components.spec.base import _GROUP_NAME_RE, _LABEL_VALUE_RE, _Model, unit
from components.spec.billing import BudgetSpec


class QuotaSpec(_Model):
    """A team's nominal share of one GPU node group, in the Kueue ClusterQueue of the team."""

    node_group: str = Field(description="A GPU node group of the stack (one Kueue ResourceFlavor each).")
    gpus: StrictInt = Field(ge=0, le=100_000, description="Nominal nvidia.com/gpu quota (GPUs, or shares when "
                      "time-slicing).", json_schema_extra=unit("GPUs"))
    borrowing_limit_gpus: StrictInt | None = Field(
        default=None, ge=0, description="Most GPUs the team may borrow from the cohort (default: no limit).",
        json_schema_extra=unit("GPUs"),
    )
    lending_limit_gpus: StrictInt | None = Field(
        default=None, ge=0, description="Most of its nominal GPUs the team lends to the cohort (default: all).",
        json_schema_extra=unit("GPUs"),
    )
    cpu: StrictInt | None = Field(
        default=None, ge=0, description="Nominal CPU cores; default: the node's vCPUs per GPU x gpus.",
        json_schema_extra=unit("CPU cores"),
    )
    memory_gib: StrictInt | None = Field(
        default=None, alias="memoryGiB", ge=0,
        description="Nominal memory (GiB); default: the node's memory per GPU x gpus.",
        json_schema_extra=unit("GiB"),
    )


class CpuQuotaSpec(_Model):
    """A team's CPU-only quota on a node group without GPUs: the Kueue ResourceFlavor its CPU-only pods (data
    preparation, tokenisation) are admitted to, listed before the GPU flavors in the team's ClusterQueue."""

    node_group: str = Field(description="A node group of the stack without GPUs that holds no system pods' share: at "
                            "least one other group without GPUs and without team CPU quota stays the platform's.")
    cpu: StrictInt = Field(ge=1, le=1_000_000, description="Nominal CPU cores (no default: set what the team's CPU "
                           "work needs; the quotas on a group add up to at most its vCPUs at maxSize).",
                           json_schema_extra=unit("CPU cores"))
    memory_gib: StrictInt = Field(alias="memoryGiB", ge=1, le=100_000_000, description="Nominal memory (GiB; no "
                                  "default, as for cpu).", json_schema_extra=unit("GiB"))


class TeamSpec(_Model):
    """A team that runs work on the cluster: a namespace, a queue, a quota and an access group."""

    name: str = Field(pattern=_GROUP_NAME_RE.pattern, description="Team name (its namespace name).")
    cost_center: str = Field(
        pattern=_LABEL_VALUE_RE.pattern, description="The team's cost-center label value."
    )
    group: str | None = Field(
        default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9:._@+-]{0,253}$",
        description="Kubernetes group bound to the team's Role (default: gpu-cluster:<name>); on GKE the team's "
        "Google Group email.",
    )
    role_arns: list[str] = Field(
        default_factory=list, description="IAM roles mapped to the team's group through EKS access entries."
    )
    quotas: list[QuotaSpec] = Field(default_factory=list, description="GPU quotas, one per node group.")
    cpu_quotas: list[CpuQuotaSpec] = Field(
        default_factory=list,
        description="CPU-only quotas, one per node group without GPUs: pods that ask for no GPU are admitted there "
        "first (Kueue tries a queue's flavors in order). Not lent to or borrowed from the cohort. Default: none, and "
        "CPU-only pods are admitted to the team's GPU flavors and hold GPU nodes' CPU and memory "
        "(blueprint admit says so).",
    )
    gid: StrictInt | None = Field(
        default=None, ge=1000, le=2**31 - 1,
        description="POSIX group that owns the team's directory on the shared filesystem (mode 2770); every pod of "
        "the team adds it to securityContext.supplementalGroups (the gpu-cluster-team-gid admission policy refuses one "
        "without it). Default: 20000 + a hash of the team name (stable when other teams are added or renamed); set it "
        "to match an existing directory.",
    )
    budget: BudgetSpec | None = Field(
        default=None, description="The team's monthly AWS Budget (required: every team has one)."
    )

    @property
    def k8s_group(self) -> str:
        """The Kubernetes group the team's RoleBinding names."""
        return self.group or f"gpu-cluster:{self.name}"

    @property
    def posix_gid(self) -> int:
        """The team directory's group: ``gid``, or 20000 + CRC-32 of the name modulo 40000 (never changes with the
        order or the names of other teams; the spec refuses two teams on one group)."""
        return self.gid if self.gid is not None else 20000 + zlib.crc32(self.name.encode()) % 40000

    @property
    def gpu_quota(self) -> int:
        """Nominal GPUs over all node groups."""
        return sum(q.gpus for q in self.quotas)
