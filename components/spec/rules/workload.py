"""Rules of the workload one-pager: the unit-cost inputs must add up."""

from __future__ import annotations

from components.spec.decisions import instance_catalog, serving_node_groups
from components.spec.errors import _Collector
from components.spec.model import ClusterSpec


def _check_workload(spec: ClusterSpec, out: _Collector) -> None:
    _check_goodput(spec, out)
    economics = spec.workload.economics
    if economics is None:
        return
    goodput = spec.workload.goodput
    if economics.from_goodput:
        for key, value in (("usefulWorkPerGpuMonth", economics.useful_work_per_gpu_month),
                           ("retryFraction", economics.retry_fraction)):
            if value is not None:
                out.add(f".workload.economics.{key}", "economics-from-goodput",
                        f"{key} is modelled from workload.goodput when fromGoodput is true: remove it")
        if goodput is None or goodput.ideal_work_per_gpu_month is None:
            out.add(".workload.economics.fromGoodput", "economics-from-goodput",
                    "fromGoodput needs workload.goodput with idealWorkPerGpuMonth (the work of one GPU-month with no "
                    "failure, idle or retry)")
        return
    for key, value in (("usefulWorkPerGpuMonth", economics.useful_work_per_gpu_month),
                       ("retryFraction", economics.retry_fraction)):
        if value is None:
            out.add(f".workload.economics.{key}", "economics-inputs",
                    f"{key} is required unless fromGoodput is true")
    if economics.retry_fraction is not None and economics.idle_fraction + economics.retry_fraction >= 1:
        out.add(".workload.economics", "waste-below-one",
                f"idleFraction ({economics.idle_fraction:g}) + retryFraction ({economics.retry_fraction:g}) must be "
                "below 1: they are shares of the same paid GPU time")
    if economics.baseline_usd_per_unit is not None and economics.baseline_source is None:
        out.add(".workload.economics.baselineSource", "baseline-sourced",
                "a baseline price needs its source and date (model API page, managed-service quote)")


def _check_goodput(spec: ClusterSpec, out: _Collector) -> None:
    """The goodput model's inputs fit the path and the storage the stack builds."""
    goodput = spec.workload.goodput
    if goodput is None:
        return
    where = ".workload.goodput"
    if goodput.checkpoint_path == "tiered" and goodput.nvme_write_mbps_per_node is None:
        out.add(f"{where}.nvmeWriteMbpsPerNode", "goodput-inputs",
                "a tiered checkpoint blocks for the local NVMe write: give the measured MB/s of one node's RAID0")
    if goodput.checkpoint_path == "bucket" and goodput.bucket_write_mbps is None:
        out.add(f"{where}.bucketWriteMbps", "goodput-inputs",
                "a checkpoint written to the bucket needs the nodes' measured aggregate MB/s to it")
    if spec.gcp is not None and goodput.checkpoint_path in ("filesystem", "tiered") \
            and spec.gcp.storage.filesystem is None:
        out.add(f"{where}.checkpointPath", "goodput-path-built",
                f"checkpointPath {goodput.checkpoint_path} needs the shared filesystem (gcp.storage.filesystem)")
    if spec.aws is None:
        return
    if goodput.checkpoint_path in ("filesystem", "tiered") and spec.aws.storage.filesystem is None:
        out.add(f"{where}.checkpointPath", "goodput-path-built",
                f"checkpointPath {goodput.checkpoint_path} needs the shared filesystem (aws.storage.filesystem)")
    if goodput.checkpoint_path == "tiered":
        catalog = instance_catalog(spec)
        serving = serving_node_groups(spec)  # a served model's group writes no checkpoint
        for i, group in enumerate(spec.aws.node_groups):
            facts = catalog.get(group.instance_type)
            if facts is None or not facts.gpu_count or group.name in serving:
                continue
            if group.local_nvme == "none" or not facts.has_local_nvme:
                out.add(f".aws.nodeGroups[{i}].localNvme", "tiered-checkpoint-needs-nvme",
                        f"checkpointPath tiered stages checkpoints on the GPU nodes' RAID0 NVMe, and "
                        f"{group.instance_type} in '{group.name}' "
                        + ("has localNvme none" if group.local_nvme == "none" else "has no confirmed local NVMe"))
