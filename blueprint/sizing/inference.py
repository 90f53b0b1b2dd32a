"""``blueprint sizing``'s served models: KV cache per token, concurrency per replica, cold start, replicas, and the cost
of a million generated tokens beside the model API the stack names as its baseline.

The GPU-hour is the node's instance-hour price as the cost engine priced the model's node group (its capacity type:
on-demand, Spot, a reservation), divided by the node's GPUs; the node's disks are not counted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from blueprint.cost.lines import CostReport, ResourceCost
from blueprint.cost.render import format_usd
from components.sizing.inference import (
    GIB,
    ColdStart,
    ModelMemory,
    cold_start,
    kv_bytes_per_token,
    model_memory,
    node_group_resource_name,
    replicas_for_peak,
    usd_per_million_tokens,
)
from components.sizing.plan import HOURS_PER_MONTH
from components.spec import ClusterSpec
from components.spec.decisions import served_group, serving_node_groups
from components.spec.inference import ServedModelSpec


@dataclass(frozen=True)
class GpuHour:
    """One GPU-hour of a node group, from its instance-hour price."""

    usd: float
    status: str  # the price's status in the catalog (confirmed, secondary, stale, ...)
    source: str


@dataclass(frozen=True)
class ServedSizing:
    """The figures of one served model."""

    model: ServedModelSpec
    memory: ModelMemory
    cold: ColdStart
    gpu_hour: GpuHour | None
    for_peak: int | None

    def monthly_usd(self, replicas: int) -> float | None:
        """What ``replicas`` replicas' GPUs cost in a month (730 hours) at the group's GPU-hour (None: no price)."""
        if self.gpu_hour is None:
            return None
        return replicas * self.model.gpus_per_replica * self.gpu_hour.usd * HOURS_PER_MONTH

    def cost_at(self, replicas: int) -> float | None:
        return None if self.gpu_hour is None else usd_per_million_tokens(self.model, replicas, self.gpu_hour.usd)

    @property
    def failover_met(self) -> bool | None:
        """Whether a lost replica serves again within the objective (None: no objective or no cold start)."""
        target = self.model.objectives.failover_seconds
        seconds = self.cold.seconds
        return None if target is None or seconds is None else seconds <= target


def gpu_hour(report: CostReport, cloud: str, group: str, gpus_per_node: int) -> GpuHour | None:
    """A GPU-hour of ``group``: its priced instance-hour over the node's GPUs (None: not priced)."""
    name = node_group_resource_name(cloud, group)
    found: ResourceCost | None = next((r for r in report.resources if r.name == name), None)
    if found is None or not gpus_per_node:
        return None
    line = next((c for c in found.components_at_max if c.unit == "hour" and c.unit_price_usd is not None), None)
    if line is None or line.unit_price_usd is None:
        return None
    return GpuHour(line.unit_price_usd / gpus_per_node, line.price_status, line.price_source)


def served_sizing(spec: ClusterSpec, report: CostReport | None) -> list[ServedSizing]:
    """Every served model's figures (an empty list when the stack serves none)."""
    if spec.inference is None:
        return []
    out = []
    for model in spec.inference.models:
        _, facts = served_group(spec, model)
        hour = gpu_hour(report, spec.cloud, model.node_group, facts.gpu_count) if report is not None else None
        out.append(ServedSizing(model, model_memory(model, float(facts.gpu_memory_gib_each or 0)), cold_start(model),
                                hour, replicas_for_peak(model)))
    return out


def inference_document(sized: list[ServedSizing]) -> list[dict[str, Any]]:
    """The ``inference`` entries of ``blueprint sizing --format json``."""
    out = []
    for s in sized:
        m = s.model
        baseline = m.baseline
        out.append({
            "model": m.name,
            "team": m.team,
            "node_group": m.node_group,
            "gpus_per_replica": m.gpus_per_replica,
            "weights_bytes": s.memory.weights_bytes,
            "kv_cache_bytes_per_token": kv_bytes_per_token(m),
            "kv_cache_room_bytes_per_replica": s.memory.kv_room_bytes,
            "context_tokens": m.context_tokens,
            "max_concurrency_per_replica": s.memory.max_concurrency,
            "objective_concurrency": m.objectives.concurrency,
            "cold_start_seconds": s.cold.seconds,
            "cold_start_note": s.cold.note,
            "failover_objective_seconds": m.objectives.failover_seconds,
            "failover_met": s.failover_met,
            "replicas": {"min": m.replicas.min, "max": m.replicas.max, "for_peak": s.for_peak},
            "gpus": {"min": m.replicas.min * m.gpus_per_replica, "max": m.replicas.max * m.gpus_per_replica},
            "output_tokens_per_second_per_replica": (m.throughput.output_tokens_per_second
                                                     if m.throughput is not None else None),
            "throughput_source": m.throughput.source if m.throughput is not None else None,
            "peak_output_tokens_per_second": m.objectives.peak_output_tokens_per_second,
            "gpu_hour_usd": s.gpu_hour.usd if s.gpu_hour is not None else None,
            "gpu_hour_price_status": s.gpu_hour.status if s.gpu_hour is not None else None,
            "monthly_usd": {"min": s.monthly_usd(m.replicas.min), "max": s.monthly_usd(m.replicas.max)},
            "cost_per_million_tokens_usd": s.cost_at(m.replicas.min),
            "cost_per_million_tokens_usd_at_max": s.cost_at(m.replicas.max),
            "baseline_cost_per_million_tokens_usd": baseline.usd_per_million_tokens if baseline is not None else None,
            "baseline_source": baseline.source if baseline is not None else None,
        })
    return out


