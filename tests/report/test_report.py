"""``blueprint report`` (issue 26): one self-contained HTML page per stack whose figures are the commands' own: the
cost of ``blueprint cost``, the goodput of ``blueprint sizing``, the Capacity Block steps of the preview; every node
group and the filesystem in the diagram; every policy finding linked to its resource's node. How a person sees the
page (in a browser) is tested in ``tests/report/test_report_browser.py``."""

from __future__ import annotations

import copy
import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

from blueprint.graph.model import ResourceGraph
from blueprint.report.diagram import build_diagram
from tests.conftest import SHIPPED_STACKS, offline_run, stack
from tests.report.report_pages import cost_json, report_page, run_cli

SVG_ID = re.compile(r'<g id="([^"]+)" class="(?:node|cluster)')


def _page(target: str) -> str:
    return report_page(target).read_text(encoding="utf-8")


def _attrs(tag: str) -> dict[str, str]:
    return {k: html.unescape(v) for k, v in re.findall(r'([\w-]+)="([^"]*)"', tag)}


def _section(page: str, section_id: str) -> dict[str, str]:
    match = re.search(rf'<section id="{section_id}"[^>]*>', page)
    assert match is not None, f"no section {section_id}"
    return _attrs(match.group(0))


@pytest.mark.parametrize("name", SHIPPED_STACKS)
def test_the_page_is_self_contained(name: str) -> None:
    """Opens offline: no script, no stylesheet or font link, nothing fetched; the Content-Security-Policy refuses
    any load, so a slip shows in the browser's console (tests/report/test_report_browser.py reads it)."""
    page = _page(name)
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page.lower() and "<link" not in page.lower() and "@import" not in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    fetched = [m for m in re.findall(r'\b(?:src|href)="([^"]*)"', page) if not m.startswith(("#", "data:"))]
    assert fetched == []
    assert not re.search(r"url\((?!#)", page)
    assert page.count("<svg") >= 2  # the diagram and the cost chart at least, inline


@pytest.mark.parametrize("name", SHIPPED_STACKS)
def test_the_diagram_draws_every_node_group_and_the_filesystem(name: str) -> None:
    """Each node group (pool) and the shared filesystem is a node of the diagram, found by its id and its name."""
    page = _page(name)
    graph = offline_run(name).graph
    spec = stack(name).spec
    groups = [(r.name, str(r.inputs.get("nodeGroupName") or r.inputs.get("name")))
              for t in ("aws:eks/nodeGroup:NodeGroup", "gcp:container/nodePool:NodePool") for r in graph.of_type(t)]
    assert groups
    for logical, shown in groups:
        block = _node_block(page, f"n-{logical}")
        assert f">{shown}<" in block, f"{shown} not in its node"
    filesystems = [str((r.inputs.get("tags") or {}).get("Name") or r.inputs.get("instanceId"))
                   for t in ("aws:fsx/lustreFileSystem:LustreFileSystem", "gcp:lustre/instance:Instance")
                   for r in graph.of_type(t)]
    if spec.cloud == "aws" and (fs := spec.aws_spec().storage.filesystem) is not None and fs.existing is not None:
        filesystems.append(fs.existing.file_system_id)
    has_fs = (spec.aws_spec().storage.filesystem if spec.cloud == "aws" else spec.gcp_spec().storage.filesystem)
    assert len(filesystems) == (1 if has_fs is not None else 0)
    for fs_name in filesystems:
        assert f">{fs_name}<" in page, f"the filesystem {fs_name} is not in the diagram"


def _node_block(page: str, node_id: str) -> str:
    start = page.find(f'<g id="{node_id}" class="node')
    assert start >= 0, f"no node {node_id} in the diagram"
    return page[start:page.index("</g>", start)]


@pytest.mark.parametrize("name", ["prod-aws", "prod-gcp", "prod-aws-slurm", "dev-gcp-slurm"])
def test_the_diagram_shows_reserved_capacity_teams_and_slurm(name: str) -> None:
    page = _page(name)
    spec = stack(name).spec
    assert "RESERVED" in page or (spec.cloud == "gcp" and not any(
        p.capacity.type == "reservation" for p in spec.gcp_spec().node_pools))
    for team in spec.teams:
        assert f">team {team.name}<" in page
    if spec.scheduler is not None and spec.scheduler.slurm is not None:
        for part in spec.scheduler.slurm.partitions:
            assert f">partition {part.name}<" in page
    if name == "prod-aws":
        assert "window 2027-01-04 11:30 -&gt; 2027-01-18 11:30 UTC, 16 instances" in page
        assert "EFA 32 of 32 interfaces per node" in page


