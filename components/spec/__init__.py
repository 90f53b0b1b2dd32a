"""The stack's configuration as one typed model tree, ``ClusterSpec``: a package by plane.

Everything the program builds is decided from the ``gpu-cluster:spec`` key of a stack file
(``stacks/Pulumi.<env>.yaml``). All validation happens in :func:`parse_spec`, before any resource is
registered, and every problem is reported with the stack file, the key path and the rule it breaks:

    stacks/Pulumi.prod-aws.yaml: gpu-cluster:spec.aws.nodeGroups[h100].desiredSize: desiredSize (20) must
    be <= maxSize (16) [rule: node-group-size-order]

Layout: ``base`` (constants, the model base), the models by plane (``workload``, ``teams``,
``platform``, the cloud sub-model ``aws``, and ``model`` for the whole stack), ``errors`` (how a broken rule
is reported), ``decisions`` (what several places need to decide, written once) and ``rules/`` (the
cross-field rules, one module per plane). Field-level rules (types, enums, ranges, unknown keys) are
pydantic's. Environment-specific values (region, zones, CIDRs, account role ARNs, cluster name) have no
defaults; everything else defaults to the secure, production-grade choice.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from components.clock import utcnow
from components.spec.aws import (
    AwsSpec,
    BucketSpec,
    CapacitySpec,
    ControlPlaneSpec,
    DeployerSpec,
    ExistingFilesystemSpec,
    ExistingNetworkSpec,
    FilesystemSpec,
    NetworkSpec,
    NodeGroupSpec,
    StorageSpec,
    SubnetSpec,
    TaintSpec,
)
from components.spec.base import (
    ALL_LOG_TYPES,
    FSX_CAPACITY_STEP_GIB,
    FSX_MIN_CAPACITY_GIB,
    FSX_THROUGHPUT_TIERS,
    GPU_TAINT_KEY,
    HEALTH_TAINT_KEY,
    MAX_PUBLIC_ACCESS_CIDRS,
    MAX_TAGS,
    MAX_TAINTS,
    PRIVILEGED_NAMESPACES,
    PROD_REQUIRED_LOG_TYPES,
    READINESS_TAINT_KEY,
    REQUIRED_LABEL_KEYS,
    SPEC_KEY,
    SYSTEM_NAMESPACES,
    TEAM_CPU_TAINT_KEY,
    LogType,
)
from components.spec.billing import (
    BillingSpec,
    BudgetSpec,
    CostExportSpec,
)
from components.spec.decisions import (
    default_ami_type,
    default_subnets,
    derive_ami_type,
    gpu_units_per_gpu,
    is_autoscaled,
    is_placed,
    is_reserved,
    k8s_key_problem,
    k8s_value_problem,
    parse_cidr,
    uses_placement_group,
)
from components.spec.errors import (
    MAX_LINE,
    MAX_LINES,
    MAX_PER_RULE,
    SpecError,
    SpecIssue,
    _issues_from_validation,
)
from components.spec.model import (
    ClusterSpec,
)
from components.spec.platform import (
    AcceptanceSpec,
    GpuSharingSpec,
    MonitoringSpec,
    PlatformSpec,
)
from components.spec.rules import validate
from components.spec.teams import (
    CpuQuotaSpec,
    QuotaSpec,
    TeamSpec,
)
from components.spec.workload import (
    WorkloadSpec,
)

__all__ = [
    "ALL_LOG_TYPES",
    "FSX_CAPACITY_STEP_GIB",
    "FSX_MIN_CAPACITY_GIB",
    "FSX_THROUGHPUT_TIERS",
    "GPU_TAINT_KEY",
    "HEALTH_TAINT_KEY",
    "MAX_LINE",
    "MAX_LINES",
    "MAX_PER_RULE",
    "MAX_PUBLIC_ACCESS_CIDRS",
    "MAX_TAGS",
    "MAX_TAINTS",
    "PRIVILEGED_NAMESPACES",
    "PROD_REQUIRED_LOG_TYPES",
    "READINESS_TAINT_KEY",
    "REQUIRED_LABEL_KEYS",
    "SPEC_KEY",
    "SYSTEM_NAMESPACES",
    "TEAM_CPU_TAINT_KEY",
    "AcceptanceSpec",
    "AwsSpec",
    "BillingSpec",
    "BucketSpec",
    "BudgetSpec",
    "CapacitySpec",
    "ClusterSpec",
    "ControlPlaneSpec",
    "CostExportSpec",
    "CpuQuotaSpec",
    "DeployerSpec",
    "ExistingFilesystemSpec",
    "ExistingNetworkSpec",
    "FilesystemSpec",
    "GpuSharingSpec",
    "LogType",
    "MonitoringSpec",
    "NetworkSpec",
    "NodeGroupSpec",
    "PlatformSpec",
    "QuotaSpec",
    "SpecError",
    "SpecIssue",
    "StorageSpec",
    "SubnetSpec",
    "TaintSpec",
    "TeamSpec",
    "WorkloadSpec",
    "default_ami_type",
    "default_subnets",
    "derive_ami_type",
    "gpu_units_per_gpu",
    "is_autoscaled",
    "is_placed",
    "is_reserved",
    "k8s_key_problem",
    "k8s_value_problem",
    "parse_cidr",
    "parse_spec",
    "uses_placement_group",
]


def parse_spec(
    raw: Any, stack_file: str, provider_region: str | None = None, now: datetime | None = None,
    provider_project: str | None = None,
) -> ClusterSpec:
    """Parse and validate the ``gpu-cluster:spec`` object of a stack file.

    Args:
        raw: the decoded YAML/JSON value of the key.
        stack_file: the file it came from, named in every error.
        provider_region: the stack's ``aws:region`` or ``gcp:region`` when set, which must agree with the spec.
        now: the moment support windows are compared with (default: :func:`components.clock.utcnow`).
        provider_project: the stack's ``gcp:project`` when set, which must be the spec's project.

    Raises:
        SpecError: listing every broken rule; nothing else escapes for any input.
    """
    if not isinstance(raw, Mapping):
        raise SpecError(stack_file, [SpecIssue(SPEC_KEY, "schema-type",
                                               f"must be a mapping of keys, got {type(raw).__name__}")])
    try:
        spec = ClusterSpec.model_validate(dict(raw))
    except ValidationError as err:
        raise SpecError(stack_file, _issues_from_validation(err, raw, ClusterSpec)) from None
    found = validate(spec, provider_region, now or utcnow(), provider_project)
    if found.issues:
        raise SpecError(stack_file, found.issues, found.totals)
    return spec
