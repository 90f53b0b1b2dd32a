"""Values AWS's APIs refuse, for graphs read from a file: an FSx for Lustre filesystem FSx does not sell, a node group
capacity type EKS does not know, a budget amount AWS Budgets does not take, a KMS deletion window or a log retention
out of its API's range, an EKS version that does not exist. Each refusal names the rule and its source; a value
unknown at preview time or secret is left alone."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from blueprint.graph.cloud import Refusal
from blueprint.graph.model import SECRET, UNKNOWN
from components.catalog.namespaces import fsx_lustre
from components.catalog.versions import VERSIONS_FILE, load_eks_versions

FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
# EKS API reference, CreateNodegroup capacityType (https://docs.aws.amazon.com/eks/latest/APIReference/
# API_CreateNodegroup.html): ON_DEMAND | SPOT | CAPACITY_BLOCK (pulumi_aws's docstring lists the first two only).
# pulumi_aws fsx.LustreFileSystem storage_type: "HDD is only supported on PERSISTENT_1 deployment types.
# INTELLIGENT_TIERING ... is only supported for PERSISTENT_2 deployment types"; SSD is every type's default.
STORAGE_TYPES = {"SSD": ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"), "HDD": ("PERSISTENT_1",),
                 "INTELLIGENT_TIERING": ("PERSISTENT_2",)}
CAPACITY_TYPES = ("ON_DEMAND", "SPOT", "CAPACITY_BLOCK")
# AWS Budgets API reference, Spend Amount (https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/
# API_budgets_Spend.html): a string of pattern ([0-9]*\.)?[0-9]+, so no sign, exponent, NaN or Infinity.
SPEND = re.compile(r"([0-9]*\.)?[0-9]+")
# AWS KMS API reference, ScheduleKeyDeletion PendingWindowInDays (https://docs.aws.amazon.com/kms/latest/APIReference/
# API_ScheduleKeyDeletion.html): "Valid Range: Minimum value of 7. Maximum value of 30."
KMS_WINDOW = (7, 30)
# CloudWatch Logs API reference, PutRetentionPolicy retentionInDays (https://docs.aws.amazon.com/AmazonCloudWatchLogs/
# latest/APIReference/API_PutRetentionPolicy.html); 0 is the provider's "never expire" (no retention policy; the
# telemetry policy refuses a log group kept forever).
LOG_RETENTION_DAYS = (0, 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557,
                      2922, 3288, 3653)


def _known(value: Any) -> bool:
    return value is not None and value not in (UNKNOWN, SECRET)


def _shown(value: Any) -> str:
    return json.dumps(value)[:60]


def _whole(value: Any) -> int | None:
    """An integer input (a JSON number without a fraction); None for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not float(value).is_integer():
        return None
    return int(value)


def _fsx(inputs: Mapping[str, Any]) -> list[Refusal]:
    facts = fsx_lustre()
    source = "(FSx API reference, CreateFileSystem; components/catalog/fsx.yaml)"
    kind = inputs.get("deploymentType", "SCRATCH_1")  # the API's default
    storage = inputs.get("storageType", "SSD")
    tier, gib = _whole(inputs.get("perUnitStorageThroughput")), _whole(inputs.get("storageCapacity"))
    if not (_known(kind) and _known(storage)):
        return []
    if kind not in facts.deployment_types:
        return [(("deploymentType",), f"{_shown(kind)} is not a deployment type of FSx for Lustre (one of "
                 f"{', '.join(facts.deployment_types)}) {source}", "fsx-deployment-type-valid")]
    if storage not in STORAGE_TYPES or kind not in STORAGE_TYPES[storage]:
        offered = ", ".join(t for t, kinds in STORAGE_TYPES.items() if kind in kinds)
        return [(("storageType",), f"{_shown(storage)} is not a storage type of FSx for Lustre {kind} ({offered}) "
                 f"{source}", "fsx-storage-type-valid")]
    tiers = facts.throughput_tiers.get(kind, ()) if storage == "SSD" else \
        tuple(facts.hdd_capacity_steps.get(kind, {})) if storage == "HDD" else ()
    out: list[Refusal] = []
    if _known(inputs.get("perUnitStorageThroughput")) and storage in ("SSD", "HDD") and tier not in tiers:
        offered = (f"one of {', '.join(map(str, tiers))} MB/s per TiB for {kind} {storage}" if tiers else
                   f"none for {kind} {storage}: remove it")
        out.append((("perUnitStorageThroughput",), f"{_shown(inputs['perUnitStorageThroughput'])} is not a "
                    f"throughput FSx for Lustre offers ({offered}) {source}", "fsx-throughput-tier-valid"))
    if tiers and inputs.get("perUnitStorageThroughput") is None:
        out.append((("perUnitStorageThroughput",), f"{kind} {storage} needs a throughput (one of "
                    f"{', '.join(map(str, tiers))} MB/s per TiB) {source}", "fsx-throughput-tier-valid"))
    if gib is not None and not out:
        problem = facts.capacity_problem(str(kind), str(storage), tier, gib)
        if problem is not None:
            out.append((("storageCapacity",), f"{gib} is not a capacity FSx for Lustre offers ({problem}) {source}",
                        "fsx-capacity-valid"))
    return out


