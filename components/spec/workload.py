"""The workload one-pager the seed asks for before any capacity is bought."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, StrictBool, StrictFloat, StrictInt

from components.spec.base import _Model, unit

# Llama 3 (arXiv 2407.21783, Table 5): 419 unexpected interruptions / (2,048 nodes x 54 days x 24 h); the
# derivation is in components/sizing/goodput.py (kept here as a literal: the spec layer imports no model).
DEFAULT_FAILURES_PER_NODE_HOUR = 419 / (2048 * 54 * 24)
# Checkpoint bytes per parameter: bf16 weights 2 + fp32 master 4 + Adam m 4 + Adam v 4, no gradients
# (derived: mixed-precision Adam state as in Rajbhandari et al., "ZeRO", arXiv:1910.02054, section 3.1, without
# the fp16 gradients, which are not checkpointed).
DEFAULT_CHECKPOINT_BYTES_PER_PARAMETER = 14.0


class GoodputSpec(_Model):
    """How the training job checkpoints and restarts: the inputs of the goodput model (``blueprint sizing``).

    Throughputs are MB/s (10^6 bytes); the filesystem's comes from the storage plane.
    """

    checkpoint_path: Literal["filesystem", "tiered", "bucket"] = Field(
        description="Where a checkpoint is written: straight to the shared filesystem; 'tiered': to the nodes' "
        "RAID0 NVMe, then drained asynchronously to the filesystem (which exports it to the bucket); or straight "
        "to the bucket.")
    bytes_per_parameter: StrictFloat = Field(
        default=DEFAULT_CHECKPOINT_BYTES_PER_PARAMETER, gt=0, le=64,
        description="Checkpoint bytes per model parameter (default 14: bf16 weights, fp32 master, Adam m and v).",
        json_schema_extra=unit("bytes per parameter"))
    failures_per_node_hour: StrictFloat = Field(
        default=DEFAULT_FAILURES_PER_NODE_HOUR, gt=0, le=1,
        description="Job-interrupting failures per node-hour (default: Llama 3's 419 in 54 days on 2,048 nodes).",
        json_schema_extra=unit("failures per node-hour"))
    restart_minutes: StrictFloat = Field(
        ge=0, le=1440, description="From a failure to training again, without reading the checkpoint: detection, "
        "Kueue re-admission, scheduling, image pull, process-group start (measure it; no default).",
        json_schema_extra=unit("minutes"))
    nvme_write_mbps_per_node: Optional[StrictFloat] = Field(
        default=None, gt=0, description="Sustained write to one node's RAID0 NVMe, MB/s (tiered; measure with fio).",
        json_schema_extra=unit("MB/s per node"))
    bucket_write_mbps: Optional[StrictFloat] = Field(
        default=None, gt=0, description="Aggregate write (and read) to the bucket of all nodes, MB/s (bucket path).",
        json_schema_extra=unit("MB/s"))
    target: Optional[StrictFloat] = Field(
        default=None, gt=0, lt=1, description="Goodput to reach (0-1); the preview warns when storage is too slow.",
        json_schema_extra=unit("fraction (0-1)"))
    ideal_work_per_gpu_month: Optional[StrictFloat] = Field(
        default=None, gt=0, description="workUnit one GPU completes in a month with no failure, idle or retry.",
        json_schema_extra=unit("workUnit per GPU-month"))
    restore_target_minutes: Optional[StrictFloat] = Field(
        default=None, gt=0, le=1440,
        description="The longest a restore (reading the whole checkpoint back) may take; `blueprint sizing "
        "--measured` fails a storage record slower than this. Default: the figure of an acceptanceMetric such as "
        "'a checkpoint restorable in under 15 minutes'.", json_schema_extra=unit("minutes"))


class EconomicsSpec(_Model):
    """The seed's unit-cost inputs that no graph holds: useful work per GPU, labour, waste and a baseline.

    ``required_gpu_capacity = target_work_per_month / useful_work_per_gpu_month`` and
    ``effective_cluster_unit_cost = (compute + network + storage + support + operations + idle + retries) /
    accepted units``; the cluster should beat ``baseline_usd_per_unit`` (a model API or managed service).
    """

    useful_work_per_gpu_month: Optional[StrictFloat] = Field(
        default=None, gt=0, description="workUnit one GPU completes in a month after failures, idle time and "
        "retries (modelled instead with fromGoodput).", json_schema_extra=unit("workUnit per GPU-month"))
    # At most a billion USD a month: beyond any cluster's support or operations bill, and far from where floating
    # point sums of money lose their cents (issue 35: 1e300 was accepted and printed).
    support_usd_per_month: StrictFloat = Field(
        ge=0, le=1e9, description="Vendor and cloud support contracts for the cluster, USD per month.",
        json_schema_extra=unit("USD per month"))
    operations_usd_per_month: StrictFloat = Field(
        ge=0, le=1e9, description="People and tooling that run the cluster, USD per month.",
        json_schema_extra=unit("USD per month"))
    idle_fraction: StrictFloat = Field(
        ge=0, lt=1, description="Share of paid GPU time with no job running (0-1).",
        json_schema_extra=unit("fraction (0-1)"))
    retry_fraction: Optional[StrictFloat] = Field(
        default=None, ge=0, lt=1, description="Share of paid GPU time lost to failed or repeated attempts (0-1; "
        "modelled instead with fromGoodput).", json_schema_extra=unit("fraction (0-1)"))
    from_goodput: StrictBool = Field(
        default=False, description="Take retries (1 - goodput) and useful work per GPU-month (idealWorkPerGpuMonth "
        "x goodput x (1 - idleFraction)) from the goodput model instead of setting them.")
    baseline_usd_per_unit: Optional[StrictFloat] = Field(
        default=None, gt=0, description="Price of one workUnit from a model API or managed service.",
        json_schema_extra=unit("USD per workUnit"))
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
        gt=0, le=100_000, description="Largest model trained or served, in billions of parameters.",
        json_schema_extra=unit("billion parameters"),
    )
    target_work_per_month: StrictFloat = Field(
        gt=0, description="Work the cluster must complete each month, in workUnit.",
        json_schema_extra=unit("workUnit per month"),
    )
    work_unit: str = Field(
        min_length=1,
        max_length=64,
        description="Unit of useful work (completed training runs, accepted tokens, ...).",
    )
    peak_gpus: StrictInt = Field(ge=1, description="GPUs the workload needs at its peak.",
                                 json_schema_extra=unit("GPUs"))
    acceptance_metric: str = Field(
        min_length=1, max_length=256, description="How a unit of work is accepted as useful."
    )
    economics: Optional[EconomicsSpec] = Field(
        default=None, description="Unit-cost inputs (support, operations, idle, retries, baseline).")
    goodput: Optional[GoodputSpec] = Field(
        default=None, description="Checkpoint and restart inputs of the goodput model (training).")
