"""The report as a person sees it (issue 26): each shipped stack's page opened in headless Chromium (required: the
test fails, never skips, without it), with no console error and nothing fetched; the diagram, as Chromium built it,
holds every node group and the filesystem by name and is laid out at a readable size; the charts' totals, read from
the rendered page, are `blueprint cost`'s; a finding's link lands on its node. The harness itself is shown to fail on
a page with a script error, a missing file or a load the page's policy refuses."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from blueprint.cost.render import format_usd
from tests.browser import Chromium, PageLoad, chromium_binary, file_url
from tests.conftest import SHIPPED_STACKS, offline_run, stack
from tests.report.report_pages import cost_json, report_page, run_cli


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    chromium = Chromium(chromium_binary())
    try:
        yield chromium
    finally:
        chromium.close()


def _clean(load: PageLoad) -> None:
    assert load.errors == [], f"{load.url}: errors in the browser: {load.errors}"
    page = load.url.split("#", 1)[0]
    assert load.requests == [page], f"{page} fetched more than itself: {load.requests[1:]}"


# Read in the page as Chromium built it: each diagram node's id and text, the cost section's figures, the text of
# the cost chart (its SVG text elements), and the size the diagram is drawn at.
DOM_FACTS = """(() => {
  const nodes = {};
  for (const g of document.querySelectorAll('#diagram svg g.node')) nodes[g.id] = g.textContent;
  const cost = document.querySelector('#cost');
  const box = document.querySelector('#diagram svg').getBoundingClientRect();
  return JSON.stringify({
    nodes,
    total: cost.dataset.totalMonthlyUsd, atMax: cost.dataset.totalMonthlyUsdAtMax, once: cost.dataset.totalOneTimeUsd,
    teams: Object.fromEntries([...document.querySelectorAll('tr[data-team]')].map(
      r => [r.dataset.team, [r.dataset.monthlyUsd, r.dataset.monthlyUsdAtMax]])),
    chartText: [...document.querySelectorAll('#cost svg text')].map(t => t.textContent).join(' | '),
    charts: document.querySelectorAll('figure.chart svg').length,
    diagram: [box.width, box.height],
    verdict: document.querySelector('#policy').dataset.passed,
  });
})()"""


@pytest.mark.parametrize("name", SHIPPED_STACKS)
def test_each_stack_report_opens_cleanly_and_shows_its_figures(browser: Chromium, name: str) -> None:
    load = browser.open(file_url(report_page(name)))
    _clean(load)
    facts = json.loads(browser.evaluate(DOM_FACTS))
    graph = offline_run(name).graph
    spec = stack(name).spec
    nodes: dict[str, str] = facts["nodes"]
    for kind in ("aws:eks/nodeGroup:NodeGroup", "gcp:container/nodePool:NodePool"):
        for res in graph.of_type(kind):
            shown = str(res.inputs.get("nodeGroupName") or res.inputs.get("name"))
            assert shown in nodes.get(f"n-{res.name}", ""), f"node group {shown} is not in the diagram"
    for kind in ("aws:fsx/lustreFileSystem:LustreFileSystem", "gcp:lustre/instance:Instance"):
        for res in graph.of_type(kind):
            shown = str((res.inputs.get("tags") or {}).get("Name") or res.inputs.get("instanceId"))
            assert shown in nodes.get(f"n-{res.name}", ""), f"filesystem {shown} is not in the diagram"
    if spec.cloud == "aws" and (fs := spec.aws_spec().storage.filesystem) is not None and fs.existing is not None:
        assert any(fs.existing.file_system_id in text for text in nodes.values())
    width, height = facts["diagram"]
    assert width >= 1000 and height >= 300, f"the diagram is drawn at {width} x {height} px"
    doc = cost_json(name)
    assert float(facts["total"]) == pytest.approx(doc["total_monthly_usd"], abs=0.005)
    assert float(facts["atMax"]) == pytest.approx(doc["total_monthly_usd_at_max"], abs=0.005)
    assert float(facts["once"]) == pytest.approx(doc["total_one_time_usd"], abs=0.005)
    for team, usd in doc["by_team_monthly_usd"].items():
        assert float(facts["teams"][team][0]) == pytest.approx(usd, abs=0.005)
    # The chart says it too, in its own text: the totals as `blueprint cost` formats them.
    assert format_usd(doc["total_monthly_usd"]) in facts["chartText"]
    assert format_usd(doc["total_monthly_usd_at_max"]) in facts["chartText"]
    if doc["total_one_time_usd"]:
        assert format_usd(doc["total_one_time_usd"]) in facts["chartText"]
    for key in doc["unpriced"]:
        assert key in facts["chartText"], f"unpriced {key} is not marked on the chart"
    assert facts["charts"] >= 1 and facts["verdict"] == "true"


def test_a_finding_link_lands_on_its_node(browser: Chromium, tmp_path: Path) -> None:
    from tests.report.test_report import _violating_graph

    graph = _violating_graph(tmp_path)
    page = tmp_path / "report.html"
    code, _, err = run_cli("report", str(graph), "-o", str(page))
    assert code == 0, err
    _clean(browser.open(file_url(page)))
    links = json.loads(browser.evaluate(
        "JSON.stringify([...document.querySelectorAll('tr.finding a')].map(a => a.getAttribute('href')))"))
    assert sorted(links) == ["#n-control-plane-eks", "#n-storage-checkpoints"]
    for link in links:
        browser.open("about:blank")  # a new load, not a jump within the page: the link is followed from outside
        load = browser.open(file_url(page) + link)
        _clean(load)
        target = browser.evaluate("document.querySelector(':target') && document.querySelector(':target').id")
        assert target == link.removeprefix("#")
        assert browser.evaluate(f"document.getElementById('{target}').classList.contains('has-finding')")


@pytest.mark.parametrize("body", [
    '<script>console.error("boom")</script>',
    "<script>throw new Error('kaput')</script>",
    '<img src="missing.png">',
    '<img src="http://example.invalid/x.png">',
])
def test_the_harness_fails_on_a_broken_page(browser: Chromium, tmp_path: Path, body: str) -> None:
    """What _clean refuses: a console error, an uncaught exception, a missing file, a load refused by the same
    Content-Security-Policy the report carries."""
    from blueprint.report.page import CSP

    page = tmp_path / "broken.html"
    csp = f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' if "http:" in body else ""
    page.write_text(f"<!DOCTYPE html><html><head>{csp}</head><body>{body}</body></html>", encoding="utf-8")
    with pytest.raises(AssertionError):
        _clean(browser.open(file_url(page)))


def test_the_prod_aws_screenshot(browser: Chromium) -> None:
    """The page renders to a picture of a person's screen width (what `make screenshot` writes to docs/img)."""
    _clean(browser.open(file_url(report_page("prod-aws"))))
    png = browser.screenshot(1400, 2200)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (1400, 2200)
    from PIL import Image

    colours = Image.open(io.BytesIO(png)).convert("RGB").getcolors(maxcolors=1_000_000)
    assert colours is not None and len(colours) > 50, "the screenshot is (nearly) blank"


def test_the_readme_shows_the_committed_screenshot() -> None:
    from tests.conftest import ROOT

    image = ROOT / "docs" / "img" / "report-prod-aws.png"
    assert image.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert "docs/img/report-prod-aws.png" in (ROOT / "README.md").read_text(encoding="utf-8")
