"""``blueprint sizing --measured`` (issue 34): the storage check's records against the goodput model and the stack's
restore target; the goodput recomputed from the measured times; bad records refused by name, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from blueprint.cli import main
from components.sizing import goodput_model
from components.sizing.measured import restore_target
from tests.conftest import stack

CHECKPOINT = 980_000_000_000  # prod-aws: 70B parameters x 14 B


def _run(tmp_path: Path, write_s: float, read_s: float, writers: int = 16, **extra: object) -> Path:
    """A downloaded acceptance/storage/<run>/ directory: one <pod>/storage.json per writer (their share each)."""
    run = tmp_path / "run-1"
    for i in range(writers):
        pod = run / f"storage-checkpoint-{i}-abcde"
        pod.mkdir(parents=True)
        share = CHECKPOINT // writers
        record = {"target": "filesystem", "bytes": share, "checkpoint_bytes": CHECKPOINT, "writers": writers,
                  "index": i, "write_seconds": write_s, "read_seconds": read_s,
                  "write_mbps": share / write_s / 1e6, "read_mbps": share / read_s / 1e6, "latency_ms": None,
                  "tool": "fio-3.36", "node": f"ip-10-0-0-{i}", "pod": pod.name, "write_status": 0,
                  "read_status": 0, "started": "2026-01-01T00:00:00Z", "finished": "2026-01-01T00:10:00Z", **extra}
        (pod / "storage.json").write_text(json.dumps(record))
        (pod / "fio-read.json").write_text(json.dumps(
            {"jobs": [{"read": {"clat_ns": {"percentile": {"50.000000": 3e6, "99.000000": 4.5e7}}}}]}))
    return run


def _doc(path: Path, out: Path) -> tuple[int, dict[str, object]]:
    code = main(["sizing", "prod-aws", "--measured", str(path), "--format", "json", "-o", str(out)])
    return code, json.loads(out.read_text())


def test_the_restore_target_is_read_from_the_acceptance_metric_or_the_spec_key() -> None:
    spec = stack("prod-aws").spec
    found = restore_target(spec)
    assert found is not None and found.seconds == 900 and "acceptanceMetric" in found.source
    goodput = spec.workload.goodput
    assert goodput is not None
    keyed = spec.model_copy(update={"workload": spec.workload.model_copy(update={
        "goodput": goodput.model_copy(update={"restore_target_minutes": 5.0})})})
    assert restore_target(keyed) == type(found)(300.0, "workload.goodput.restoreTargetMinutes")
    plain = spec.model_copy(update={"workload": spec.workload.model_copy(update={"acceptance_metric": "eval loss"})})
    assert restore_target(plain) is None


def test_a_fast_run_passes_and_its_goodput_follows_the_measured_time(tmp_path: Path) -> None:
    fast = _run(tmp_path / "fast", 100.0, 120.0)
    code, doc = _doc(fast, tmp_path / "fast.json")
    assert code == 0 and doc["passed"] is True and doc["restore_met"] is True
    assert doc["writers"] == 16 and doc["bytes"] == CHECKPOINT
    assert doc["checkpoint_write_s"] == pytest.approx(100.0) and doc["checkpoint_read_s"] == pytest.approx(120.0)
    assert doc["write_mbps"] == pytest.approx(9800.0)
    assert doc["latency_ms_worst"] == {"read": {"p50": 3.0, "p99": 45.0}}
    model = goodput_model(stack("prod-aws").spec)
    assert doc["modelled_write_s"] == pytest.approx(model.paths["filesystem"].write_s)
    # Faster than the rated throughput: more goodput than modelled.
    assert doc["goodput_measured"] > doc["goodput_modelled"] == pytest.approx(model.goodput)
    slower = _run(tmp_path / "slower", 400.0, 480.0)
    code, slow_doc = _doc(slower, tmp_path / "slower.json")
    assert code == 0 and slow_doc["goodput_measured"] < doc["goodput_measured"]


def test_a_slow_restore_misses_the_target_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    slow = _run(tmp_path, 200.0, 20 * 60.0)  # restore in 20 minutes: over the 15 the acceptance metric allows
    assert main(["sizing", "prod-aws", "--measured", str(slow)]) == 1
    out = capsys.readouterr().out
    assert "restore target: 15.0 min" in out and "MISSED" in out and "result: FAIL" in out


def test_a_failed_pod_fails_the_run(tmp_path: Path) -> None:
    run = _run(tmp_path, 100.0, 120.0)
    record = next(run.rglob("storage.json"))
    doc = json.loads(record.read_text())
    doc.update({"read_status": 124, "read_seconds": None})
    record.write_text(json.dumps(doc))
    code, out = _doc(run, tmp_path / "out.json")
    assert code == 1 and len(out["failed"]) == 1  # type: ignore[arg-type]


def test_a_single_record_file_is_read(tmp_path: Path) -> None:
    run = _run(tmp_path, 100.0, 120.0, writers=1)
    assert main(["sizing", "prod-aws", "--measured", str(next(run.rglob("storage.json")))]) == 0


@pytest.mark.parametrize("content, message", [
    ("not json {", "not JSON"),
    ("[1, 2]", "JSON object"),
    (json.dumps({"target": "tape", "bytes": 1, "writers": 1}), "target must be"),
    (json.dumps({"target": "filesystem", "bytes": "many", "writers": 1}), "bytes must be"),
    (json.dumps({"target": "filesystem", "bytes": 10, "writers": 1, "write_seconds": -1}), "write_seconds"),
])
def test_bad_records_are_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str,
                                         message: str) -> None:
    bad = tmp_path / "storage.json"
    bad.write_text(content)
    assert main(["sizing", "prod-aws", "--measured", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and message in err and "Traceback" not in err


def test_a_directory_without_a_record_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["sizing", "prod-aws", "--measured", str(tmp_path / "empty")]) == 2
    assert "no storage.json" in capsys.readouterr().err


def _bucket_run(run: Path, write_s: float, read_s: float, writers: int = 16) -> None:
    """Each pod's storage-bucket.json beside its storage.json (the bucket leg of the same run)."""
    for i, pod in enumerate(sorted(p for p in run.iterdir() if p.is_dir())[:writers]):
        share = CHECKPOINT // writers
        (pod / "storage-bucket.json").write_text(json.dumps({
            "target": "bucket", "bytes": share, "checkpoint_bytes": CHECKPOINT, "writers": writers, "index": i,
            "write_seconds": write_s, "read_seconds": read_s, "write_mbps": None, "read_mbps": None,
            "latency_ms": None, "tool": "aws-cli/2.31.23", "node": f"ip-10-0-0-{i}", "pod": pod.name,
            "write_status": 0, "read_status": 0}))