def render_inference(sized: list[ServedSizing]) -> list[str]:
    """The table form's lines for the served models."""
    lines: list[str] = []
    for s in sized:
        m = s.model
        stale = " [stale price]" if s.gpu_hour is not None and s.gpu_hour.status == "stale" else ""
        span = f"{m.replicas.min}" if m.replicas.min == m.replicas.max else f"{m.replicas.min}-{m.replicas.max}"
        lines += [
            f"served model {m.name} (team {m.team}, {span} replicas x {m.gpus_per_replica} GPU(s) on {m.node_group})",
            f"  weights {s.memory.weights_bytes / 1e9:,.1f} GB ({m.weights.dtype}); KV cache "
            f"{kv_bytes_per_token(m) / 1024:,.0f} KiB per token ({m.engine.kv_cache_dtype}), "
            f"{max(s.memory.kv_room_bytes, 0) / GIB:,.1f} GiB per replica at most (activations not counted)",
            f"  concurrency: {s.memory.max_concurrency} sequences of {m.context_tokens:,} tokens per replica at most; "
            f"the objective's {m.objectives.concurrency} in flight need "
            f"{-(-m.objectives.concurrency // max(s.memory.max_concurrency, 1))} replica(s)",
        ]
        if s.gpu_hour is not None:
            ends = (f"{format_usd(s.monthly_usd(m.replicas.min))} a month" if m.replicas.min == m.replicas.max else
                    f"{format_usd(s.monthly_usd(m.replicas.min))} a month at {m.replicas.min} replica(s), "
                    f"{format_usd(s.monthly_usd(m.replicas.max))} at {m.replicas.max}")
            lines.append(f"  GPUs: {ends} (GPU-hour {format_usd(s.gpu_hour.usd)}{stale}, from "
                         f"{m.node_group}'s instance-hour)")
        if s.cold.seconds is None:
            lines.append(f"  cold start: unknown ({s.cold.note})")
        else:
            verdict = {None: "", True: " (within the failover objective)",
                       False: f" (NOT within the failover objective of {m.objectives.failover_seconds:,.0f} s)"}
            lines.append(f"  cold start: {s.cold.seconds:,.0f} s ({s.cold.note}){verdict[s.failover_met]}")
        if m.throughput is None:
            lines.append("  cost per million tokens: unknown (throughput.outputTokensPerSecond not measured)")
        elif s.gpu_hour is None:
            lines.append(f"  cost per million tokens: unknown (no price read for {m.node_group}'s instances)")
        else:
            peak = (f"; the peak needs {s.for_peak} replica(s)" if s.for_peak is not None else "")
            lines.append(f"  cost per million generated tokens: {format_usd(s.cost_at(m.replicas.min))} at "
                         f"{m.replicas.min} replica(s), {format_usd(s.cost_at(m.replicas.max))} at "
                         f"{m.replicas.max} ({m.throughput.output_tokens_per_second:,.0f} tokens/s per replica){peak}")
        if m.baseline is not None:
            lines.append(f"  baseline model API: {format_usd(m.baseline.usd_per_million_tokens)} per million tokens "
                         f"({m.baseline.source})")
    return lines


def with_served(text: str, spec: ClusterSpec, report: CostReport | None) -> str:
    """``blueprint sizing``'s table: the goodput model's text (may be empty) and then each served model's lines, as
    the command prints it and the report shows it."""
    if spec.inference is None:
        return text
    return text + ("\n" if text else "") + "\n".join(render_inference(served_sizing(spec, report))) + "\n"


def serving_resources(spec: ClusterSpec) -> frozenset[str]:
    """The provider resources of the groups served models run on (what :func:`gpu_compute_usd` leaves out)."""
    return frozenset(node_group_resource_name(spec.cloud, g) for g in serving_node_groups(spec))
