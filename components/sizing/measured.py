"""The goodput model fed with measured storage times (issue 34): the restore target a stack states, and the plan
the model's checkpoint path gives when its write and restore times are the storage check's instead of the rated
throughput's. Pure: the records are read by ``blueprint sizing --measured`` (blueprint/sizing/measured.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from components.sizing.goodput import CheckpointPlan
from components.sizing.plan import GoodputModel, PathTimes, plan_on_path
from components.spec import ClusterSpec

# "a checkpoint restorable in under 15 minutes", "restore within 900 s", "restored in 0.5 hours": a restore word,
# then within/in (under/less than), a number and a unit.
_RESTORE = re.compile(
    r"restor\w*\s+(?:with)?in\s+(?:under\s+|less\s+than\s+)?(\d+(?:\.\d+)?)\s*"
    r"(seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h)\b", re.IGNORECASE)
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class RestoreTarget:
    """The longest a restore may take, seconds, and where the figure was read."""

    seconds: float
    source: str


def restore_target(spec: ClusterSpec) -> RestoreTarget | None:
    """``workload.goodput.restoreTargetMinutes`` when set (the explicit figure), else the figure of an
    ``acceptanceMetric`` such as "a checkpoint restorable in under 15 minutes", else None."""
    gp = spec.workload.goodput
    if gp is not None and gp.restore_target_minutes is not None:
        return RestoreTarget(gp.restore_target_minutes * 60, "workload.goodput.restoreTargetMinutes")
    match = _RESTORE.search(spec.workload.acceptance_metric)
    if match is None:
        return None
    unit = match.group(2).lower()
    seconds = float(match.group(1)) * _UNIT_S["s" if unit.startswith("s") else unit[0]]
    return RestoreTarget(seconds, f'workload.acceptanceMetric ("{match.group(0)}")')


def measured_times(model: GoodputModel, target: str, write_s: float, read_s: float) -> PathTimes | None:
    """The model's path times with the measured ones in place: ``filesystem`` and ``bucket`` paths block for the
    write and read back; ``tiered`` drains to the filesystem (the measured write) and reads back from it, its local
    NVMe write stays modelled. None when the record measured storage the path does not use."""
    if model.path == target:
        return PathTimes(write_s, 0.0, read_s)
    if model.path == "tiered" and target == "filesystem":
        return PathTimes(model.paths["tiered"].write_s, write_s, read_s)
    return None


def measured_plan(model: GoodputModel, times: PathTimes) -> CheckpointPlan:
    """Daly's optimum and the goodput with the measured times (the same restart and fleet MTBF)."""
    return plan_on_path(times, model.restart_s, model.mtbf_hours)
