"""``blueprint sizing``: the goodput model of a stack, with what its lost GPU-hours cost and what storage would
reach the target (priced from the catalog where a price was read)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from blueprint.cost.lines import CostReport
from blueprint.cost.prices import Price
from blueprint.cost.render import format_usd
from components.sizing import GoodputModel, StorageOption
from components.sizing.plan import finite


@dataclass(frozen=True)
class PricedOption:
    """A storage option with its monthly price, when the catalog has one."""

    option: StorageOption
    monthly_usd: float | None
    price_status: str


@dataclass(frozen=True)
class GpuCompute:
    """What the GPU node groups cost in a month at max size (the fleet the model counts), Capacity Blocks
    counted in the month their window serves; None when a line has no price read."""

    usd: float | None
    stale: bool


def gpu_compute_usd(report: CostReport, serving: Collection[str] = ()) -> GpuCompute:
    """The training GPU node groups' (pools') cost at max size: the groups the cost engine priced with GPUs on their
    nodes, less those named in ``serving`` (their provider resources' names: a served model's groups train nothing)."""
    groups = [r for r in report.resources if r.nodes is not None and r.gpus_per_node and r.name not in serving]
    priced = all(r.priced_fully for r in groups)
    usd = sum(r.monthly_usd_at_max + r.one_time_usd for r in groups) if priced else None
    stale = any(line.stale for r in groups for line in (*r.components, *r.components_at_max))
    return GpuCompute(usd, stale)


def price_options(model: GoodputModel, prices: dict[str, Price]) -> list[PricedOption]:
    """Each option that reaches the target, cheapest known price first, then those with no price read."""
    out = []
    for option in model.options:
        price = prices.get(option.price_key)
        usd = None if price is None or price.usd is None else option.capacity_gib * price.usd
        out.append(PricedOption(option, usd, price.status if price is not None else "unconfirmed"))
    # Cheapest known price first; then, unpriced, the smallest capacity increase (capacity cannot be given back).
    return sorted(out, key=lambda p: (p.monthly_usd is None, p.monthly_usd or 0.0, p.option.capacity_gib,
                                      p.option.mbps_per_tib))


def sizing_document(model: GoodputModel, gpu: GpuCompute, options: list[PricedOption]) -> dict[str, Any]:
    """The JSON form (``--format json``)."""
    chosen = model.paths[model.path]
    lost_share = (1.0 - model.idle_fraction) * (1.0 - model.goodput)
    lost_usd = None if gpu.usd is None else gpu.usd * lost_share
    return {
        "path": model.path,
        "checkpoint_bytes": model.checkpoint_bytes,
        "checkpoint_write_s": chosen.write_s,
        "checkpoint_drain_s": chosen.drain_s,
        "restore_read_s": chosen.read_s,
        "restart_s": model.restart_s,
        "paths": {name: {"write_s": t.write_s, "drain_s": t.drain_s, "read_s": t.read_s}
                  for name, t in model.paths.items()},
        "nodes": model.nodes,
        "gpus": model.gpus,
        "failures_per_node_hour": model.failures_per_node_hour,
        "mtbf_hours": finite(model.mtbf_hours),
        "optimal_interval_s": finite(model.plan.interval_s),
        "young_interval_s": finite(model.plan.young_interval_s),
        "goodput": model.goodput,
        "target": model.target,
        "meets_target": model.meets_target,
        "gpu_hours_per_month": model.gpu_hours_per_month,
        "gpu_hours_lost_per_month": model.gpu_hours_lost_per_month,
        "gpu_compute_usd_per_month": gpu.usd,
        "gpu_compute_price_stale": gpu.stale,
        "idle_fraction": model.idle_fraction,
        "lost_usd_per_month": lost_usd,
        "progressing": model.progressing,
        "useful_work_per_gpu_month": model.useful_work_per_gpu_month,
        "required_gpus": model.required_gpus,
        "available_gpus": model.available_gpus,
        "covered": model.covered,
        "storage_options": [{"description": p.option.describe(), "deployment_type": p.option.deployment_type,
                             "capacity_gib": p.option.capacity_gib, "mbps_per_tib": p.option.mbps_per_tib,
                             "goodput": p.option.goodput, "monthly_usd": p.monthly_usd,
                             "price_status": p.price_status} for p in options],
    }


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "never (no failure expected)"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def render_sizing(model: GoodputModel, gpu: GpuCompute, options: list[PricedOption], stack: str) -> str:
    """The table form."""
    doc = sizing_document(model, gpu, options)
    lines = [f"goodput model of {stack}: checkpointPath {model.path}, {model.nodes} GPU nodes ({model.gpus} GPUs)",
             f"checkpoint: {model.checkpoint_bytes / 1e12:,.3f} TB"]
    for name, t in model.paths.items():
        mark = " <- the spec's path" if name == model.path else ""
        drain = f", durable {_duration(t.drain_s)} later (drain)" if t.drain_s else ""
        lines.append(f"  {name}: write {_duration(t.write_s)}{drain}, restore read {_duration(t.read_s)}{mark}")
    lines += [
        f"failures: {model.failures_per_node_hour:.4g} per node-hour -> fleet MTBF {model.mtbf_hours:,.1f} h",
        f"restart: {_duration(model.restart_s)} + restore read = {_duration(model.plan.restart_s)} per failure"
        + (f" (+ {_duration(model.plan.lag_s)} of work since the last durable checkpoint)" if model.plan.lag_s else ""),
        f"optimal checkpoint interval: every {_duration(doc['optimal_interval_s'])} of compute (Daly; Young's first "
        f"order: {_duration(doc['young_interval_s'])})",
        f"expected goodput: {model.goodput:.2%}"
        + (f" (target {model.target:.1%}: {'met' if model.meets_target else 'NOT met'})" if model.target else ""),
        f"GPU-hours lost a month: {model.gpu_hours_lost_per_month:,.0f} of {model.gpu_hours_per_month:,.0f}"
        + (f" ({model.idle_fraction:.0%} idle, not counted)" if model.idle_fraction else "") + ", "
        + (f"{format_usd(doc['lost_usd_per_month'])} of {format_usd(gpu.usd)} of GPU compute at max size"
           + (" [stale price]" if gpu.stale else "") if gpu.usd is not None
           else "their cost unknown (a GPU node group line has no price read)"),
    ]
    if not model.progressing:
        lines.append(f"required GPU capacity: none: the job makes no progress (goodput {model.goodput:.2e}; a "
                     f"{model.paths[model.path].write_s:,.0f} s checkpoint against a fleet MTBF of "
                     f"{model.mtbf_hours * 3600:,.0f} s)")
    elif model.required_gpus is not None:
        lines.append(f"required GPU capacity: {model.required_gpus:,.1f} GPUs all month (target work "
                     f"{model.target_work_per_month:g} / useful work per GPU-month "
                     f"{model.useful_work_per_gpu_month:.4g}); the node groups give {model.available_gpus:,.1f}: "
                     + ("covered" if model.covered else "NOT covered"))
    else:
        lines.append("required GPU capacity: set workload.goodput.idealWorkPerGpuMonth to compute it")
    if model.filesystem is not None:
        lines.append(f"filesystem today: {model.filesystem.describe()}")
    if options:
        lines.append(f"storage that reaches {model.target:.1%} (smallest capacity per throughput tier; FSx capacity "
                     "only grows):")
        for p in options:
            price = format_usd(p.monthly_usd) + " a month" if p.monthly_usd is not None else "no price read"
            stale = " [stale price]" if p.price_status == "stale" else ""
            lines.append(f"  {p.option.describe()}: goodput {p.option.goodput:.2%}, {price}{stale}")
        priced = [p for p in options if p.monthly_usd is not None]
        if priced:
            lines.append(f"  cheapest with a price read: {priced[0].option.describe()}"
                         + ("" if len(priced) == len(options) else " (tiers without a price read may be cheaper)"))
    return "\n".join(lines) + "\n"
