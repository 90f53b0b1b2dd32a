"""Bad input never crashes: every exit code means one thing, every error names its input, no traceback
(issue 8). The random counterpart of these cases is tests/cli/test_fuzz.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import blueprint.files.output
import blueprint.graph.engine
from blueprint.cli import main
from blueprint.preview.render import render_preview
from components.spec import parse_spec
from tests.conftest import offline_run, raw_stack_config

PROD = Path("stacks/Pulumi.prod-aws.yaml")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.fixture(scope="module")
def graph_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("graph") / "prod.json"
    path.write_text(offline_run("prod-aws").graph.to_json())
    return path


# --- exit codes ---------------------------------------------------------------------------------


def test_exit_0_ok_and_1_on_a_mandatory_violation(tmp_path: Path, graph_file: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "policy", str(graph_file))[0] == 0
    doc = json.loads(graph_file.read_text())
    doc["resources"] = [r for r in doc["resources"] if r["name"] != "opencost"]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(doc))
    code, out, _ = run(capsys, "policy", str(broken))
    assert code == 1 and "policy verdict: FAIL" in out


def test_exit_3_on_an_internal_error_with_a_short_report(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    def boom(*_: Any, **__: Any) -> Any:
        raise RuntimeError("engine exploded")

    monkeypatch.setattr(blueprint.graph.engine, "run_program", boom)
    code, out, err = run(capsys, "graph", "prod-aws")
    assert code == 3 and out == ""
    assert err == ("internal error: RuntimeError: engine exploded\nthis is a bug in blueprint, not in your input; "
                   "run again with --debug to write the traceback to a log file\n")


def test_debug_writes_the_traceback_to_a_log(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    def boom(*_: Any, **__: Any) -> Any:
        raise RuntimeError("engine exploded")

    monkeypatch.setattr(blueprint.graph.engine, "run_program", boom)
    code, _, err = run(capsys, "graph", "prod-aws", "--debug")
    assert code == 3
    log = Path(err.rsplit("the traceback is in ", 1)[1].strip())
    assert "Traceback" in log.read_text() and "engine exploded" in log.read_text()
    log.unlink()


# --- output paths -------------------------------------------------------------------------------


@pytest.mark.parametrize(("target", "message"), [
    ("{tmp}", "{tmp}: is a directory; give a file name"),
    ("{tmp}/missing/graph.json", "{tmp}/missing/graph.json: the directory {tmp}/missing does not exist"),
    ("{tmp}/file.txt/graph.json", "{tmp}/file.txt/graph.json: the directory {tmp}/file.txt does not exist"),
])
def test_output_paths_are_checked_before_the_program_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        target: str, message: str) -> None:
    (tmp_path / "file.txt").write_text("x")
    monkeypatch.setattr(blueprint.graph.engine, "run_program", lambda *a, **k: pytest.fail("the program ran"))
    code, _, err = run(capsys, "graph", "prod-aws", "-o", target.format(tmp=tmp_path))
    assert code == 2 and err == f"error: {message.format(tmp=tmp_path)}\n"


def test_manifests_refuse_a_file_as_their_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "out").write_text("x")
    code, _, err = run(capsys, "manifests", "dev-aws", "-o", str(tmp_path / "out"))
    assert code == 2 and err == f"error: {tmp_path}/out: exists and is not a directory\n"


def test_a_failed_write_leaves_no_partial_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str], graph_file: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("previous report")

    def full(_: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(blueprint.files.output.os, "fsync", full)
    code, _, err = run(capsys, "policy", str(graph_file), "--format", "json", "-o", str(target))
    assert code == 2 and err == f"error: {target}: cannot be written: No space left on device\n"
    assert target.read_text() == "previous report"  # the old file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # and no temporary file is left


def test_a_device_is_written_through_never_replaced(graph_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As root, renaming a temporary file over /dev/null would replace the device node with a regular file."""
    import stat

    code, out, _ = run(capsys, "policy", str(graph_file), "--format", "json", "-o", "/dev/null")
    assert (code, out) == (0, "")
    assert stat.S_ISCHR(Path("/dev/null").stat().st_mode)
    assert not [p for p in Path("/dev").iterdir() if p.name.startswith(".null.")]  # no temporary file left there
    if Path("/dev/full").exists():
        code, _, err = run(capsys, "policy", str(graph_file), "--format", "json", "-o", "/dev/full")
        assert code == 2 and err == "error: /dev/full: cannot be written: No space left on device\n"
        assert stat.S_ISCHR(Path("/dev/full").stat().st_mode)


