"""What the tool writes stays inside its target, and what it reads is bounded, whatever the file is (issue 35,
"Output and input files"): links planted in an output directory are never followed out of it, and a device or a
link to one given as input is read only up to the documented limit and then refused, exit 2, naming the path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from blueprint.cli import main
from blueprint.files.output import OutputError, write_inside


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


# --- writing several files: only inside the target ----------------------------------------------------------------


def test_a_link_planted_where_a_manifest_goes_is_replaced_not_written_through(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, outside = tmp_path / "out", tmp_path / "outside.yaml"
    outside.write_text("precious\n")
    (out / "namespace").mkdir(parents=True)
    planted = out / "namespace" / "research.yaml"
    planted.symlink_to(outside)
    code, _, err = run(capsys, "manifests", "dev-aws", "-o", str(out))
    assert code == 0, err
    assert outside.read_text() == "precious\n"  # the link's target is untouched
    assert not planted.is_symlink() and "kind: Namespace" in planted.read_text()


def test_a_linked_directory_inside_the_target_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "helm").symlink_to(elsewhere, target_is_directory=True)
    code, _, err = run(capsys, "manifests", "dev-aws", "-o", str(out))
    assert code == 2
    assert err == (f"error: {out}/helm: is a link; files are written only inside {out} and links there are not "
                   "followed: remove it\n")
    assert list(elsewhere.iterdir()) == []


def test_the_named_directory_may_itself_be_a_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "out").symlink_to(real, target_is_directory=True)
    code, _, err = run(capsys, "manifests", "dev-aws", "-o", str(tmp_path / "out"))
    assert code == 0, err
    assert (real / "namespace").is_dir()


@pytest.mark.parametrize("name", ["..", ".", "", "a/b", "../../etc/passwd", "x\0y"])
def test_a_name_that_is_not_one_component_never_leaves_the_directory(tmp_path: Path, name: str) -> None:
    with pytest.raises(OutputError, match="is not a file name"):
        write_inside(tmp_path, ["kind", name], "x")
    with pytest.raises(OutputError, match="is not a file name"):
        write_inside(tmp_path, [name, "file.yaml"], "x")
    assert sorted(os.listdir(tmp_path)) in ([], ["kind"])


# --- reading: bounded whatever the file is ------------------------------------------------------------------------

DEVICES = ["/dev/zero", "link"]  # a device reports st_size 0 and never ends; a link to one reads the same


def _input(tmp_path: Path, kind: str) -> str:
    if kind == "link":
        link = tmp_path / "innocent.yaml"
        link.symlink_to("/dev/zero")
        return str(link)
    return kind


@pytest.mark.parametrize("kind", DEVICES)
@pytest.mark.parametrize(("argv", "message"), [
    (["admit", "dev-aws", "{input}"], "{input}: more than 16,777,216 bytes"),
    (["policy", "dev-aws", "--config", "{input}"], "{input}: not a readable JSON file: more than 1,048,576 bytes"),
    (["cost", "dev-aws", "--usage", "{input}"], "{input}: cannot be read: more than 16,777,216 bytes"),
    (["nccl", "parse", "{input}"], "{input}: more than 268,435,456 bytes"),
    (["nccl", "compare", "{input}", "{input}"], "{input}: not an acceptance record: more than 67,108,864 bytes"),
    (["cost", "diff", "--combine", "{input}"], "{input}: cannot be read (more than 67,108,864 bytes"),
])
def test_a_device_given_as_input_is_read_to_its_limit_and_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, argv: list[str], message: str) -> None:
    source = _input(tmp_path, kind)
    code, _, err = run(capsys, *(a.format(input=source) for a in argv))
    assert code == 2, err
    assert message.format(input=source) in err


def test_the_credentials_file_google_reads_is_bounded_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from blueprint.acceptance.checks import AccountAccessError
    from blueprint.clouds.gcp.api import _check_credentials_file

    for named, expected in (("/dev/zero", "more than 1,048,576 bytes"), (str(tmp_path), "cannot be read")):
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", named)
        with pytest.raises(AccountAccessError, match=f"GOOGLE_APPLICATION_CREDENTIALS={named}: {expected}"):
            _check_credentials_file()
    key = tmp_path / "key.json"
    key.write_text('{"type": "service_account"}')
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    _check_credentials_file()  # a real key file passes to google.auth


def test_expect_nodes_is_bounded_and_an_odd_index_is_no_crash(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    node = run_dir / "n0"
    node.mkdir(parents=True)
    (node / "nccl.log").write_text("#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
                                   "   8 2 float sum -1 10.0 0.00 0.00 0 10.0 0.00 0.00 0\n"
                                   "# Avg bus bandwidth    : 0.0\n")
    (node / "node.json").write_text('{"node": "n0", "index": "\\u00b2", "gpus": 8}')
    code, _, err = run(capsys, "nccl", "nodes", str(run_dir), "--instance-type", "p5.48xlarge",
                       "--expect-nodes", "1000000000")
    assert code == 2 and "--expect-nodes must be between 1 and 100,000, got 1000000000" in err
    code, _, err = run(capsys, "nccl", "nodes", str(run_dir), "--instance-type", "p5.48xlarge",
                       "--expect-nodes", "3")
    assert code == 1, err  # two nodes missing; the index "²" is not a Job index, and no crash


# --- documents that are not what the tool writes: refused by name ---------------------------------------------------


def test_deep_or_wrongly_typed_records_and_reports_are_refused_by_name(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"max_busbw_gbps": "fast", "busbw_by_size": 5}')
    nodes = tmp_path / "nodes.json"
    nodes.write_text('{"kind": "per-node", "nodes": [1, 2]}')
    nan = tmp_path / "nan.json"
    nan.write_text('{"stack": "a", "diff_monthly_usd": NaN, "diff_monthly_usd_at_max": 1, "resources": []}')
    for argv, message in (
            (["nccl", "compare", str(deep), str(deep)], f"{deep}: not an acceptance record: nested too deeply"),
            (["nccl", "compare", str(wrong), str(wrong)], f"{wrong}: not an acceptance record as blueprint writes "
                                                          "it: max_busbw_gbps must be a non-negative finite number"),
            (["nccl", "compare", str(nodes), str(nodes)], "nodes[0] must be an object with a node name"),
            (["cost", "diff", "--combine", str(deep)], f"{deep}: not JSON (nested too deeply)"),
            (["cost", "diff", "--combine", str(nan)], f"{nan}: not JSON")):
        code, _, err = run(capsys, *argv)
        assert code == 2 and message in err, (argv, err)


def test_arguments_that_would_make_a_check_pass_or_run_for_ever_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = Path("tests/fixtures/nccl/all_reduce_p5x2_mpirun.log")
    nodes = tmp_path / "nodes.json"
    nodes.write_text('{"items": []}')
    record = tmp_path / "record.json"
    assert main(["nccl", "record", str(log), "--stack", "prod-aws", "--node-group", "h100", "--nodes-json",
                 str(nodes), "-o", str(record)]) == 0
    for argv in (["nccl", "compare", str(record), str(record), "--tolerance", "nan"],
                 ["nccl", "compare", str(record), str(record), "--tolerance", "-1"],
                 ["nccl", "check", str(log), "--instance-type", "p5.48xlarge", "--nodes", "99999999999999999999"],
                 ["nccl", "check", str(log), "--instance-type", "p5.48xlarge", "--nodes", "0"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2, argv  # argparse's usage error, before any work
    capsys.readouterr()
    code, _, err = run(capsys, "cost", "diff", "--combine")
    assert code == 2 and "--combine needs the per-stack reports to combine" in err


def test_a_malformed_endpoint_is_refused_by_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    import boto3

    # a session of its own: boto3's default one caches what it resolves, which would leak into later tests
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "ht!tp://[::bad")
    code, _, err = run(capsys, "prices", "refresh", "--region", "us-east-1", "-o", str(tmp_path / "p.yaml"))
    assert code == 2 and "check AWS_ENDPOINT_URL" in err and "internal error" not in err


def test_a_forged_node_record_fails_and_its_name_cannot_drive_the_terminal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = Path("tests/fixtures/nccl/all_reduce_p5x2_mpirun.log").read_text()
    node = tmp_path / "run" / "n0"
    node.mkdir(parents=True)
    (node / "nccl.log").write_text(log)
    args = ("nccl", "nodes", str(tmp_path / "run"), "--instance-type", "p5.48xlarge", "--expected-busbw", "400")
    (node / "node.json").write_text('{"node": "n0", "exit_status": "0", "gpus": 8}')
    code, _, err = run(capsys, *args)
    assert code == 2 and 'exit_status is "0", not an integer' in err  # a string passes no check
    (node / "node.json").write_text('{"node": "evil\\u001b[31mRED\\u001b[0m\\u0007", "gpus": 8}')
    code, out, _ = run(capsys, *args)
    assert code == 0 and "\x1b" not in out and "\x07" not in out and "evil\\x1b[31mRED" in out
    (node / "node.json").write_text('{"node": "n0", "gpus": 8}')
    (node / "nccl.log").write_text(log.replace("437.89", "1e308", 1))
    code, out, _ = run(capsys, *args)
    assert code == 1 and "in-place busbw is 1e308 GB/s, beyond any fabric (100,000 GB/s)" in out
