"""A group's acceptance run as the in-cluster jobs upload it, read whole: the per-node records, the pairs and the
multi-node run, each judged by its own module (:mod:`blueprint.acceptance.records`,
:mod:`blueprint.acceptance.fabric`), and the run as one record for ``blueprint nccl nodes``.

The layout of a group's run (``acceptance/<group>/<run>/`` in the checkpoint bucket, downloaded with ``aws s3 cp
--recursive`` or ``gcloud storage cp --recursive``) is a contract with the jobs that write it:

- ``<node>/nccl.log``: all_reduce_perf over the node's own GPUs (NVLink), and ``<node>/node.json``: ``node``,
  ``pod``, ``index``, ``node_group``, ``instance_type``, ``gpus`` (GPUs the stack expects), ``driver``, ``cuda``,
  ``exit_status``, ``started``, ``finished``; newer records add (each optional, an old record is read as before)
  ``gpu_count`` and ``gpu_model`` (what nvidia-smi lists and names), ``nccl_version``, ``fabric_plugin``, ``dcgm``
  (``{"level", "result": pass|fail|skipped|error, "seconds", "failed": [test, ...]}``), ``fabric`` (``{"kind":
  efa|gpu-nic|none, "expected", "present", "up", "devices": [...]}``), ``checks`` (``[{"name", "passed",
  "detail"}]``: gpu-count, gpu-model, dcgm, fabric-devices, nvlink-busbw, gpus-idle) and ``passed`` (the node's own
  verdict).
- ``pairs/<round>-<nodeA>--<nodeB>/nccl.log``: all_reduce_perf across two nodes (all their GPUs, over the fabric),
  and ``pair.json``: ``{"round": 1|2, "nodes": [nodeA, nodeB], "node_group", "exit_status", "started",
  "finished"}``. Round 1 pairs neighbours (0,1), (2,3) ...; round 2 shifts by one (1,2), (3,4) ... (last,0), so each
  node meets two partners and a bad NIC shows in both of its pairs.
- ``multinode/nccl.log``: all_reduce_perf over every node, and ``multinode/nodes.json``: ``{"nodes": [...],
  "workers": {pod hostname: node}, "node_group", "instance_type", "exit_status", "started", "finished"}``.

Files are read up to :data:`MAX_LOG_BYTES` (logs) and :data:`MAX_FACTS_BYTES` (JSON)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blueprint.acceptance.fabric import MultinodeRun, PairRun, render_multinode, render_pairs
from blueprint.acceptance.nccl import NcclLogError
from blueprint.acceptance.records import (
    NodeRun,
    is_int,
    is_number,
    is_strings,
    record_shape_problem,
    render_node_table,
)
from blueprint.files.input import (
    InputTooLargeError,
    NotAFileError,
    kind_in_tree,
    read_regular_limited,
    read_text_limited,
)
from blueprint.graph.model import strict_json

MAX_LOG_BYTES = 256 * 1024 * 1024  # a 16-node run with NCCL_DEBUG=INFO is tens of MB
MAX_FACTS_BYTES = 1024 * 1024  # node.json, pair.json, nodes.json: a few hundred bytes each
MAX_NODES_JSON_BYTES = 64 * 1024 * 1024  # kubectl get nodes -o json of a large cluster (nccl record)
MAX_RECORD_BYTES = 64 * 1024 * 1024  # a record nccl record or nccl nodes wrote (nccl compare)
_PAIR_DIR = re.compile(r"(?P<round>[0-9]+)-(?P<a>.+?)--(?P<b>.+)")
RUN_SUBDIRS = ("pairs", "multinode")  # a run's directories that are not nodes


def read_text(path: Path, limit: int = MAX_LOG_BYTES) -> str:
    """A log as text (undecodable bytes replaced), read up to ``limit`` bytes from a regular file:
    :class:`NcclLogError` beyond it, or for a link, a FIFO or a device (never followed, never blocked on)."""
    try:
        data = read_regular_limited(path, limit)
    except InputTooLargeError:
        raise NcclLogError(f"{path}: more than {limit:,} bytes") from None
    except NotAFileError as err:
        raise NcclLogError(f"{path}: {err}") from None
    except OSError as err:
        raise NcclLogError(f"{path}: cannot be read: {err.strerror or err}") from None
    return data.decode("utf-8", errors="replace")


def _is(path: Path, kind: str) -> bool:
    """Whether ``path`` is a regular file (``kind`` "file") or a directory ("dir") of the run, links not followed;
    :class:`NcclLogError` for a link, a FIFO or a device there, or a directory where a file goes (and the reverse),
    so that nothing is skipped as if it were absent."""
    try:
        found = kind_in_tree(path)
    except NotAFileError as err:
        raise NcclLogError(f"{path}: {err}") from None
    if found is not None and found != kind:
        raise NcclLogError(f"{path}: is a {'directory' if found == 'dir' else 'file'}, not a "
                           f"{'file' if kind == 'file' else 'directory'} as the run's layout has it")
    return found is not None


def _subdirs(root: Path) -> list[Path]:
    """The directories in ``root``, sorted; a link there is refused (it could point out of the run), other files
    are not the run's and are passed over."""
    out = []
    for entry in sorted(root.iterdir()):
        try:
            if kind_in_tree(entry) == "dir":
                out.append(entry)
        except NotAFileError as err:
            if entry.is_symlink():
                raise NcclLogError(f"{entry}: {err}") from None
    return out


