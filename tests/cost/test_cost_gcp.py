"""The cost engine on GCP graphs: totals equal a hand computation from prices_gcp.yaml, a specific reservation is
paid at its reach at the on-demand rate, Spot uses the Spot price, flex-start stays unpriced (never zero, never
on-demand), every priced line carries its source, date and status, and `cost diff` works between GCP graphs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from blueprint.cli import main
from blueprint.clouds.gcp.pricing import gke_pool_size
from blueprint.cost.engine import price_graph
from blueprint.cost.lines import CostReport, ResourceCost
from blueprint.cost.prices import prices_for
from blueprint.cost.render import render_cost_table
from blueprint.graph.model import ResourceGraph
from tests.conftest import offline_run, raw_stack_config, run_spec

H = 730  # hours a month (the engine's HOURS_PER_MONTH)


def usd(key: str) -> float:
    """A unit price of the shipped catalog (prices_gcp.yaml, us-central1): the hand computations multiply these."""
    price = prices_for("gcp")[key]
    assert price.usd is not None, f"{key}: no price read"
    return price.usd


A3_MEGA = usd("compute_on_demand.a3-megagpu-8g")  # stale: skypilot snapshot, excludes the bundled Local SSD
N2_16 = usd("compute_on_demand.n2-standard-16")  # secondary
E2_4 = usd("compute_on_demand.e2-standard-4")  # secondary
G2_8_SPOT = usd("compute_spot.g2-standard-8")  # stale (every Spot price is)
G2_8 = usd("compute_on_demand.g2-standard-8")  # secondary: prod's served model's l4 pool
PD_BALANCED = usd("persistent_disk.pd-balanced")  # per GiB-month
LOCAL_SSD = usd("local_ssd.capacity")  # per GiB-month
GKE_FEE = usd("gke.cluster_fee")  # per cluster-hour
NAT_VM_HOUR, NAT_IP_HOUR = usd("cloud_nat.gateway_vm_hour"), usd("cloud_nat.external_ip_hour")  # up to 32 VMs
KMS_VERSION = usd("kms.key_version")  # per active SOFTWARE version a month
GCS_STANDARD, CLASS_A, CLASS_B, NAT_GIB = (usd("gcs.standard_regional_storage"), usd("gcs.class_a_operations"),
                                           usd("gcs.class_b_operations"), usd("cloud_nat.data_processed"))


@pytest.fixture(scope="module")
def prod() -> ResourceGraph:
    return offline_run("prod-gcp").graph


@pytest.fixture(scope="module")
def dev() -> ResourceGraph:
    return offline_run("dev-gcp").graph


def resource(report: CostReport, name: str) -> ResourceCost:
    return next(r for r in report.resources if r.name == name)


def mutated(graph: ResourceGraph, name: str, change: Any) -> ResourceGraph:
    doc = copy.deepcopy(graph.to_dict())
    for res in doc["resources"]:
        if res["name"] == name:
            change(res["inputs"])
    return ResourceGraph.from_dict(doc)


def test_prod_gcp_totals_match_a_hand_computation(prod: ResourceGraph) -> None:
    # h100: 16 a3-megagpu-8g on the specific reservation a3mega-prod-16, paid at the on-demand rate whether they
    # run or not (static pool: 16 at both sizes), 200 GiB pd-balanced boot disks each, and the bundled 16 x 375 GiB
    # Local SSD per node, which the a3-megagpu-8g price read excludes (held, and billed, with the reserved VMs).
    h100 = 16 * H * A3_MEGA + 16 * 200 * PD_BALANCED + 16 * 16 * 375 * LOCAL_SSD
    system_now, system_max = 3 * H * N2_16 + 3 * 200 * PD_BALANCED, 6 * H * N2_16 + 6 * 200 * PD_BALANCED
    cpu = 2 * H * N2_16 + 2 * 200 * PD_BALANCED  # the teams' cpu pool, 2 nodes at a fixed size
    # The served model's l4 pool, autoscaled 2..4 with its replicas (KEDA).
    serving_now, serving_max = 2 * H * G2_8 + 2 * 200 * PD_BALANCED, 4 * H * G2_8 + 4 * 200 * PD_BALANCED
    fee = H * GKE_FEE  # regional cluster: no free-tier credit
    kms = 3 * KMS_VERSION  # data, disks, secrets: 1 active version each
    # Cloud NAT: every node uses it: 16 + 3 + 2 + 2 = 23 VMs at desired, 16 + 6 + 2 + 4 = 28 at max (under 32: per
    # VM-hour), one auto-allocated address (28 VMs x 1,024 min ports < 64,512 ports of one address).
    nat_now, nat_max = 23 * H * NAT_VM_HOUR + H * NAT_IP_HOUR, 28 * H * NAT_VM_HOUR + H * NAT_IP_HOUR
    budgets = 4 * (H / 24) * 0.0  # cluster + 3 teams; budgets have no charge
    report = price_graph(prod)
    assert report.total_monthly_usd == pytest.approx(
        h100 + system_now + cpu + serving_now + fee + kms + nat_now + budgets)
    assert report.total_monthly_usd_at_max == pytest.approx(
        h100 + system_max + cpu + serving_max + fee + kms + nat_max + budgets)
    assert report.region == "us-central1" and report.notes == ()
    assert report.unpriced == ["managed_lustre.tier-500"]
    assert report.stale_prices == ["compute_on_demand.a3-megagpu-8g"]
    lustre = resource(report, "storage-lustre")
    assert [(c.quantity, c.price_key, c.cost_usd) for c in lustre.components] == [
        (18000, "managed_lustre.tier-500", None)]
    assert not lustre.priced_fully
    # The buckets (checkpoints, data) and the NAT's traffic wait for a usage file; the cluster's logs and metrics
    # have no quantity.
    assert sorted(what for _, what in report.usage_not_priced) == [
        "Cloud Logging GiB ingested and Managed Prometheus samples (no usage quantity or price read)",
        "GiB processed", "stored GiB and operations", "stored GiB and operations"]


def test_the_reservation_pool_costs_its_full_count_at_on_demand_rates(prod: ResourceGraph) -> None:
    cost = resource(price_graph(prod), "nodepool-h100-pool")
    hours, disks, ssd = cost.components
    assert (hours.quantity, hours.price_key, hours.unit_price_usd) == (16 * H, "compute_on_demand.a3-megagpu-8g",
                                                                       A3_MEGA)
    assert (disks.quantity, disks.price_key) == (16 * 200, "persistent_disk.pd-balanced")
    assert (ssd.quantity, ssd.price_key, ssd.unit_price_usd) == (16 * 16 * 375, "local_ssd.capacity", LOCAL_SSD)
    assert "billed at the on-demand rate whether VMs run or not" in cost.note
    assert "committed-use discount" in cost.note
    # Kueue nominal quotas 64 / 48 / 16 GPUs split the pool's cost between the teams.
    assert dict(cost.team_shares) == pytest.approx({"research": 0.5, "pretraining": 0.375, "applied": 0.125})


def test_an_autoscaled_reservation_pool_is_paid_at_its_reach_but_disks_only_on_running_nodes(
        prod: ResourceGraph) -> None:
    def autoscale(inputs: dict[str, Any]) -> None:
        del inputs["nodeCount"]
        inputs["initialNodeCount"] = 8
        inputs["autoscaling"] = {"totalMinNodeCount": 8, "totalMaxNodeCount": 16, "locationPolicy": "ANY"}

    cost = resource(price_graph(mutated(prod, "nodepool-h100-pool", autoscale)), "nodepool-h100-pool")
    assert [c.quantity for c in cost.components] == [16 * H, 8 * 200, 16 * 16 * 375]
    assert [c.quantity for c in cost.components_at_max] == [16 * H, 16 * 200, 16 * 16 * 375]


def test_dev_gcp_spot_pool_at_zero_desired_and_two_max(dev: ResourceGraph) -> None:
    fee, kms = H * GKE_FEE, 3 * KMS_VERSION  # zonal cluster: the free tier may cover the fee; not subtracted
    system_now, system_max = 1 * H * E2_4 + 1 * 200 * PD_BALANCED, 2 * H * E2_4 + 2 * 200 * PD_BALANCED
    l4_max = 2 * H * G2_8_SPOT + 2 * 200 * PD_BALANCED  # 0 nodes at desired
    nat_now, nat_max = 1 * H * NAT_VM_HOUR + H * NAT_IP_HOUR, 4 * H * NAT_VM_HOUR + H * NAT_IP_HOUR
    report = price_graph(dev)
    assert report.total_monthly_usd == pytest.approx(system_now + fee + kms + nat_now)
    assert report.total_monthly_usd_at_max == pytest.approx(system_max + l4_max + fee + kms + nat_max)
    l4 = resource(report, "nodepool-l4-pool")
    assert [(c.quantity, c.price_key) for c in l4.components_at_max] == [
        (2 * H, "compute_spot.g2-standard-8"), (2 * 200, "persistent_disk.pd-balanced")]
    assert l4.monthly_usd == 0.0 and l4.priced_fully
    assert report.unpriced == [] and report.stale_prices == ["compute_spot.g2-standard-8"]
    assert "free tier" in resource(report, "control-plane-gke").note


def test_a_flex_start_pool_is_bounded_by_on_demand_never_zero(tmp_path: Path) -> None:
    """Issue 36: no flex-start figure was read (prices_gcp.yaml says what was looked for), and Google discounts
    flex-start from on-demand, so the VM hours are priced at the on-demand rate as an upper bound and say so, instead
    of counting $0 of a 16-node pool's reach."""
    from blueprint.cost.prices import prices_for

    spec = copy.deepcopy(raw_stack_config("prod-gcp")["gpu-cluster:spec"])
    spec["gcp"]["nodePools"][1].update(minSize=0, desiredSize=0, capacity={"type": "flex-start", "maxRunHours": 72})
    graph = run_spec(spec, "prod-gcp").graph
    report = price_graph(graph)
    cost = resource(report, "nodepool-h100-pool")
    hours = cost.components_at_max[0]
    on_demand = prices_for("gcp")["compute_on_demand.a3-megagpu-8g"].usd
    assert on_demand == 92.21427 and not prices_for("gcp")["compute_flex_start.a3-megagpu-8g"].known
    assert (hours.quantity, hours.price_key, hours.unit_price_usd) == (
        16 * H, "compute_flex_start.a3-megagpu-8g", on_demand)
    assert hours.cost_usd == pytest.approx(16 * H * 92.21427)
    assert hours.bound == "flex-start price not read: bounded by on-demand $92.2143/h"
    assert report.bounded == ["compute_flex_start.a3-megagpu-8g"] and cost.priced_fully
    assert "compute_flex_start.a3-megagpu-8g" not in report.unpriced
    assert cost.monthly_usd_at_max == pytest.approx(16 * H * 92.21427 + 16 * 200 * PD_BALANCED
                                                    + 16 * 16 * 375 * LOCAL_SSD)
    path = tmp_path / "g.json"
    path.write_text(graph.to_json())
    out = tmp_path / "c.json"
    assert main(["cost", str(path), "--format", "json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    pool = next(r for r in doc["resources"] if r["urn"].endswith("::nodepool-h100-pool"))
    assert pool["components_at_max"][0]["monthly_usd"] == pytest.approx(16 * H * 92.21427)
    assert pool["components_at_max"][0]["bound"] == hours.bound
    assert doc["bounded"] == [f"compute_flex_start.a3-megagpu-8g (nodepool-h100-pool): {hours.bound}"]
    assert main(["cost", str(path)]) == 0


def test_a_price_that_includes_the_bundled_local_ssd_gets_no_local_ssd_line() -> None:
    spec = copy.deepcopy(raw_stack_config("prod-gcp")["gpu-cluster:spec"])
    spec["gcp"]["nodePools"][1].update(machineType="a3-highgpu-8g", capacity={"type": "spot"})
    spec["acceptance"] = {"enabled": False}  # not built for TCPX pools (rule acceptance-fabric-built)
    report = price_graph(run_spec(spec, "prod-gcp").graph)
    spot = resource(report, "nodepool-h100-pool")
    # the Spot price has no SSD in it
    assert [c.price_key for c in spot.components_at_max] == [
        "compute_spot.a3-highgpu-8g", "persistent_disk.pd-balanced", "local_ssd.capacity"]
    spec["gcp"]["nodePools"][1]["capacity"] = {"type": "on-demand"}
    report = price_graph(run_spec(spec, "prod-gcp").graph)
    on_demand = resource(report, "nodepool-h100-pool")
    assert [c.price_key for c in on_demand.components_at_max] == ["compute_on_demand.a3-highgpu-8g",
                                                                  "persistent_disk.pd-balanced"]
    assert "includes its bundled Local SSD (16 x 375 GiB)" in on_demand.note


@pytest.mark.parametrize("stack_name", ["prod-gcp", "dev-gcp"])
def test_every_priced_line_carries_source_date_and_status(stack_name: str, tmp_path: Path) -> None:
    out = tmp_path / "cost.json"
    assert main(["cost", stack_name, "--format", "json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    lines = [c for r in doc["resources"] for c in r["components"] + r["components_at_max"]]
    assert len(lines) > 10
    for line in lines:
        if line["unit_price_usd"] is None:
            assert line["cost_usd"] is None and line["price_status"] == "unconfirmed"
        else:
            assert line["price_source"].strip() and line["price_as_of"].strip()
            assert line["price_status"] in ("confirmed", "secondary", "stale")
            assert line["cost_usd"] == pytest.approx(line["quantity"] * line["unit_price_usd"])
    stale = sorted({c["price_key"] for c in lines if c["price_status"] == "stale"})
    assert stale and doc["stale_prices"] == stale
    assert {c["price_key"].split(".")[0] for c in lines} <= {
        "compute_on_demand", "compute_spot", "compute_flex_start", "persistent_disk", "local_ssd", "gke",
        "managed_lustre", "filestore", "parallelstore", "gcs", "cloud_nat", "kms", "billing"}


def test_stale_and_unknown_gcp_prices_are_flagged_in_the_table(prod: ResourceGraph) -> None:
    text = render_cost_table(price_graph(prod))
    assert (f"a3-megagpu-8g VM hours (specific reservation): 11,680 hour x ${A3_MEGA} = ${11680 * A3_MEGA:,.2f}  "
            "[stale price]") in text
    assert f"Local SSD (16 x 375 GiB per node): 96,000 GB-month x ${LOCAL_SSD} = ${96000 * LOCAL_SSD:,.2f}\n" in text
    assert ("Managed Lustre tier-500 (500 MB/s per TiB) capacity: 18,000 GB-month x ? = no price  "
            "[no price: unconfirmed]") in text
    assert "not in the total (no price read): managed_lustre.tier-500" in text
    assert "budget days: 30.4167 budget-day x $0.0 = $0.00" in text


def test_prices_are_for_us_central1_and_another_region_says_so(prod: ResourceGraph) -> None:
    def move(inputs: dict[str, Any]) -> None:
        inputs["region"] = "europe-west4"

    doc = copy.deepcopy(prod.to_dict())
    for res in doc["resources"]:
        if res["type"] == "pulumi:providers:gcp":
            move(res["inputs"])
    report = price_graph(ResourceGraph.from_dict(doc))
    assert report.region == "europe-west4"
    assert report.notes == ("some prices are list prices of us-central1; this stack is in europe-west4",)


def test_usage_file_prices_the_bucket_and_nat_traffic(tmp_path: Path) -> None:
    usage = tmp_path / "u.yaml"
    usage.write_text("version: 1\nresources:\n"
                     "  storage-checkpoints: {storageGB: 50000, putRequests: 200000, getRequests: 3000000}\n"
                     "  storage-bucket-data: {storageGB: 120000, getRequests: 9000000}\n"
                     "  network-nat: {processedGB: 2000}\n")
    out = tmp_path / "c.json"
    assert main(["cost", "prod-gcp", "--usage", str(usage), "--format", "json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    bucket = 50000 * GCS_STANDARD + 200 * CLASS_A + 3000 * CLASS_B + 120000 * GCS_STANDARD + 9000 * CLASS_B
    assert doc["total_monthly_usd"] == pytest.approx(price_graph(offline_run("prod-gcp").graph).total_monthly_usd
                                                     + bucket + 2000 * NAT_GIB)
    checkpoints = next(r for r in doc["resources"] if r["urn"].endswith("::storage-checkpoints"))
    assert [(c["quantity"], c["price_key"]) for c in checkpoints["components"]] == [
        (50000, "gcs.standard_regional_storage"), (200, "gcs.class_a_operations"), (3000, "gcs.class_b_operations")]
    assert "versioning on" in checkpoints["note"]
    assert [u["depends_on"] for u in doc["usage_not_priced"]] == [
        "Cloud Logging GiB ingested and Managed Prometheus samples (no usage quantity or price read)"]


def test_a_usage_quantity_a_gcp_type_does_not_have_is_refused(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    usage = tmp_path / "u.yaml"
    usage.write_text("version: 1\nresources: {network-nat: {internetEgressGB: 5}}\n")
    assert main(["cost", "prod-gcp", "--usage", str(usage)]) == 2
    assert ("resources.network-nat.internetEgressGB: not a usage of gcp:compute/routerNat:RouterNat (its quantities: "
            "processedGB) [rule: usage-field]") in capsys.readouterr().err


def test_node_counts_are_per_zone_and_autoscaling_totals_are_not() -> None:
    assert gke_pool_size({"nodeCount": 2, "nodeLocations": ["us-central1-a", "us-central1-b"]}).maximum == 4
    size = gke_pool_size({"initialNodeCount": 2, "nodeLocations": ["a", "b", "c"],
                          "autoscaling": {"totalMinNodeCount": 0, "totalMaxNodeCount": 5}})
    assert (size.desired, size.maximum) == (5, 5)
    size = gke_pool_size({"initialNodeCount": 1, "nodeLocations": ["a", "b"], "autoscaling": {"maxNodeCount": 3}})
    assert (size.desired, size.maximum) == (2, 6)
    assert "one zone" in gke_pool_size({"nodeCount": 1, "location": "us-central1"}).note


def test_cost_diff_between_gcp_graphs_shows_the_delta(prod: ResourceGraph, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    def double_max(inputs: dict[str, Any]) -> None:  # the reserved pool may grow to 32: all 32 are paid for
        del inputs["nodeCount"]
        inputs["initialNodeCount"] = 16
        inputs["autoscaling"] = {"totalMinNodeCount": 16, "totalMaxNodeCount": 32, "locationPolicy": "ANY"}

    base, new = tmp_path / "base.json", tmp_path / "new.json"
    base.write_text(prod.to_json())
    new.write_text(mutated(prod, "nodepool-h100-pool", double_max).to_json())
    # 16 more reserved a3-megagpu-8g and their Local SSD (held with the VM); disks and NAT follow the running nodes
    delta = 16 * H * A3_MEGA + 16 * 16 * 375 * LOCAL_SSD
    assert main(["cost", "diff", "--base", str(base), str(new), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["diff_monthly_usd"] == pytest.approx(delta)
    assert [(r["change"], r["urn"].rsplit("::", 1)[1]) for r in doc["resources"]] == [
        ("changed", "nodepool-h100-pool"), ("changed", "network-nat")]  # by URN; the NAT's VMs at max changed
    assert doc["unpriced_changes"] == []  # every line of the changed pool has a price
    assert "compute_on_demand.a3-megagpu-8g" in doc["stale_prices"]
    assert main(["cost", "diff", "--base", str(base), str(new)]) == 0
    text = capsys.readouterr().out
    pct = 100 * delta / price_graph(prod).total_monthly_usd
    assert f"**Monthly cost at desired size will increase by ${delta:,.2f} (+{pct:.1f}%); at max size" in text
    assert "Not counted" not in text  # the Local SSD now has a price
    assert "| `nodepool-h100-pool` | changed | " in text


def test_aws_graphs_still_use_the_aws_catalog() -> None:
    report = price_graph(offline_run("prod-aws").graph)
    assert {line.price_key.split(".")[0] for line in report.lines()} <= {
        "ec2_on_demand", "ec2_spot", "ec2_capacity_block", "ebs", "fsx_lustre", "eks", "vpc", "kms", "budgets", "s3",
        "cloudwatch_logs"}


def test_preview_shows_the_gcp_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preview", "dev-gcp"]) == 0
    out = capsys.readouterr().out
    report = price_graph(offline_run("dev-gcp").graph)
    assert report.total_monthly_usd > 0
    assert report.usage_not_priced  # NAT traffic and bucket storage have no usage estimate in dev: a lower bound
    assert (f"cost: at least ${report.total_monthly_usd:,.2f} a month at desired size, "
            f"at least ${report.total_monthly_usd_at_max:,.2f} at max size (USD; ") in out
    assert "  stale prices: compute_spot.g2-standard-8" in out
