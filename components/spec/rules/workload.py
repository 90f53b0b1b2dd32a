"""Rules of the workload one-pager: the unit-cost inputs must add up."""

from __future__ import annotations

from components.spec.errors import _Collector
from components.spec.model import ClusterSpec


def _check_workload(spec: ClusterSpec, out: _Collector) -> None:
    economics = spec.workload.economics
    if economics is None:
        return
    if economics.idle_fraction + economics.retry_fraction >= 1:
        out.add(".workload.economics", "waste-below-one",
                f"idleFraction ({economics.idle_fraction:g}) + retryFraction ({economics.retry_fraction:g}) must be "
                "below 1: they are shares of the same paid GPU time")
    if economics.baseline_usd_per_unit is not None and economics.baseline_source is None:
        out.add(".workload.economics.baselineSource", "baseline-sourced",
                "a baseline price needs its source and date (model API page, managed-service quote)")
