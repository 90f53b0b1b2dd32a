"""The runs over the fabric (issue 34): two-node pairs, judged and then read for the node they point at (a bad NIC
fails both pairs of its node; the NVLink-only per-node run never touches it), and the multi-node run over every
node, kept as a record with its nodes. The layout they are read from: :mod:`blueprint.acceptance.rundir`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blueprint.acceptance.nccl import NcclLogError, parse_nccl
from blueprint.acceptance.records import NodeRun, acceptance_record, log_problems, median


@dataclass(frozen=True)
class PairRun:
    """One pair's record (``pairs/<round>-<nodeA>--<nodeB>/``): its round, its two nodes, its log (None when the
    pair left none) and pair.json."""

    name: str
    round: int
    nodes: tuple[str, str]
    log: str | None
    facts: dict[str, Any]




def pair_records(pairs: list[PairRun], *, expected_busbw: float | None, expected_source: str | None,
                 pass_fraction: float, outlier_fraction: float) -> dict[str, Any]:
    """The pairs of a run judged, then the nodes they point at. A pair fails on a log that is no result (see
    :func:`log_problems`) or a peak bus bandwidth below ``pass_fraction`` of ``expected_busbw`` (the multi-node
    figure: bus bandwidth does not depend on the node count); without one, below ``outlier_fraction`` of the pairs'
    median (``judged_against`` says which). Then :func:`isolate`."""
    rows: list[dict[str, Any]] = []
    for pair in sorted(pairs, key=lambda p: (p.round, p.nodes)):
        parsed, problems = log_problems(pair.log, pair.facts.get("exit_status"))
        rows.append({"name": pair.name, "round": pair.round, "nodes": list(pair.nodes),
                     "busbw_gbps": parsed.max_busbw if parsed else None,
                     "nccl_version": parsed.nccl_version if parsed else None,
                     "exit_status": pair.facts.get("exit_status"), "problems": problems})
    mid = median([r["busbw_gbps"] for r in rows if r["busbw_gbps"] is not None and not r["problems"]])
    required: float | None
    if expected_busbw is not None:
        judged, required = "expected", expected_busbw * pass_fraction
        how = f"({pass_fraction:.0%} of the expected {expected_busbw:.2f} GB/s)"
    else:
        judged, required = "median", (outlier_fraction * mid if mid else None)
        how = f"({outlier_fraction:.0%} of the pairs' median, {mid or 0:.2f} GB/s: no expected figure)"
    for r in rows:
        bw = r["busbw_gbps"]
        if bw is not None and required is not None and bw < required:
            r["problems"].append(f"bus bandwidth {bw:.2f} GB/s is below {required:.2f} GB/s {how}")
        r["passed"] = not r["problems"]
    suspects, inconclusive = isolate([(tuple(r["nodes"]), r["passed"]) for r in rows])
    for r in rows:
        r["verdict"] = ("pass" if r["passed"] else
                        "inconclusive: rerun" if tuple(r["nodes"]) in inconclusive else "fail")
    return {"expected_busbw_gbps": expected_busbw, "expected_source": expected_source, "judged_against": judged,
            "required_busbw_gbps": required, "median_busbw_gbps": mid, "pairs": rows, "suspects": suspects,
            "inconclusive": [list(p) for p in inconclusive], "passed": all(r["passed"] for r in rows)}


def isolate(pairs: list[tuple[tuple[str, ...], bool]]) -> tuple[list[dict[str, str]], list[tuple[str, ...]]]:
    """The nodes a set of pair results points at, and the failing pairs that point at none.

    A node is ``bad`` when it passed no pair and failed with two partners or more: the one thing its failing pairs
    share. A failing pair with a bad node is explained by it. Of a failing pair without one: when both nodes passed
    another pair, the pair's own link or placement is suspect (inconclusive: rerun it); when only one did, the other
    is ``suspect, unconfirmed`` (no second partner confirms it); when neither did (they only met each other, as two
    nodes do), both are."""
    partners: dict[str, dict[str, list[bool]]] = {}
    for nodes, passed in pairs:
        a, b = nodes[0], nodes[1]
        partners.setdefault(a, {}).setdefault(b, []).append(passed)
        partners.setdefault(b, {}).setdefault(a, []).append(passed)

    def passed_any(node: str) -> bool:
        return any(any(results) for results in partners[node].values())
    bad = {n for n, met in partners.items() if not passed_any(n) and len(met) >= 2}
    suspects: dict[str, dict[str, str]] = {}
    for node in sorted(bad):
        suspects[node] = {"node": node, "verdict": "bad", "reason": f"it failed with each of its partners "
                          f"({', '.join(sorted(partners[node]))}) and passed with none"}
    inconclusive: list[tuple[str, ...]] = []
    for nodes, passed in pairs:
        a, b = nodes[0], nodes[1]
        if passed or a in bad or b in bad:
            if not passed:
                lone = b if a in bad else a
                if lone not in bad and not passed_any(lone) and lone not in suspects:
                    suspects[lone] = {"node": lone, "verdict": "suspect, unconfirmed", "reason": (
                        f"its only partner ({a if lone == b else b}) is bad: rerun it with another partner")}
            continue
        ok_a, ok_b = passed_any(a), passed_any(b)
        if ok_a and ok_b and tuple(nodes) not in inconclusive:
            inconclusive.append(tuple(nodes))
        for node, other, ok, other_ok in ((a, b, ok_a, ok_b), (b, a, ok_b, ok_a)):
            if ok or node in suspects:
                continue
            reason = (f"its pair with {other} failed and {other} passed with another partner; no second partner "
                      "confirms it" if other_ok else
                      f"its pair with {other} failed and neither passed another pair: either could be at fault")
            suspects[node] = {"node": node, "verdict": "suspect, unconfirmed", "reason": reason}
    order = {"bad": 0, "suspect, unconfirmed": 1}
    return sorted(suspects.values(), key=lambda s: (order[s["verdict"]], s["node"])), inconclusive


def render_pairs(record: dict[str, Any]) -> str:
    """The pairs for a terminal: one line per pair, then the suspect nodes with their reasons."""
    pairs = record["pairs"]
    fails = sum(1 for p in pairs if not p["passed"])
    required = record["required_busbw_gbps"]
    basis = (f"required {required:.2f} GB/s" if required is not None else "no figure to judge against")
    if record["judged_against"] == "expected":
        basis += f" (of the expected {record['expected_busbw_gbps']:.2f} GB/s; its source in the JSON)"
    else:
        basis += " (the pairs' median: no expected multi-node figure, give --expected-pair-busbw)"
    lines = [f"pairs: {'PASS' if record['passed'] else 'FAIL'}: {len(pairs)} pair(s), {fails} failed; {basis}",
             f"{'round':>5}  {'nodes':<60} {'busbw GB/s':>10}  verdict"]
    for p in pairs:
        bw = f"{p['busbw_gbps']:.2f}" if p["busbw_gbps"] is not None else "-"
        lines.append(f"{p['round']:>5}  {' + '.join(p['nodes']):<60} {bw:>10}  {p['verdict']}")
        lines += [f"  - {problem}" for problem in p["problems"]]
    if record["suspects"]:
        lines.append("suspect nodes:")
        lines += [f"  {s['node']}: {s['verdict']}: {s['reason']}" for s in record["suspects"]]
    if record.get("unpaired"):
        lines.append(f"warning: not in any pair (their fabric was not tested): {', '.join(record['unpaired'])}")
    for nodes in record["inconclusive"]:
        lines.append(f"inconclusive: {' + '.join(nodes)} failed together and each passed with another partner: the "
                     "link or placement between them is suspect; rerun that pair")
    return "\n".join(lines) + "\n"


# --- The multi-node run (issue 34): all_reduce over every node, kept with the nodes it ran on ----------------------

@dataclass(frozen=True)
class MultinodeRun:
    """``<run>/multinode/``: its log (None when it left none) and nodes.json."""

    log: str | None
    facts: dict[str, Any]
    where: Path

    @property
    def nodes(self) -> list[str]:
        return [str(n) for n in self.facts.get("nodes") or []]


def multinode_record(run: MultinodeRun, node_runs: list[NodeRun], run_name: str | None) -> dict[str, Any]:
    """The multi-node run as an acceptance record (the shape of :func:`acceptance_record`, so ``nccl compare`` reads
    it beside one made with ``nccl record``): its nodes by name from nodes.json, versions from its log, the GPU model
    nvidia-smi reported on those nodes (node.json of the same run) or else the log's device lines, driver and CUDA
    from those node.json files. :class:`NcclLogError` naming the file when the log is missing or holds no result."""
    log = run.where / "nccl.log"
    if run.log is None:
        raise NcclLogError(f"{log}: missing")
    try:
        parsed = parse_nccl(run.log)
    except NcclLogError as err:
        raise NcclLogError(f"{log}: not an nccl-tests log: {err}") from None
    names = run.nodes or sorted({str(d["host"]) for d in parsed.devices})
    mine = [r.facts for r in node_runs if r.node in set(names)]

    def one(values: set[str]) -> str | None:
        return ", ".join(sorted(values)) if values else None
    models = {str(f["gpu_model"]) for f in mine if f.get("gpu_model")} or {str(d["gpu"]) for d in parsed.devices}
    facts = {"nodes": [{"name": n, "instance_id": None, "zone": None,
                        "instance_type": run.facts.get("instance_type")} for n in names],
             "gpu_model": one(models), "driver": one({str(f["driver"]) for f in mine if f.get("driver")}),
             "cuda": one({str(f["cuda"]) for f in mine if f.get("cuda")})}
    record = acceptance_record(parsed, run.log, None, str(run.facts.get("node_group") or ""), facts, None)
    record.update({"kind": "multi-node", "run": run_name, "instance_type": run.facts.get("instance_type"),
                   "workers": run.facts.get("workers") or {}, "exit_status": run.facts.get("exit_status"),
                   "started": run.facts.get("started"), "finished": run.facts.get("finished")})
    return record


def multinode_summary(run: MultinodeRun, *, expected_busbw: float | None, expected_source: str | None,
                      pass_fraction: float) -> dict[str, Any]:
    """The multi-node run in ``nccl nodes``: its nodes, its peak bus bandwidth against ``pass_fraction`` of the
    multi-node figure (not judged on bandwidth without one), and what makes its log no result."""
    parsed, problems = log_problems(run.log, run.facts.get("exit_status"))
    bw = parsed.max_busbw if parsed else None
    required = expected_busbw * pass_fraction if expected_busbw is not None else None
    if bw is not None and required is not None and bw < required:
        problems.append(f"bus bandwidth {bw:.2f} GB/s is below {required:.2f} GB/s ({pass_fraction:.0%} of the "
                        f"expected {expected_busbw:.2f} GB/s)")
    return {"nodes": run.nodes, "workers": run.facts.get("workers") or {}, "busbw_gbps": bw,
            "nccl_version": parsed.nccl_version if parsed else None, "expected_busbw_gbps": expected_busbw,
            "expected_source": expected_source, "required_busbw_gbps": required,
            "exit_status": run.facts.get("exit_status"), "problems": problems, "passed": not problems}


def render_multinode(summary: dict[str, Any]) -> str:
    """The multi-node run's summary for a terminal."""
    bw = f"{summary['busbw_gbps']:.2f} GB/s" if summary["busbw_gbps"] is not None else "no figure"
    versus = (f"required {summary['required_busbw_gbps']:.2f} GB/s" if summary["required_busbw_gbps"] is not None
              else "no expected multi-node figure (give --expected-pair-busbw)")
    lines = [f"multinode: {'PASS' if summary['passed'] else 'FAIL'}: {len(summary['nodes'])} node(s), peak {bw}, "
             f"{versus}", f"  nodes: {', '.join(summary['nodes']) or '?'}"]
    lines += [f"  - {p}" for p in summary["problems"]]
    return "\n".join(lines) + "\n"