def read_facts(path: Path) -> dict[str, Any]:
    """A JSON object (node.json, pair.json, nodes.json), read up to :data:`MAX_FACTS_BYTES`: :class:`NcclLogError`
    when it is larger, not JSON (NaN, a key given twice) or not an object."""
    try:
        loaded = strict_json(read_text(path, MAX_FACTS_BYTES))
    except ValueError as err:
        if isinstance(err, NcclLogError):
            raise
        raise NcclLogError(f"{path}: not JSON: {err}") from None
    if not isinstance(loaded, dict):
        raise NcclLogError(f"{path}: not a JSON object")
    return loaded


DCGM_RESULTS = ("pass", "fail", "skipped", "error")
FABRIC_KINDS = ("efa", "gpu-nic", "none")


def check_node_facts(facts: dict[str, Any], where: str) -> None:
    """The fields node.json gained for the node check (issue 34), each optional, checked for their JSON type:
    :class:`NcclLogError` naming ``where`` and the key for one that has another type."""
    def bad(key: str, want: str) -> NcclLogError:
        return NcclLogError(f"{where}: {key} is {json.dumps(facts.get(key))[:60]}, not {want}")
    if facts.get("exit_status") is not None and not is_int(facts["exit_status"]):
        raise bad("exit_status", "an integer (a string or a number in quotes passes no check)")
    if facts.get("node") is not None and not isinstance(facts["node"], str):
        raise bad("node", "a string")
    for key in ("gpu_count",):
        if facts.get(key) is not None and not (is_int(facts[key]) and facts[key] >= 0):
            raise bad(key, "a count of GPUs")
    for key in ("gpu_model", "nccl_version", "fabric_plugin"):
        if facts.get(key) is not None and not isinstance(facts[key], str):
            raise bad(key, "a string")
    if facts.get("passed") is not None and not isinstance(facts["passed"], bool):
        raise bad("passed", "true or false")
    dcgm = facts.get("dcgm")
    if dcgm is not None:
        if not isinstance(dcgm, dict) or dcgm.get("result") not in DCGM_RESULTS:
            raise bad("dcgm", f"an object whose result is one of {', '.join(DCGM_RESULTS)}")
        if (dcgm.get("level") is not None and not is_int(dcgm["level"])) or (
                dcgm.get("seconds") is not None and not is_number(dcgm["seconds"])) or (
                dcgm.get("failed") is not None and not is_strings(dcgm["failed"])):
            raise bad("dcgm", "{level: int, result, seconds: number, failed: [test, ...]}")
    fabric = facts.get("fabric")
    if fabric is not None:
        if not isinstance(fabric, dict) or fabric.get("kind") not in FABRIC_KINDS:
            raise bad("fabric", f"an object whose kind is one of {', '.join(FABRIC_KINDS)}")
        if not all(is_int(fabric.get(k)) and fabric[k] >= 0 for k in ("expected", "present", "up")) or (
                fabric.get("devices") is not None and not is_strings(fabric["devices"])):
            raise bad("fabric", "{kind, expected, present, up: counts, devices: [name, ...]}")
    checks = facts.get("checks")
    if checks is not None and not (isinstance(checks, list) and all(
            isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("passed"), bool)
            and isinstance(c.get("detail", ""), str) for c in checks)):
        raise bad("checks", "a list of {name: string, passed: bool, detail: string}")


