"""The pull-request comment's picture (issue 26): a small Mermaid flowchart of what changed, the planes touched and
the resources added, changed, replaced or removed, coloured by cost change; drawn from the JSON reports too (the
workflow combines them); and parsed and rendered by Mermaid itself in headless Chromium, as GitHub would."""

from __future__ import annotations

import copy
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from blueprint.cost.mermaid import PER_PLANE, render_mermaid
from tests.browser import Chromium, chromium_binary, file_url
from tests.conftest import ROOT, offline_run
from tests.report.report_pages import run_cli

NODE = re.compile(r'^\s+(\w+)\["([^"]*)"\]:::(\w+)$')
EDGE = re.compile(r"^\s+(\w+) --- (\w+)$")


def _changed_prod_aws() -> dict[str, Any]:
    """prod-aws with a larger system group (up at max size), one NAT gateway fewer (down), a larger filesystem
    (its rate was never read: unpriced), the S3 endpoint gone (no cost) and one more KMS key (up)."""
    doc = copy.deepcopy(offline_run("prod-aws").graph.to_dict())
    gone = {"network-nat-use1-az6", "network-s3-endpoint"}
    resources = []
    for res in doc["resources"]:
        if res["name"] in gone:
            continue
        if res["name"] == "nodegroup-system-ng":
            res["inputs"]["scalingConfig"]["maxSize"] = 8
        if res["name"] == "storage-lustre":
            res["inputs"]["storageCapacity"] = 12000
        resources.append(res)
        if res["name"] == "control-plane-secrets-key":
            extra = copy.deepcopy(res)
            extra["urn"] = res["urn"].replace("::control-plane-secrets-key", "::control-plane-extra-key")
            extra["name"] = "control-plane-extra-key"
            resources.append(extra)
    doc["resources"] = resources
    return doc


def _comment(tmp_path: Path, base: dict[str, Any], new: dict[str, Any], *extra: str) -> str:
    (tmp_path / "base.json").write_text(json.dumps(base), encoding="utf-8")
    (tmp_path / "new.json").write_text(json.dumps(new), encoding="utf-8")
    code, out, err = run_cli("cost", "diff", "--base", str(tmp_path / "base.json"), str(tmp_path / "new.json"), *extra)
    assert code == 0, err
    return out


def _block(comment: str) -> list[str]:
    lines = comment.splitlines()
    start = lines.index("```mermaid")
    return lines[start + 1:lines.index("```", start)]


def _nodes(block: list[str]) -> dict[str, tuple[str, str]]:
    """Node id -> (label, class), checking every line is one Mermaid knows from this grammar."""
    nodes: dict[str, tuple[str, str]] = {}
    edges = []
    classes = set()
    assert block[0] == "flowchart LR"
    for line in block[1:]:
        if (m := NODE.match(line)) is not None:
            assert m.group(1) not in nodes, f"node {m.group(1)} defined twice"
            nodes[m.group(1)] = (m.group(2), m.group(3))
        elif (m := EDGE.match(line)) is not None:
            edges.append((m.group(1), m.group(2)))
        elif line.strip().startswith("classDef "):
            classes.add(line.split()[1])
        else:
            assert re.match(r'^  subgraph s\d+\["[^"]*"\]$|^    direction LR$|^  end$', line), line
    assert {n for e in edges for n in e} <= set(nodes)
    assert {klass for _, klass in nodes.values()} <= classes
    return nodes


def test_the_comment_draws_the_planes_and_resources_coloured_by_cost(tmp_path: Path) -> None:
    comment = _comment(tmp_path, offline_run("prod-aws").graph.to_dict(), _changed_prod_aws())
    assert comment.index("| stack |") < comment.index("```mermaid") < comment.index("<details>")
    nodes = _nodes(_block(comment))
    by_label = {label.split("<br/>")[0]: (label, klass) for label, klass in nodes.values()}
    # planes: the touched ones, each with its counts and its cost change
    assert by_label["network"][0].startswith("network<br/>2 removed<br/>-$")
    assert by_label["network"][1] == "down"
    assert by_label["compute"] == (by_label["compute"][0], "up") and "at max size" in by_label["compute"][0]
    assert by_label["storage"][1] == "unpriced"  # the filesystem's rate was never read: its change is not priced
    assert by_label["control-plane"][1] == "up" and "1 added" in by_label["control-plane"][0]
    # resources: the symbol says the change, the class the cost change
    assert by_label["- network-nat-use1-az6"][1] == "down"
    assert by_label["- network-s3-endpoint"][1] == "same"
    assert by_label["~ nodegroup-system-ng"][1] == "up"
    assert by_label["~ storage-lustre"][1] == "unpriced"
    assert by_label["+ control-plane-extra-key"][0] == "+ control-plane-extra-key<br/>+$1.00/month"
    assert by_label["+ control-plane-extra-key"][1] == "up"
    # nothing else: the untouched planes are not drawn
    assert {label.split("<br/>")[0] for label, _ in nodes.values() if "<br/>" in label and label[0] not in "+-~±"} \
        == {"network", "compute", "storage", "control-plane"}


