"""The seed's sizing and unit-cost formulas, from a cost report and the workload one-pager.

``required_gpu_capacity = target_work_per_month / useful_work_per_gpu_month`` (after failures, idle and
retries), and ``effective_cluster_unit_cost = (compute + network + storage + support + operations + idle +
retries) / accepted units``. The graph's compute cost is everything paid for GPU and CPU nodes, so idle and
retries are the shares of it that did no accepted work, split out rather than added again; the control plane
is its own term. Support and operations come from the spec: no graph holds them.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from blueprint.cost.lines import CostReport

if TYPE_CHECKING:  # the spec's models (pydantic) load with a stack, not for a graph's cost
    from components.spec import WorkloadSpec


@dataclass(frozen=True)
class UnitCost:
    """What one accepted unit of work costs, term by term, against a baseline when one is given."""

    work_unit: str
    accepted_units_per_month: float
    required_gpu_capacity: float
    peak_gpus: int
    terms: tuple[tuple[str, float], ...]
    baseline_usd_per_unit: float | None
    baseline_source: str | None
    lower_bound: bool  # some prices are unknown, so the true cost is higher
    stale: bool = False  # some prices may have changed since they were read
    modelled: bool = False  # retries and useful work per GPU-month come from the goodput model
    paid_gpus: float = 0.0  # the GPUs the compute term pays for (reserved, plus autoscaled to the requirement)
    shortfall_gpus: float = 0.0  # required GPUs the node groups cannot reach at max size

    @property
    def total_usd(self) -> float:
        return sum(v for _, v in self.terms)

    @property
    def unit_cost_usd(self) -> float:
        return self.total_usd / self.accepted_units_per_month

    @property
    def beats_baseline(self) -> bool | None:
        return None if self.baseline_usd_per_unit is None else self.unit_cost_usd < self.baseline_usd_per_unit


def unit_cost(report: CostReport, workload: WorkloadSpec, goodput: float | None = None,
              serving: Collection[str] = ()) -> UnitCost | None:
    """The unit cost, or None when the stack gives no ``workload.economics`` (or asks for the goodput model's
    figures, ``fromGoodput``, and ``goodput`` is not given). ``serving`` names the node groups' resources served
    models run on: their GPUs are neither the work's capacity nor its compute cost (``blueprint sizing`` gives their
    own cost per million tokens).

    With ``fromGoodput`` the retries are the modelled loss (1 - goodput: checkpoint overhead, lost work and
    restarts) and the useful work per GPU-month is ``idealWorkPerGpuMonth x goodput x (1 - idleFraction)``.
    """
    econ = workload.economics
    if econ is None:
        return None
    if econ.from_goodput:
        ideal = workload.goodput.ideal_work_per_gpu_month if workload.goodput is not None else None
        if goodput is None or ideal is None:
            return None
        if goodput <= 1e-6:
            return None  # no useful work: `blueprint sizing` says why
        # Of the paid time, idleFraction runs nothing; of the rest, (1 - goodput) is lost to checkpoints,
        # failures and restarts: waste is split multiplicatively, never counted twice.
        retry_fraction = (1.0 - econ.idle_fraction) * (1.0 - goodput)
        useful_per_gpu = ideal * goodput * (1.0 - econ.idle_fraction)
    else:
        if econ.retry_fraction is None or econ.useful_work_per_gpu_month is None:
            return None  # refused at load (rule economics-inputs)
        retry_fraction = econ.retry_fraction
        useful_per_gpu = econ.useful_work_per_gpu_month
    required = workload.target_work_per_month / useful_per_gpu
    compute, paid_gpus, shortfall = compute_at_paid_capacity(report, required, serving)
    by_plane: dict[str, float] = {}
    for res in report.resources:
        if res.plane != "compute":
            by_plane[res.plane] = by_plane.get(res.plane, 0.0) + res.monthly_usd + res.one_time_usd
    useful = 1.0 - econ.idle_fraction - retry_fraction
    terms = (
        ("compute (useful share)", compute * useful),
        ("network", by_plane.pop("network", 0.0)),
        ("storage", by_plane.pop("storage", 0.0)),
        ("control plane", sum(by_plane.values())),
        ("support", econ.support_usd_per_month),
        ("operations", econ.operations_usd_per_month),
        ("idle", compute * econ.idle_fraction),
        ("retries", compute * retry_fraction),
    )
    return UnitCost(work_unit=workload.work_unit, accepted_units_per_month=workload.target_work_per_month,
                    required_gpu_capacity=required,
                    peak_gpus=workload.peak_gpus, terms=terms, baseline_usd_per_unit=econ.baseline_usd_per_unit,
                    baseline_source=econ.baseline_source, lower_bound=bool(report.unpriced),
                    stale=bool(report.stale_prices), modelled=econ.from_goodput, paid_gpus=paid_gpus,
                    shortfall_gpus=shortfall)


def compute_at_paid_capacity(report: CostReport, required_gpus: float,
                             serving: Collection[str] = ()) -> tuple[float, float, float]:
    """(compute cost a month, GPUs paid for, GPUs short of ``required_gpus``) at the capacity the stack pays for:
    reserved groups (Capacity Blocks, reservations) as priced, whether nodes run or not; autoscaled GPU groups at their
    minimum size plus the nodes the required capacity needs beyond the reserved and minimum GPUs (cheapest per GPU
    first, up to each group's max size), never at a desired size of zero; groups without GPUs (system nodes) at
    desired size. A Capacity Block is
    counted in the month its window serves: that is what those units cost."""
    compute = 0.0
    paid = 0.0
    scaled = []
    for res in report.resources:
        if res.plane != "compute" or res.name in serving:
            continue
        if res.nodes is None or not res.gpus_per_node or res.paid_regardless:
            compute += res.monthly_usd + res.one_time_usd
            if res.nodes is not None and res.paid_regardless:
                paid += res.nodes[1] * res.gpus_per_node
            continue
        if res.nodes[1] > 0:
            scaled.append(res)
    # Every autoscaled group runs at least its minimum size; those GPUs count towards the requirement first.
    paid += sum(r.min_nodes * r.gpus_per_node for r in scaled)
    remaining = max(0.0, required_gpus - paid)
    for res in sorted(scaled, key=lambda r: (r.monthly_usd_at_max / (r.nodes[1] * r.gpus_per_node)
                                             if r.nodes else 0.0, r.urn)):
        assert res.nodes is not None
        per_node = res.monthly_usd_at_max / res.nodes[1]
        extra = min(res.nodes[1] - res.min_nodes, math.ceil(remaining / res.gpus_per_node - 1e-9)) \
            if remaining > 0 else 0
        extra = max(0, extra)
        compute += (res.min_nodes + extra) * per_node
        paid += extra * res.gpus_per_node
        remaining = max(0.0, remaining - extra * res.gpus_per_node)
    return compute, paid, remaining


def unit_cost_document(unit: UnitCost | None, reason: str) -> dict[str, Any] | None:
    """The JSON form; ``reason`` says why it is missing when it is."""
    if unit is None:
        return {"computed": False, "reason": reason}
    return {
        "computed": True,
        "work_unit": unit.work_unit,
        "accepted_units_per_month": unit.accepted_units_per_month,
        "required_gpu_capacity": unit.required_gpu_capacity,
        "peak_gpus": unit.peak_gpus,
        "terms_usd": dict(unit.terms),
        "total_usd": unit.total_usd,
        "effective_cluster_unit_cost_usd": unit.unit_cost_usd,
        "lower_bound": unit.lower_bound,
        "stale_prices": unit.stale,
        "includes_one_time": "Capacity Blocks are counted in the month their window serves",
        "baseline_usd_per_unit": unit.baseline_usd_per_unit,
        "baseline_source": unit.baseline_source,
        "beats_baseline": unit.beats_baseline,
        "modelled_from_goodput": unit.modelled,
        "paid_gpus": unit.paid_gpus,
        "shortfall_gpus": unit.shortfall_gpus,
    }


def render_unit_cost(unit: UnitCost | None, reason: str) -> str:
    """The preview's and the table's lines."""
    if unit is None:
        return f"unit cost: not computed ({reason})\n"
    bound = " (a lower bound: some prices are unknown)" if unit.lower_bound else ""
    bound += " (some prices are stale)" if unit.stale else ""
    out = [f"unit cost: ${unit.unit_cost_usd:,.2f} per {unit.work_unit}{bound} = ${unit.total_usd:,.2f} / "
           f"{unit.accepted_units_per_month:g} accepted per month",
           "  " + ", ".join(f"{name} ${value:,.2f}" for name, value in unit.terms)
           + " (Capacity Blocks counted in the month their window serves)",
           f"  required GPU capacity: {unit.required_gpu_capacity:,.1f} GPUs (target work / useful work per "
           f"GPU-month); the workload's peak is {unit.peak_gpus}"
           + ("; retries and useful work modelled from goodput (`blueprint sizing`)" if unit.modelled else ""),
           f"  compute priced at the capacity paid for: {unit.paid_gpus:,.0f} GPUs (reserved groups as reserved, "
           "autoscaled groups at the required capacity, not at their desired size)"
           + (f"; the node groups fall {unit.shortfall_gpus:,.1f} GPUs short of the requirement at max size"
              if unit.shortfall_gpus > 0 else "")]
    if unit.baseline_usd_per_unit is not None:
        verdict = "beats" if unit.beats_baseline else "does NOT beat"
        out.append(f"  the cluster {verdict} the baseline of ${unit.baseline_usd_per_unit:,.2f} per {unit.work_unit} "
                   f"({unit.baseline_source})")
    return "\n".join(out) + "\n"


def modelled_goodput(spec: Any) -> float | None:
    """The goodput model's figure when the stack gives its inputs (for the unit cost), else None."""
    if spec is None or spec.workload.goodput is None:
        return None
    from components.sizing import SizingError, goodput_model

    try:
        return goodput_model(spec).goodput
    except SizingError:
        return None


def unit_reason(spec: Any, goodput: float | None) -> str:
    """Why the unit cost is not computed, for the stack at hand (``goodput``: the model's figure, if any)."""
    if spec is None:
        return "a graph holds no workload economics: run `blueprint cost` on the stack"
    econ = spec.workload.economics
    if econ is None:
        return "set workload.economics in the stack file"
    if econ.from_goodput and goodput is None:
        return "workload.goodput cannot be modelled (`blueprint sizing` says why)"
    return "the goodput model gives no useful work (`blueprint sizing` says why)"
