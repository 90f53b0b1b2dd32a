"""Issue 35, hostile input to the tools' own files (acceptance runs, cost reports, JSON documents, credentials):
each ends as a refusal (exit 2, naming the file and what is wrong) or, for a benchmark's figures, a failure; never
an internal error. Each test fails when its check is removed."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from blueprint.cli import main

NCCL_LOG = Path("tests/fixtures/nccl/all_reduce_p5x2_mpirun.log")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    return code, out, err


# --- JSON nested deeper than the parser recurses: every JSON reader refuses it -------------------------------------


@pytest.mark.parametrize(("argv", "message"), [
    (["policy", "{deep}"], "{deep}: nested too deeply"),
    (["cost", "{deep}"], "{deep}: nested too deeply"),
    (["policy", "dev-aws", "--config", "{deep}"], "{deep}: not a readable JSON file: nested too deeply"),
    (["nccl", "record", str(NCCL_LOG), "--stack", "prod-aws", "--node-group", "h100", "--nodes-json", "{deep}"],
     "{deep}: nested too deeply"),
    (["nccl", "compare", "{deep}", "{deep}"], "{deep}: not an acceptance record: nested too deeply"),
    (["cost", "diff", "--combine", "{deep}"], "{deep}: not JSON (nested too deeply)"),
    (["sizing", "prod-aws", "--measured", "{deep}"], "{deep}: not JSON (nested too deeply)"),
])
@pytest.mark.parametrize("opening", ["[", '{"a": '])
def test_deeply_nested_json_is_refused_by_every_reader(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      argv: list[str], message: str, opening: str) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text(opening * 100_000 + ("]" if opening == "[" else "1}") + ("]" if opening == "[" else "}")
                    * 99_999)
    code, _, err = run(capsys, *(a.format(deep=deep) for a in argv))
    assert code == 2 and message.format(deep=deep) in err, err


def test_a_node_json_nested_too_deeply_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    node = tmp_path / "run" / "n0"
    node.mkdir(parents=True)
    (node / "nccl.log").write_text(NCCL_LOG.read_text())
    (node / "node.json").write_text("[" * 100_000 + "]" * 100_000)
    code, _, err = run(capsys, "nccl", "nodes", str(tmp_path / "run"), "--instance-type", "p5.48xlarge")
    assert code == 2 and f"{node / 'node.json'}: not JSON: nested too deeply" in err


def test_credentials_that_name_a_directory_are_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path))
    code, _, err = run(capsys, "preflight", "prod-gcp")
    assert code == 2 and err == f"error: GOOGLE_APPLICATION_CREDENTIALS={tmp_path}: cannot be read: Is a directory\n"


# --- nccl-tests figures: what printf writes, nothing else ---------------------------------------------------------


def test_a_figure_in_other_digits_is_not_read_as_a_number(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A fullwidth 437.89 is 437.89 to Python's float(); nccl-tests never writes it, so the row is no row and the
    run's peak is what the ASCII rows say."""
    lines = NCCL_LOG.read_text().splitlines(keepends=True)
    (i,) = [n for n, line in enumerate(lines) if "  2147483648  " in line]
    lines[i] = lines[i].translate({ord(d): 0xFF10 + int(d) for d in "0123456789"}).replace(
        "[\uff11,\uff10]<stdout>", "[1,0]<stdout>")
    log = tmp_path / "n.log"
    log.write_text("".join(lines))
    code, out, _ = run(capsys, "nccl", "check", str(log), "--instance-type", "p5.48xlarge", "--nodes", "2",
                       "--expected-busbw", "400")
    assert code == 1 and out.startswith("FAIL: peak busbw 313.29 GB/s"), out


@pytest.mark.parametrize("figure", ["1e308", "12345678901234567890"])
def test_an_absurd_busbw_in_a_failing_log_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                figure: str) -> None:
    log = tmp_path / "n.log"
    log.write_text(NCCL_LOG.read_text().replace("437.89      0", f"{figure}      3", 1))
    code, out, _ = run(capsys, "nccl", "check", str(log), "--instance-type", "p5.48xlarge", "--nodes", "2")
    assert code == 1 and f"in-place busbw is {figure} GB/s, beyond any fabric (100,000 GB/s)" in out, out


# --- a run directory as downloaded: files and directories only --------------------------------------------------


def _run_dir(root: Path) -> Path:
    for node in ("n0", "n1"):
        (root / node).mkdir(parents=True)
        (root / node / "nccl.log").write_text(NCCL_LOG.read_text())
        (root / node / "node.json").write_text(f'{{"node": "{node}", "gpus": 8}}')
    return root


