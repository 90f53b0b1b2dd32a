"""The goodput model of a stack: checkpoint size, each write path's time, the fleet's failure rate, the
optimum interval, the goodput, the GPU capacity the seed's formula asks for, and the storage that would reach
the target. Pure: reads the spec and the catalog, so the program, the preview and ``blueprint sizing`` share it.

Units: bytes; MB = 10^6 bytes (FSx and the spec's MB/s); TiB = 1,024 GiB; 730 hours a month.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from components.sizing.goodput import CheckpointPlan, fleet_mtbf_hours, plan_checkpoints
from components.spec import FSX_CAPACITY_STEP_GIB, FSX_THROUGHPUT_TIERS, CapacitySpec, ClusterSpec
from components.spec.decisions import cloud_node_groups, instance_catalog, serving_node_groups

HOURS_PER_MONTH = 730
MB = 1e6
# SCRATCH_2 baseline throughput per TiB: secondary (gpu_facts.yaml storage.fsx_lustre, "up to 200 MB/s per TiB").
SCRATCH_2_MBPS_PER_TIB = 200
# How far the storage search looks: FSx capacity only grows, so from today's size up to this many valid sizes
# more (SSD capacities are 1,200, 2,400, then multiples of 2,400 GiB: components/catalog/fsx.yaml).
MAX_CAPACITY_STEPS = 200
# Below this goodput the job makes no progress worth modelling (every interval is lost to failures).
MIN_GOODPUT = 1e-6


@dataclass(frozen=True)
class PathTimes:
    """One checkpoint's times on a write path, seconds."""

    write_s: float  # the job blocks this long
    drain_s: float  # then it becomes durable this much later (asynchronous drain; 0 when direct)
    read_s: float  # reading it back after a failure


@dataclass(frozen=True)
class StorageOption:
    """A filesystem configuration and the goodput the chosen path would reach on it."""

    deployment_type: str
    capacity_gib: int
    mbps_per_tib: int
    goodput: float

    @property
    def mbps(self) -> float:
        return self.capacity_gib / 1024 * self.mbps_per_tib

    @property
    def price_key(self) -> str:
        """The key of its GB-month price in the price catalog (SCRATCH types have one rate, no tier)."""
        if self.deployment_type == "managed-lustre":
            return f"managed_lustre.tier-{self.mbps_per_tib}"
        if self.deployment_type.startswith("SCRATCH"):
            return f"fsx_lustre.{self.deployment_type}"
        return f"fsx_lustre.{self.deployment_type}_{self.mbps_per_tib}"

    def describe(self) -> str:
        service = "" if self.deployment_type in ("managed-lustre", "filestore", "parallelstore") else "FSx "
        return (f"{service}{self.deployment_type} {self.capacity_gib:,} GiB x {self.mbps_per_tib} MB/s/TiB "
                f"({self.mbps:,.0f} MB/s)")


@dataclass(frozen=True)
class GoodputModel:
    """The model's figures for one stack."""

    checkpoint_bytes: float
    path: str
    paths: dict[str, PathTimes]
    nodes: int
    gpus: int
    gpu_hours_per_month: float  # what the GPU node groups can run in a month (block windows count their hours)
    failures_per_node_hour: float
    mtbf_hours: float
    restart_s: float
    plan: CheckpointPlan
    target: float | None
    filesystem: StorageOption | None  # today's filesystem, when the stack builds it
    options: tuple[StorageOption, ...] = field(default=())  # per throughput tier, the smallest reaching the target
    best_searched: StorageOption | None = None  # the fastest configuration searched, when none reaches the target
    ideal_work_per_gpu_month: float | None = None
    idle_fraction: float = 0.0
    target_work_per_month: float = 0.0

    @property
    def goodput(self) -> float:
        return self.plan.goodput

    @property
    def meets_target(self) -> bool | None:
        return None if self.target is None else self.goodput >= self.target

    @property
    def progressing(self) -> bool:
        """False when failures come faster than the job can checkpoint: no useful work to size with."""
        return self.goodput > MIN_GOODPUT

    @property
    def gpu_hours_lost_per_month(self) -> float:
        """GPU-hours that run jobs but end as no kept work (checkpoint overhead, lost work, restarts); idle
        hours (``idleFraction``) run nothing and are not counted here."""
        return self.gpu_hours_per_month * (1.0 - self.idle_fraction) * (1.0 - self.goodput)

    @property
    def available_gpus(self) -> float:
        """The node groups' monthly GPU time in GPUs running all month."""
        return self.gpu_hours_per_month / HOURS_PER_MONTH

    @property
    def useful_work_per_gpu_month(self) -> float | None:
        """The seed's "useful work per GPU-month after failures, idle and retries"."""
        if self.ideal_work_per_gpu_month is None:
            return None
        return self.ideal_work_per_gpu_month * self.goodput * (1.0 - self.idle_fraction)

    @property
    def required_gpus(self) -> float | None:
        """``target_work_per_month / useful_work_per_gpu_month``: GPUs running all month."""
        useful = self.useful_work_per_gpu_month
        return None if not useful or not self.progressing else self.target_work_per_month / useful

    @property
    def covered(self) -> bool | None:
        required = self.required_gpus
        return None if required is None else required <= self.available_gpus + 1e-9