@pytest.mark.parametrize("name", SHIPPED_STACKS)
def test_every_resource_has_a_place_in_the_diagram(name: str) -> None:
    """What a finding links to exists in the drawn SVG, for every resource of the graph."""
    graph = offline_run(name).graph
    diagram = build_diagram(graph, stack(name).spec)
    drawn = set(SVG_ID.findall(_page(name)))
    assert {n.id for n in diagram.nodes} <= drawn
    for res in graph.resources:
        assert diagram.anchor_of(res.urn) in drawn, res.urn


def _close(a: float, b: float) -> bool:
    return abs(a - b) < 0.005 + 1e-9 * abs(b)


@pytest.mark.parametrize("name", SHIPPED_STACKS)
def test_the_cost_figures_are_blueprint_costs(name: str) -> None:
    """Totals, planes and teams of the page (data attributes and the chart's own text) equal `blueprint cost`'s."""
    page = _page(name)
    doc = cost_json(name)
    cost = _section(page, "cost")
    assert _close(float(cost["data-total-monthly-usd"]), doc["total_monthly_usd"])
    assert _close(float(cost["data-total-monthly-usd-at-max"]), doc["total_monthly_usd_at_max"])
    assert _close(float(cost["data-total-one-time-usd"]), doc["total_one_time_usd"])
    assert json.loads(cost["data-unpriced"]) == doc["unpriced"]
    assert json.loads(cost["data-stale"]) == doc["stale_prices"]
    planes: dict[str, list[float]] = {}
    for res in doc["resources"]:
        row = planes.setdefault(res["plane"], [0.0, 0.0, 0.0])
        row[0] += res["monthly_usd"]
        row[1] += res["monthly_usd_at_max"]
        row[2] += res["one_time_usd"]
    shown = {a["data-plane"]: a for a in map(_attrs, re.findall(r"<tr data-plane=[^>]*>", page))}
    assert set(planes) <= set(shown)
    for plane, (desired, at_max, once) in planes.items():
        assert _close(float(shown[plane]["data-monthly-usd"]), desired)
        assert _close(float(shown[plane]["data-monthly-usd-at-max"]), at_max)
        assert _close(float(shown[plane]["data-one-time-usd"]), once)
    teams = {a["data-team"]: a for a in map(_attrs, re.findall(r"<tr data-team=[^>]*>", page))}
    assert set(teams) == set(doc["by_team_monthly_usd"])
    for team, usd in doc["by_team_monthly_usd"].items():
        assert _close(float(teams[team]["data-monthly-usd"]), usd)
    for team, usd in doc["by_team_one_time_usd"].items():
        assert _close(float(teams[team]["data-one-time-usd"]), usd)
    # The chart's own text states the totals, as the cost table does.
    chart = page[page.index('<section id="cost"'):page.index('<section id="goodput"')]
    code, table, _ = run_cli("cost", name)
    assert code == 0
    total_line = next(line for line in table.splitlines() if line.startswith("total: "))
    desired_text = total_line.removeprefix("total: ").split(" a month at desired size")[0]
    assert desired_text in html.unescape(chart)
    for key in doc["unpriced"]:
        assert f"no price: {key}" in html.unescape(chart) or f", {key}" in html.unescape(chart)


@pytest.mark.parametrize("name", SHIPPED_STACKS)
def test_the_header_card_says_at_least_when_anything_is_unpriced(name: str) -> None:
    """Issue 36 item 5: the header's totals are "at least" exactly when the cost leaves something out (a line without a
    price, a usage-priced resource without an estimate), and the cost section lists every line without a price."""
    page = html.unescape(_page(name))
    doc = cost_json(name)
    header = page[page.index('<div class="glance">'):page.index("</header>")]
    least = "at least " if doc["lower_bound"] else ""
    assert f"a month at desired size<b>{least}${doc['total_monthly_usd']:,.2f}</b>" in header
    assert f"at max size<b>{least}${doc['total_monthly_usd_at_max']:,.2f}</b>" in header
    assert doc["lower_bound"] == bool(doc["unpriced"] or doc["usage_not_priced"])
    for item in doc["unpriced_lines"]:
        assert item in page


def test_prod_aws_header_says_at_least_and_lists_the_filesystem_line() -> None:
    page = html.unescape(_page("prod-aws"))
    doc = cost_json("prod-aws")
    assert doc["lower_bound"] and "fsx_lustre.PERSISTENT_2_500" in doc["unpriced"]
    assert f"a month at desired size<b>at least ${doc['total_monthly_usd']:,.2f}</b>" in page
    assert "storage-lustre: PERSISTENT_2_500 storage, 9,600 GB-month of fsx_lustre.PERSISTENT_2_500" in page