def test_a_new_stack_stays_a_small_picture(tmp_path: Path) -> None:
    """From nothing, every resource is added: per plane a few are named (largest cost first), the rest counted."""
    new = offline_run("prod-aws").graph.to_dict()
    comment = _comment(tmp_path, {"stack": "prod-aws", "resources": []}, new)
    block = _block(comment)
    nodes = _nodes(block)
    assert len(block) < 120
    planes = [label for label, _ in nodes.values() if re.match(r"^[a-z-]+<br/>\d+ added", label)]
    assert len(planes) == 7  # every plane of the stack
    for node_id, (label, _) in nodes.items():
        if re.fullmatch(r"s0p\d+", node_id):
            named = [n for n in nodes if re.fullmatch(rf"{node_id}r\d+", n)]
            assert 1 <= len(named) <= PER_PLANE
            total = int(re.search(r"(\d+) added", label).group(1))  # type: ignore[union-attr]
            if total > PER_PLANE:
                assert nodes[f"{node_id}more"][0] == f"and {total - PER_PLANE} more"
    compute = next(label for label, _ in nodes.values() if label.startswith("+ nodegroup-h100-ng"))
    assert "one-time" in compute  # the Capacity Block: no monthly change, a one-time one


def test_combine_draws_it_from_the_json_reports(tmp_path: Path) -> None:
    out = _comment(tmp_path, offline_run("prod-aws").graph.to_dict(), _changed_prod_aws(), "--format", "json")
    doc = json.loads(out)
    assert {"urn", "name", "type", "plane", "change"} <= set(doc["changes"][0])
    assert all(r["plane"] for r in doc["resources"])
    (tmp_path / "a.cost.json").write_text(out, encoding="utf-8")
    older = {k: v for k, v in doc.items() if k != "changes"}  # a report from before the picture
    older["stack"] = "prod-aws-old"
    (tmp_path / "b.cost.json").write_text(json.dumps(older), encoding="utf-8")
    code, comment, err = run_cli("cost", "diff", "--combine", str(tmp_path / "a.cost.json"),
                                 str(tmp_path / "b.cost.json"))
    assert code == 0, err
    block = _block(comment)
    _nodes(block)
    assert sum(1 for line in block if line.startswith("  subgraph ")) == 2
    older_part = block[[i for i, line in enumerate(block) if line.startswith("  subgraph ")][1]:]
    assert any("~ nodegroup-system-ng" in line for line in older_part)  # its priced resources, still drawn
    assert not any("network-s3-endpoint" in line for line in older_part)  # unpriced ones it never recorded


def test_no_change_no_picture(tmp_path: Path) -> None:
    graph = offline_run("dev-aws").graph.to_dict()
    assert "```mermaid" not in _comment(tmp_path, graph, graph)


def test_labels_cannot_break_the_diagram() -> None:
    doc = {"stack": 'a "quoted" <stack>', "diff_monthly_usd": 1.0, "diff_monthly_usd_at_max": 1.0,
           "resources": [], "changes": [{"urn": "u", "name": 'x"]; click x', "type": "t", "plane": "compute",
                                         "change": "added"}]}
    block = render_mermaid([doc])[1:-1]
    _nodes(block)
    assert any("+ x']; click x" in line for line in block)
    assert "a 'quoted' (stack)" in block[1]


# --- Mermaid itself, in Chromium ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mermaid_page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Chromium, str]]:
    bundles = sorted((ROOT / ".tools").glob("mermaid-*/mermaid.min.js"))
    if not bundles:
        if shutil.which("npm") is not None:
            pytest.fail("Mermaid's bundle is not fetched: run `make test-tools` (make test does)")
        pytest.skip("npm not found: Mermaid's parser cannot be fetched; the syntax is still checked above")
    folder = tmp_path_factory.mktemp("mermaid")
    shutil.copy(bundles[-1], folder / "mermaid.min.js")
    page = folder / "page.html"
    page.write_text('<!DOCTYPE html><html><head><script src="mermaid.min.js"></script></head><body></body></html>',
                    encoding="utf-8")
    chromium = Chromium(chromium_binary())
    try:
        load = chromium.open(file_url(page))
        assert load.errors == []
        chromium.evaluate("mermaid.initialize({startOnLoad: false, securityLevel: 'strict'})")
        yield chromium, file_url(page)
    finally:
        chromium.close()


def _render(browser: Chromium, text: str) -> dict[str, Any]:
    result = browser.evaluate(f"""(async () => {{
        try {{
            await mermaid.parse({json.dumps(text)});
            const {{svg}} = await mermaid.render('d' + Math.floor(Math.random() * 1e9), {json.dumps(text)});
            return JSON.stringify({{svg}});
        }} catch (e) {{ return JSON.stringify({{error: String(e && e.message || e)}}); }}
    }})()""", wait=True)
    doc = json.loads(result)
    assert isinstance(doc, dict)
    return doc


def test_mermaid_parses_and_renders_the_comments_pictures(mermaid_page: tuple[Chromium, str],
                                                          tmp_path: Path) -> None:
    browser, _ = mermaid_page
    pictures = [
        _block(_comment(tmp_path, offline_run("prod-aws").graph.to_dict(), _changed_prod_aws())),
        _block(_comment(tmp_path, {"stack": "prod-gcp", "resources": []}, offline_run("prod-gcp").graph.to_dict())),
        render_mermaid([{"stack": 'a "b" <c>', "diff_monthly_usd": 0, "diff_monthly_usd_at_max": 0, "resources": [],
                         "changes": [{"urn": "u", "name": 'x"]; click x', "type": "t", "plane": "p",
                                      "change": "removed"}]}])[1:-1],
    ]
    for block in pictures:
        rendered = _render(browser, "\n".join(block))
        assert "error" not in rendered, rendered.get("error")
        svg = rendered["svg"]
        for label, _ in _nodes(block).values():
            first = label.split("<br/>")[0]
            assert first in svg, f"{first} is not in Mermaid's picture"


def test_mermaid_refuses_a_broken_picture(mermaid_page: tuple[Chromium, str]) -> None:
    """The check can fail: Mermaid's own parse error on a malformed line."""
    browser, _ = mermaid_page
    assert "error" in _render(browser, "flowchart LR\n  a --- --- b")
