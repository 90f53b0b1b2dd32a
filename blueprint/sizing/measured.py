"""``blueprint sizing <stack> --measured <record>``: the storage check's records (components/kubernetes/objects/
storage_check.py) against the goodput model and the stack's restore target.

A record is one pod's ``storage.json`` (the filesystem) or ``storage-bucket.json`` (the bucket); a run is the
directory ``acceptance/storage/<run>/`` downloaded from the bucket (per writer a ``<pod>/`` with its records, and
fio's ``fio-write.json`` and ``fio-read.json``). The pods wrote at once and read at once, so the checkpoint's write
time is the slowest pod's, and its throughput all the bytes over that time; the time for the model's checkpoint is
its bytes at that throughput (the same when the run wrote the model's size). A run with both targets is judged on
the one the model's restore reads (:func:`judged_target`); the other is shown beside it, not judged.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blueprint.files.input import InputTooLargeError, read_text_limited
from blueprint.graph.model import StrictJsonError, strict_json
from components.sizing.goodput import CheckpointPlan
from components.sizing.measured import RestoreTarget, measured_plan, measured_times
from components.sizing.plan import MB, GoodputModel, finite

RECORD_NAME = "storage.json"
BUCKET_RECORD_NAME = "storage-bucket.json"  # components/kubernetes/objects/storage_check.py, BUCKET_RECORD
RECORD_NAMES = (RECORD_NAME, BUCKET_RECORD_NAME)
TARGETS = ("filesystem", "bucket")


class RecordError(ValueError):
    """A record that cannot be read: the message names the file."""


@dataclass(frozen=True)
class StorageRecord:
    """One pod's record (the fields ``blueprint sizing`` uses) and where it was read."""

    file: Path
    target: str
    bytes: int
    writers: int
    write_seconds: float | None
    read_seconds: float | None
    write_status: int
    read_status: int
    node: str
    tool: str
    # {"write"|"read": {"p50": ms, "p99": ms}} from fio's output beside the record; "record": the record's own figure
    latency_ms: dict[str, dict[str, float]]

    @property
    def passed(self) -> bool:
        return (self.write_status == 0 and self.read_status == 0 and self.write_seconds is not None
                and self.read_seconds is not None)


def _number(doc: dict[str, Any], key: str, file: Path, *, nullable: bool = False) -> float | None:
    value = doc.get(key)
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise RecordError(f"{file}: {key} must be a non-negative number{' or null' if nullable else ''}, "
                          f"got {value!r}")
    return float(value)


# A storage record or fio's JSON output: what `sizing --measured` reads at most of each (blueprint.files.input).
MAX_RECORD_BYTES = 16 * 1024 * 1024


def _fio_latency(path: Path, direction: str) -> dict[str, float] | None:
    """p50 and p99 completion latency (ms) of fio's JSON output (``jobs[0].<rw>.clat_ns.percentile``, one job with
    group_reporting), or None when the file is missing or has no percentiles."""
    try:
        doc = strict_json(read_text_limited(path, MAX_RECORD_BYTES))
        pct = doc["jobs"][0][direction]["clat_ns"]["percentile"]
        return {"p50": float(pct["50.000000"]) / 1e6, "p99": float(pct["99.000000"]) / 1e6}
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None


def read_record(file: Path) -> StorageRecord:
    """One ``storage.json``; :class:`RecordError` naming the file when it is not JSON or lacks a field."""
    try:
        doc = strict_json(read_text_limited(file, MAX_RECORD_BYTES))
    except InputTooLargeError as err:
        raise RecordError(f"{file}: {err}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise RecordError(f"{file}: cannot read: {err}") from None
    except json.JSONDecodeError as err:
        raise RecordError(f"{file}: not JSON ({err.msg}, line {err.lineno})") from None
    except StrictJsonError as err:  # NaN, a key given twice, nested too deeply
        raise RecordError(f"{file}: not JSON ({err})") from None
    if not isinstance(doc, dict):
        raise RecordError(f"{file}: a storage record is a JSON object")
    target = doc.get("target")
    if target not in TARGETS:
        raise RecordError(f"{file}: target must be one of {', '.join(TARGETS)}, got {target!r}")
    size = _number(doc, "bytes", file)
    writers = _number(doc, "writers", file)
    if not size or not writers or writers != int(writers):
        raise RecordError(f"{file}: bytes and writers must be positive (writers a whole number)")
    statuses = []
    for key in ("write_status", "read_status"):
        value = doc.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int):
            raise RecordError(f"{file}: {key} must be an integer, got {value!r}")
        statuses.append(value)
    latency: dict[str, dict[str, float]] = {}
    given = doc.get("latency_ms")
    if isinstance(given, dict) and {"p50", "p99"} <= set(given):
        latency["record"] = {"p50": float(given["p50"]), "p99": float(given["p99"])}
    for direction in ("write", "read"):
        found = _fio_latency(file.parent / f"fio-{direction}.json", direction)
        if found is not None:
            latency[direction] = found
    return StorageRecord(
        file=file, target=str(target), bytes=int(size), writers=int(writers),
        write_seconds=_number(doc, "write_seconds", file, nullable=True),
        read_seconds=_number(doc, "read_seconds", file, nullable=True),
        write_status=statuses[0], read_status=statuses[1], node=str(doc.get("node", "")),
        tool=str(doc.get("tool", "")), latency_ms=latency)


