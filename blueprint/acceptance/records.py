"""Acceptance records: one run's record (the log's figures, the nodes' facts from ``kubectl get nodes -o json``, the
verdict), a group's per-node run (``<group>/<run>/<node>/nccl.log`` and ``node.json``, read by
:mod:`blueprint.acceptance.rundir`, which documents the layout) judged node by node against the group's median, the
expected figure and the node's own check (GPUs, DCGM, fabric devices), and what changed between two records."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from blueprint.acceptance.nccl import NcclLogError, NcclRun, Verdict, parse_nccl

_OFI = re.compile(r"(?:aws-ofi-nccl|NET/OFI Initializing aws-ofi-nccl)\s+v?(?P<version>\d+\.\d+\.\d+\S*)")


def ofi_version(text: str) -> str | None:
    """The aws-ofi-nccl plugin version the log prints (``NET/OFI Initializing aws-ofi-nccl 1.x.y``)."""
    m = _OFI.search(text)
    return m["version"] if m else None


def node_facts(nodes_json: Any) -> dict[str, Any]:
    """What ``kubectl get nodes -o json`` says of the run's nodes: names, instance ids and zones (the providerID's
    last two segments: ``aws:///<zone>/<instance id>`` on EKS, ``gce://<project>/<zone>/<instance>`` on GKE), and
    the GPU feature discovery labels (GPU model, driver and CUDA)."""
    if not isinstance(nodes_json, dict) or not isinstance(nodes_json.get("items"), list):
        raise NcclLogError("the node facts are not the output of `kubectl get nodes -o json` (no items list)")
    nodes: list[dict[str, Any]] = []
    products: set[str] = set()
    drivers: set[str] = set()
    cudas: set[str] = set()
    for item in nodes_json["items"]:
        meta = item.get("metadata", {}) if isinstance(item, dict) else {}
        labels = meta.get("labels", {}) or {}
        provider = str(item.get("spec", {}).get("providerID", ""))
        zone, instance = _zone_and_instance(provider)
        nodes.append({"name": meta.get("name"), "instance_id": instance or None, "zone": zone or None,
                      "instance_type": labels.get("node.kubernetes.io/instance-type")})
        for key, bucket in (("nvidia.com/gpu.product", products), ("nvidia.com/cuda.driver-version.full", drivers),
                            ("nvidia.com/cuda.runtime-version.full", cudas)):
            if key in labels:
                bucket.add(str(labels[key]))

    def one(values: set[str]) -> str | None:
        return ", ".join(sorted(values)) if values else None
    return {"nodes": nodes, "gpu_model": one(products), "driver": one(drivers), "cuda": one(cudas)}


def _zone_and_instance(provider_id: str) -> tuple[str, str]:
    """(zone, instance) from a node's providerID (``<cloud>://[<project>]/<zone>/<instance>``); empty when it has
    no such shape."""
    _, sep, path = provider_id.partition("://")
    parts = path.split("/") if sep else []
    return (parts[-2], parts[-1]) if len(parts) >= 2 and parts[-1] else ("", "")


def acceptance_record(run: NcclRun, log_text: str, stack: str | None, node_group: str, facts: dict[str, Any],
                      verdict: Verdict | None) -> dict[str, Any]:
    """One acceptance run, as kept beside the stack and compared with the next one."""
    return {
        "stack": stack, "node_group": node_group, **facts,
        "nccl_version": run.nccl_version, "aws_ofi_nccl_version": ofi_version(log_text),
        "nccl_tests_version": run.tests_version, "collective": run.collective, "ranks": run.ranks,
        "max_busbw_gbps": run.max_busbw, "avg_busbw_gbps": run.avg_busbw,
        "busbw_by_size": {str(r.size): r.max_busbw for r in run.rows},
        "wrong": run.wrong, "complete": run.complete,
        "verdict": None if verdict is None else verdict.to_dict(),
    }


def compare_records(a: dict[str, Any], b: dict[str, Any], tolerance: float) -> tuple[list[str], bool]:
    """Lines describing what changed from run A to run B, and whether B's peak fell more than ``tolerance``."""
    lines = []
    for key in ("gpu_model", "driver", "cuda", "nccl_version", "aws_ofi_nccl_version", "nccl_tests_version"):
        if a.get(key) != b.get(key):
            lines.append(f"{key}: {a.get(key)} -> {b.get(key)}")
    peak_a, peak_b = a.get("max_busbw_gbps") or 0.0, b.get("max_busbw_gbps") or 0.0
    change = (peak_b - peak_a) / peak_a if peak_a else 0.0
    lines.append(f"peak bus bandwidth: {peak_a:.2f} -> {peak_b:.2f} GB/s ({change:+.1%})")
    sizes_a, sizes_b = a.get("busbw_by_size") or {}, b.get("busbw_by_size") or {}
    for size in sorted(set(sizes_a) & set(sizes_b), key=int):
        before, after = float(sizes_a[size]), float(sizes_b[size])
        if before and abs(after - before) / before > tolerance:
            lines.append(f"  {int(size):>12} B: {before:.2f} -> {after:.2f} GB/s")
    nodes_a = {str(n.get("instance_id") or n.get("name")) for n in a.get("nodes", [])}
    nodes_b = {str(n.get("instance_id") or n.get("name")) for n in b.get("nodes", [])}
    if nodes_a != nodes_b:
        lines.append(f"instances: {len(nodes_a & nodes_b)} the same, {len(nodes_b - nodes_a)} new")
        if nodes_a - nodes_b:
            lines.append(f"  gone: {', '.join(sorted(nodes_a - nodes_b))}")
        if nodes_b - nodes_a:
            lines.append(f"  new: {', '.join(sorted(nodes_b - nodes_a))}")
    return lines, change < -tolerance


