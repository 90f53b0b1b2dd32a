"""How the stack carries its cluster through time: when the preview warns that a Kubernetes version leaves standard
support, and which replacements of data- or identity-holding resources a change may make (the pull-request check
refuses any other)."""

from __future__ import annotations

from pydantic import Field, StrictInt

from components.spec.base import _Model, unit


class AllowReplaceSpec(_Model):
    """A replacement of a resource that holds data or identity, allowed on purpose."""

    resource: str = Field(
        min_length=1, max_length=255,
        description="The resource's logical name, as the preview's tree and `blueprint cost diff` name it (e.g. "
        "storage-lustre).")
    reason: str = Field(
        min_length=10, max_length=500,
        description="Why replacing it is acceptable (shown in the pull-request comment): its data is copied, or "
        "disposable, or the identity change is coordinated.")


class UpgradesSpec(_Model):
    """Day two: support-window warnings and allowed replacements."""

    support_warning_days: StrictInt = Field(
        default=90, ge=0, le=365,
        description="Warn this many days before the cluster's Kubernetes minor leaves standard support (EKS or "
        "GKE); 0: only once it has.", json_schema_extra=unit("days"))
    allow_replace: list[AllowReplaceSpec] = Field(
        default_factory=list, max_length=100,
        description="Resources that hold data or identity (filesystems, buckets, the cluster, KMS keys, the "
        "accounting database, IAM roles that policies name) that a change may replace: the pull-request check "
        "(`blueprint cost diff`) fails on any other such replacement, naming the field that forces it.")
