"""Fuzzing the three inputs of the command-line tool: stack files, graph documents and policy configs.

Whatever the input, `blueprint` exits 0, 1 or 2 (3 would be a bug), prints no traceback and keeps its
error output short (issue 8). Bounded so that `make test` stays fast; the exact cases are in
tests/test_robustness.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blueprint.cli import main
from blueprint.policy import load_pack
from tests.conftest import offline_run

MAX_STDERR = 64 * 1024
PROD_TEXT = Path("stacks/Pulumi.prod-aws.yaml").read_text()
LINES = PROD_TEXT.splitlines()
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=10,
)
yaml_noise = st.sampled_from([
    "&a", "*a", "<<: *a", "{", "}", "[", "]", ": ", "- ", "!!python/object:os.system", "\x00", "\t", "'", '"',
    "? ", "|", ">", "%YAML 1.1", "---", "...", "~", "true", "1e999", "0x1F", "\ufeff", "\u2028",
    "environment: staging", "maxSize: true", "cidr: 10.0.0.0/255.0.0.0",
])


def invoke(*argv: str) -> tuple[int, str]:
    """Run the tool in this process; return its exit code and standard error."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse's own usage errors exit 2
            code = int(exc.code or 0)
    return code, err.getvalue()


def check(code: int, stderr: str) -> None:
    assert code in (0, 1, 2), (code, stderr[-2000:])
    assert "Traceback" not in stderr, stderr[-2000:]
    assert len(stderr) < MAX_STDERR, len(stderr)


@st.composite
def stack_texts(draw: st.DrawFn) -> str:
    lines = list(LINES)
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["noise", "delete", "duplicate", "replace-value", "indent"]))
        if action == "noise":
            pos = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:pos] + draw(yaml_noise) + lines[i][pos:]
        elif action == "delete":
            del lines[i]
        elif action == "duplicate":
            lines.insert(i, lines[i])
        elif action == "replace-value" and ":" in lines[i]:
            key = lines[i].split(":", 1)[0]
            lines[i] = f"{key}: {json.dumps(draw(json_values))}"
        else:
            lines[i] = " " * draw(st.integers(0, 6)) + lines[i].lstrip()
    return "\n".join(lines) + "\n"


@FUZZ
@given(text=stack_texts())
def test_fuzzed_stack_files(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "Pulumi.fuzz.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        check(*invoke("graph", str(path), "-o", str(Path(tmp) / "g.json")))


@cache
def small_graph() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(offline_run("dev-aws").graph.to_json())
    return doc


@st.composite
def graph_documents(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["graph", "preview", "export", "random"]))
    if kind == "random":
        return draw(json_values)
    resources = [dict(r) for r in small_graph()["resources"][:20]]
    for _ in range(draw(st.integers(1, 3))):
        r = resources[draw(st.integers(0, len(resources) - 1))]
        key = draw(st.sampled_from(["urn", "type", "name", "parent", "provider", "inputs", "protect",
                                    "retain_on_delete", "dependencies", "ignore_changes"]))
        r[key] = draw(json_values)
    if kind == "graph":
        return {"stack": "fuzz", "resources": resources}
    states = [{**{k: v for k, v in r.items() if k not in ("name", "retain_on_delete", "ignore_changes")},
               "retainOnDelete": r.get("retain_on_delete")} for r in resources]
    if kind == "export":
        return {"version": 3, "deployment": {"resources": states}}
    ops = draw(st.lists(json_values | st.sampled_from(["create", "same", "delete", "update"]),
                        min_size=len(states), max_size=len(states)))
    return {"steps": [{"op": op, "newState": s} for op, s in zip(ops, states, strict=True)]}


@FUZZ
@given(doc=graph_documents(), text_form=st.booleans())
def test_fuzzed_graph_documents(doc: Any, text_form: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "graph.json"
        try:
            text = json.dumps(doc, allow_nan=True)
        except (ValueError, RecursionError):
            return
        path.write_text(text if text_form else text.replace("true", '"true"'), encoding="utf-8")
        check(*invoke("policy", str(path), "--format", "json"))


@cache
def saved_graph() -> str:
    path = Path(tempfile.mkdtemp()) / "prod.json"
    path.write_text(offline_run("prod-aws").graph.to_json())
    return str(path)


@st.composite
def policy_configs(draw: st.DrawFn) -> Any:
    pack = load_pack()
    names = [p.name for p in pack.policies]
    knobs = sorted({k for p in pack.policies if p.config_schema for k in (p.config_schema.properties or {})})
    config: dict[str, Any] = {}
    for _ in range(draw(st.integers(0, 4))):
        name = draw(st.sampled_from([*names, "all", "no-such-policy"]))
        config[name] = draw(
            st.sampled_from(["advisory", "mandatory", "disabled", "remediate", "loud"])
            | st.dictionaries(st.sampled_from([*knobs, "enforcementLevel"]), json_values, max_size=3)
            | json_values)
    return draw(st.just(config) | json_values)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=policy_configs())
def test_fuzzed_policy_configs(config: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.json"
        path.write_text(json.dumps(config, allow_nan=True), encoding="utf-8")
        check(*invoke("policy", saved_graph(), "--config", str(path), "--format", "json"))
