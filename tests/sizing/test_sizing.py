"""The goodput and sizing model (issue 15): Daly's published optima, the Llama 3 failure rate, a hand computation
of prod-aws, a Llama-3-scale sanity check, monotonicity, the spec rules, the warning, the ConfigMap and the unit
cost."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blueprint.cli import main
from blueprint.cost.prices import prices_for
from blueprint.policy.runner import run_policies
from components.sizing import (
    LLAMA3_FAILURES_PER_NODE_HOUR,
    daly_interval,
    fleet_mtbf_hours,
    goodput_model,
    path_times,
    plan_checkpoints,
    wall_time_ratio,
    young_interval,
)
from components.spec import SpecError, parse_spec
from components.spec.workload import DEFAULT_FAILURES_PER_NODE_HOUR
from tests.conftest import offline_run, raw_stack_config, run_spec

FILE = "stacks/Pulumi.prod-aws.yaml"
P = f"{FILE}: gpu-cluster:spec"
MIN, HOUR = 60.0, 3600.0


def errors(spec: Any) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(spec, FILE, provider_region="us-east-1")
    return str(info.value).splitlines()


@pytest.mark.parametrize(("mtbf_min", "published_min"), [(24 * 60, 117), (6 * 60, 57), (15, 9.1)])
def test_daly_reproduces_his_published_optima(mtbf_min: float, published_min: float) -> None:
    """Daly (FGCS 22, 2006), Figs. 3-5: R = 10 min, delta = 5 min, M = 24 h, 6 h, 15 min -> 117, 57, 9.1 min."""
    closed = daly_interval(5 * MIN, mtbf_min * MIN) / MIN
    assert closed == pytest.approx(published_min, abs=0.5)
    # The closed form approximates the minimum of the complete model's wall time, found here by brute force.
    grid = [t / 10 for t in range(10, 100_000)]
    numeric = min(grid, key=lambda t: wall_time_ratio(t * MIN, 5 * MIN, 10 * MIN, mtbf_min * MIN))
    assert numeric == pytest.approx(closed, rel=0.01)


def test_young_is_the_first_order_term() -> None:
    assert young_interval(300, 86_400) == pytest.approx(math.sqrt(2 * 300 * 86_400))
    assert daly_interval(300, 86_400) < young_interval(300, 86_400)  # minus delta dominates the correction here
    assert daly_interval(7200, 1800) == 1800  # delta >= 2M: checkpoint every M


def test_the_default_failure_rate_is_llama3s() -> None:
    """419 unexpected interruptions in 54 days on 2,048 nodes (16,384 H100): 3.09 h between them."""
    assert LLAMA3_FAILURES_PER_NODE_HOUR == 419 / (2048 * 54 * 24)
    assert fleet_mtbf_hours(2048, LLAMA3_FAILURES_PER_NODE_HOUR) == pytest.approx(3.09, abs=0.005)
    assert DEFAULT_FAILURES_PER_NODE_HOUR == LLAMA3_FAILURES_PER_NODE_HOUR  # the spec's default, kept in step


def test_prod_matches_a_hand_computation(tmp_path: Path) -> None:
    """prod-aws: 70B x 14 B, FSx 9,600 GiB x 500 MB/s/TiB, 16 p5 nodes on a 336-hour block, restart 10 min,
    Llama 3 failure rate, idle 0.1, 0.08 runs per ideal GPU-month, 4 runs a month."""
    checkpoint = 70e9 * 14  # 9.8e11 bytes
    fs_bytes_per_s = 9600 / 1024 * 500 * 1e6  # 4,687.5 MB/s
    write = checkpoint / fs_bytes_per_s  # 209.07 s
    mtbf = 1 / (16 * 419 / (2048 * 54 * 24)) * 3600  # 395.91 h in seconds
    restart = 10 * 60 + write  # restart, then read the checkpoint back at the same rate
    x = write / (2 * mtbf)
    interval = math.sqrt(2 * write * mtbf) * (1 + math.sqrt(x) / 3 + x / 9) - write
    goodput = interval / (mtbf * math.exp(restart / mtbf) * (math.exp((interval + write) / mtbf) - 1))
    gpu_hours = 128 * 336
    required = 4 / (0.08 * goodput * (1 - 0.1))

    out = tmp_path / "sizing.json"
    assert main(["sizing", "prod-aws", "--format", "json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["checkpoint_bytes"] == checkpoint
    assert doc["checkpoint_write_s"] == pytest.approx(write)
    assert doc["checkpoint_write_s"] == pytest.approx(209.0667, abs=1e-3)
    assert doc["mtbf_hours"] == pytest.approx(mtbf / 3600) and doc["mtbf_hours"] == pytest.approx(395.914, abs=1e-3)
    assert doc["optimal_interval_s"] == pytest.approx(interval)
    assert doc["goodput"] == pytest.approx(goodput) and doc["goodput"] == pytest.approx(0.98241, abs=1e-5)
    assert doc["gpu_hours_per_month"] == gpu_hours
    # Idle time (10 %) runs nothing; of the running time, 1 - goodput is lost.
    assert doc["gpu_hours_lost_per_month"] == pytest.approx(gpu_hours * (1 - 0.1) * (1 - goodput))
    assert doc["required_gpus"] == pytest.approx(required) and doc["required_gpus"] == pytest.approx(56.55, abs=0.01)
    assert doc["available_gpus"] == pytest.approx(gpu_hours / 730) and doc["covered"] is True
    assert doc["meets_target"] is True and doc["target"] == 0.97
    # The lost GPU-hours cost their share of the GPU group at max size: the block (16 x 336 h at the p5 Capacity
    # Block rate, a stale price) and its nodes' 500 GB volumes for the window's 336 h (gp3 per GB-month).
    prices = prices_for("aws")
    block_rate, gp3 = prices["ec2_capacity_block.p5.48xlarge"].usd, prices["ebs.gp3_storage"].usd
    assert block_rate is not None and gp3 is not None
    gpu_usd = 16 * 336 * block_rate + 16 * 500 * gp3 * 336 / 730
    assert doc["gpu_compute_usd_per_month"] == pytest.approx(gpu_usd) and doc["gpu_compute_price_stale"] is True
    assert doc["lost_usd_per_month"] == pytest.approx(gpu_usd * (1 - 0.1) * (1 - goodput))
    # Storage reaching 97 %: the 125 MB/s/TiB tier needs 14,400 GiB, priced at PERSISTENT_2_125 per GB-month.
    cheapest = doc["storage_options"][0]
    assert (cheapest["mbps_per_tib"], cheapest["capacity_gib"]) == (125, 14_400)
    assert cheapest["monthly_usd"] == pytest.approx(14_400 * prices["fsx_lustre.PERSISTENT_2_125"].usd)
    assert [o["monthly_usd"] for o in doc["storage_options"][1:]] == [None, None, None]  # no price read


def test_the_table_says_the_same(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sizing", "prod-aws"]) == 0
    out = capsys.readouterr().out
    assert "optimal checkpoint interval: every 6.74 h of compute (Daly; Young's first order: 6.78 h)" in out
    assert "expected goodput: 98.24% (target 97.0%: met)" in out
    assert "the node groups give 58.9: covered" in out


def test_a_llama3_scale_run_lands_near_its_reported_effective_training_time() -> None:
    """16,384 GPUs at Llama 3's failure rate, a 405B checkpoint (14 B/param, 5.67 TB) written at Tectonic's
    sustained 2 TB/s (secondary, gpu_facts.yaml), restarting in 10 minutes (an assumption: Daly's example R):
    the paper reports more than 90 % effective training time."""
    mtbf = fleet_mtbf_hours(2048, LLAMA3_FAILURES_PER_NODE_HOUR) * HOUR
    checkpoint = 405e9 * 14
    times = path_times(checkpoint, 2048, "filesystem", 2e12 / 1e6, None, None)
    assert times is not None
    direct = plan_checkpoints(times.write_s, 10 * MIN + times.read_s, mtbf)
    assert 0.90 < direct.goodput < 0.95
    # Tiered: each node writes its 2.8 GB shard to NVMe at 2 GB/s, then drains to the same store.
    staged = path_times(checkpoint, 2048, "tiered", 2e12 / 1e6, 2000, None)
    assert staged is not None and staged.write_s < times.write_s
    tiered = plan_checkpoints(staged.write_s, 10 * MIN + staged.read_s, mtbf, lag_s=staged.drain_s)
    assert tiered.goodput > 0.90


@settings(max_examples=200, deadline=None)
@given(st.floats(1e9, 1e13), st.integers(1, 4096), st.floats(10, 1e5), st.floats(1.01, 10), st.floats(0, 3600),
       st.floats(1e-6, 1e-2))
def test_faster_storage_never_lowers_goodput(checkpoint: float, nodes: int, mbps: float, faster: float,
                                             restart: float, rate: float) -> None:
    mtbf = fleet_mtbf_hours(nodes, rate) * HOUR
    for path in ("filesystem", "tiered"):
        slow = path_times(checkpoint, nodes, path, mbps, 1000.0, None)
        fast = path_times(checkpoint, nodes, path, mbps * faster, 1000.0, None)
        assert slow is not None and fast is not None
        g_slow = plan_checkpoints(slow.write_s, restart + slow.read_s, mtbf, slow.drain_s).goodput
        g_fast = plan_checkpoints(fast.write_s, restart + fast.read_s, mtbf, fast.drain_s).goodput
        assert 0 <= g_slow <= g_fast + 1e-12 <= 1 + 1e-12


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 100_000), st.integers(1, 1000), st.floats(1e-7, 1e-1))
def test_more_nodes_never_lower_the_failure_rate(nodes: int, more: int, rate: float) -> None:
    assert 1 / fleet_mtbf_hours(nodes + more, rate) >= 1 / fleet_mtbf_hours(nodes, rate)


def test_the_checkpoint_policy_reaches_each_teams_jobs() -> None:
    graph = offline_run("prod-aws").graph
    maps = [r for r in graph.of_type("kubernetes:core/v1:ConfigMap") if r.name.endswith("-checkpoint-policy")]
    assert sorted(m.inputs["metadata"]["namespace"] for m in maps) == ["applied", "pretraining", "research"]
    data = maps[0].inputs["data"]
    spec = parse_spec(raw_stack_config("prod-aws")["gpu-cluster:spec"], FILE, provider_region="us-east-1")
    assert data["CHECKPOINT_INTERVAL_SECONDS"] == str(round(goodput_model(spec).plan.interval_s)) == "24273"
    assert data["CHECKPOINT_DIR"] == "/checkpoints" and data["CHECKPOINT_PATH"] == "filesystem"
    assert data["GOODPUT_TARGET"] == "0.9700" and data["STORAGE_REACHING_TARGET"] == ""
    assert maps[0].inputs["metadata"]["labels"]["gpu-cluster/checkpoint-policy"] == "true"


def test_storage_too_slow_warns_and_names_what_would_reach_the_target(prod_spec: dict[str, Any],
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    prod_spec["workload"]["goodput"]["target"] = 0.985
    model = goodput_model(parse_spec(prod_spec, FILE, provider_region="us-east-1"))
    assert model.meets_target is False
    # The smallest capacity increase that reaches it (capacity cannot be given back): the 1000 MB/s/TiB tier.
    least = min(model.options, key=lambda o: (o.capacity_gib, o.mbps_per_tib))
    assert (least.capacity_gib, least.mbps_per_tib) == (9600, 1000) and least.goodput >= 0.985
    run = run_spec(prod_spec)
    maps = [r for r in run.graph.of_type("kubernetes:core/v1:ConfigMap") if r.name.endswith("-checkpoint-policy")]
    assert maps[0].inputs["data"]["STORAGE_REACHING_TARGET"] == least.describe()
    report = run_policies(run.graph)
    found = [v for v in report.violations if v.policy == "checkpoint-storage-reaches-goodput-target"]
    assert len(found) == 1 and least.describe() in found[0].message


def test_tiered_needs_the_nvme_it_stages_on(prod_spec: dict[str, Any]) -> None:
    prod_spec["workload"]["goodput"]["checkpointPath"] = "tiered"
    assert errors(prod_spec) == [
        f"{P}.workload.goodput.nvmeWriteMbpsPerNode: a tiered checkpoint blocks for the local NVMe write: give the "
        "measured MB/s of one node's RAID0 [rule: goodput-inputs]"]
    prod_spec["workload"]["goodput"]["nvmeWriteMbpsPerNode"] = 6000.0
    h100 = next(g for g in prod_spec["aws"]["nodeGroups"] if g["name"] == "h100")
    h100["localNvme"] = "none"
    assert errors(prod_spec) == [
        f"{P}.aws.nodeGroups[h100].localNvme: checkpointPath tiered stages checkpoints on the GPU nodes' RAID0 NVMe, "
        "and p5.48xlarge in 'h100' has localNvme none [rule: tiered-checkpoint-needs-nvme]"]
    h100["localNvme"] = "raid0"
    model = goodput_model(parse_spec(prod_spec, FILE, provider_region="us-east-1"))
    shard = 70e9 * 14 / 16
    assert model.paths["tiered"].write_s == pytest.approx(shard / 6000e6)
    assert model.paths["tiered"].drain_s == pytest.approx(model.paths["filesystem"].write_s)
    assert model.plan.interval_s >= model.paths["tiered"].drain_s


def test_the_bucket_path_needs_its_throughput(prod_spec: dict[str, Any]) -> None:
    prod_spec["workload"]["goodput"]["checkpointPath"] = "bucket"
    assert errors(prod_spec) == [
        f"{P}.workload.goodput.bucketWriteMbps: a checkpoint written to the bucket needs the nodes' measured "
        "aggregate MB/s to it [rule: goodput-inputs]"]


def test_economics_from_goodput_leaves_retries_to_the_model(prod_spec: dict[str, Any]) -> None:
    prod_spec["workload"]["economics"]["retryFraction"] = 0.05
    assert errors(prod_spec) == [
        f"{P}.workload.economics.retryFraction: retryFraction is modelled from workload.goodput when fromGoodput is "
        "true: remove it [rule: economics-from-goodput]"]
    del prod_spec["workload"]["economics"]["retryFraction"]
    prod_spec["workload"]["economics"]["fromGoodput"] = False
    assert errors(prod_spec) == [
        f"{P}.workload.economics.usefulWorkPerGpuMonth: usefulWorkPerGpuMonth is required unless fromGoodput is true "
        "[rule: economics-inputs]",
        f"{P}.workload.economics.retryFraction: retryFraction is required unless fromGoodput is true "
        "[rule: economics-inputs]"]


def test_the_unit_cost_uses_the_modelled_retries(tmp_path: Path) -> None:
    out = tmp_path / "cost.json"
    assert main(["cost", "prod-aws", "--format", "json", "-o", str(out)]) == 0
    unit = json.loads(out.read_text())["unit_cost"]
    assert unit["computed"] and unit["modelled_from_goodput"]
    sizing = tmp_path / "sizing.json"
    assert main(["sizing", "prod-aws", "--format", "json", "-o", str(sizing)]) == 0
    goodput = json.loads(sizing.read_text())["goodput"]
    terms = unit["terms_usd"]
    compute = terms["compute (useful share)"] + terms["idle"] + terms["retries"]
    # Waste splits multiplicatively: idle first, then what the running time loses; nothing counted twice.
    assert terms["retries"] == pytest.approx(compute * 0.9 * (1 - goodput))
    assert terms["idle"] == pytest.approx(compute * 0.1)
    assert terms["compute (useful share)"] == pytest.approx(compute * 0.9 * goodput)
    assert unit["required_gpu_capacity"] == pytest.approx(4 / (0.08 * goodput * 0.9))


def test_sizing_without_goodput_inputs_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sizing", "dev-aws"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: stacks/Pulumi.dev-aws.yaml: the stack has no workload.goodput section (checkpointPath, "
        "restartMinutes, ...)")


def test_the_storage_search_proposes_only_sizes_fsx_accepts(dev_spec: dict[str, Any]) -> None:
    """dev-aws: SCRATCH_2 at 1,200 GiB; larger sizes are multiples of 2,400 GiB (FSx CreateFileSystem)."""
    from components.sizing.plan import _capacities

    assert _capacities(1200)[:4] == [1200, 2400, 4800, 7200]
    assert _capacities(9600)[:3] == [9600, 12000, 14400]
    dev_spec["workload"]["goodput"] = {"checkpointPath": "filesystem", "restartMinutes": 5.0, "target": 0.999}
    model = goodput_model(parse_spec(dev_spec, "stacks/Pulumi.dev-aws.yaml", provider_region="us-west-2"))
    for option in (*model.options, *([model.best_searched] if model.best_searched else [])):
        assert option.capacity_gib == 1200 or option.capacity_gib % 2400 == 0
        assert option.price_key == "fsx_lustre.SCRATCH_2"  # the catalog's key for the scratch rate


def test_a_job_that_cannot_progress_is_said_so_not_sized(prod_spec: dict[str, Any], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A checkpoint far longer than the time between failures: goodput ~ 0, no capacity, no unit cost."""
    prod_spec["workload"]["modelParametersBillions"] = 50_000.0
    prod_spec["workload"]["goodput"]["failuresPerNodeHour"] = 0.5
    model = goodput_model(parse_spec(prod_spec, FILE, provider_region="us-east-1"))
    assert not model.progressing and model.required_gpus is None
    stack = tmp_path / "Pulumi.stuck.yaml"
    stack.write_text(json.dumps({"config": {"aws:region": "us-east-1", "gpu-cluster:spec": prod_spec}}))
    assert main(["sizing", str(stack)]) == 0
    assert "required GPU capacity: none: the job makes no progress" in capsys.readouterr().out
    assert main(["cost", str(stack)]) == 0
    assert "unit cost: not computed (the goodput model gives no useful work" in capsys.readouterr().out