# --- Per-node records (issue 27): the acceptance gate's run on every node of a group ------------------------------

SMALL_MESSAGE_BYTES = 8  # the smallest message of the gate's sweep (-b 8): its time is the node's latency


def small_message_time_us(run: NcclRun) -> float | None:
    """The time (us) of the smallest non-empty message the run measured, the faster of out-of-place and in-place:
    the node's latency at small messages."""
    rows = sorted((r for r in run.rows if r.size > 0), key=lambda r: r.size)
    for row in rows:
        times = [float(p["time_us"]) for p in (row.out_of_place, row.in_place) if p.get("time_us") is not None]
        if times:
            return min(times)
    return None


@dataclass(frozen=True)
class NodeRun:
    """One node's record as the per-node job wrote it: its name, its log and its facts (node.json)."""

    node: str
    log: str
    facts: dict[str, Any]


def median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def is_int(value: Any) -> bool:
    """A JSON integer (not a boolean)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """A JSON number (not a boolean)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_strings(value: Any) -> bool:
    """A JSON list of strings."""
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def node_check_problems(facts: dict[str, Any]) -> list[str]:
    """What the node's own check (node.json, issue 34) says is wrong with it: fewer GPUs than the stack expects, a
    DCGM diagnostic that failed or could not run, fabric devices missing or down (a NIC the NVLink-only benchmark
    never touches), any check that failed. Empty for an old record without these fields."""
    problems: list[str] = []
    covered: set[str] = set()
    count, expected = facts.get("gpu_count"), facts.get("gpus")
    if is_int(count) and is_int(expected) and count != expected:
        problems.append(f"nvidia-smi lists {count} GPU(s), the stack expects {expected}")
        covered.add("gpu-count")
    dcgm = facts.get("dcgm")
    if isinstance(dcgm, dict) and dcgm.get("result") in ("fail", "error"):
        failed = dcgm.get("failed") or []
        problems.append(f"DCGM diagnostic (level {dcgm.get('level', '?')}): {dcgm['result']}"
                        + (f" ({', '.join(failed)})" if failed else ""))
        covered.add("dcgm")
    fabric = facts.get("fabric")
    if isinstance(fabric, dict) and fabric.get("kind") != "none":
        want, present, up = fabric.get("expected", 0), fabric.get("present", 0), fabric.get("up", 0)
        if up < want or present < want:
            problems.append(f"{fabric['kind']} devices: {up} of {want} up ({present} present)")
            covered.add("fabric-devices")
    for check in facts.get("checks") or []:
        if not check["passed"] and check["name"] not in covered:
            detail = check.get("detail") or ""
            problems.append(f"check {check['name']} failed" + (f": {detail}" if detail else ""))
    if facts.get("passed") is False and not problems:
        problems.append("the node's own check failed (passed: false in node.json, no failed check named)")
    return problems