def _capacity_type(inputs: Mapping[str, Any]) -> list[Refusal]:
    value = inputs.get("capacityType")
    if not _known(value) or value in CAPACITY_TYPES:
        return []
    return [(("capacityType",), f"{_shown(value)} is not a capacity type of EKS node groups (one of "
             f"{', '.join(CAPACITY_TYPES)}; EKS API reference, CreateNodegroup)", "eks-capacity-type-valid")]


def _eks_version(inputs: Mapping[str, Any]) -> list[Refusal]:
    value = inputs.get("version")
    versions = load_eks_versions()
    if not _known(value) or value in versions:
        return []
    return [(("version",), f"{_shown(value)} is not a Kubernetes version of Amazon EKS (the catalog "
             f"components/catalog/{VERSIONS_FILE.name} has {', '.join(versions)}, from the EKS user guide's release "
             "calendar; a version released since belongs there first)", "eks-version-known")]


def _spend(value: Any, path: tuple[str, ...], what: str) -> list[Refusal]:
    if not _known(value) or (isinstance(value, str) and SPEND.fullmatch(value)):
        return []
    return [(path, f"{_shown(value)} is not {what} AWS Budgets takes (a decimal string of digits and at most one "
             "point: no sign, exponent, NaN or Infinity; AWS Budgets API reference, Spend)", "budget-amount-valid")]


def _budget(inputs: Mapping[str, Any]) -> list[Refusal]:
    out = _spend(inputs.get("limitAmount"), ("limitAmount",), "a budget limit")
    for i, limit in enumerate(inputs.get("plannedLimits") or []):
        if isinstance(limit, dict):
            out += _spend(limit.get("amount"), ("plannedLimits", f"[{i}]", "amount"), "a planned limit")
    return out


def _kms(inputs: Mapping[str, Any]) -> list[Refusal]:
    value = inputs.get("deletionWindowInDays")
    days = _whole(value)
    if not _known(value) or (days is not None and KMS_WINDOW[0] <= days <= KMS_WINDOW[1]):
        return []
    return [(("deletionWindowInDays",), f"{_shown(value)} is not a deletion window AWS KMS takes (whole days from "
             f"{KMS_WINDOW[0]} to {KMS_WINDOW[1]}; KMS API reference, ScheduleKeyDeletion)",
             "kms-deletion-window-valid")]


def _log_group(inputs: Mapping[str, Any]) -> list[Refusal]:
    value = inputs.get("retentionInDays")
    if not _known(value) or _whole(value) in LOG_RETENTION_DAYS:
        return []
    return [(("retentionInDays",), f"{_shown(value)} is not a retention CloudWatch Logs takes (one of "
             f"{', '.join(map(str, LOG_RETENTION_DAYS[1:]))} days, or 0 for never; CloudWatch Logs API reference, "
             "PutRetentionPolicy)", "log-retention-valid")]


CHECKS: dict[str, Callable[[Mapping[str, Any]], list[Refusal]]] = {
    FSX: _fsx,
    "aws:eks/nodeGroup:NodeGroup": lambda inputs: _capacity_type(inputs) + _eks_version(inputs),
    "aws:eks/cluster:Cluster": _eks_version,
    "aws:budgets/budget:Budget": _budget,
    "aws:kms/key:Key": _kms,
    "aws:cloudwatch/logGroup:LogGroup": _log_group,
}


def refused_values(typ: str, inputs: Mapping[str, Any]) -> list[Refusal]:
    """The inputs of one AWS resource that AWS's API would refuse (see the module's documentation)."""
    check = CHECKS.get(typ)
    return check(inputs) if check is not None else []