def test_a_run_with_both_targets_is_judged_on_the_filesystem_and_shows_the_bucket(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """prod-aws restores from the filesystem: its records decide; the bucket's (a restore after the filesystem is
    lost) are shown beside them, a slow one not failing the run."""
    run = _run(tmp_path, 100.0, 120.0)
    _bucket_run(run, 400.0, 30 * 60.0)  # restore from the bucket in 30 minutes: over the 15 allowed
    code, doc = _doc(run, tmp_path / "out.json")
    assert code == 0 and doc["target"] == "filesystem" and doc["passed"] is True
    bucket = doc["others"]["bucket"]  # type: ignore[index]
    assert bucket["target"] == "bucket" and bucket["writers"] == 16 and bucket["restore_met"] is False
    assert bucket["write_mbps"] == pytest.approx(CHECKPOINT / 400.0 / 1e6)
    assert bucket["modelled_mbps"] is None and bucket["goodput_measured"] is None  # prod-aws gives no bucketWriteMbps
    assert main(["sizing", "prod-aws", "--measured", str(run)]) == 0
    out = capsys.readouterr().out
    assert "measured storage of prod-aws: bucket, 16 writers" in out and "aws-cli/2.31.23" in out
    assert "restore from the bucket (after the filesystem is lost; not judged): 15.0 min" in out and "MISSED" in out
    assert "set workload.goodput.bucketWriteMbps" in out
    assert out.rstrip().endswith("result: PASS (judged on the filesystem)")


def test_a_bucket_path_is_judged_on_the_bucket_beside_bucket_write_mbps(tmp_path: Path) -> None:
    from blueprint.sizing.measured import compare, judged_target, load_records, measured_document

    spec = stack("prod-aws").spec
    goodput = spec.workload.goodput
    assert goodput is not None
    bucket_spec = spec.model_copy(update={"workload": spec.workload.model_copy(update={
        "goodput": goodput.model_copy(update={"checkpoint_path": "bucket", "bucket_write_mbps": 5000.0})})})
    model = goodput_model(bucket_spec)
    run = _run(tmp_path, 100.0, 120.0)
    _bucket_run(run, 150.0, 180.0)
    by_target = load_records(run)
    assert judged_target(model, set(by_target)) == "bucket"
    doc = measured_document(compare(model, by_target["bucket"], restore_target(bucket_spec)))
    assert doc["modelled_mbps"] == pytest.approx(5000.0) and doc["write_mbps"] == pytest.approx(CHECKPOINT / 150e6)
    assert doc["checkpoint_read_s"] == pytest.approx(180.0) and doc["restore_met"] is True
    assert doc["goodput_measured"] is not None  # the bucket path's plan with the measured times
    # Only bucket records for a filesystem model: they are what there is to judge.
    assert judged_target(goodput_model(spec), {"bucket"}) == "bucket"