def load_records(path: Path) -> dict[str, list[StorageRecord]]:
    """The records of a file or of a run's directory (every ``storage.json`` and ``storage-bucket.json`` below it),
    by target; :class:`RecordError` when there is none."""
    if not path.exists():
        raise RecordError(f"{path}: no such file or directory")
    files = sorted(f for n in RECORD_NAMES for f in path.rglob(n)) if path.is_dir() else [path]
    if not files:
        raise RecordError(f"{path}: no {' or '.join(RECORD_NAMES)} below it (download acceptance/storage/<run>/ "
                          "from the bucket)")
    by_target: dict[str, list[StorageRecord]] = {}
    for record in (read_record(f) for f in files):
        by_target.setdefault(record.target, []).append(record)
    return by_target


def judged_target(model: GoodputModel, targets: list[str] | set[str]) -> str:
    """The target whose restore the model's path reads: the bucket on ``bucket``, the filesystem on ``filesystem``
    and ``tiered``; the only one measured when that one was not."""
    wanted = "bucket" if model.path == "bucket" else "filesystem"
    return wanted if wanted in targets else sorted(targets)[0]


@dataclass(frozen=True)
class Measured:
    """A run against the model: the aggregate figures, those scaled to the model's checkpoint, the plan they give."""

    target: str
    records: tuple[StorageRecord, ...]
    bytes: int
    write_s: float | None  # the slowest pod's (they wrote at once)
    read_s: float | None
    model_write_s: float | None  # the model's checkpoint at the measured throughput
    model_read_s: float | None
    modelled_write_s: float | None  # what the model assumed (rated throughput)
    modelled_read_s: float | None
    modelled_mbps: float | None  # the throughput the model assumed for this target (rated, or bucketWriteMbps)
    plan: CheckpointPlan | None
    restore: RestoreTarget | None
    model: GoodputModel

    @property
    def failed(self) -> list[StorageRecord]:
        return [r for r in self.records if not r.passed]

    @property
    def writers(self) -> int:
        return len(self.records)

    @property
    def restore_met(self) -> bool | None:
        if self.restore is None or self.model_read_s is None:
            return None
        return self.model_read_s <= self.restore.seconds

    @property
    def goodput_met(self) -> bool | None:
        if self.model.target is None or self.plan is None:
            return None
        return self.plan.goodput >= self.model.target

    @property
    def passed(self) -> bool:
        return not self.failed and self.restore_met is not False and self.goodput_met is not False


def compare(model: GoodputModel, records: list[StorageRecord], restore: RestoreTarget | None) -> Measured:
    """The run's aggregate against the model (module docstring)."""
    target = records[0].target
    total = sum(r.bytes for r in records)
    ok = [r for r in records if r.passed]
    write = max((r.write_seconds for r in ok if r.write_seconds is not None), default=None) if ok else None
    read = max((r.read_seconds for r in ok if r.read_seconds is not None), default=None) if ok else None
    done = sum(r.bytes for r in ok)

    def scaled(seconds: float | None) -> float | None:
        return None if seconds is None or not done else model.checkpoint_bytes / (done / max(seconds, 1e-9))

    model_write, model_read = scaled(write), scaled(read)
    modelled = model.paths.get(target)  # the target's own figure: the filesystem's rating, bucketWriteMbps
    times = (measured_times(model, target, model_write, model_read)
             if model_write is not None and model_read is not None else None)
    return Measured(
        target=target, records=tuple(records), bytes=total, write_s=write, read_s=read,
        model_write_s=model_write, model_read_s=model_read,
        modelled_write_s=modelled.write_s if modelled is not None else None,
        modelled_read_s=modelled.read_s if modelled is not None else None,
        modelled_mbps=_mbps(model.checkpoint_bytes, modelled.write_s) if modelled is not None else None,
        plan=measured_plan(model, times) if times is not None else None, restore=restore, model=model)


def _mbps(size: float, seconds: float | None) -> float | None:
    return None if not seconds else size / seconds / MB


