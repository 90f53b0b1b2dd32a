"""Checkpoint/restart arithmetic: how much of the paid GPU time becomes useful work.

Failures are Poisson with mean time between failures ``M`` (the whole job's fleet). A job computes for ``tau``,
then blocks for ``delta`` to write a checkpoint; after a failure it spends ``R`` restarting (rescheduling,
re-admission, reading the last checkpoint) and redoes the work since the last durable checkpoint.

- Young (1974), first order: ``tau = sqrt(2 * delta * M)``.
- Daly (2006), "A higher order estimate of the optimum checkpoint interval for restart dumps", FGCS 22:
  ``tau = sqrt(2*delta*M) * [1 + (1/3)*sqrt(delta/(2M)) + (1/9)*(delta/(2M))] - delta`` for ``delta < 2M``,
  else ``tau = M``; it minimises the complete model's wall time per unit of work,
  ``T_w / T_s = M * exp(R/M) * (exp((tau + delta)/M) - 1) / tau``. The paper's published optima (M = 24 h,
  6 h and 15 min with R = 10 min and delta = 5 min: 117, 57 and 9.1 min) are reproduced in the tests, both
  by the closed form and by minimising the cost function numerically.

Goodput is ``T_s / T_w``: the fraction of wall-clock GPU time that ends as kept work, after checkpoint
overhead, lost work and restarts. A checkpoint staged on local NVMe and drained asynchronously blocks only for
the local write, but the last *durable* checkpoint lags by the drain time ``D``: every failure loses ``D``
more, which in this model is the same as a restart ``D`` longer, and the next checkpoint cannot start before
the drain ends (``tau >= D``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# The failure-rate default: Meta, "The Llama 3 Herd of Models" (arXiv 2407.21783), Table 5: 419 unexpected
# interruptions in a 54-day snapshot of pre-training on 16,384 H100 GPUs (2,048 servers of 8). Derivation:
# 419 / (2,048 nodes x 54 days x 24 h) = 1.5786e-4 interruptions per node-hour (one per ~6,335 node-hours);
# the job's MTBF is 1 / (nodes x rate): 3.09 h at 2,048 nodes (derived).
LLAMA3_UNEXPECTED_INTERRUPTIONS = 419
LLAMA3_WINDOW_DAYS = 54
LLAMA3_NODES = 16_384 // 8
LLAMA3_FAILURES_PER_NODE_HOUR = LLAMA3_UNEXPECTED_INTERRUPTIONS / (LLAMA3_NODES * LLAMA3_WINDOW_DAYS * 24)


def fleet_mtbf_hours(nodes: int, failures_per_node_hour: float) -> float:
    """Mean time between failures of a job spanning ``nodes`` (independent node failures)."""
    if nodes <= 0 or failures_per_node_hour <= 0:
        return math.inf
    return 1.0 / (nodes * failures_per_node_hour)


def young_interval(delta_s: float, mtbf_s: float) -> float:
    """Young's first-order optimum compute time between checkpoints, seconds."""
    return math.sqrt(2.0 * delta_s * mtbf_s)


def daly_interval(delta_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimum compute time between checkpoints, seconds."""
    if math.isinf(mtbf_s):
        return math.inf
    if delta_s >= 2.0 * mtbf_s:
        return mtbf_s
    x = delta_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * delta_s * mtbf_s) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - delta_s


def wall_time_ratio(tau_s: float, delta_s: float, restart_s: float, mtbf_s: float) -> float:
    """Daly's complete model: wall-clock time per unit of useful compute time (>= 1)."""
    if math.isinf(mtbf_s):
        return (tau_s + delta_s) / tau_s
    # expm1 keeps precision when (tau + delta) is small against M; past exp's range nothing gets done.
    exponent = max(restart_s / mtbf_s, (tau_s + delta_s) / mtbf_s)
    if exponent > 700:
        return math.inf
    return mtbf_s * math.exp(restart_s / mtbf_s) * math.expm1((tau_s + delta_s) / mtbf_s) / tau_s


@dataclass(frozen=True)
class CheckpointPlan:
    """One way of checkpointing, priced in time: the interval to use and the goodput it gives."""

    delta_s: float  # blocking write time of one checkpoint
    lag_s: float  # how long after the blocking write the checkpoint becomes durable (asynchronous drain)
    restart_s: float  # failure to training again: restart plus reading the checkpoint back
    mtbf_s: float
    interval_s: float  # compute time between checkpoints (Daly's optimum, at least the drain time)
    young_interval_s: float
    goodput: float  # useful compute / wall-clock time

    @property
    def overhead(self) -> float:
        """The share of wall-clock time that is not kept work."""
        return 1.0 - self.goodput


def plan_checkpoints(delta_s: float, restart_s: float, mtbf_s: float, lag_s: float = 0.0) -> CheckpointPlan:
    """The optimum interval and the resulting goodput for a checkpoint that blocks ``delta_s`` and becomes
    durable ``lag_s`` later; a failure costs ``restart_s`` plus the lag."""
    if delta_s <= 0:
        raise ValueError("a checkpoint takes some time to write")
    interval = max(daly_interval(delta_s, mtbf_s), lag_s)
    young = young_interval(delta_s, mtbf_s)
    if math.isinf(interval):
        return CheckpointPlan(delta_s, lag_s, restart_s, mtbf_s, interval, young, 1.0)
    ratio = wall_time_ratio(interval, delta_s, restart_s + lag_s, mtbf_s)
    return CheckpointPlan(delta_s, lag_s, restart_s, mtbf_s, interval, young, 1.0 / ratio)
