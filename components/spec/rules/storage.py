"""Rules on the storage plane: the FSx for Lustre figures."""

from __future__ import annotations

from components.spec.aws import AwsSpec
from components.spec.base import FSX_CAPACITY_STEP_GIB, FSX_MIN_CAPACITY_GIB, FSX_THROUGHPUT_TIERS
from components.spec.decisions import mount_path_problem
from components.spec.errors import _Collector


def _check_storage(aws: AwsSpec, out: _Collector) -> None:
    fs = aws.storage.filesystem
    if fs is None:
        return
    where = ".aws.storage.filesystem"
    if (problem := mount_path_problem(fs.mount_path)) is not None:
        out.add(f"{where}.mountPath", "mount-path-allowed", f"'{fs.mount_path}' cannot be the filesystem's path in "
                f"pods: {problem}")
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
