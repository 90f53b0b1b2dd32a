"""``cost diff --combine`` reads reports other jobs wrote (issue 35): every field it reads is checked and refused by
its key path, a stack given twice is refused, the guardrails apply to the sum, and names from the reports cannot
write Markdown into the pull-request comment."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from blueprint.cli import main
from blueprint.files.markdown import html_name, md_code, md_name, md_text

LINE = {"name": "h100 instance hours", "unit": "hour", "price_key": "ec2.p5.48xlarge", "previous_quantity": 730,
        "new_quantity": 1460, "unit_price_usd": 55.04, "previous_usd": 40179.2, "new_usd": 80358.4, "at_max": False,
        "one_time": False}
RESOURCE = {"urn": "urn:pulumi:a::p::t::ng", "name": "nodegroup-h100-ng", "change": "changed",
            "previous_monthly_usd": 100.0, "new_monthly_usd": 150.0, "previous_monthly_usd_at_max": 100.0,
            "new_monthly_usd_at_max": 150.0, "previous_one_time_usd": 0.0, "new_one_time_usd": 0.0,
            "priced_fully": True, "lines": [LINE], "plane": "compute"}
REPORT: dict[str, Any] = {
    "currency": "USD", "stack": "prod-aws", "previous_monthly_usd": 100.0, "new_monthly_usd": 150.0,
    "diff_monthly_usd": 50.0, "diff_percent": 50.0, "previous_monthly_usd_at_max": 100.0,
    "new_monthly_usd_at_max": 150.0, "diff_monthly_usd_at_max": 50.0, "diff_percent_at_max": 50.0,
    "previous_one_time_usd": 0.0, "new_one_time_usd": 0.0, "diff_one_time_usd": 0.0, "unpriced_changes": [],
    "resources": [RESOURCE],
    "changes": [{"urn": "u", "name": "nodegroup-h100-ng", "type": "aws:eks/nodeGroup:NodeGroup", "plane": "compute",
                 "change": "changed"}],
    "stale_prices": [], "unpriced": [], "notes": ["usage estimates from stacks/prod-aws.usage.yaml"], "replaced": [],
    "node_rolls": [{"node_group": "h100", "nodes": 16, "reason": "the AMI changes", "order": 1,
                    "interrupts_jobs": True, "gpu_hours_at_risk": 12.5, "how": "rolling", "when": None}],
    "replacements": [{"name": "bucket", "type": "aws:s3/bucket:Bucket", "urn": "u", "fields": ["bucket"],
                      "holds_data": True, "holds": "checkpoints", "allowed": "moved", "unknown_fields": []}],
    "version_problems": [{"what": "cluster", "key": "k", "message": "a downgrade", "rule": "r"}],
}


def report(tmp_path: Path, doc: Any, name: str = "r.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def combine(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["cost", "diff", "--combine", *argv])
    out, err = capsys.readouterr()
    assert "internal error" not in err and "Traceback" not in err, err
    return code, out, err


def test_a_valid_report_renders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = combine(capsys, str(report(tmp_path, REPORT)))
    assert code == 0 and out.startswith("### Cost preview: prod-aws\n")


def _set(doc: dict[str, Any], path: str, value: Any) -> None:
    keys = re.findall(r"[a-z_]+|\d+", path)
    target: Any = doc
    for key in keys[:-1]:
        target = target[int(key)] if key.isdigit() else target[key]
    last = keys[-1]
    if value is KeyError:
        del target[last]
    else:
        target[int(last) if last.isdigit() else last] = value


@pytest.mark.parametrize(("path", "value", "says"), [
    ("stack", 5, "(the report).stack: must be a string, got 5"),
    ("stack", None, "(the report).stack: must be a string, got null"),
    ("diff_monthly_usd", "50", '(the report).diff_monthly_usd: must be a finite number, got "50"'),
    ("diff_monthly_usd", True, "(the report).diff_monthly_usd: must be a finite number, got true"),
    ("previous_monthly_usd", KeyError, "(the report).previous_monthly_usd: required (a finite number)"),
    ("new_monthly_usd_at_max", [1], "(the report).new_monthly_usd_at_max: must be a finite number, got [1]"),
    ("diff_percent", "50%", '(the report).diff_percent: must be a finite number or null, got "50%"'),
    ("diff_one_time_usd", None, "(the report).diff_one_time_usd: must be a finite number, got null"),
    ("notes", "a note", '(the report).notes: must be a list of strings, got "a note"'),
    ("stale_prices", [1], "(the report).stale_prices: must be a list of strings, got [1]"),
    ("resources", {"a": 1}, '(the report).resources: must be a list of objects, got {"a": 1}'),
    ("resources[0]", ["x"], "(the report).resources[0]: must be an object, got list"),
    ("resources[0].name", 7, "(the report).resources[0].name: must be a string, got 7"),
    ("resources[0].new_monthly_usd", "150", '(the report).resources[0].new_monthly_usd: must be a finite number'),
    ("resources[0].priced_fully", "yes", '(the report).resources[0].priced_fully: must be true or false, got "yes"'),
    ("resources[0].lines", {}, "(the report).resources[0].lines: must be a list of objects, got {}"),
    ("resources[0].lines[0]", None, "(the report).resources[0].lines[0]: must be an object, got null"),
    ("resources[0].lines[0].unit_price_usd", "55", "(the report).resources[0].lines[0].unit_price_usd: must be a "
                                                   "finite number or null"),
    ("resources[0].lines[0].previous_quantity", None, "lines[0].previous_quantity: must be a finite number"),
    ("resources[0].lines[0].at_max", 0, "lines[0].at_max: must be true or false, got 0"),
    ("changes[0].plane", ["compute"], '(the report).changes[0].plane: must be a string, got ["compute"]'),
    ("node_rolls[0].nodes", "16", '(the report).node_rolls[0].nodes: must be a finite number, got "16"'),
    ("node_rolls[0].gpu_hours_at_risk", {}, "(the report).node_rolls[0].gpu_hours_at_risk: must be a finite number "
                                            "or null, got {}"),
    ("replacements[0].fields", "bucket", '(the report).replacements[0].fields: must be a list of strings'),
    ("version_problems[0].message", None, "(the report).version_problems[0].message: must be a string, got null"),
    ("version_problems", None, "(the report).version_problems: must be a list of objects, got null"),
])
def test_a_wrongly_typed_field_is_refused_by_its_path(tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str,
                                                      value: Any, says: str) -> None:
    doc = copy.deepcopy(REPORT)
    _set(doc, path, value)
    source = report(tmp_path, doc)
    code, out, err = combine(capsys, str(source))
    assert code == 2 and out == ""
    assert err.startswith(f"error: {source}: not a `blueprint cost diff --format json` report: ") and says in err, err


@pytest.mark.parametrize("doc", ["[1, 2]", "null", '"text"', '{"stacks": 5}', '{"stacks": [null]}'])
def test_what_is_not_a_report_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: str) -> None:
    source = report(tmp_path, doc)
    code, _, err = combine(capsys, str(source))
    assert code == 2 and err.startswith(f"error: {source}: "), err


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], constant: str) -> None:
    source = report(tmp_path, json.dumps(REPORT).replace('"diff_monthly_usd": 50.0', f'"diff_monthly_usd": {constant}'))
    code, _, err = combine(capsys, str(source))
    assert code == 2 and f"{source}: not JSON ({constant} is not a JSON number)" in err, err


def test_a_stack_given_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = report(tmp_path, REPORT, "a.json"), report(tmp_path, REPORT, "b.json")
    code, _, err = combine(capsys, str(first), str(second))
    assert code == 2 and err == (f"error: {second}: (the report).stack: the stack 'prod-aws' is also in {first}: each "
                                 "stack's report is combined once (its cost would count twice)\n")
    both = report(tmp_path, {"stacks": [REPORT, REPORT]}, "both.json")
    code, _, err = combine(capsys, str(both))
    assert code == 2 and "stacks[1].stack: the stack 'prod-aws' is also in" in err


def test_the_guardrails_apply_to_the_sum(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = {**copy.deepcopy(REPORT), "stack": "prod-gcp"}
    files = [str(report(tmp_path, REPORT, "a.json")), str(report(tmp_path, other, "b.json"))]
    code, out, err = combine(capsys, *files, "--fail-above-usd", "80")
    assert code == 1 and out.startswith("### Cost preview: 2 of 2 stacks change")  # the comment is still written
    assert err == ("cost guardrail: all stacks: the monthly cost at desired size rises by $100.00, above "
                   "--fail-above-usd $80.00\ncost guardrail: all stacks: the monthly cost at max size rises by "
                   "$100.00, above --fail-above-usd $80.00\n")
    code, _, err = combine(capsys, *files, "--fail-above-usd", "100")
    assert code == 0 and err == ""
    code, _, err = combine(capsys, *files, "--fail-above-percent", "40")
    assert code == 1 and "rises by 50.0%, above --fail-above-percent 40%" in err
    code, _, err = combine(capsys, *files, "--fail-above-percent", "50")
    assert code == 0


@pytest.mark.parametrize("option", ["--fail-above-usd", "--fail-above-percent"])
@pytest.mark.parametrize("value", ["nan", "inf", "-1", "\uff15", "much"])
def test_guardrails_that_would_let_everything_through_are_usage_errors(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str) -> None:
    with pytest.raises(SystemExit) as info:
        main(["cost", "diff", "--combine", str(report(tmp_path, REPORT)), option, value])
    assert info.value.code == 2 and f"argument {option}: " in capsys.readouterr().err


# --- names from the reports cannot write Markdown into the comment --------------------------------------------------

HOSTILE = ["# Heading", "![x](http://evil.example/x.png)", "[click](http://evil.example)", "a | b", "<img src=x>",
           "@everyone", "x\n# second line", "`code` and ``more``", "</details><b>x</b>", "&#64;team"]


@pytest.mark.parametrize("name", HOSTILE)
def test_names_in_the_comment_are_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    doc = copy.deepcopy(REPORT)
    doc["stack"] = name
    doc["resources"][0]["name"] = name
    doc["resources"][0]["lines"][0]["name"] = name
    doc["notes"] = [name]
    doc["replaced"] = [name]
    doc["stale_prices"] = [name]
    doc["node_rolls"][0]["node_group"] = name
    doc["node_rolls"][0]["reason"] = name
    doc["replacements"][0]["name"] = name
    doc["version_problems"][0]["message"] = name
    other = {**copy.deepcopy(REPORT), "stack": "prod-gcp"}
    code, out, _ = combine(capsys, str(report(tmp_path, doc, "a.json")), str(report(tmp_path, other, "b.json")))
    assert code == 0
    fenced = False
    for line in out.splitlines():
        assert not line.startswith("# ")
        if line.startswith("```"):
            fenced = not fenced  # the Mermaid picture: no Markdown, no mention in a code block (its labels: mermaid.py)
        if fenced:
            continue
        bare = re.sub(r"(`+)(?:(?!\1).)*?\1", "", line)  # outside code spans, where Markdown is read
        bare = re.sub(r"\\.|<code>[^<]*</code>", "", bare)  # nor what is backslash-escaped or in HTML code
        assert "![" not in bare and "](" not in bare and "<img" not in bare
        assert "@everyone" not in bare and "&#64;" not in bare and "</details><b>" not in bare
        if line.startswith("|"):  # a table row keeps its columns
            assert len(re.findall(r"(?<!\\)\|", line)) == line.count("|") - line.count("\\|")
    assert "\n# second line" not in out


def test_the_markdown_helpers() -> None:
    assert md_name("prod-aws") == "prod-aws" and html_name("prod-aws") == "prod-aws"
    assert md_name("a | b") == "`a \\| b`" and md_name("a | b", table=False) == "`a | b`"
    assert md_code("x`y") == "``x`y``" and md_code("`") == "`` ` ``"
    assert md_code("a\x1b[31m\nb") == "`a\\x1b[31m\\x0ab`"
    assert html_name("<b>x</b>") == "<code>&lt;b&gt;x&lt;/b&gt;</code>"
    assert md_text("[a](b) <i> @me & `c` |") == "\\[a\\](b) \\<i\\> @\u2060me &amp; \\`c\\` \\|"
