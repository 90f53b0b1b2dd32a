"""The preview's checkpoint line, the same on every cloud: what one checkpoint of the stack's model costs in time on
its filesystem, from the goodput model when the stack gives its inputs, else from the filesystem's throughput."""

from __future__ import annotations

from components.sizing.plan import SizingError, goodput_model
from components.spec import ClusterSpec
from components.spec.workload import DEFAULT_CHECKPOINT_BYTES_PER_PARAMETER


def checkpoint_lines(spec: ClusterSpec, mbps: float) -> list[str]:
    """``checkpoint of the 70B model: 0.98 TB, filesystem path: blocks 3.5 min, every 6.74 h of compute (Daly) ...``
    with the goodput model; a plain write time at ``mbps`` (the filesystem's MB/s) without it; nothing without a
    filesystem throughput."""
    if not mbps:
        return []
    if spec.workload.goodput is not None:
        try:
            model = goodput_model(spec)
        except SizingError:
            model = None
        if model is not None:
            t = model.paths[model.path]
            interval = model.plan.interval_s
            target = f" (target {model.target:.1%})" if model.target is not None else ""
            return [f"checkpoint of the {spec.workload.model_parameters_billions:g}B model: "
                    f"{model.checkpoint_bytes / 1e12:.2f} TB, {model.path} path: blocks {t.write_s / 60:.1f} min, "
                    f"every {interval / 3600:.2f} h of compute (Daly); fleet MTBF {model.mtbf_hours:,.0f} h; goodput "
                    f"{model.goodput:.2%}{target} (`blueprint sizing`)"]
    ckpt_gb = spec.workload.model_parameters_billions * DEFAULT_CHECKPOINT_BYTES_PER_PARAMETER
    seconds = ckpt_gb * 1000 / mbps
    return [f"checkpoint of the {spec.workload.model_parameters_billions:g}B model: ~{ckpt_gb / 1000:.2f} TB "
            f"({DEFAULT_CHECKPOINT_BYTES_PER_PARAMETER:g} B/param) writes in ~{seconds / 60:.1f} min at full "
            "filesystem throughput"]
