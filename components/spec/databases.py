"""The shapes of the accounting database's machine: which RDS instance classes and Cloud SQL tiers exist, so a stack
that names one AWS or GCP would refuse is refused at load, with the rule, before anything is registered."""

from __future__ import annotations

import re

# RDS: "A DB instance class consists of both the DB instance class type and the size" (Amazon RDS User Guide, "DB
# instance classes", read 2026-12-02). RDS for MySQL offers only general-purpose (db.m*), memory-optimized (db.r*,
# db.x*, db.z*) and burstable (db.t*) class types ("DB instance class types"); sizes are EC2's, up to 48xlarge.
_RDS_CLASS = re.compile(r"^db\.(?P<family>[mrtxz][1-9][a-z-]*)\.(?P<size>[a-z0-9]+)$")
_RDS_SIZES = ("micro", "small", "medium", "large", "xlarge",
              *(f"{n}xlarge" for n in (2, 3, 4, 6, 8, 9, 10, 12, 16, 18, 24, 32, 48)))
RDS_SOURCE = "Amazon RDS User Guide, 'DB instance classes' and 'DB instance class types'"

# Cloud SQL custom tiers db-custom-<vCPU>-<MiB>: "Cores 1 to 96 (must be either 1 or an even number)", "Memory 0.9 to
# 6.5 GB per vCPU (must be a multiple of 256 MB and at least 3.75 GB)" (Cloud SQL "About instance settings",
# cloud.google.com/sql/docs/mysql/instance-settings; GB here is GiB: 2 vCPU and 13 GB is db-custom-2-13312,
# hashicorp/terraform#12617). Enterprise Plus's db-perf-optimized-N-<vCPU> come in 2 to 128 vCPU ("Machine series
# overview", N2 series).
CLOUD_SQL_SOURCE = "Cloud SQL 'About instance settings' (custom machine types) and 'Machine series overview'"
_CUSTOM = re.compile(r"^db-custom-(?P<cpu>\d+)-(?P<mib>\d+)$")
_PERF_OPTIMIZED_VCPUS = (2, 4, 8, 16, 32, 48, 64, 80, 96, 128)
_N1 = {"standard": (1, 2, 4, 8, 16, 32, 64, 96), "highmem": (2, 4, 8, 16, 32, 64, 96)}


def rds_class_problem(instance_class: str) -> str | None:
    """Why RDS has no such instance class, or None."""
    m = _RDS_CLASS.match(instance_class)
    if m is None:
        return (f"'{instance_class}' is not an RDS for MySQL instance class: db.<type>.<size> with a general-purpose "
                f"(m), memory-optimized (r, x, z) or burstable (t) type, e.g. db.r7g.large ({RDS_SOURCE})")
    if m["size"] not in _RDS_SIZES:
        return (f"'{instance_class}': RDS has no size '{m['size']}' (sizes: {', '.join(_RDS_SIZES)}; {RDS_SOURCE})")
    return None


def cloud_sql_tier_problem(tier: str) -> str | None:
    """Why Cloud SQL for MySQL has no such tier, or None."""
    m = _CUSTOM.match(tier)
    if m is not None:
        cpu, mib = int(m["cpu"]), int(m["mib"])
        if cpu != 1 and (cpu % 2 or not 2 <= cpu <= 96):
            return f"'{tier}': a custom tier has 1 or an even number of vCPUs up to 96, not {cpu} ({CLOUD_SQL_SOURCE})"
        low, high = max(3840, _up_to_256(0.9 * 1024 * cpu)), int(6.5 * 1024 * cpu) // 256 * 256
        if mib % 256 or not low <= mib <= high:
            return (f"'{tier}': {cpu} vCPU take {low:,} to {high:,} MiB in multiples of 256 (0.9 to 6.5 GiB per vCPU, "
                    f"at least 3,840 MiB), not {mib:,} ({CLOUD_SQL_SOURCE})")
        return None
    if tier.startswith("db-perf-optimized-N-"):
        count = tier.removeprefix("db-perf-optimized-N-")
        if count.isdigit() and int(count) in _PERF_OPTIMIZED_VCPUS:
            return None
        return (f"'{tier}': Enterprise Plus's N2 tiers have {', '.join(map(str, _PERF_OPTIMIZED_VCPUS))} vCPUs "
                f"({CLOUD_SQL_SOURCE})")
    for kind, counts in _N1.items():
        prefix = f"db-n1-{kind}-"
        if tier.startswith(prefix):
            count = tier.removeprefix(prefix)
            if count.isdigit() and int(count) in counts:
                return None
            return f"'{tier}': db-n1-{kind} comes in {', '.join(map(str, counts))} vCPUs ({CLOUD_SQL_SOURCE})"
    return (f"'{tier}' is not a Cloud SQL for MySQL tier: db-custom-<vCPU>-<MiB>, db-perf-optimized-N-<vCPU> or "
            f"db-n1-standard|highmem-<vCPU> ({CLOUD_SQL_SOURCE})")


def _up_to_256(mib: float) -> int:
    return -(-int(mib) // 256) * 256
