"""The workload one-pager the seed asks for before any capacity is bought."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, StrictFloat, StrictInt

from components.spec.base import _Model


class EconomicsSpec(_Model):
    """The seed's unit-cost inputs that no graph holds: useful work per GPU, labour, waste and a baseline.

    ``required_gpu_capacity = target_work_per_month / useful_work_per_gpu_month`` and
    ``effective_cluster_unit_cost = (compute + network + storage + support + operations + idle + retries) /
    accepted units``; the cluster should beat ``baseline_usd_per_unit`` (a model API or managed service).
    """

    useful_work_per_gpu_month: StrictFloat = Field(
        gt=0, description="workUnit one GPU completes in a month after failures, idle time and retries.")
    support_usd_per_month: StrictFloat = Field(
        ge=0, description="Vendor and cloud support contracts for the cluster, USD per month.")
    operations_usd_per_month: StrictFloat = Field(
        ge=0, description="People and tooling that run the cluster, USD per month.")
    idle_fraction: StrictFloat = Field(
        ge=0, lt=1, description="Share of paid GPU time with no job running (0-1).")
    retry_fraction: StrictFloat = Field(
        ge=0, lt=1, description="Share of paid GPU time lost to failed or repeated attempts (0-1).")
    baseline_usd_per_unit: Optional[StrictFloat] = Field(
        default=None, gt=0, description="Price of one workUnit from a model API or managed service.")
    baseline_source: Optional[str] = Field(
        default=None, min_length=1, max_length=256, description="Where the baseline price comes from, with date.")


class WorkloadSpec(_Model):
    """The one-page workload summary the seed asks for before any capacity is bought.

    Later layers use it for sizing and unit cost; the program itself only reports it.
    """

    kind: Literal["training", "inference", "both"] = Field(
        description="What the cluster is for: training, inference or both."
    )
    model_parameters_billions: StrictFloat = Field(
        gt=0, le=100_000, description="Largest model trained or served, in billions of parameters."
    )
    target_work_per_month: StrictFloat = Field(
        gt=0, description="Work the cluster must complete each month, in workUnit."
    )
    work_unit: str = Field(
        min_length=1,
        max_length=64,
        description="Unit of useful work (completed training runs, accepted tokens, ...).",
    )
    peak_gpus: StrictInt = Field(ge=1, description="GPUs the workload needs at its peak.")
    acceptance_metric: str = Field(
        min_length=1, max_length=256, description="How a unit of work is accepted as useful."
    )
    economics: Optional[EconomicsSpec] = Field(
        default=None, description="Unit-cost inputs (support, operations, idle, retries, baseline).")