@pytest.mark.parametrize(("plant", "what"), [
    (lambda p: os.mkfifo(p / "n1" / "nccl.log"), "n1/nccl.log: is a FIFO"),
    (lambda p: os.mkfifo(p / "n1" / "node.json"), "n1/node.json: is a FIFO"),
    (lambda p: (p / "n1" / "nccl.log").symlink_to("/etc/hostname"), "n1/nccl.log: is a link"),
    (lambda p: (p / "n1" / "node.json").symlink_to(p / "n0" / "node.json"), "n1/node.json: is a link"),
    (lambda p: (p / "n1" / "nccl.log").mkdir(), "n1/nccl.log: is a directory, not a file"),
    (lambda p: (p / "n2").symlink_to(p / "n0", target_is_directory=True), "n2: is a link"),
    (lambda p: ((p / "pairs" / "1-n0--n1").mkdir(parents=True), os.mkfifo(p / "pairs" / "1-n0--n1" / "nccl.log")),
     "pairs/1-n0--n1/nccl.log: is a FIFO"),
    (lambda p: (p / "multinode" / "nodes.json").mkdir(parents=True), "multinode/nodes.json: is a directory"),
])
def test_a_run_with_links_or_special_files_is_refused_without_blocking(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], plant: Callable[[Path], Any], what: str) -> None:
    root = _run_dir(tmp_path / "run")
    for name in ("nccl.log", "node.json"):
        if "n1/" + name in what:
            (root / "n1" / name).unlink()
    plant(root)
    code, _, err = run(capsys, "nccl", "nodes", str(root), "--instance-type", "p5.48xlarge")
    assert code == 2 and f"{root}/{what}" in err, err


def test_stray_special_files_beside_the_nodes_are_passed_over(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    root = _run_dir(tmp_path / "run")
    os.mkfifo(root / "stray")
    code, out, err = run(capsys, "nccl", "nodes", str(root), "--instance-type", "p5.48xlarge")
    assert code == 0 and "n1" in out, err


@pytest.mark.parametrize("argv", [
    ["nccl", "check", str(NCCL_LOG), "--instance-type", "p5.48xlarge", "--nodes", "\uff12"],
    ["nccl", "check", str(NCCL_LOG), "--instance-type", "p5.48xlarge", "--nodes", "\u00b2"],
    ["nccl", "check", str(NCCL_LOG), "--instance-type", "p5.48xlarge", "--nodes", "99999999999999999999"],
    ["nccl", "compare", str(NCCL_LOG), str(NCCL_LOG), "--tolerance", "inf"],
    ["nccl", "compare", str(NCCL_LOG), str(NCCL_LOG), "--tolerance", "-0.1"],
    ["nccl", "compare", str(NCCL_LOG), str(NCCL_LOG), "--tolerance", "nan"],
    ["nccl", "compare", str(NCCL_LOG), str(NCCL_LOG), "--tolerance", "0.\u0661"],
])
def test_counts_and_tolerances_outside_their_range_are_usage_errors(
        capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert ("--nodes" in err or "--tolerance" in err) and "Traceback" not in err


# --- Markdown the other commands print: names escaped there too ---------------------------------------------------


def test_policy_and_nccl_markdown_escape_what_they_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from tests.conftest import offline_run

    doc = json.loads(offline_run("dev-aws").graph.to_json())
    doc["stack"] = "x` <img src=y> `@everyone"
    bucket = next(r for r in doc["resources"] if r["type"] == "aws:s3/bucket:Bucket")
    bucket["inputs"].pop("serverSideEncryptionConfiguration", None)
    bucket["urn"] = bucket["urn"].rsplit("::", 1)[0] + "::a|b`<img>"
    graph = tmp_path / "g.json"
    graph.write_text(json.dumps(doc))
    main(["policy", str(graph), "--format", "markdown"])
    out = capsys.readouterr().out
    assert out.splitlines()[0].endswith("Policy check for ``x` <img src=y> `@everyone``")
    rows = [line for line in out.splitlines() if "<img>" in line]
    assert rows and all("``a\\|b`<img>``" in line for line in rows), rows

    log = tmp_path / "n.log"
    log.write_text("NCCL INFO NCCL version <img>[x](y)2.21.5\n" + NCCL_LOG.read_text())
    main(["nccl", "check", str(log), "--instance-type", "p5.48xlarge", "--nodes", "2", "--format", "markdown"])
    out = capsys.readouterr().out
    assert "NCCL \\<img\\>\\[x\\](y)2." in out and "<img>" not in out