def test_a_fifo_is_written_through(tmp_path: Path, graph_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import os
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    code, _, _ = run(capsys, "policy", str(graph_file), "--format", "json", "-o", str(fifo))
    reader.join(timeout=30)
    assert code == 0 and json.loads(got[0]) == {"violations": []}
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_symlink_is_written_through_to_its_target(tmp_path: Path, graph_file: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "reports" / "policy.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "latest.json"
    link.symlink_to(target)
    assert run(capsys, "policy", str(graph_file), "--format", "json", "-o", str(link))[0] == 0
    assert link.is_symlink() and link.resolve() == target
    assert json.loads(target.read_text()) == {"violations": []}
    dangling = tmp_path / "next.json"
    dangling.symlink_to(tmp_path / "reports" / "new.json")
    assert run(capsys, "policy", str(graph_file), "--format", "json", "-o", str(dangling))[0] == 0
    assert dangling.is_symlink() and (tmp_path / "reports" / "new.json").is_file()


@pytest.mark.parametrize(("target", "message"), [
    ("", "argument -o/--output: an empty path is not a file name"),
    ("{tmp}/out.json/", "argument -o/--output: '{tmp}/out.json/' ends with '/', so it names a directory; give a "
                        "file name"),
])
def test_not_a_file_name_is_refused_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str], target: str,
                                                    message: str) -> None:
    monkeypatch.setattr(blueprint.graph.engine, "run_program", lambda *a, **k: pytest.fail("the program ran"))
    with pytest.raises(SystemExit) as exit_info:
        main(["graph", "prod-aws", "-o", target.format(tmp=tmp_path)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.endswith(f"blueprint graph: error: {message.format(tmp=tmp_path)}\n")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(SystemExit) as exit_info:
        main(["manifests", "dev-aws", "-o", ""])
    assert exit_info.value.code == 2
    assert "argument -o/--output: an empty path is not a directory name" in capsys.readouterr().err


def test_new_files_follow_the_umask_and_replaced_files_keep_their_mode(tmp_path: Path, graph_file: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    import os
    import stat

    old = os.umask(0o022)
    try:
        new = tmp_path / "new.json"
        assert run(capsys, "policy", str(graph_file), "--format", "json", "-o", str(new))[0] == 0
        assert stat.S_IMODE(new.stat().st_mode) == 0o644
        os.umask(0o077)
        other = tmp_path / "private.json"
        assert run(capsys, "policy", str(graph_file), "--format", "json", "-o", str(other))[0] == 0
        assert stat.S_IMODE(other.stat().st_mode) == 0o600
        new.chmod(0o640)
        assert run(capsys, "policy", str(graph_file), "--format", "json", "-o", str(new))[0] == 0
        assert stat.S_IMODE(new.stat().st_mode) == 0o640
    finally:
        os.umask(old)


# --- stack files --------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "message"), [
    ("config:\n  a: &x [1]\n  b: *x\n", "line 3, column 6: aliases (*name) are not allowed in stack files; write "
                                        "the value out [rule: yaml-no-aliases]"),
    ("a: &a [*a]\n", "line 1, column 8: aliases (*name) are not allowed in stack files; write the value out "
                     "[rule: yaml-no-aliases]"),
    ("config:\n  gpu-cluster:spec:\n    environment: prod\n    environment: staging\n",
     "line 4, column 5: duplicate key 'environment' (the first value would be silently replaced) "
     "[rule: yaml-duplicate-key]"),
    ("config:\n  a: \"x\u0000\"\n", "position 15: not valid YAML: unacceptable character #x0000 [rule: yaml-syntax]"),
    ("config: " + "[" * 100 + "]" * 100, "line 1, column 72: nested deeper than 64 levels [rule: yaml-depth]"),
    ("config:\n  1: x\n", "line 2, column 3: keys must be plain strings [rule: yaml-key-type]"),
])
def test_hostile_stack_files(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str) -> None:
    path = tmp_path / "Pulumi.hostile.yaml"
    path.write_text(text)
    code, out, err = run(capsys, "graph", str(path))
    assert code == 2 and out == ""
    assert err == f"error: {path}: {message}\n"


def test_a_billion_laughs_is_refused_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    path = tmp_path / "Pulumi.lol.yaml"
    path.write_text("\n".join(lines) + "\n")
    code, _, err = run(capsys, "graph", str(path))
    assert code == 2 and "[rule: yaml-no-aliases]" in err and len(err) < 300


def test_oversize_stack_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "Pulumi.big.yaml"
    path.write_text("# " + "x" * (1024 * 1024) + "\n")
    code, _, err = run(capsys, "graph", str(path))
    assert code == 2 and err.endswith("a stack file is at most 1,048,576 bytes [rule: stack-file-size]\n")


def test_timestamps_stay_strings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # An unquoted start/end is read as text, as the Pulumi CLI passes it, and the program still runs.
    text = PROD.read_text().replace('"2027-01-04T11:30:00Z"', "2027-01-04T11:30:00Z")
    path = tmp_path / "Pulumi.unquoted.yaml"
    path.write_text(text)
    code, _, _ = run(capsys, "graph", str(path), "-o", str(tmp_path / "g.json"))
    assert code == 0


# --- graph documents ----------------------------------------------------------------------------


def _doc_with(graph_file: Path, change: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(graph_file.read_text())
    change(doc)
    return doc


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["resources"][0].update(protect="false"), "resources[0].protect: must be a boolean, got str"),
    (lambda d: d["resources"][0].update(urn=7), "resources[0].urn: must be a string, got int"),
    (lambda d: d["resources"][0].update(inputs=[]), "resources[0].inputs: must be an object, got list"),
    (lambda d: d["resources"][0].update(dependencies=[1]), "resources[0].dependencies[0]: must be a string"),
    (lambda d: d["resources"][0].update(parent=True), "resources[0].parent: must be a string, got a boolean"),
    (lambda d: d.update(stack=["x"]), "graph.stack: must be a string, got list"),
])
def test_graph_fields_are_typed_at_the_door(tmp_path: Path, graph_file: Path, capsys: pytest.CaptureFixture[str],
                                           change: Any, message: str) -> None:
    path = tmp_path / "g.json"
    path.write_text(json.dumps(_doc_with(graph_file, change)))
    code, out, err = run(capsys, "policy", str(path))
    assert code == 2 and out == ""
    assert err == f"error: {path}: {message}\n"