class SizingError(ValueError):
    """The stack gives no goodput inputs, or they cannot be modelled."""


def _fleet(spec: ClusterSpec) -> tuple[int, int, float]:
    """GPU nodes and GPUs at max size, and the GPU-hours they can run in a month, of the training fleet: the groups a
    served model runs on are not in it (their failures stop no training job; their hours train nothing)."""
    catalog = instance_catalog(spec)
    serving = serving_node_groups(spec)
    nodes = gpus = 0
    hours = 0.0
    for group in cloud_node_groups(spec):
        facts = catalog.get(group.instance_type)
        if facts is None or not facts.gpu_count or group.name in serving:
            continue
        nodes += group.max_size
        gpus += group.max_size * facts.gpu_count
        cap = group.capacity
        window = float(HOURS_PER_MONTH)
        if isinstance(cap, CapacitySpec) and cap.type == "capacity-block" and cap.start and cap.end:
            window = min(HOURS_PER_MONTH, int((cap.end - cap.start).total_seconds()) / 3600)
        hours += group.max_size * facts.gpu_count * window
    return nodes, gpus, hours


def _filesystem(spec: ClusterSpec) -> tuple[StorageOption | None, bool]:
    """Today's filesystem (as a storage option at goodput 0) and whether the stack creates it."""
    if spec.gcp is not None:
        gfs = spec.gcp.storage.filesystem
        if gfs is None:
            return None, False
        # Managed Lustre's tier is its throughput per TiB; Filestore and Parallelstore have no per-TiB figure here.
        return (StorageOption(gfs.type, gfs.capacity_gib, gfs.per_unit_storage_throughput or 0, 0.0),
                gfs.existing is None)
    fs = spec.aws_spec().storage.filesystem
    if fs is None:
        return None, False
    per_tib = fs.per_unit_storage_throughput or (SCRATCH_2_MBPS_PER_TIB if fs.deployment_type == "SCRATCH_2" else 0)
    return StorageOption(fs.deployment_type, fs.capacity_gib, per_tib, 0.0), fs.existing is None


def path_times(checkpoint_bytes: float, nodes: int, path: str, fs_mbps: float | None,
               nvme_mbps_per_node: float | None, bucket_mbps: float | None) -> PathTimes | None:
    """The times of one path, or None when the stack lacks what it needs."""
    def seconds(mbps: float | None) -> float | None:
        return None if not mbps else checkpoint_bytes / (mbps * MB)

    if path == "filesystem":
        t = seconds(fs_mbps)
        return None if t is None else PathTimes(t, 0.0, t)
    if path == "bucket":
        t = seconds(bucket_mbps)
        return None if t is None else PathTimes(t, 0.0, t)
    local = seconds(nvme_mbps_per_node * nodes if nvme_mbps_per_node else None)
    drain = seconds(fs_mbps)
    if local is None or drain is None:
        return None
    return PathTimes(local, drain, drain)


def plan_on_path(times: PathTimes, restart_s: float, mtbf_hours: float) -> CheckpointPlan:
    """The checkpoint plan of one write path: a failure costs the restart plus reading the checkpoint back, and
    an asynchronous drain delays durability (the interval is at least the drain)."""
    return plan_checkpoints(times.write_s, restart_s + times.read_s, mtbf_hours * 3600, lag_s=times.drain_s)


def option_plan(model: GoodputModel, spec: ClusterSpec, option: StorageOption) -> CheckpointPlan | None:
    """The plan the model's path would have on a storage option (what its ``goodput`` was computed from)."""
    gp = spec.workload.goodput
    if gp is None:
        return None
    times = path_times(model.checkpoint_bytes, model.nodes, model.path, option.mbps, gp.nvme_write_mbps_per_node,
                       gp.bucket_write_mbps)
    return None if times is None else plan_on_path(times, model.restart_s, model.mtbf_hours)


