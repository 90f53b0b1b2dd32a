"""Fuzzing the three inputs of the command-line tool: stack files, graph documents and policy configs.

Whatever the input, `blueprint` exits 0, 1 or 2 (3 would be a bug), prints no traceback and keeps its
error output short (issue 8). Bounded so that `make test` stays fast; the exact cases are in
tests/cli/test_robustness.py.
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
from blueprint.policy.runner import load_pack
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
    # issue 20: values JSON cannot carry, and values the spec must refuse
    "9" * 5000, "-" + "9" * 40, "!!binary aGVsbG8=", "!!timestamp 2027-01-04", "!!set {a}", "!!omap [a: 1]",
    "runnerCidrs: [0.0.0.0/1, 128.0.0.0/1]", "node-role.kubernetes.io/worker: 'true'", "mountPath: /proc/x",
    "instanceCount: 65", "end: '2027-01-18T12:00:00Z'",
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


# --- issue 20: properties, not only "no crash" ---------------------------------------------------------------------


@st.composite
def internet_in_pieces(draw: st.DrawFn) -> list[str]:
    """0.0.0.0/0 split at random into halves, quarters, ...: the pieces together cover every address."""
    import ipaddress

    pieces = [ipaddress.ip_network("0.0.0.0/0")]
    for _ in range(draw(st.integers(0, 6))):
        i = draw(st.integers(0, len(pieces) - 1))
        if pieces[i].prefixlen < 24:
            pieces[i:i + 1] = list(pieces[i].subnets(1))
    return [str(n) for n in draw(st.permutations(pieces))]


@FUZZ
@given(cidrs=internet_in_pieces(), where=st.sampled_from(["runnerCidrs", "publicAccessCidrs"]))
def test_the_internet_in_any_pieces_is_refused(cidrs: list[str], where: str) -> None:
    import copy

    import pytest

    from components.spec import SpecError, parse_spec
    from tests.conftest import raw_stack_config

    spec = copy.deepcopy(raw_stack_config("dev-aws")["gpu-cluster:spec"])
    if where == "runnerCidrs":
        spec["aws"]["controlPlane"]["deployer"]["runnerCidrs"] = cidrs
    else:
        spec["aws"]["controlPlane"]["publicAccessCidrs"] = cidrs
    with pytest.raises(SpecError) as info:
        parse_spec(spec, "stacks/Pulumi.dev-aws.yaml", provider_region="us-west-2")
    rule = "runner-cidrs-not-open" if where == "runnerCidrs" else "endpoint-not-open"
    assert f"[rule: {rule}]" in str(info.value)


@FUZZ
@given(size=st.integers(-10**30, 10**30) | st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_graph_sizes_outside_what_a_cloud_runs_are_refused(size: int | float) -> None:
    doc = json.loads(json.dumps(small_graph()))
    group = next(r for r in doc["resources"] if r["type"] == "aws:eks/nodeGroup:NodeGroup")
    group["inputs"]["scalingConfig"]["maxSize"] = size
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "g.json"
        path.write_text(json.dumps(doc))
        code, err = invoke("cost", str(path), "--format", "json")
    sane = float(size).is_integer() and 0 <= size <= 100_000
    check(code, err)
    assert (code == 0) is sane or (sane and code == 2 and "maxSize" not in err), (size, code, err[:300])
    if not sane:
        assert code == 2 and "scalingConfig.maxSize" in err and "is not a node count" in err


finite_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=10,
)


@FUZZ
@given(key=st.text(min_size=1, max_size=12), first=finite_json, second=finite_json)
def test_a_key_given_twice_is_refused(key: str, first: Any, second: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.json"
        path.write_text("{" + f"{json.dumps(key)}: {json.dumps(first)}, {json.dumps(key)}: {json.dumps(second)}"
                        + "}", encoding="utf-8", errors="surrogatepass")
        code, err = invoke("policy", saved_graph(), "--config", str(path))
    assert code == 2 and "is given twice" in err, err[:300]


wrong_values = st.sampled_from(["0", "N/A", "1", "-1", "5", "-5", "2.5", "nan", "inf", "-inf", "1e3", "0.0"])
figures = st.sampled_from(["268.44", "0.00", "nan", "inf", "-inf", "NaN", "1e+02"])


@FUZZ
@given(oop=wrong_values, ip=wrong_values, busbw=figures)
def test_nccl_check_passes_only_what_it_checked(oop: str, ip: str, busbw: str) -> None:
    import math

    from tests.acceptance.test_nccl import NEW_FORMAT, ROW_1G

    row = ROW_1G.replace("268.44      0", f"{busbw} {oop:>6}").replace("268.89      0", f"268.89 {ip:>6}")
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "run.log"
        log.write_text(NEW_FORMAT.replace(ROW_1G, row))
        code, err = invoke("nccl", "check", str(log), "--instance-type", "p5.48xlarge", "--nodes", "2",
                           "--expected-busbw", "100")
        parsed, _ = invoke("nccl", "parse", str(log))
    check(code, err)
    clean = all(w in ("0", "N/A") for w in (oop, ip)) and math.isfinite(float(busbw))
    assert (code == 0) is clean, (oop, ip, busbw, code)
    assert parsed == 0