def log_problems(log: str | None, exit_status: Any) -> tuple[NcclRun | None, list[str]]:
    """An all_reduce log read (a node's, a pair's, a group's): the run, and what makes it no result: no log, no
    table, a non-zero exit, a run cut short, wrong or invalid values, a collective other than all_reduce."""
    problems: list[str] = []
    parsed: NcclRun | None = None
    if log is None:
        problems.append("no nccl.log")
    else:
        try:
            parsed = parse_nccl(log)
        except NcclLogError as err:
            problems.append(f"no result in its log: {err}")
    if is_int(exit_status) and exit_status != 0:
        problems.append(f"all_reduce_perf exited {exit_status}")
    if parsed is not None:
        if not parsed.complete:
            problems.append("the run was cut short (no 'Avg bus bandwidth' line)")
        if parsed.wrong:
            problems.append(f"{parsed.wrong} wrong value(s)")
        problems += [f"not a valid figure: {p}" for p in parsed.invalid]
        if parsed.collective not in (None, "all_reduce"):
            problems.append(f"the log is {parsed.collective}, not all_reduce")
    return parsed, problems


def node_records(nodes: list[NodeRun], *, instance_type: str, expected_busbw: float, expected_source: str,
                 pass_fraction: float, outlier_fraction: float, latency_factor: float, stack: str | None = None,
                 node_group: str | None = None, run: str | None = None) -> dict[str, Any]:
    """The per-node run of a group as one record: each node's bus bandwidth (peak, GB/s) and small-message time, its
    versions (driver, CUDA from node.json; NCCL and nccl-tests from its log) and its problems: a log that is not a
    complete valid run, wrong values, a benchmark that exited non-zero, a bandwidth below ``outlier_fraction`` of the
    group's median or below ``pass_fraction`` of the expected figure, a latency above ``latency_factor`` times the
    group's median. ``passed`` when no node has a problem."""
    rows: list[dict[str, Any]] = []
    for item in sorted(nodes, key=lambda n: n.node):
        parsed: NcclRun | None = None
        problems: list[str] = []
        status = item.facts.get("exit_status")
        if item.log or not isinstance(item.facts.get("checks"), list):  # a node check without NCCL has no log
            parsed, problems = log_problems(item.log, status)
        problems += node_check_problems(item.facts)
        rows.append({
            "node": item.node, "pod": item.facts.get("pod"), "driver": item.facts.get("driver") or None,
            "cuda": item.facts.get("cuda") or None, "gpu_model": item.facts.get("gpu_model") or None,
            "gpu_count": item.facts.get("gpu_count"), "gpus_expected": item.facts.get("gpus"),
            "dcgm": item.facts.get("dcgm"), "fabric": item.facts.get("fabric"),
            "fabric_plugin": item.facts.get("fabric_plugin"), "node_passed": item.facts.get("passed"),
            "nccl_version": parsed.nccl_version if parsed else None,
            "nccl_tests_version": parsed.tests_version if parsed else None,
            "busbw_gbps": parsed.max_busbw if parsed else None,
            "latency_us": small_message_time_us(parsed) if parsed else None,
            "exit_status": status, "problems": problems,
        })
    median_bw = median([r["busbw_gbps"] for r in rows if r["busbw_gbps"] is not None and not r["problems"]])
    median_lat = median([r["latency_us"] for r in rows if r["latency_us"] is not None and not r["problems"]])
    required = expected_busbw * pass_fraction
    for r in rows:
        bw, lat = r["busbw_gbps"], r["latency_us"]
        if bw is not None and median_bw and bw < outlier_fraction * median_bw:
            r["problems"].append(f"bus bandwidth {bw:.2f} GB/s is below {outlier_fraction:.0%} of the group's median "
                                 f"({median_bw:.2f} GB/s)")
        if bw is not None and bw < required:
            r["problems"].append(f"bus bandwidth {bw:.2f} GB/s is below {required:.2f} GB/s ({pass_fraction:.0%} of "
                                 f"the expected {expected_busbw:.2f} GB/s)")
        if lat is not None and median_lat and lat > latency_factor * median_lat:
            r["problems"].append(f"small-message time {lat:.2f} us is above {latency_factor:g} x the group's median "
                                 f"({median_lat:.2f} us)")
        r["outlier"] = bool(r["problems"])

    def versions(key: str) -> list[str]:
        return sorted({str(r[key]) for r in rows if r[key]})
    return {
        "gpu_models": versions("gpu_model"),
        "kind": "per-node", "stack": stack, "node_group": node_group, "run": run, "instance_type": instance_type,
        "expected_busbw_gbps": expected_busbw, "expected_source": expected_source, "pass_fraction": pass_fraction,
        "outlier_fraction": outlier_fraction, "latency_factor": latency_factor,
        "median_busbw_gbps": median_bw, "median_latency_us": median_lat, "nodes": rows,
        "versions": {"driver": versions("driver"), "cuda": versions("cuda"), "nccl": versions("nccl_version")},
        "outliers": [r["node"] for r in rows if r["outlier"]], "passed": bool(rows) and not any(r["outlier"]
                                                                                               for r in rows),
    }


