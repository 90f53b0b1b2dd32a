"""Issue 35, hostile input to the tools' own files (acceptance runs, cost reports, JSON documents, credentials):
each ends as a refusal (exit 2, naming the file and what is wrong) or, for a benchmark's figures, a failure; never
an internal error. Each test fails when its check is removed."""

from __future__ import annotations

from pathlib import Path

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