@pytest.mark.parametrize("name", SHIPPED_STACKS)
def test_the_goodput_is_blueprint_sizings(name: str) -> None:
    page = _page(name)
    code, out, err = run_cli("sizing", name)
    section = page[page.index('<section id="goodput"'):page.index('<section id="timeline"')]
    if code != 0:
        reason = err.removeprefix("error: ").split(": ", 1)[1].strip()
        assert html.escape(reason, quote=True) in section
        return
    assert f"<pre>{html.escape(out, quote=True)}</pre>" in section
    model = json.loads(run_cli("sizing", name, "--format", "json")[1])
    data = _attrs(re.search(r"<div data-goodput=[^>]*>", section).group(0))  # type: ignore[union-attr]
    assert float(data["data-goodput"]) == pytest.approx(model["goodput"], abs=1e-6)
    assert float(data["data-interval-s"]) == pytest.approx(model["optimal_interval_s"], abs=0.1)
    assert float(data["data-young-s"]) == pytest.approx(model["young_interval_s"], abs=0.1)
    text = html.unescape(section)
    assert f"Young's optimum {model['young_interval_s'] / 3600:.2f} h" in text
    assert f"chosen: every {model['optimal_interval_s'] / 3600:.2f} h" in text
    for option in model["storage_options"]:
        assert option["description"] in text
    # The log axis is labelled in plain hours, never in the TeX matplotlib writes by default.
    assert "mathdefault" not in section and "10^{" not in section
    ticks = re.findall(r">([0-9.]+ h)<", section)
    assert ticks and all(float(t.removesuffix(" h")) > 0 for t in ticks), ticks


@pytest.mark.parametrize("name", ["prod-aws", "prod-aws-slurm"])
def test_the_capacity_block_timeline_lists_the_previews_steps(name: str) -> None:
    page = html.unescape(_page(name))
    section = page[page.index('<section id="timeline"'):page.index('<section id="policy"')]
    code, preview, _ = run_cli("preview", name)
    assert code == 0
    block = [line.strip() for line in preview.splitlines() if "Capacity Block cr-" in line and "->" in line]
    assert block and block[0] in section
    start = preview.index(block[0])
    steps = [line.strip() for line in preview[start:].splitlines()[1:4]]
    assert steps[0].startswith("the group is created at 0 nodes")
    for step in steps:
        assert step in section
    assert "scale to 0 by now" in section and "EKS scales to 0" in section and "block ends" in section


def _violating_graph(tmp_path: Path) -> Path:
    """prod-aws with its bucket's versioning suspended (advisory) and its API open to the internet (mandatory)."""
    doc: dict[str, Any] = copy.deepcopy(offline_run("prod-aws").graph.to_dict())  # its rows share the cached run's
    for res in doc["resources"]:
        if res["name"] == "storage-checkpoints-versioning":
            res["inputs"]["versioningConfiguration"]["status"] = "Suspended"
        if res["name"] == "control-plane-eks":
            res["inputs"]["vpcConfig"].update(endpointPublicAccess=True, publicAccessCidrs=["0.0.0.0/0"])
    path = tmp_path / "prod-aws-violating.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_each_finding_links_to_its_resource_in_the_diagram(tmp_path: Path) -> None:
    """A graph with violations: the report is still written (exit 0: the page shows the verdict), each finding's link
    names a node of the SVG, the node of the resource it is about, which is marked."""
    path = _violating_graph(tmp_path)
    out = tmp_path / "report.html"
    code, _, err = run_cli("report", str(path), "-o", str(out))
    assert code == 0, err
    page = out.read_text(encoding="utf-8")
    policy = _section(page, "policy")
    assert policy["data-passed"] == "false" and policy["data-violations"] == "2"
    drawn = set(SVG_ID.findall(page))
    links = dict(re.findall(r'<tr id="finding-\d+" class="finding" data-policy="([^"]+)"[^>]*>.*?<a href="#([^"]+)"',
                            page))
    assert links == {"aws-s3-checkpoint-bucket-versioned": "n-storage-checkpoints",
                     "aws-eks-endpoint-not-open-to-internet": "n-control-plane-eks"}
    assert set(links.values()) <= drawn
    for node_id in links.values():
        assert "has-finding" in page[page.index(f'<g id="{node_id}"'):][:80]
    assert "policy: 1 finding(s): aws-s3-checkpoint-bucket-versioned" in html.unescape(_node_block(
        page, "n-storage-checkpoints"))
    # A graph carries no workload or stack file: the page says where those sections come from.
    assert "run <code>blueprint report</code> on the stack for the goodput model" in page