def goodput_model(spec: ClusterSpec) -> GoodputModel:
    """The stack's goodput model; :class:`SizingError` when ``workload.goodput`` is missing or unusable."""
    gp = spec.workload.goodput
    if gp is None:
        raise SizingError("the stack has no workload.goodput section (checkpointPath, restartMinutes, ...)")
    nodes, gpus, gpu_hours = _fleet(spec)
    if nodes == 0:
        raise SizingError("the stack has no GPU node group to model")
    checkpoint_bytes = spec.workload.model_parameters_billions * 1e9 * gp.bytes_per_parameter
    fs, fs_built = _filesystem(spec)
    fs_mbps = fs.mbps if fs is not None else None
    paths = {name: t for name in ("filesystem", "tiered", "bucket")
             if (t := path_times(checkpoint_bytes, nodes, name, fs_mbps, gp.nvme_write_mbps_per_node,
                                 gp.bucket_write_mbps)) is not None}
    chosen = paths.get(gp.checkpoint_path)
    if chosen is None:
        raise SizingError(f"checkpointPath {gp.checkpoint_path} cannot be modelled: the stack lacks its storage or "
                          "its measured throughput")
    mtbf_h = fleet_mtbf_hours(nodes, gp.failures_per_node_hour)
    restart_s = gp.restart_minutes * 60

    def plan_on(times: PathTimes) -> CheckpointPlan:
        return plan_on_path(times, restart_s, mtbf_h)

    plan = plan_on(chosen)
    options: list[StorageOption] = []
    best: StorageOption | None = None
    if gp.target is not None and fs is not None and fs_built and gp.checkpoint_path in ("filesystem", "tiered") \
            and fs.deployment_type in FSX_THROUGHPUT_TIERS:
        for tier in FSX_THROUGHPUT_TIERS.get(fs.deployment_type, (fs.mbps_per_tib,)):
            for capacity in _capacities(fs.capacity_gib):
                mbps = capacity / 1024 * tier
                times = path_times(checkpoint_bytes, nodes, gp.checkpoint_path, mbps, gp.nvme_write_mbps_per_node,
                                   gp.bucket_write_mbps)
                if times is None:
                    break
                reached = plan_on(times).goodput
                option = StorageOption(fs.deployment_type, capacity, tier, reached)
                if best is None or reached > best.goodput:
                    best = option
                if reached >= gp.target:
                    options.append(option)
                    break
    econ = spec.workload.economics
    return GoodputModel(
        checkpoint_bytes=checkpoint_bytes, path=gp.checkpoint_path, paths=paths, nodes=nodes, gpus=gpus,
        gpu_hours_per_month=gpu_hours, failures_per_node_hour=gp.failures_per_node_hour, mtbf_hours=mtbf_h,
        restart_s=restart_s, plan=plan, target=gp.target,
        filesystem=StorageOption(fs.deployment_type, fs.capacity_gib, fs.mbps_per_tib, plan.goodput)
        if fs is not None else None,
        options=tuple(options), best_searched=None if options else best,
        ideal_work_per_gpu_month=gp.ideal_work_per_gpu_month,
        idle_fraction=econ.idle_fraction if econ is not None else 0.0,
        target_work_per_month=spec.workload.target_work_per_month,
    )


