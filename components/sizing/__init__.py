"""The goodput and sizing model (issue 15): checkpoint/restart arithmetic and its application to a stack."""

from components.sizing.goodput import (
    LLAMA3_FAILURES_PER_NODE_HOUR,
    CheckpointPlan,
    daly_interval,
    fleet_mtbf_hours,
    plan_checkpoints,
    wall_time_ratio,
    young_interval,
)
from components.sizing.plan import (
    GoodputModel,
    PathTimes,
    SizingError,
    StorageOption,
    goodput_model,
    path_times,
    spec_warnings,
    storage_warning,
)

__all__ = [
    "LLAMA3_FAILURES_PER_NODE_HOUR",
    "CheckpointPlan",
    "GoodputModel",
    "PathTimes",
    "SizingError",
    "StorageOption",
    "daly_interval",
    "fleet_mtbf_hours",
    "goodput_model",
    "path_times",
    "plan_checkpoints",
    "spec_warnings",
    "storage_warning",
    "wall_time_ratio",
    "young_interval",
]
