"""Fuzzing the inputs of the command-line tool: stack files, graph documents and policy configs (issue 8), and the
tools' own files (issue 35): workload numbers and sbatch options (admit), absurd figures, run directories with links
and special files, tolerances and guardrails (nccl), combined cost reports with wrong types and hostile names
(cost diff --combine), and JSON nested to any depth (every JSON reader).

Whatever the input, `blueprint` exits 0, 1 or 2 (3 would be a bug), prints no traceback and keeps its error output
short; the issue 35 cases also check that nothing blocks or reads without end (an alarm) and that nothing is written
outside the cases' temporary directories (the working tree is unchanged). Bounded so that `make test` stays fast
(BLUEPRINT_FUZZ_EXAMPLES raises it); the exact cases are in tests/cli/test_robustness.py,
tests/cli/test_hostile_tools.py and tests/cost/test_combine.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blueprint.cli import main
from blueprint.policy.runner import load_pack
from tests.conftest import offline_run

MAX_STDERR = 64 * 1024
PROD_TEXT = Path("stacks/Pulumi.prod-aws.yaml").read_text()
LINES = PROD_TEXT.splitlines()
# BLUEPRINT_FUZZ_EXAMPLES=500 for a longer run than `make test`'s.
EXAMPLES = int(os.environ.get("BLUEPRINT_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

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


@pytest.fixture(autouse=True, scope="module")
def _cel_environment_built() -> None:
    """celpy raises the recursion limit (to 2500) when its first Environment is built, which the policies and admit
    do; built here first, so that Hypothesis, which restores the limit it recorded, finds it unchanged."""
    import celpy

    celpy.Environment()


@pytest.fixture(scope="module")
def graph_file(graph_files: Any) -> Path:
    """prod-aws's graph, for admit."""
    path: Path = graph_files("prod-aws")
    return path


@pytest.fixture(scope="module")
def slurm_graph_file(graph_files: Any) -> Path:
    """prod-aws-slurm's graph, for admit on sbatch scripts."""
    path: Path = graph_files("prod-aws-slurm")
    return path


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