def read_node_runs(root: Path) -> tuple[list[NodeRun], str | None]:
    """The nodes of one run as downloaded from the bucket (``acceptance/<group>/<run>/<node>/nccl.log`` and
    ``node.json``): ``root`` is the run's directory (its name is the run's); ``pairs/`` and ``multinode/`` are not
    nodes. :class:`NcclLogError` for a directory without node records or a node.json that is not an object of the
    documented shape."""
    out = _node_runs(root)
    if not out:
        raise NcclLogError(f"{root} holds no <node>/nccl.log")
    return out, root.name


def _node_runs(root: Path) -> list[NodeRun]:
    """The per-node records under ``root``, possibly none."""
    if not root.is_dir():
        raise NcclLogError(f"{root} is not a directory of node records (<node>/nccl.log, <node>/node.json)")
    out: list[NodeRun] = []
    for node_dir in (p for p in _subdirs(root) if p.name not in RUN_SUBDIRS):
        log = node_dir / "nccl.log"
        meta = node_dir / "node.json"
        if not _is(log, "file"):
            # a node check that ran no NCCL (GKE GPUDirect pools): its node.json alone, judged on its checks
            if not _is(meta, "file"):
                continue
            facts = read_facts(meta)
            check_node_facts(facts, str(meta))
            if not isinstance(facts.get("checks"), list):
                continue
            out.append(NodeRun(node=str(facts.get("node") or node_dir.name), log="", facts=facts))
            continue
        facts = read_facts(meta) if _is(meta, "file") else {}
        check_node_facts(facts, str(meta))
        out.append(NodeRun(node=str(facts.get("node") or node_dir.name), log=read_text(log), facts=facts))
    return out


def read_pair_runs(root: Path) -> list[PairRun]:
    """The pairs of a run (``<run>/pairs/*/``), possibly none; the round and nodes come from pair.json, else from
    the directory's name. :class:`NcclLogError` naming the file for a pair.json of another shape."""
    pairs_dir = root / "pairs"
    if not _is(pairs_dir, "dir"):
        return []
    out: list[PairRun] = []
    for pair_dir in _subdirs(pairs_dir):
        log, meta = pair_dir / "nccl.log", pair_dir / "pair.json"
        has_log, has_meta = _is(log, "file"), _is(meta, "file")
        if not has_log and not has_meta:
            continue
        facts = read_facts(meta) if has_meta else {}
        named = _PAIR_DIR.fullmatch(pair_dir.name)
        round_: Any = facts.get("round")
        nodes: Any = facts.get("nodes")
        if has_meta:
            if not (is_int(round_) and round_ >= 1):
                raise NcclLogError(f"{meta}: round is {json.dumps(round_)[:60]}, not a round number (1, 2)")
            if not (is_strings(nodes) and len(nodes) == 2 and nodes[0] != nodes[1]):
                raise NcclLogError(f"{meta}: nodes is {json.dumps(nodes)[:80]}, not two node names")
            if facts.get("exit_status") is not None and not is_int(facts["exit_status"]):
                raise NcclLogError(f"{meta}: exit_status is {json.dumps(facts['exit_status'])[:60]}, not an integer")
        elif named is not None and named["a"] != named["b"]:
            round_, nodes = int(named["round"]), [named["a"], named["b"]]
        else:
            raise NcclLogError(f"{pair_dir}: no pair.json, and its name is not <round>-<nodeA>--<nodeB>")
        out.append(PairRun(name=pair_dir.name, round=int(round_), nodes=(str(nodes[0]), str(nodes[1])),
                           log=read_text(log) if has_log else None, facts=facts))
    return out


def read_multinode(root: Path) -> MultinodeRun | None:
    """``<run>/multinode/nccl.log`` and ``nodes.json``, or None when the run has no multinode directory.
    :class:`NcclLogError` naming the file for a nodes.json of another shape."""
    where = root / "multinode"
    if not _is(where, "dir"):
        return None
    log, meta = where / "nccl.log", where / "nodes.json"
    has_log, has_meta = _is(log, "file"), _is(meta, "file")
    if not has_log and not has_meta:
        return None
    facts = read_facts(meta) if has_meta else {}
    if has_meta:
        if not is_strings(facts.get("nodes")) or not facts["nodes"]:
            raise NcclLogError(f"{meta}: nodes is {json.dumps(facts.get('nodes'))[:80]}, not a list of node names")
        workers = facts.get("workers")
        if workers is not None and not (isinstance(workers, dict) and all(isinstance(v, str)
                                                                           for v in workers.values())):
            raise NcclLogError(f"{meta}: workers is not an object of worker hostname: node name")
        for key in ("node_group", "instance_type"):
            if facts.get(key) is not None and not isinstance(facts[key], str):
                raise NcclLogError(f"{meta}: {key} is {json.dumps(facts[key])[:60]}, not a string")
        if facts.get("exit_status") is not None and not is_int(facts["exit_status"]):
            raise NcclLogError(f"{meta}: exit_status is {json.dumps(facts['exit_status'])[:60]}, not an integer")
    return MultinodeRun(log=read_text(log) if has_log else None, facts=facts, where=where)


