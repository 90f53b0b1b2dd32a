"""What the pull-request author and finance read (issue 22): the cost change at desired and at max size, percentages
only from a meaningful base, one summary table across stacks, the base built from the same stack file at the ref,
totals that say when they are a lower bound, unit cost at the capacity paid for, the checkpoint time on GKE."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from blueprint.cli import main
from blueprint.cost.diff import percent
from blueprint.cost.engine import price_graph
from blueprint.cost.lines import CostLine, CostReport, ResourceCost
from blueprint.cost.unit import compute_at_paid_capacity
from blueprint.graph.model import ResourceGraph
from tests.conftest import ROOT, offline_run


def _graph_file(tmp_path: Path, name: str, doc: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _with_max(graph: ResourceGraph, group: str, maximum: int) -> dict[str, Any]:
    doc = copy.deepcopy(graph.to_dict())
    for res in doc["resources"]:
        if res["name"] == f"nodegroup-{group}-ng":
            res["inputs"]["scalingConfig"]["maxSize"] = maximum
    return doc


def test_raising_max_size_is_a_change_at_max(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """dev-aws's l4 group from max 2 to 4 nodes: nothing changes at desired size, the reach grows by two nodes."""
    graph = offline_run("dev-aws").graph
    base = _graph_file(tmp_path, "base.json", graph.to_dict())
    (group,) = [r for r in graph.of_type("aws:eks/nodeGroup:NodeGroup") if r.name == "nodegroup-l4-ng"]
    before = int(group.inputs["scalingConfig"]["maxSize"])
    new = _graph_file(tmp_path, "new.json", _with_max(graph, "l4", before * 2))
    report_before = price_graph(graph)
    (res,) = [r for r in report_before.resources if r.name == "nodegroup-l4-ng"]
    per_node_at_max = res.monthly_usd_at_max / before
    assert per_node_at_max > 0
    assert main(["cost", "diff", "--base", str(base), str(new), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["diff_monthly_usd"] == 0
    assert doc["diff_monthly_usd_at_max"] == pytest.approx(before * per_node_at_max)
    (changed,) = doc["resources"]
    assert changed["name"] == "nodegroup-l4-ng" and changed["change"] == "changed"
    assert any(line["at_max"] and line["new_quantity"] == 2 * line["previous_quantity"] for line in changed["lines"])
    assert main(["cost", "diff", "--base", str(base), str(new)]) == 0
    text = capsys.readouterr().out
    assert "Monthly cost at desired size will not change; at max size (what the node groups may reach) it will " \
           f"increase by ${before * per_node_at_max:,.2f}" in text
    assert "Monthly cost will not change" not in text


def test_percentages_need_a_meaningful_base() -> None:
    assert percent(100.0, 150.0) == pytest.approx(50.0)
    assert percent(0.0, 754.0) is None  # from nothing: "new"
    assert percent(8.0, 754.0) is None  # +9,327 % says nothing
    assert percent(754.0, 8.0) == pytest.approx(-98.94, abs=0.01)  # a fall to almost nothing is still a percentage


def _combine(tmp_path: Path, capsys: pytest.CaptureFixture[str], *docs: Path) -> str:
    assert main(["cost", "diff", "--combine", *map(str, docs)]) == 0
    return capsys.readouterr().out


def test_several_stacks_give_one_summary_table_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = []
    for stack, group in (("prod-aws", None), ("dev-aws", "l4"), ("prod-gcp", None)):
        graph = offline_run(stack).graph
        base = _graph_file(tmp_path, f"{stack}-base.json", graph.to_dict())
        node = next((r for r in graph.of_type("aws:eks/nodeGroup:NodeGroup") if group and r.name.endswith(
            f"{group}-ng")), None)
        new_doc = _with_max(graph, group, int(node.inputs["scalingConfig"]["maxSize"]) + 2) if node else \
            graph.to_dict()
        new = _graph_file(tmp_path, f"{stack}-new.json", new_doc)
        out = tmp_path / f"{stack}.cost.json"
        assert main(["cost", "diff", "--base", str(base), str(new), "--format", "json", "-o", str(out)]) == 0
        reports.append(out)
    text = _combine(tmp_path, capsys, *reports)
    lines = text.splitlines()
    assert lines[0] == "### Cost preview: 1 of 3 stacks change"
    table = [line for line in lines if line.startswith("| ") and not line.startswith("| ---")]
    assert table[0].startswith("| stack | previous / month | new / month | change | at max size: new")
    rows = [row.split(" | ")[0].lstrip("| ") for row in table[1:4]]
    assert rows == ["dev-aws", "prod-aws", "prod-gcp"]  # the changed stack first, then the unchanged ones
    assert table[2].endswith("| no change | | | |") and table[3].endswith("| no change | | | |")
    assert text.index("| stack |") < text.index("<details><summary><b>dev-aws</b>")
    assert text.count("<details>") == 1  # unchanged stacks are one line, no section
    assert re.search(r"\| `nodegroup-l4-ng` \| g6\.xlarge instance hours \(spot\) \(at max size\) \| [\d,]+ -> [\d,]+ "
                     r"hour \| ", text), text  # each changed line: quantity before -> after, unit price
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["cost", "diff", "--combine", str(bad)]) == 2
    assert "not a `blueprint cost diff --format json` report" in capsys.readouterr().err


def test_a_stack_path_is_built_from_the_same_path_at_the_base_ref(capsys: pytest.CaptureFixture[str],
                                                                  tmp_path: Path) -> None:
    """The base of a stack file is that file at the ref, never the working tree's: a stack file the ref lacks is a
    new stack (everything added); a file outside the repository has no version at a ref."""
    folder = ROOT / ".pytest-new-stack"
    folder.mkdir(exist_ok=True)
    try:
        path = folder / "Pulumi.dev-aws.yaml"
        shutil.copy(ROOT / "stacks" / "Pulumi.dev-aws.yaml", path)
        assert main(["cost", "diff", "--base", "HEAD", str(path.resolve()), "--format", "json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["previous_monthly_usd"] == 0 and doc["new_monthly_usd"] > 0
        assert doc["notes"] == [f"{path.resolve()} is new: HEAD has no such stack file, so everything in it is added"]
        assert all(r["change"] == "added" for r in doc["resources"])
    finally:
        shutil.rmtree(folder)
    outside = tmp_path / "Pulumi.dev-aws.yaml"
    shutil.copy(ROOT / "stacks" / "Pulumi.dev-aws.yaml", outside)
    assert main(["cost", "diff", "--base", "HEAD", str(outside)]) == 2
    assert "is outside the repository" in capsys.readouterr().err


def test_two_stacks_against_a_ref(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "diff", "--base", "HEAD", "dev-aws", "dev-gcp", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [d["stack"] for d in doc["stacks"]] == ["dev-aws", "dev-gcp"]
    assert doc["total"]["new_monthly_usd"] == pytest.approx(sum(d["new_monthly_usd"] for d in doc["stacks"]))


def test_totals_say_when_they_are_a_lower_bound(capsys: pytest.CaptureFixture[str]) -> None:
    from blueprint.cost.render import render_cost_summary

    report = price_graph(offline_run("prod-aws").graph)
    line = CostLine("x instance hours", 730, "hour", None, "unconfirmed", "ec2_on_demand.x", "", "")
    odd = ResourceCost("urn:x", "aws:eks/nodeGroup:NodeGroup", "nodegroup-x-ng", "compute", "", (line,), (line,))
    unpriced = CostReport(report.stack, report.region, (*report.resources, odd), report.usage_not_priced)
    text = render_cost_summary(unpriced)
    assert text.startswith(f"cost: at least ${unpriced.total_monthly_usd:,.2f} a month at desired size")
    assert "730 hour of ec2_on_demand.x (nodegroup-x-ng)" in text
    priced = CostReport(report.stack, report.region, tuple(r for r in report.resources if r.priced_fully), ())
    assert render_cost_summary(priced).startswith(f"cost: ${priced.total_monthly_usd:,.2f} a month")
    # a usage-priced resource without an estimate (a bucket's stored GB) leaves the total a lower bound too
    usage_only = CostReport(report.stack, report.region, priced.resources, (("urn:b", "stored GB and requests"),))
    assert render_cost_summary(usage_only).startswith(f"cost: at least ${priced.total_monthly_usd:,.2f} a month")


def _group(name: str, per_node: float, nodes: tuple[int, int], gpus: int, paid: bool = False,
           one_time: float = 0.0, minimum: int = 0) -> ResourceCost:
    hours = CostLine("hours", 730 * nodes[0], "hour", per_node / 730, "confirmed", f"k.{name}", "", "")
    at_max = CostLine("hours", 730 * nodes[1], "hour", per_node / 730, "confirmed", f"k.{name}", "", "")
    block = (CostLine("block", 1, "hour", one_time, "confirmed", f"b.{name}", "", "", one_time=True),) \
        if one_time else ()
    return ResourceCost(f"urn:{name}", "aws:eks/nodeGroup:NodeGroup", name, "compute", "", (hours, *block),
                        (at_max, *block), nodes=nodes, gpus_per_node=gpus, paid_regardless=paid, min_nodes=minimum)


def test_unit_cost_prices_the_capacity_paid_for() -> None:
    """A group that scales from zero is priced at the nodes the required capacity needs, never at zero; a reserved
    group as reserved; system nodes at desired size; a shortfall is said."""
    system = _group("system", 300.0, (3, 6), 0)
    autoscaled = _group("h100", 40_000.0, (0, 16), 8)
    report = CostReport("s", "r", (system, autoscaled), ())
    compute, paid, short = compute_at_paid_capacity(report, 20.0)  # 20 GPUs: 3 nodes of 8
    assert (paid, short) == (24.0, 0.0) and compute == pytest.approx(3 * 300.0 + 3 * 40_000.0)
    compute, paid, short = compute_at_paid_capacity(report, 200.0)
    assert (paid, short) == (128.0, 72.0) and compute == pytest.approx(900.0 + 16 * 40_000.0)
    floor = _group("l4", 500.0, (2, 8), 1, minimum=2)  # never below 2 nodes: both count even if 1 GPU would do
    compute, paid, short = compute_at_paid_capacity(CostReport("s", "r", (system, floor), ()), 1.0)
    assert (paid, short) == (2.0, 0.0) and compute == pytest.approx(900.0 + 2 * 500.0)
    block = _group("block", 0.0, (0, 16), 8, paid=True, one_time=211_000.0)
    compute, paid, short = compute_at_paid_capacity(CostReport("s", "r", (system, block, autoscaled), ()), 130.0)
    assert paid == 128.0 + 8.0 and compute == pytest.approx(900.0 + 211_000.0 + 40_000.0)


def test_prod_aws_unit_cost_pays_for_its_capacity_block(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "prod-aws", "--format", "json"]) == 0
    unit = json.loads(capsys.readouterr().out)["unit_cost"]
    assert unit["computed"] and unit["paid_gpus"] == 128 and unit["shortfall_gpus"] == 0


def test_the_gke_preview_tells_the_checkpoint_time(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preview", "prod-gcp"]) == 0
    out = capsys.readouterr().out
    storage = out.split("== storage", 1)[1].split("\n== ", 1)[0]
    assert re.search(r"checkpoint of the 70B model: 0\.98 TB, filesystem path: blocks \d+\.\d min, every "
                     r"\d+\.\d\d h of compute \(Daly\)", storage), storage


def test_a_ref_is_built_from_the_repository_root_wherever_the_command_runs(monkeypatch: pytest.MonkeyPatch,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Run from a subdirectory, `git archive` alone would hold only that subdirectory: the base stack would look
    new and the whole stack "added"."""
    monkeypatch.chdir(ROOT / "docs")
    assert main(["cost", "diff", "--base", "HEAD", str(ROOT / "stacks" / "Pulumi.dev-aws.yaml"), "--format",
                 "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["previous_monthly_usd"] > 0 and doc["notes"] == []


def test_sarif_names_the_stack_file_from_the_repository_root(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    monkeypatch.chdir(ROOT / "docs")
    out = tmp_path / "o.sarif"
    assert main(["policy", str(ROOT / "stacks" / "Pulumi.prod-aws.yaml"), "--format", "sarif", "-o", str(out)]) == 0
    run = json.loads(out.read_text())["runs"][0]
    assert run["artifacts"] == [{"location": {"uri": "stacks/Pulumi.prod-aws.yaml", "uriBaseId": "%SRCROOT%"}}]