@settings(max_examples=max(30, EXAMPLES * 3 // 4), deadline=None, suppress_health_check=[HealthCheck.too_slow])
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


# --- issue 35: the tools' own files, as another job or a downloaded tree hands them over ------------------------------

# Digits that are not ASCII: superscript, fullwidth, Arabic-Indic, Persian, Devanagari, mathematical bold.
OTHER_DIGITS = st.sampled_from(["\u00b2", "\uff12", "\u0663", "\u06f4", "\u0968", "\U0001d7d0"])


@pytest.fixture(autouse=True, scope="module")
def _nothing_written_outside_the_targets() -> Iterator[None]:
    """Every fuzz case writes only into its temporary directory: the working tree is as it was."""
    def status() -> str:
        return subprocess.run(["git", "status", "--porcelain", "--ignored"], capture_output=True, text=True,
                              check=False).stdout
    before = status()
    yield
    assert status() == before


@contextlib.contextmanager
def bounded(seconds: int = 60) -> Iterator[None]:
    """A case that reads without end or blocks on a FIFO fails here instead of hanging the suite."""
    def stop(*_: Any) -> None:
        raise TimeoutError(f"no answer in {seconds} s: an unbounded read or a blocking open")
    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@st.composite
def hostile_numbers(draw: st.DrawFn) -> Any:
    """What may stand where a count or a quantity goes."""
    return draw(st.integers(-10**6, 10**6) | st.sampled_from([-1, 0, 1, True, None, "1", "-1", "1e3", "-0"])
                | st.builds(lambda d, s: f"{d}{s}", OTHER_DIGITS, st.sampled_from(["", "Gi", "m", "k"]))
                | st.builds(lambda n, s: f"{n}{s}", st.integers(-10**4, 10**4), st.sampled_from(["", "Gi", "m"])))


@FUZZ
@given(field=st.sampled_from(["parallelism", "completions", "backoffLimit", "cpu", "memory", "nvidia.com/gpu"]),
       value=hostile_numbers())
def test_fuzzed_workload_numbers(graph_file: Path, field: str, value: Any) -> None:
    text = Path("examples/workloads/prod-aws/finetune-single-node.yaml").read_text()
    if field in ("parallelism", "completions", "backoffLimit"):
        text = text.replace("  backoffLimit: 2\n", f"  backoffLimit: 2\n  {field}: {json.dumps(value)}\n"
                            if field != "backoffLimit" else f"  backoffLimit: {json.dumps(value)}\n", 1)
    else:
        old = {"cpu": 'cpu: "160"', "memory": "memory: 1600Gi\n            limits",
               "nvidia.com/gpu": "nvidia.com/gpu: 8"}[field]
        tail = "\n            limits" if field == "memory" else ""
        text = text.replace(old, f"{field}: {json.dumps(value)}{tail}", 1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "job.yaml"
        path.write_text(text, encoding="utf-8")
        code, err = invoke("admit", str(graph_file), str(path))
    check(code, err)
    negative = isinstance(value, int) and not isinstance(value, bool) and value < 0
    negative |= isinstance(value, str) and value.startswith("-") and value.strip("-0") not in ("", "Gi", "m")
    if negative or (isinstance(value, str) and not value.isascii()):
        assert code != 0, (field, value)


@FUZZ
@given(option=st.sampled_from(["--nodes", "--gpus-per-node", "--ntasks", "--cpus-per-task", "--time", "--gres"]),
       digits=st.lists(st.sampled_from("0123456789") | OTHER_DIGITS, min_size=1, max_size=4))
def test_fuzzed_sbatch_numbers(slurm_graph_file: Path, option: str, digits: list[str]) -> None:
    number = "".join(digits)
    value = f"gpu:{number}" if option == "--gres" else number
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "job.sbatch"
        path.write_text("#!/bin/bash\n#SBATCH --account=research\n#SBATCH --partition=train\n"
                        f"#SBATCH {option}={value}\nsrun hostname\n", encoding="utf-8")
        code, err = invoke("admit", str(slurm_graph_file), str(path))
    check(code, err)
    if not number.isascii():
        assert code == 2 and f"{option}=" in err, (option, value, err[:300])


@FUZZ
@given(figure=st.floats(min_value=1e5, exclude_min=True, allow_nan=False, allow_infinity=False).map(repr)
       | st.integers(10**5 + 1, 10**20).map(str), wrong=st.sampled_from(["0", "3"]))
def test_fuzzed_absurd_figures_never_pass(figure: str, wrong: str) -> None:
    from tests.acceptance.test_nccl import NEW_FORMAT, ROW_1G

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "run.log"
        log.write_text(NEW_FORMAT.replace(ROW_1G, ROW_1G.replace("268.44      0", f"{figure} {wrong:>6}")))
        code, err = invoke("nccl", "check", str(log), "--instance-type", "p5.48xlarge", "--nodes", "2",
                           "--expected-busbw", "100")
    check(code, err)
    assert code in (1, 2), (figure, wrong, code)


node_files = st.sampled_from(["file", "fifo", "link-out", "link-in", "dir", "missing", "zero"])
node_facts = st.fixed_dictionaries({}, optional={
    "node": st.text(max_size=12) | st.integers(), "exit_status": st.sampled_from([0, 1, "0", None, 2.5, True]),
    "index": st.sampled_from([0, 1, "\u00b2", "x", -1, None]), "gpus": st.sampled_from([8, "8", -1, None])})


@FUZZ
@given(log_kind=node_files, meta_kind=node_files, facts=node_facts, name=st.text(min_size=1, max_size=8))
def test_fuzzed_run_directories(log_kind: str, meta_kind: str, facts: dict[str, Any], name: str) -> None:
    from tests.acceptance.test_nccl import NEW_FORMAT

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "run"
        node = root / "n0"
        node.mkdir(parents=True)
        facts = {**facts, "node": facts.get("node", "n0\x1b]0;" + name)}
        for file, kind, content in (("nccl.log", log_kind, NEW_FORMAT), ("node.json", meta_kind, json.dumps(facts))):
            path = node / file
            if kind == "file":
                path.write_text(content)
            elif kind == "fifo":
                os.mkfifo(path)
            elif kind == "link-out":
                path.symlink_to("/etc/hostname")
            elif kind == "link-in":
                (Path(tmp) / file).write_text(content)
                path.symlink_to(Path(tmp) / file)
            elif kind == "dir":
                path.mkdir()
            elif kind == "zero":
                path.symlink_to("/dev/zero")
        with bounded():
            code, err = invoke("nccl", "nodes", str(root), "--instance-type", "p5.48xlarge")
            _, out = invoke_out("nccl", "nodes", str(root), "--instance-type", "p5.48xlarge")
    check(code, err)
    assert "\x1b" not in out and "\x1b" not in err
    if "file" not in (log_kind,) or meta_kind not in ("file", "missing"):
        assert code != 0, (log_kind, meta_kind)


@FUZZ
@given(tolerance=st.text(max_size=6) | st.floats().map(str), guard=st.text(max_size=6) | st.floats().map(str))
def test_fuzzed_tolerances_and_guardrails(tolerance: str, guard: str) -> None:
    import math

    log = "tests/fixtures/nccl/all_reduce_p5x2_mpirun.log"
    code, err = invoke("nccl", "compare", log, log, "--tolerance", tolerance)
    check(code, err)
    try:
        ok = tolerance.isascii() and math.isfinite(float(tolerance)) and 0 <= float(tolerance) <= 1
    except ValueError:
        ok = False
    if not ok:
        assert code == 2, tolerance
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.json"
        path.write_text(json.dumps(_report()))
        code, err = invoke("cost", "diff", "--combine", str(path), "--fail-above-usd", guard)
    check(code, err)


def _report() -> dict[str, Any]:
    from tests.cost.test_combine import REPORT

    return json.loads(json.dumps(REPORT))


def _paths(doc: Any, where: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [where]
    if isinstance(doc, dict):
        out += [p for k, v in doc.items() for p in _paths(v, (*where, k))]
    elif isinstance(doc, list):
        out += [p for i, v in enumerate(doc) for p in _paths(v, (*where, i))]
    return out


@FUZZ
@given(data=st.data(), value=json_values | st.text(alphabet=st.sampled_from("#![]()<>|@`&\n x-_/"), max_size=20))
def test_fuzzed_combined_reports(data: st.DataObject, value: Any) -> None:
    doc = _report()
    where = data.draw(st.sampled_from(_paths(doc)[1:]))
    target: Any = doc
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.json"
        try:
            path.write_text(json.dumps(doc, allow_nan=True), encoding="utf-8", errors="surrogatepass")
        except ValueError:
            return
        code, err = invoke("cost", "diff", "--combine", str(path))
        _, out = invoke_out("cost", "diff", "--combine", str(path))
    check(code, err)
    if code == 0 and isinstance(value, str):
        for line in out.splitlines():
            assert not line.startswith(("# ", "![", "<img", "@")), line


@FUZZ
@given(depth=st.integers(1, 200_000), opening=st.sampled_from(["[", '{"a": ']),
       reader=st.sampled_from(["policy", "config", "record", "compare", "combine", "measured"]))
def test_fuzzed_nesting(depth: int, opening: str, reader: str) -> None:
    text = opening * depth + ("1" if opening != "[" else "") + ("}" if opening != "[" else "]") * depth
    log = "tests/fixtures/nccl/all_reduce_p5x2_mpirun.log"
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "deep.json")
        Path(path).write_text(text)
        argv = {"policy": ["policy", path], "config": ["policy", saved_graph(), "--config", path],
                "record": ["nccl", "record", log, "--stack", "prod-aws", "--node-group", "h100", "--nodes-json", path],
                "compare": ["nccl", "compare", path, path], "combine": ["cost", "diff", "--combine", path],
                "measured": ["sizing", "prod-aws", "--measured", path]}[reader]
        code, err = invoke(*argv)
    check(code, err)
    assert code == 2, (reader, depth, err[:300])


def invoke_out(*argv: str) -> tuple[int, str]:
    """Run the tool in this process; return its exit code and standard output."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue()