def _capacities(current_gib: int) -> list[int]:
    """Today's size, then every larger size FSx accepts (multiples of 2,400 GiB), up to the search's end."""
    first = -(-current_gib // FSX_CAPACITY_STEP_GIB) * FSX_CAPACITY_STEP_GIB
    larger = [first + k * FSX_CAPACITY_STEP_GIB for k in range(MAX_CAPACITY_STEPS + 1)]
    return [current_gib, *(c for c in larger if c > current_gib)][:MAX_CAPACITY_STEPS + 1]


def recommended_option(model: GoodputModel) -> StorageOption | None:
    """What the warning names: the option reaching the target with the smallest capacity increase (capacity
    cannot be given back; a throughput tier can be changed either way), then the lowest tier."""
    if not model.options:
        return None
    return min(model.options, key=lambda o: (o.capacity_gib, o.mbps_per_tib))


def storage_warning(model: GoodputModel) -> str | None:
    """The load-time warning when the storage is too slow for the target, naming what would reach it."""
    if model.meets_target is not False:
        return None
    fix = ""
    if (pick := recommended_option(model)) is not None:
        fix = f"; {pick.describe()} would reach {pick.goodput:.2%}"
    elif model.best_searched is not None:
        times = model.paths[model.path]
        best = model.best_searched
        limit = _capacities(model.filesystem.capacity_gib)[-1] if model.filesystem is not None else 0
        fix = (f"; no FSx size (searched up to {limit:,} GiB) or tier reaches it (at best {best.goodput:.2%}, "
               f"{best.describe()}): with a {times.write_s:,.0f} s checkpoint write, a restart of "
               f"{model.plan.restart_s:,.0f} s and a fleet MTBF of {model.mtbf_hours:,.1f} h, "
               "try checkpointPath tiered or a lower target")
    return (f"storage too slow for the goodput target: checkpointPath {model.path} gives {model.goodput:.2%} "
            f"against workload.goodput.target {model.target:.2%}{fix}")


def finite(value: float) -> float | None:
    """JSON-safe: infinities become null."""
    return None if math.isinf(value) or math.isnan(value) else value


def stack_checkpoint_policy(spec: ClusterSpec) -> dict[str, str] | None:
    """The goodput model's figures for the teams' jobs (the checkpoint-policy ConfigMap), when the stack gives its
    inputs; the checkpoint directory is the shared filesystem's mount path unless checkpoints go to the bucket."""
    if spec.workload.goodput is None:
        return None
    try:
        model = goodput_model(spec)
    except SizingError:
        return None
    fs = spec.gcp.storage.filesystem if spec.gcp is not None else spec.aws_spec().storage.filesystem
    return checkpoint_policy_data(model, fs.mount_path if fs is not None and model.path != "bucket" else None)


def allowed_write_seconds(model: GoodputModel) -> float:
    """The longest a blocking checkpoint write may take and the modelled goodput still reach the target: the write
    time at which Daly's optimum plan (the same restart, read-back, drain and fleet MTBF) gives exactly the target,
    found by bisection (goodput falls as the write time grows). Without a target, or when the modelled write already
    misses it, the modelled write time itself."""
    plan = model.plan
    write = plan.delta_s
    if model.target is None or not model.meets_target or math.isinf(plan.mtbf_s):
        return write

    def goodput(delta: float) -> float:
        return plan_checkpoints(delta, plan.restart_s, plan.mtbf_s, lag_s=plan.lag_s).goodput

    low, high = write, write
    while goodput(high) >= model.target and high < plan.mtbf_s:
        low, high = high, high * 2
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if goodput(mid) >= model.target else (low, mid)
    return low


def checkpoint_policy_data(model: GoodputModel, checkpoint_dir: str | None) -> dict[str, str]:
    """What a team's jobs read from the ``checkpoint-policy`` ConfigMap (environment variables): the interval, the
    path, the figures of the goodput model, the write time it assumes and the longest write that still meets the
    target (the checkpoint-duration alert's threshold)."""
    interval = finite(model.plan.interval_s)
    pick = recommended_option(model)
    recommended = pick.describe() if pick is not None and model.meets_target is False else ""
    data = {
        "CHECKPOINT_WRITE_SECONDS": f"{model.plan.delta_s:.0f}",
        "CHECKPOINT_WRITE_ALLOWED_SECONDS": f"{allowed_write_seconds(model):.0f}",
        "CHECKPOINT_INTERVAL_SECONDS": "" if interval is None else str(round(interval)),
        "CHECKPOINT_PATH": model.path,
        # What an interruption costs besides the work since the last checkpoint: the restart and the read-back (the
        # pull-request comment's GPU-hours at risk of a node roll read it with the interval).
        "RESTART_SECONDS": f"{model.plan.restart_s:.0f}",
        "FLEET_MTBF_HOURS": "" if finite(model.mtbf_hours) is None else f"{model.mtbf_hours:.1f}",
        "GOODPUT_MODELLED": f"{model.goodput:.4f}",
        "GOODPUT_TARGET": "" if model.target is None else f"{model.target:.4f}",
        "STORAGE_REACHING_TARGET": recommended,
    }
    if checkpoint_dir:
        data["CHECKPOINT_DIR"] = checkpoint_dir
    return data


def spec_warnings(spec: ClusterSpec) -> list[str]:
    """Load-time warnings of the goodput model (not errors: the stack can still be built)."""
    if spec.workload.goodput is None:
        return []
    try:
        warning = storage_warning(goodput_model(spec))
    except SizingError as err:
        return [f"gpu-cluster:spec.workload.goodput: not modelled: {err}"]
    return [f"gpu-cluster:spec.workload.goodput.target: {warning}"] if warning else []