def test_without_dot_the_command_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import shutil

    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda cmd, *a, **k: None if cmd == "dot" else real(cmd, *a, **k))
    out = tmp_path / "report.html"
    code, _, err = run_cli("report", "dev-aws", "-o", str(out))
    assert code == 2
    assert err.startswith("error: blueprint report lays out its diagram with Graphviz, and its `dot` program is not "
                          "installed")
    assert "apt-get install --no-install-recommends graphviz" in err and "Traceback" not in err
    assert not out.exists()


def test_the_diagram_model_of_a_graph_needs_no_spec() -> None:
    """From a graph alone (no stack file), the planes are still drawn from the resources."""
    graph = ResourceGraph.from_dict(offline_run("prod-gcp").graph.to_dict())
    diagram = build_diagram(graph, None)
    kinds = {n.kind for n in diagram.nodes}
    assert {"vpc", "fabric", "reserved", "filesystem", "bucket", "control-plane", "team"} <= kinds
    gpu_vpcs = diagram.node("n-gpu-vpcs")
    assert gpu_vpcs.title == "GPU VPCs x8" and "MTU 8244" in gpu_vpcs.lines


def test_chart_clip_paths_are_named_by_order_not_by_float_hashes() -> None:
    # matplotlib names a clip path by a hash of its rectangle's floats; their last bits once differed between two runs
    # of the same report, which changed nothing visible but every byte-comparison of the page.
    from blueprint.report.charts import stable_clip_ids

    a = ('<svg><clipPath id="p27aaa9f612"><rect x="1.0"/></clipPath><clipPath id="p4299c7e44b"/>'
         '<path clip-path="url(#p27aaa9f612)"/><path clip-path="url(#p4299c7e44b)"/></svg>')
    b = a.replace("p27aaa9f612", "p8dd3793b76")  # the same chart, the first rectangle a float's last bit apart
    assert stable_clip_ids(a, "cost-x") == stable_clip_ids(b, "cost-x")
    out = stable_clip_ids(a, "cost-x")
    assert 'id="p' not in out and out.count('url(#c') == 2
    assert stable_clip_ids(a, "cost-x") != stable_clip_ids(a, "goodput-x")  # two charts on one page never collide


def test_the_page_references_only_clip_paths_it_defines() -> None:
    import re

    page = report_page("prod-aws").read_text(encoding="utf-8")
    defined = set(re.findall(r'<clipPath id="([^"]+)"', page))
    used = set(re.findall(r'clip-path="url\(#([^)]+)\)"', page))
    assert defined and used <= defined
    assert not any(re.fullmatch(r"p[0-9a-f]{10}", d) for d in defined)


def _picture_tool() -> Any:
    import importlib.util

    from tests.conftest import ROOT

    spec = importlib.util.spec_from_file_location("report_picture", ROOT / "tools" / "report_picture.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_picture_shows_the_report_as_it_is() -> None:
    """Issue 36 item 5: docs/img/report-prod-aws.txt is the text of the page the README's picture was taken from
    (`make screenshot`); the report built now (at the same pinned clock) must say the same, or the picture is stale.
    `make docs-check` (CI) runs the same comparison."""
    from tests.conftest import ROOT, TEST_NOW

    assert TEST_NOW == "2026-11-29T00:00:00Z"  # the Makefile's PICTURE_NOW
    committed = (ROOT / "docs" / "img" / "report-prod-aws.txt").read_text(encoding="utf-8")
    assert _picture_tool().drift(_page("prod-aws"), committed) == []
    assert "a month at desired size\nat least $6,824.46\nat max size\nat least $10,757.06\n" in committed


def test_the_picture_check_fails_on_drift(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The check exits 1 with the changed lines and what to run when the committed text is not the report's."""
    tool = _picture_tool()
    page = report_page("prod-aws")
    text = tmp_path / "picture.txt"
    assert tool.main(["write", str(page), str(text)]) == 0
    assert tool.main(["check", str(page), str(text)]) == 0
    text.write_text(text.read_text(encoding="utf-8").replace("at least $6,824.46", "$6,824.46"), encoding="utf-8")
    assert tool.main(["check", str(page), str(text)]) == 1
    err = capsys.readouterr().err
    assert "-$6,824.46\n+at least $6,824.46" in err
    assert "the README's picture is stale (the report it shows has changed): run `make screenshot`" in err
    assert tool.main(["check", str(page), str(tmp_path / "missing.txt")]) == 1