def require_nodes(record: dict[str, Any], runs: list[NodeRun], expected: int) -> None:
    """A run must cover every node it was meant to: fewer records than ``expected`` fails it (the missing nodes are
    the suspect ones), naming the Job indexes that left none."""
    record["expected_nodes"] = expected
    # ASCII digits only: str.isdigit() also accepts "²", which int() refuses
    seen = {int(str(r.facts.get("index"))) for r in runs if re.fullmatch(r"[0-9]{1,9}", str(r.facts.get("index", "")))}
    missing = max(expected - len(runs), 0)
    record["missing_nodes"] = missing
    record["missing_indexes"] = sorted(set(range(expected)) - seen) if seen and missing else []
    if missing:
        record["passed"] = False


def _node_check_summary(row: dict[str, Any]) -> str | None:
    """One line of the node's own check (GPUs and model from nvidia-smi, DCGM, fabric devices), or None for an old
    record without it."""
    parts = []
    if row.get("gpu_count") is not None or row.get("gpu_model"):
        parts.append(f"{row.get('gpu_count', '?')} x {row.get('gpu_model') or '?'}")
    dcgm = row.get("dcgm")
    if isinstance(dcgm, dict):
        parts.append(f"DCGM level {dcgm.get('level', '?')} {dcgm['result']}")
    fabric = row.get("fabric")
    if isinstance(fabric, dict):
        parts.append(f"{fabric['kind']} {fabric['up']}/{fabric['expected']} up"
                     + (f" ({row['fabric_plugin']})" if row.get("fabric_plugin") else ""))
    return ", ".join(parts) if parts else None


def render_node_table(record: dict[str, Any]) -> str:
    """The per-node record for a terminal: one line per node, outliers marked, then the versions."""
    median = record["median_busbw_gbps"] or 0.0
    models = record.get("gpu_models") or []
    shown = f"{record['instance_type']}, {models[0]}" if len(models) == 1 else record["instance_type"]
    head = (f"{'PASS' if record['passed'] else 'FAIL'}: {len(record['nodes'])} node(s) of "
            f"{record.get('node_group') or '?'} ({shown}), median {median:.2f} GB/s, expected "
            f"{record['expected_busbw_gbps']:.2f} GB/s")
    lines = [head]
    if record.get("missing_nodes"):
        indexes = record.get("missing_indexes")
        lines.append(f"missing: {record['missing_nodes']} of {record['expected_nodes']} node(s) left no record"
                     + (f" (indexes {', '.join(map(str, indexes))})" if indexes else "")
                     + ": they are the ones to look at (kubectl get pods -n gpu-acceptance -o wide)")
    lines.append(f"{'node':<40} {'busbw GB/s':>10} {'8 B us':>8}  driver / CUDA / NCCL")
    for r in record["nodes"]:
        bw = f"{r['busbw_gbps']:.2f}" if r["busbw_gbps"] is not None else "-"
        lat = f"{r['latency_us']:.2f}" if r["latency_us"] is not None else "-"
        lines.append(f"{r['node']:<40} {bw:>10} {lat:>8}  {r['driver'] or '?'} / {r['cuda'] or '?'} / "
                     f"{r['nccl_version'] or '?'}{'  OUTLIER' if r['outlier'] else ''}")
        if (check := _node_check_summary(r)) is not None:
            lines.append(f"  {check}")
        lines += [f"  - {p}" for p in r["problems"]]
    if len(models) > 1:
        lines.append(f"warning: the nodes report {len(models)} GPU models (nvidia-smi): {', '.join(models)}")
    for key, values in record["versions"].items():
        if len(values) > 1:
            lines.append(f"warning: the group runs {len(values)} {key} versions: {', '.join(values)}")
    return "\n".join(lines) + "\n"