@dataclass(frozen=True)
class RunDir:
    """What a run's directory holds: per-node records, pairs, the multi-node run (any of them may be absent)."""

    name: str
    nodes: list[NodeRun]
    pairs: list[PairRun]
    multinode: MultinodeRun | None


def read_run(root: Path) -> RunDir:
    """A run's directory as downloaded (the layout in this module's docstring). :class:`NcclLogError` when it holds
    none of per-node records, pairs or a multi-node run, or a file of another shape."""
    nodes = _node_runs(root)
    pairs = read_pair_runs(root)
    multinode = read_multinode(root)
    if not nodes and not pairs and multinode is None:
        raise NcclLogError(f"{root} holds no <node>/nccl.log, pairs/<pair>/nccl.log or multinode/nccl.log")
    return RunDir(root.name, nodes, pairs, multinode)


def run_record(run: RunDir, per_node: dict[str, Any] | None, pairs: dict[str, Any] | None,
               multinode: dict[str, Any] | None, *, stack: str | None, node_group: str | None,
               instance_type: str | None) -> dict[str, Any]:
    """The per-node record (or, for a run without per-node records, one with no nodes) with the pairs and the
    multi-node run beside it; ``passed`` when each part present passed. Nodes with a per-node record and no pair
    are named (``unpaired``): their fabric was not tested two nodes at a time."""
    record = per_node if per_node is not None else {
        "kind": "per-node", "stack": stack, "node_group": node_group, "run": run.name, "instance_type": instance_type,
        "expected_busbw_gbps": None, "median_busbw_gbps": None, "median_latency_us": None, "nodes": [],
        "gpu_models": [], "versions": {"driver": [], "cuda": [], "nccl": []}, "outliers": [], "passed": True}
    if pairs is not None:
        paired = {n for p in pairs["pairs"] for n in p["nodes"]}
        pairs["unpaired"] = sorted({r["node"] for r in record["nodes"]} - paired) if pairs["pairs"] else []
    record["pairs"] = pairs
    record["multinode"] = multinode
    record["passed"] = (record["passed"] and (pairs is None or pairs["passed"])
                        and (multinode is None or multinode["passed"]))
    return record


def render_run(record: dict[str, Any]) -> str:
    """A run for a terminal: the per-node table (when the run has per-node records), the pairs, the multi-node
    run."""
    parts = [render_node_table(record)] if record["nodes"] else [
        f"{'PASS' if record['passed'] else 'FAIL'}: run {record.get('run') or '?'} of "
        f"{record.get('node_group') or '?'} ({record.get('instance_type') or 'instance type not named'}): no "
        "per-node records\n"]
    if record.get("pairs") is not None:
        parts.append(render_pairs(record["pairs"]))
    if record.get("multinode") is not None:
        parts.append(render_multinode(record["multinode"]))
    return "".join(parts)


def read_record_file(path: Path) -> dict[str, Any]:
    """A record ``nccl record`` or ``nccl nodes`` wrote, read within :data:`MAX_RECORD_BYTES` and checked to have the
    shape they write; ValueError (or OSError) saying why not."""
    try:
        doc = strict_json(read_text_limited(path, MAX_RECORD_BYTES))
    except ValueError as err:
        raise ValueError(f"not an acceptance record: {err}") from None
    if not isinstance(doc, dict) or ("max_busbw_gbps" not in doc and doc.get("kind") != "per-node"):
        raise ValueError("not an acceptance record (no max_busbw_gbps, not a per-node record)")
    if doc.get("kind") == "per-node" and not isinstance(doc.get("nodes"), list):
        raise ValueError("a per-node record without its nodes list")
    problem = record_shape_problem(doc)
    if problem is not None:
        raise ValueError(f"not an acceptance record as blueprint writes it: {problem}")
    return doc
