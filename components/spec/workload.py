"""The workload one-pager the seed asks for before any capacity is bought."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictFloat, StrictInt

from components.spec.base import _Model


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