@pytest.mark.parametrize(("text", "message"), [
    ('{"resources": [{"urn": "u", "type": "t", "name": "n", "inputs": {"a": NaN}}]}',
     "not JSON: NaN is not a JSON number"),
    ('{"resources": [{"urn": "u", "type": "t", "name": "n", "inputs": {"a": "\\ud800"}}]}',
     "resources[0].inputs.a: a string holds a lone surrogate (\\ud800-\\udfff), not text"),
    ('{"resources": [{"urn": "u", "type": "t", "name": "n", "inputs": ' + '{"a": ' * 70 + "1" + "}" * 71 + "]}",
     "resources[0].inputs.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a."
     "a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a: nested deeper than 64 levels"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"steps": [1, 2]}', "steps[0]: a step is an object"),
    ('{"steps": [{"op": "create"}]}', "steps[0].newState: required"),
    ('{"steps": [{"op": "same", "newState": {"urn": "u", "type": "t", "protect": "false"}}]}',
     "steps[0].newState.protect: must be a boolean, got str"),
    ('{"deployment": {"resources": ["x"]}}', "deployment.resources[0]: a resource is an object"),
    ("\xff", "not UTF-8 text"),
])
def test_hostile_graph_documents(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                 message: str) -> None:
    path = tmp_path / "g.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape") if text != "\xff" else b"\xff")
    code, out, err = run(capsys, "policy", str(path))
    assert code == 2 and out == ""
    assert err == f"error: {path}: {message}\n"


# --- policy config ------------------------------------------------------------------------------


@pytest.mark.parametrize(("config", "message"), [
    ({"aws-eks-gpu-nodegroup-max-size-cap": {"maxNodes": "32"}},
     "aws-eks-gpu-nodegroup-max-size-cap.maxNodes: '32' is not of type 'integer'"),
    ({"aws-resources-require-billing-tags": {"requiredTags": "team"}},
     "aws-resources-require-billing-tags.requiredTags: 'team' is not of type 'array'"),
    ({"stateful-resources-protected-in-production": {"statefulTypes": "x"}},
     "stateful-resources-protected-in-production.statefulTypes: 'x' is not of type 'array'"),
    ({"aws-ec2-launch-template-requires-imdsv2": {"maxHopLimit": 0}},
     "aws-ec2-launch-template-requires-imdsv2.maxHopLimit: 0 is less than the minimum of 1"),
    ({"aws-eks-gpu-nodegroup-max-size-cap": {"maxNodes": True}},
     "aws-eks-gpu-nodegroup-max-size-cap.maxNodes: True is not of type 'integer'"),
    ({"aws-resources-require-billing-tags": {"requiredTags": ["team", "team"]}},
     "aws-resources-require-billing-tags.requiredTags: ['team', 'team'] has non-unique elements"),
])
def test_policy_knobs_are_checked_against_their_schema(tmp_path: Path, graph_file: Path,
                                                       capsys: pytest.CaptureFixture[str], config: dict[str, Any],
                                                       message: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code, out, err = run(capsys, "policy", str(graph_file), "--config", str(path))
    assert code == 2 and out == ""
    assert err == f"error: {path}: {message}\n"


# --- the preview warns before standard support ends --------------------------------------------


def test_preview_warns_90_days_before_standard_support_ends() -> None:
    run_ = offline_run("prod-aws")
    spec = parse_spec(raw_stack_config("prod-aws")["gpu-cluster:spec"], "stacks/Pulumi.prod-aws.yaml")
    soon = render_preview(run_.graph, spec, "x", run_.outputs, now=datetime(2027, 1, 10, tzinfo=UTC))
    assert ("warning: Kubernetes 1.35 leaves EKS standard support on 2027-03-27 (in 76 days): plan the upgrade"
            in soon)
    later = render_preview(run_.graph, spec, "x", run_.outputs, now=datetime(2026, 11, 29, tzinfo=UTC))
    assert "leaves EKS standard support" not in later