def measured_document(m: Measured) -> dict[str, Any]:
    """The JSON form (``--format json``)."""
    latency: dict[str, dict[str, float]] = {}
    for r in m.records:
        for direction, figures in r.latency_ms.items():
            worst = latency.setdefault(direction, {"p50": 0.0, "p99": 0.0})
            for k in ("p50", "p99"):
                worst[k] = max(worst[k], figures[k])
    return {
        "target": m.target, "writers": m.writers, "model_nodes": m.model.nodes, "bytes": m.bytes,
        "checkpoint_bytes": m.model.checkpoint_bytes,
        "write_s": m.write_s, "read_s": m.read_s,
        "write_mbps": _mbps(sum(r.bytes for r in m.records if r.passed), m.write_s),
        "read_mbps": _mbps(sum(r.bytes for r in m.records if r.passed), m.read_s),
        "checkpoint_write_s": m.model_write_s, "checkpoint_read_s": m.model_read_s,
        "modelled_write_s": m.modelled_write_s, "modelled_read_s": m.modelled_read_s,
        "modelled_mbps": m.modelled_mbps,
        "latency_ms_worst": latency or None,
        "failed": [{"file": str(r.file), "node": r.node, "write_status": r.write_status,
                    "read_status": r.read_status} for r in m.failed],
        "restore_target_s": m.restore.seconds if m.restore is not None else None,
        "restore_target_source": m.restore.source if m.restore is not None else None,
        "restore_met": m.restore_met,
        "goodput_modelled": m.model.goodput,
        "goodput_measured": m.plan.goodput if m.plan is not None else None,
        "optimal_interval_s": finite(m.plan.interval_s) if m.plan is not None else None,
        "goodput_target": m.model.target, "goodput_met": m.goodput_met,
        "passed": m.passed,
    }


def _t(seconds: float | None) -> str:
    if seconds is None:
        return "not measured"
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _restore_label(m: Measured, judged: bool) -> str:
    if judged:
        return "restore target"
    if m.target == "bucket":
        return "restore from the bucket (after the filesystem is lost; not judged)"
    return f"restore from the {m.target} (not judged)"


def _lines(m: Measured, stack: str, judged: bool) -> list[str]:
    """One target's lines; the restore verdict and goodput only count for the judged target."""
    doc = measured_document(m)
    tools = sorted({r.tool for r in m.records if r.tool})
    lines = [f"measured storage of {stack}: {m.target}, {m.writers} writers (the model counts {m.model.nodes} "
             f"nodes), {m.bytes / 1e12:,.3f} TB written and read back ({', '.join(tools) or 'tool not recorded'})"]
    if m.writers != m.model.nodes:
        lines.append(f"  note: {m.writers} writers, not the model's {m.model.nodes}: the times below are the "
                     "model's checkpoint at the measured throughput, which may not scale")
    for r in m.failed:
        lines.append(f"  FAILED {r.file} (node {r.node or '?'}): write status {r.write_status}, read status "
                     f"{r.read_status} (124 timeout, 125 not run)")
    wm, rm = doc["write_mbps"], doc["read_mbps"]
    lines += [
        f"write: {_t(m.write_s)}" + (f" ({wm:,.0f} MB/s)" if wm else "")
        + f"; the model's checkpoint: {_t(m.model_write_s)} measured, {_t(m.modelled_write_s)} modelled",
        f"restore read: {_t(m.read_s)}" + (f" ({rm:,.0f} MB/s)" if rm else "")
        + f"; the model's checkpoint: {_t(m.model_read_s)} measured, {_t(m.modelled_read_s)} modelled",
    ]
    if m.modelled_mbps is not None:
        source = "workload.goodput.bucketWriteMbps" if m.target == "bucket" else "the filesystem's rating"
        lines.append(f"throughput the model assumes: {m.modelled_mbps:,.0f} MB/s ({source})")
    elif m.target == "bucket":
        lines.append("throughput the model assumes: none (set workload.goodput.bucketWriteMbps)")
    if doc["latency_ms_worst"]:
        lines.append("latency (worst pod, fio completion): " + "; ".join(
            f"{d} p50 {v['p50']:.1f} ms, p99 {v['p99']:.1f} ms" for d, v in sorted(doc["latency_ms_worst"].items())))
    label = _restore_label(m, judged)
    if m.restore is not None:
        verdict = {True: "met", False: "MISSED", None: "not judged (no restore measured)"}[m.restore_met]
        lines.append(f"{label}: {_t(m.restore.seconds)} from {m.restore.source}: {verdict}")
    elif judged:
        lines.append("restore target: none (set workload.goodput.restoreTargetMinutes)")
    if not judged:
        return lines
    if m.plan is not None:
        target = ""
        if m.model.target is not None:
            target = f" (target {m.model.target:.1%}: {'met' if m.goodput_met else 'NOT met'})"
        lines.append(f"goodput with the measured times: {m.plan.goodput:.2%}, modelled {m.model.goodput:.2%}{target}"
                     f"; checkpoint every {_t(finite(m.plan.interval_s))} of compute (Daly)")
    else:
        lines.append(f"goodput: not recomputed (checkpointPath {m.model.path} does not use the {m.target} as "
                     "measured, or nothing was measured)")
    return lines


def render_measured(m: Measured, stack: str, others: tuple[Measured, ...] = ()) -> str:
    """The table form: the judged target, then the others (``others``) unjudged, then the judged result."""
    lines = _lines(m, stack, True)
    for other in others:
        lines += ["", *_lines(other, stack, False)]
    lines.append("result: " + ("PASS" if m.passed else "FAIL") + f" (judged on the {m.target})")
    return "\n".join(lines) + "\n"


def render_measured_json(m: Measured, others: tuple[Measured, ...] = ()) -> str:
    """The judged target's document, with the other targets' under ``others`` (by target)."""
    doc = measured_document(m)
    doc["others"] = {o.target: measured_document(o) for o in others}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"