def record_shape_problem(doc: dict[str, Any]) -> str | None:
    """What makes a record unfit for :func:`compare_records` or :func:`compare_node_records`: a field of another type
    than the tool writes (a number where a figure goes, strings for versions, objects for nodes), or None."""
    def number(key: str, where: dict[str, Any], label: str) -> str | None:
        value = where.get(key)
        if value is None or (is_number(value) and math.isfinite(value) and value >= 0):
            return None
        return f"{label}{key} must be a non-negative finite number or null, got {str(value)[:40]!r}"

    def text(key: str, where: dict[str, Any], label: str) -> str | None:
        value = where.get(key)
        return None if value is None or isinstance(value, str) else f"{label}{key} must be a string or null"
    if doc.get("kind") == "per-node":
        problems = [number("median_busbw_gbps", doc, "")]
        versions = doc.get("versions", {})
        if not isinstance(versions, dict) or not all(is_strings(v) for v in versions.values()):
            problems.append("versions must map names to lists of strings")
        for i, node in enumerate(doc.get("nodes") or []):
            if not isinstance(node, dict) or not isinstance(node.get("node"), str):
                return f"nodes[{i}] must be an object with a node name"
            problems += [number("busbw_gbps", node, f"nodes[{i}]."),
                         *(text(k, node, f"nodes[{i}].") for k in ("gpu_model", "driver", "cuda", "nccl_version"))]
            if not isinstance(node.get("outlier", False), bool):
                problems.append(f"nodes[{i}].outlier must be true or false")
        return next((p for p in problems if p), None)
    problems = [number("max_busbw_gbps", doc, ""),
                *(text(k, doc, "") for k in ("gpu_model", "driver", "cuda", "nccl_version", "aws_ofi_nccl_version",
                                             "nccl_tests_version"))]
    sizes = doc.get("busbw_by_size") or {}
    if not isinstance(sizes, dict) or not all(re.fullmatch(r"[0-9]{1,20}", str(k)) and is_number(v)
                                              and math.isfinite(v) for k, v in sizes.items()):
        problems.append("busbw_by_size must map sizes (digits) to finite numbers")
    nodes = doc.get("nodes") or []
    if not isinstance(nodes, list) or not all(isinstance(n, dict) for n in nodes):
        problems.append("nodes must be a list of objects")
    return next((p for p in problems if p), None)


def compare_node_records(a: dict[str, Any], b: dict[str, Any], tolerance: float) -> tuple[list[str], bool]:
    """What changed between two per-node records of a group: nodes gone and new, by name; per node kept, its driver,
    CUDA and NCCL versions and a bus bandwidth that moved more than ``tolerance``; the median's change. The second
    value: the median fell more than ``tolerance``, or a node became an outlier."""
    nodes_a = {str(n["node"]): n for n in a.get("nodes", [])}
    nodes_b = {str(n["node"]): n for n in b.get("nodes", [])}
    lines: list[str] = []
    gone, new = sorted(set(nodes_a) - set(nodes_b)), sorted(set(nodes_b) - set(nodes_a))
    if gone:
        lines.append(f"nodes gone: {', '.join(gone)}")
    if new:
        lines.append(f"nodes new: {', '.join(new)}")
    became = []
    for name in sorted(set(nodes_a) & set(nodes_b)):
        before, after = nodes_a[name], nodes_b[name]
        changes = [f"{label} {before.get(key)} -> {after.get(key)}"
                   for key, label in (("gpu_model", "GPU"), ("driver", "driver"), ("cuda", "CUDA"),
                                      ("nccl_version", "NCCL"))
                   if before.get(key) != after.get(key)]
        bw_a, bw_b = before.get("busbw_gbps"), after.get("busbw_gbps")
        if bw_a and bw_b and abs(bw_b - bw_a) / bw_a > tolerance:
            changes.append(f"bus bandwidth {bw_a:.2f} -> {bw_b:.2f} GB/s ({(bw_b - bw_a) / bw_a:+.1%})")
        if after.get("outlier") and not before.get("outlier"):
            became.append(name)
            changes.append("now an outlier")
        if changes:
            lines.append(f"{name}: {'; '.join(changes)}")
    for key, label in (("driver", "driver"), ("cuda", "CUDA"), ("nccl", "NCCL")):
        va, vb = a.get("versions", {}).get(key, []), b.get("versions", {}).get(key, [])
        if va != vb:
            lines.append(f"{label} versions of the group: {', '.join(va) or '?'} -> {', '.join(vb) or '?'}")
    med_a, med_b = a.get("median_busbw_gbps") or 0.0, b.get("median_busbw_gbps") or 0.0
    change = (med_b - med_a) / med_a if med_a else 0.0
    lines.append(f"median bus bandwidth: {med_a:.2f} -> {med_b:.2f} GB/s ({change:+.1%})")
    return lines, change < -tolerance or bool(became)
