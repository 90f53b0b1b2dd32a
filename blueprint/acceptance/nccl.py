"""``blueprint nccl parse|check``: read nccl-tests output as it is found in the wild, and judge it.

Formats handled (each has a test): plain output; lines prefixed by ``mpirun --tag-output`` (``[1,0]<stdout>:``)
or ``srun -l`` (``0: ``, `` 13: ``); ``NCCL INFO`` lines, warnings and PMIx noise interleaved; the old table
(an ``error`` column, no ``root``) and the newer one (``root``, ``#wrong``, the ``nccl-tests version`` header
and the "Collective test concluded" footer); ``N/A`` in ``#wrong`` (validation off); lines whose leading ``#``
was stripped; a run cut short (no average line: ``complete`` is false). Bandwidths are nccl-tests' GB/s
(10^9 bytes per second), as printed.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from blueprint.files.markdown import md_text

_PREFIXES = (
    re.compile(r"^\[\d+,\d+\]<(?:stdout|stderr)>:", re.ASCII),  # mpirun --tag-output
    re.compile(r"^\s*\d+:\s?", re.ASCII),  # srun -l
)
# Figures are ASCII (re.ASCII below): nccl-tests prints them with printf, and Python's \d and float() would read
# fullwidth ("\uff12\uff16\uff18") or Arabic-Indic digits as numbers.
_NUMBER = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|(?i:nan|inf(?:inity)?))"
_ROW = re.compile(
    rf"^\s*(?P<size>\d+)\s+(?P<count>\d+)\s+(?P<type>[A-Za-z0-9_]+)\s+(?P<redop>[A-Za-z_]+)\s+"
    rf"(?:(?P<root>-?\d+)\s+)?"
    rf"(?P<oop_time>{_NUMBER})\s+(?P<oop_algbw>{_NUMBER})\s+(?P<oop_busbw>{_NUMBER})\s+(?P<oop_wrong>\S+)\s+"
    rf"(?P<ip_time>{_NUMBER})\s+(?P<ip_algbw>{_NUMBER})\s+(?P<ip_busbw>{_NUMBER})\s+(?P<ip_wrong>\S+)\s*$", re.ASCII)
_AVG = re.compile(rf"^#?\s*Avg bus bandwidth\s*:\s*(?P<value>{_NUMBER})(?P<failed>.*FAILED)?", re.ASCII)
_OOB = re.compile(r"^#?\s*Out of bounds values\s*:\s*(?P<count>\d+)\s+(?P<status>OK|FAILED)", re.ASCII)
_NGPUS = re.compile(r"^#?\s*nThread\s+(?P<threads>\d+)\s+nGpus\s+(?P<gpus>\d+)", re.ASCII)
_DEVICE = re.compile(r"^#?\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(?P<host>\S+)\s+device\s+"
                     r"(?P<device>\d+)\s+\[(?P<bus>[^\]]+)\]\s+(?P<gpu>.+?)\s*$", re.ASCII)
_TESTS_VERSION = re.compile(r"nccl-tests version\s+(?P<version>\S+)")
_NCCL_VERSION = re.compile(r"NCCL (?:INFO )?NCCL version\s+(?P<version>\S+)|NCCL version\s+(?P<v2>\d+\.\d+\.\d+\S*)")
_COLLECTIVE = re.compile(r"Collective test (?P<phase>starting|concluded):\s*(?P<name>\S+)")
_BINARY = re.compile(r"\b(?P<name>[a-z_]+)_perf\b")
_HEADER = re.compile(r"^#?\s*size\s+count\s+type\s+redop\s+(?P<root>root\s+)?time\s+algbw\s+busbw\s+"
                     r"(?P<wrong>#wrong|error)")


_COUNT = re.compile(r"\+?\d+", re.ASCII)
_MAX_COUNT_DIGITS = 20  # nccl-tests prints size_t and int64 values
_TYPE_BYTES = {"int8": 1, "uint8": 1, "char": 1, "half": 2, "float16": 2, "bfloat16": 2, "int32": 4, "uint32": 4,
               "int": 4, "float": 4, "float32": 4, "int64": 8, "uint64": 8, "double": 8, "float64": 8}


def infer_collective(rows: list[NcclRow]) -> tuple[str | None, list[str]]:
    """The collective a table must come from when the log does not name it, and the candidates when the columns
    leave a choice. nccl-tests prints ``size`` = max(send, receive bytes) and ``count`` = the per-rank parameter
    count (src/common.cu and each test's GetCollByteCount), so size / (count x type size) is 1 for all_reduce,
    broadcast, reduce and sendrecv, and the number of ranks for all_gather, alltoall, reduce_scatter, gather and
    scatter; ``redop`` (none or a reduction) and ``root`` (-1 or a rank) tell the rest apart. Returns (None,
    candidates) when they still tie: all_gather and alltoall, gather and scatter look alike."""
    measured = [r for r in rows if r.size > 0 and r.count > 0 and r.type in _TYPE_BYTES]
    if not measured:
        return None, []
    row = max(measured, key=lambda r: r.size)
    factor, rest = divmod(row.size, row.count * _TYPE_BYTES[row.type])
    if rest or factor < 1:
        return None, []
    rooted = row.root is not None and row.root >= 0
    reduces = row.redop != "none"
    if factor == 1:
        if reduces:
            return ("reduce", []) if rooted else ("all_reduce", [])
        return ("broadcast", []) if rooted else ("sendrecv", [])
    if reduces:
        return (None, []) if rooted else ("reduce_scatter", [])
    candidates = ["gather", "scatter"] if rooted else ["all_gather", "alltoall"]
    return None, candidates


class NcclLogError(ValueError):
    """A file that is not nccl-tests output; the message says why."""


@dataclass
class NcclRow:
    """One message size: out-of-place and in-place time (us), algbw and busbw (GB/s) and wrong values.

    A figure that is not a finite number (``nan``, ``inf``) is kept as None and named in ``invalid``; so is a
    ``#wrong`` that is not a whole count (negative, fractional, NaN). The old table's ``error`` column is the
    largest deviation seen (a float), not a count: it is kept as ``max_error`` and ``wrong`` stays None."""

    size: int
    count: int
    type: str
    redop: str
    root: int | None
    out_of_place: dict[str, Any]
    in_place: dict[str, Any]
    invalid: list[str] = field(default_factory=list)

    @property
    def wrong(self) -> int | None:
        """Wrong values over both passes; None when validation was off (``N/A``) or the table is the old one."""
        values = [p["wrong"] for p in (self.out_of_place, self.in_place) if p.get("wrong") is not None]
        return None if not values else int(sum(values))

    @property
    def max_busbw(self) -> float:
        return max((float(p["busbw"]) for p in (self.out_of_place, self.in_place) if p["busbw"] is not None),
                   default=0.0)


@dataclass
class NcclRun:
    """What a log says."""

    collective: str | None = None
    ranks: int | None = None
    gpus_per_rank: int | None = None
    nccl_version: str | None = None
    tests_version: str | None = None
    devices: list[dict[str, Any]] = field(default_factory=list)
    rows: list[NcclRow] = field(default_factory=list)
    avg_busbw: float | None = None
    out_of_bounds: int | None = None
    oob_status: str | None = None
    concluded: bool = False
    table_format: str | None = None  # "new" (root, #wrong) or "old" (error column)
    collective_inferred: bool = False  # read from the table's columns, not named in the log
    avg_failed: bool = False  # nccl-tests marked its summary FAILED
    avg_invalid: str | None = None  # the average as printed when it is not a finite number
    collective_candidates: list[str] = field(default_factory=list)  # when the table's shape leaves a choice

    @property
    def max_busbw(self) -> float | None:
        return max((r.max_busbw for r in self.rows), default=None)

    @property
    def wrong(self) -> int | None:
        """Wrong values over every row (each a count >= 0, so none cancels another); None when no row was
        validated."""
        counted = [r.wrong for r in self.rows if r.wrong is not None]
        return sum(counted) if counted else None

    @property
    def wrong_summary(self) -> str:
        """The wrong-value figure as a report shows it."""
        if self.wrong is not None:
            return str(self.wrong)
        if self.table_format == "old":
            oob = f"{self.out_of_bounds} {self.oob_status}" if self.oob_status else "not printed"
            return f"no count in the old table (out of bounds: {oob})"
        return "not validated"

    @property
    def invalid(self) -> list[str]:
        """Figures that are not numbers nccl-tests can print for a good run (NaN, infinity, a negative or
        fractional count), row by row, and a summary that is not a number."""
        out = [f"size {r.size}: {problem}" for r in self.rows for problem in r.invalid]
        if self.avg_invalid:
            out.append(f"the average bus bandwidth is {self.avg_invalid}")
        return out

    @property
    def complete(self) -> bool:
        """The run printed its summary (average line), so it was not cut short."""
        return self.avg_busbw is not None or self.avg_invalid is not None

    @property
    def ok(self) -> bool:
        """Complete, no wrong value, no out-of-bounds failure, every figure a finite number."""
        return (self.complete and not self.wrong and self.oob_status != "FAILED" and not self.avg_failed
                and not self.invalid)

    def to_dict(self) -> dict[str, Any]:
        return {
            "collective": self.collective,
            "collective_inferred": self.collective_inferred,
            "collective_candidates": self.collective_candidates,
            "ranks": self.ranks,
            "gpus_per_rank": self.gpus_per_rank,
            "nccl_version": self.nccl_version,
            "nccl_tests_version": self.tests_version,
            "devices": self.devices,
            "table_format": self.table_format,
            "busbw_unit": "GB/s",
            "rows": [{"size": r.size, "count": r.count, "type": r.type, "redop": r.redop, "root": r.root,
                      "out_of_place": r.out_of_place, "in_place": r.in_place} for r in self.rows],
            "invalid_values": self.invalid,
            "max_busbw_gbps": self.max_busbw,
            "avg_busbw_gbps": self.avg_busbw,
            "wrong": self.wrong,
            "out_of_bounds": self.out_of_bounds,
            "complete": self.complete,
            "ok": self.ok,
        }


def _strip(line: str) -> str:
    for prefix in _PREFIXES:
        line = prefix.sub("", line, count=1)
    return line.rstrip("\r\n")


def _clip(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:20]}... ({len(text):,} characters)"


# A bandwidth no fabric carries (GB/s): NVLink 5 gives one GPU 1,800 GB/s, so a figure above this is a corrupt or
# forged log (1e308 once passed every threshold), not a fast run.
MAX_PLAUSIBLE_GBPS = 100_000.0


def _number(text: str, what: str, invalid: list[str], limit: float | None = None) -> float | None:
    """A printed figure as a float, or None (named in ``invalid``) when it is NaN, infinite or above ``limit``."""
    value = float(text)
    if not math.isfinite(value):
        invalid.append(f"{what} is {_clip(text)}")
        return None
    if limit is not None and value > limit:
        invalid.append(f"{what} is {_clip(text)} GB/s, beyond any fabric ({limit:,.0f} GB/s)")
        return None
    return value


def _wrong(text: str, what: str, old_table: bool, invalid: list[str]) -> tuple[int | None, float | None]:
    """(#wrong count, old-table max error) of one pass. ``N/A``: validation off. A count must be a whole number
    >= 0 (5 and -5 must not cancel); the old ``error`` column is a deviation, finite and >= 0."""
    if text.upper() == "N/A":
        return None, None
    try:
        value = float(text)
    except ValueError:
        raise NcclLogError(f"'{text}' is not a count of wrong values") from None
    if old_table:
        if not math.isfinite(value) or value < 0:
            invalid.append(f"{what} error is {_clip(text)}")
            return None, None
        return None, value
    if not math.isfinite(value) or value < 0 or not value.is_integer() or not _COUNT.fullmatch(text):
        invalid.append(f"{what} #wrong is {_clip(text)}, not a count")
        return None, None
    return int(text), None


def _pass(m: re.Match[str], side: str, old_table: bool, invalid: list[str]) -> dict[str, Any]:
    name = "out-of-place" if side == "oop" else "in-place"
    wrong, error = _wrong(m[f"{side}_wrong"], name, old_table, invalid)
    out: dict[str, Any] = {"time_us": _number(m[f"{side}_time"], f"{name} time", invalid),
                           "algbw": _number(m[f"{side}_algbw"], f"{name} algbw", invalid, MAX_PLAUSIBLE_GBPS),
                           "busbw": _number(m[f"{side}_busbw"], f"{name} busbw", invalid, MAX_PLAUSIBLE_GBPS)}
    if old_table:
        out["max_error"] = error
    else:
        out["wrong"] = wrong
    return out


def parse_nccl(text: str) -> NcclRun:
    """Parse one nccl-tests output; :class:`NcclLogError` when it holds no result table."""
    if "\x00" in text:
        raise NcclLogError("not a text log (it holds NUL bytes)")
    run = NcclRun()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _strip(raw)
        if (m := _ROW.match(line)) is not None:
            if max(len(m["size"]), len(m["count"]), len(m["root"] or "")) > _MAX_COUNT_DIGITS:
                raise NcclLogError(f"line {number}: a size, count or root of more than {_MAX_COUNT_DIGITS} digits; "
                                   "nccl-tests prints 64-bit integers there")
            if run.table_format is None:
                run.table_format = "new" if m["root"] is not None else "old"
            invalid: list[str] = []
            old_table = run.table_format == "old"
            run.rows.append(NcclRow(size=int(m["size"]), count=int(m["count"]), type=m["type"], redop=m["redop"],
                                    root=int(m["root"]) if m["root"] is not None else None,
                                    out_of_place=_pass(m, "oop", old_table, invalid),
                                    in_place=_pass(m, "ip", old_table, invalid), invalid=invalid))
        elif (m := _AVG.match(line)) is not None:
            value = float(m["value"])
            run.avg_busbw, run.avg_invalid = (value, None) if math.isfinite(value) else (None, _clip(m["value"]))
            run.avg_failed = m["failed"] is not None
        elif (m := _OOB.match(line)) is not None:
            run.out_of_bounds, run.oob_status = int(m["count"]), m["status"]
        elif (m := _NGPUS.match(line)) is not None:
            run.gpus_per_rank = int(m["gpus"])
        elif (m := _DEVICE.match(line)) is not None:
            run.devices.append({"rank": int(m["rank"]), "host": m["host"], "device": int(m["device"]),
                                "bus_id": m["bus"], "gpu": m["gpu"]})
        elif (m := _HEADER.match(line)) is not None:
            run.table_format = "new" if m["root"] else "old"
        else:
            if (m := _TESTS_VERSION.search(line)) is not None:
                run.tests_version = m["version"]
            if run.nccl_version is None and (m := _NCCL_VERSION.search(line)) is not None:
                run.nccl_version = m["version"] or m["v2"]
            if (m := _COLLECTIVE.search(line)) is not None:
                name = m["name"].removesuffix("_perf")
                if run.collective is not None and name != run.collective:
                    raise NcclLogError(f"the log holds more than one test ({run.collective}, {name}): split it")
                run.collective = name
                run.concluded = run.concluded or m["phase"] == "concluded"
            elif run.collective is None and (m := _BINARY.search(line)) is not None:
                run.collective = m["name"]
    if not run.rows:
        raise NcclLogError("no nccl-tests result row was found (size, count, type, redop, time, algbw, busbw ...)")
    if run.devices:
        run.ranks = len({d["rank"] for d in run.devices})
    if run.collective is None:
        run.collective, run.collective_candidates = infer_collective(run.rows)
        run.collective_inferred = run.collective is not None
    return run


@dataclass(frozen=True)
class Verdict:
    """``check``: the run against the threshold of its instance type and node count."""

    run: NcclRun
    instance_type: str
    nodes: int
    expected_busbw: float
    pass_fraction: float
    source: str

    @property
    def required_busbw(self) -> float:
        return self.expected_busbw * self.pass_fraction

    @property
    def problems(self) -> list[str]:
        out = []
        if not self.run.complete:
            out.append("the run was cut short (no 'Avg bus bandwidth' line)")
        if self.run.wrong:
            rows = [r.size for r in self.run.rows if r.wrong]
            out.append(f"{self.run.wrong} wrong value(s) in the result table (sizes {', '.join(map(str, rows))})")
        out += [f"not a valid figure: {problem}" for problem in self.run.invalid]
        if self.run.avg_failed:
            out.append("nccl-tests marked the run FAILED")
        if self.run.collective is not None and self.run.collective != "all_reduce":
            out.append(f"the thresholds are for all_reduce, and this log is {self.run.collective}")
        elif self.run.collective is None:
            maybe = " or ".join(self.run.collective_candidates) or "unknown"
            out.append(f"the thresholds are for all_reduce, and this log's collective is {maybe} (the log does not "
                       "name it and its table is not all_reduce's)")
        if self.run.oob_status == "FAILED":
            out.append(f"out-of-bounds check FAILED ({self.run.out_of_bounds} value(s))")
        peak = self.run.max_busbw or 0.0
        if peak < self.required_busbw:
            out.append(f"peak bus bandwidth {peak:.2f} GB/s is below {self.required_busbw:.2f} GB/s "
                       f"({self.pass_fraction:.0%} of the expected {self.expected_busbw:.2f} GB/s)")
        return out

    @property
    def passed(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "instance_type": self.instance_type, "nodes": self.nodes,
                "max_busbw_gbps": self.run.max_busbw, "avg_busbw_gbps": self.run.avg_busbw,
                "expected_busbw_gbps": self.expected_busbw, "pass_fraction": self.pass_fraction,
                "required_busbw_gbps": self.required_busbw, "threshold_source": self.source,
                "wrong": self.run.wrong, "complete": self.run.complete, "problems": self.problems}

    def to_markdown(self) -> str:
        """The verdict as a pull-request comment; what the log says (versions, problems) escaped."""
        head = "PASS" if self.passed else "FAIL"
        lines = [f"### NCCL acceptance: {head}", "",
                 f"{md_text(self.run.collective or 'collective unknown')} on {self.nodes} x "
                 f"{md_text(self.instance_type)}"
                 + (f", {self.run.ranks} ranks" if self.run.ranks else "")
                 + (f", NCCL {md_text(self.run.nccl_version)}" if self.run.nccl_version else ""), "",
                 "| figure | value |", "| --- | --- |",
                 f"| peak bus bandwidth | {self.run.max_busbw or 0:.2f} GB/s |",
                 f"| average bus bandwidth | {self.run.avg_busbw:.2f} GB/s |" if self.run.avg_busbw is not None
                 else "| average bus bandwidth | (run cut short) |",
                 f"| required | {self.required_busbw:.2f} GB/s ({self.pass_fraction:.0%} of "
                 f"{self.expected_busbw:.2f}) |",
                 f"| wrong values | {self.run.wrong_summary} |", "",
                 f"Threshold source: {md_text(self.source)}"]
        lines += [f"- {md_text(p)}" for p in self.problems]
        return "\n".join(lines) + "\n"


def render_json(doc: dict[str, Any]) -> str:
    """JSON, never NaN or Infinity (not JSON): the parser keeps such figures as null and names them."""
    return json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n"
