"""``blueprint nccl parse|check|record|nodes|compare``: read and judge nccl-tests output: a log as JSON, a run against
the acceptance threshold, one run's record, a group's per-node run, and what changed between two records."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from blueprint.cli.common import (
    EXIT_OK,
    EXIT_POLICY,
    MAX_EXPECT_NODES,
    CommandError,
    emit,
    fraction,
    node_count,
    output_option,
    write,
)
from blueprint.files.input import InputTooLargeError, read_limited, read_text_limited
from blueprint.files.output import check_output_file
from blueprint.graph.model import strict_json


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    nccl = sub.add_parser("nccl", parents=[common], help="read and judge nccl-tests output")
    nccl.set_defaults(handler=run)
    nccl_sub = nccl.add_subparsers(dest="nccl_command", required=True)
    parse = nccl_sub.add_parser("parse", parents=[common], help="an nccl-tests log as JSON")
    parse.add_argument("log", type=Path)
    output_option(parse, "the JSON")
    check = nccl_sub.add_parser("check", parents=[common], help="compare a log with the acceptance threshold; "
                                "exit 1 below it or on any wrong value")
    check.add_argument("log", type=Path)
    check.add_argument("--instance-type", required=True, help="the node group's instance type")
    check.add_argument("--nodes", type=node_count, required=True, help="nodes the run spanned")
    check.add_argument("--expected-busbw", type=float, help="expected bus bandwidth (GB/s) when the catalog has "
                       "none for the type")
    check.add_argument("--format", choices=("table", "json", "markdown"), default="table")
    output_option(check)
    record = nccl_sub.add_parser("record", parents=[common], help="one acceptance run as JSON: the log, the "
                                 "nodes (kubectl get nodes -o json) and the verdict")
    record.add_argument("log", type=Path)
    record.add_argument("--stack", required=True, help="the stack the run tested")
    record.add_argument("--node-group", required=True, help="the node group the run spanned")
    record.add_argument("--nodes-json", type=Path, required=True,
                        help="kubectl get nodes -l gpu-cluster/node-group=<group> -o json > nodes.json")
    record.add_argument("--instance-type", help="judge the run against this type's threshold too")
    output_option(record, "the record")
    nodes = nccl_sub.add_parser("nodes", parents=[common], help="a group's run (acceptance/<group>/<run>/ as "
                                "downloaded from the bucket): each node's bus bandwidth, small-message time, versions "
                                "and own check (GPUs, DCGM, fabric devices); the two-node pairs and the nodes they "
                                "point at; the multi-node run; exit 1 when a node is an outlier or a pair fails")
    nodes.add_argument("run_dir", type=Path, help="the run's directory: <node>/nccl.log and <node>/node.json, "
                       "pairs/<round>-<a>--<b>/, multinode/ (any of them)")
    nodes.add_argument("--instance-type", help="the group's instance type (default: the nodes' node.json)")
    nodes.add_argument("--expected-busbw", type=float, help="expected per-node bus bandwidth (GB/s) when the catalog "
                       "has none for the type (the stack's acceptance.expected figure)")
    nodes.add_argument("--expected-pair-busbw", type=float, help="expected multi-node bus bandwidth (GB/s) for the "
                       "pairs and the multi-node run when the catalog has none for the type (without either, pairs "
                       "are judged against their median)")
    nodes.add_argument("--stack", help="the stack the run tested (kept in the record; its group's maxSize is the "
                       "node count expected unless --expect-nodes)")
    nodes.add_argument("--expect-nodes", type=int, help="nodes the run was meant to cover: fewer records fail it")
    nodes.add_argument("--format", choices=("table", "json"), default="table")
    output_option(nodes)
    compare = nccl_sub.add_parser("compare", parents=[common], help="what changed between two records (nodes, "
                                  "driver, CUDA and NCCL versions, bandwidth); exit 1 when the later peak or median "
                                  "fell more than the tolerance, or a node became an outlier")
    compare.add_argument("before", type=Path, help="a record (JSON), or a run directory with multinode/")
    compare.add_argument("after", type=Path, help="a record (JSON), or a run directory with multinode/")
    compare.add_argument("--tolerance", type=fraction, default=0.1, help="allowed fall of the peak, a fraction "
                         "from 0 to 1 (default 0.1)")


def run(args: argparse.Namespace) -> int:
    """Exit 0, 1 (check failed, an outlier, a fall), 2 (not an nccl-tests log, or no threshold)."""
    from blueprint.acceptance.nccl import NcclLogError, parse_nccl, render_json
    from blueprint.acceptance.rundir import MAX_LOG_BYTES, MAX_NODES_JSON_BYTES

    if args.nccl_command == "compare":
        return _compare(args)
    if args.nccl_command == "nodes":
        return _nodes(args)
    if args.output is not None:
        check_output_file(args.output)
    try:
        data = read_limited(args.log, MAX_LOG_BYTES)
    except InputTooLargeError as err:
        raise CommandError(f"{args.log}: {err}") from None
    except OSError as err:
        raise CommandError(f"{args.log}: cannot be read: {err.strerror or err}") from None
    try:
        parsed = parse_nccl(data.decode("utf-8", errors="replace"))
    except NcclLogError as err:
        raise CommandError(f"{args.log}: not an nccl-tests log: {err}") from None
    if args.nccl_command == "parse":
        write(render_json(parsed.to_dict()), args.output)
        return EXIT_OK
    if args.nccl_command == "record":
        from blueprint.acceptance.records import acceptance_record, node_facts

        try:
            facts = node_facts(strict_json(read_text_limited(args.nodes_json, MAX_NODES_JSON_BYTES)))
        except (OSError, ValueError) as err:
            raise CommandError(f"{args.nodes_json}: {err}") from None
        verdict = _verdict(parsed, args.instance_type, len(facts["nodes"]), None) if args.instance_type else None
        text = data.decode("utf-8", errors="replace")
        write(render_json(acceptance_record(parsed, text, args.stack, args.node_group, facts, verdict)), args.output)
        return EXIT_OK
    verdict = _verdict(parsed, args.instance_type, args.nodes, args.expected_busbw)
    fraction = verdict.pass_fraction
    expected = verdict.expected_busbw
    if args.format == "json":
        text = render_json(verdict.to_dict())
    elif args.format == "markdown":
        text = verdict.to_markdown()
    else:
        text = (f"{'PASS' if verdict.passed else 'FAIL'}: peak busbw {parsed.max_busbw or 0:.2f} GB/s, required "
                f"{verdict.required_busbw:.2f} ({fraction:.0%} of {expected:.2f}), wrong values "
                f"{parsed.wrong_summary}\n"
                + "".join(f"  - {p}\n" for p in verdict.problems))
    write(text, args.output)
    return EXIT_OK if verdict.passed else EXIT_POLICY


def _verdict(parsed: Any, instance_type: str, nodes: int, expected_busbw: float | None) -> Any:
    """The run against the catalog's threshold for the type (or the one given)."""
    from blueprint.acceptance.nccl import Verdict
    from components.catalog.acceptance import catalog_figure, load_thresholds

    fraction, thresholds = load_thresholds()
    known = thresholds.get(instance_type)
    if nodes < 1:
        raise CommandError("--nodes must be at least 1")
    if expected_busbw is not None and not (math.isfinite(expected_busbw) and expected_busbw > 0):
        raise CommandError(f"--expected-busbw must be a finite positive number of GB/s, got {expected_busbw}")
    per_node = catalog_figure(instance_type, 1) if nodes == 1 else None
    if expected_busbw is not None:
        expected, source = expected_busbw, "given with --expected-busbw"
    elif per_node is not None and per_node.expected_busbw_gbps is not None:
        expected, source = per_node.expected_busbw_gbps, f"{per_node.source} (per-node figure, {per_node.status})"
    elif known is not None and known.expected_busbw_gbps is not None and nodes == 1 and (known.nodes or 2) > 1:
        raise CommandError(f"the {instance_type} threshold was measured across {known.nodes} nodes over the "
                           "fabric; a single-node (NVLink) run needs --expected-busbw")
    elif known is not None and known.expected_busbw_gbps is not None:
        expected, source = known.expected_busbw_gbps, known.source + (
            f" (measured on {known.nodes} nodes)" if known.nodes and known.nodes != nodes else "")
    else:
        raise CommandError(f"no expected bus bandwidth for {instance_type} in components/catalog/"
                           "acceptance.yaml: give --expected-busbw (GB/s) with its source in your ticket")
    return Verdict(parsed, instance_type, nodes, expected, fraction, source)


def _positive(value: float | None, flag: str) -> None:
    """A figure given on the command line must be a finite positive number of GB/s."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise CommandError(f"{flag} must be a finite positive number of GB/s, got {value}")


def _nodes(args: argparse.Namespace) -> int:
    """``blueprint nccl nodes``: exit 0, 1 (a node is an outlier or failed its check, a pair or the multi-node run
    failed), 2 (no records, a record of another shape, or no expected per-node figure)."""
    from blueprint.acceptance.fabric import multinode_summary, pair_records
    from blueprint.acceptance.nccl import NcclLogError, render_json
    from blueprint.acceptance.records import node_records, require_nodes
    from blueprint.acceptance.rundir import read_run, render_run, run_record
    from components.catalog.acceptance import catalog_figure, latency_outlier_factor, load_thresholds, outlier_fraction

    if args.output is not None:
        check_output_file(args.output)
    _positive(args.expected_busbw, "--expected-busbw")
    _positive(args.expected_pair_busbw, "--expected-pair-busbw")
    try:
        run_dir = read_run(args.run_dir)
    except (NcclLogError, OSError) as err:
        raise CommandError(f"{args.run_dir}: {err}") from None
    runs, multi = run_dir.nodes, run_dir.multinode
    types = {str(r.facts["instance_type"]) for r in runs if r.facts.get("instance_type")}
    if multi is not None and multi.facts.get("instance_type"):
        types.add(str(multi.facts["instance_type"]))
    instance_type = args.instance_type or (next(iter(types)) if len(types) == 1 else None)
    if instance_type is None and (runs or len(types) > 1):
        raise CommandError(f"{args.run_dir}: the nodes name {len(types) or 'no'} instance type(s): give "
                           "--instance-type")
    groups = {str(r.facts["node_group"]) for r in runs if r.facts.get("node_group")}
    groups |= {str(p.facts["node_group"]) for p in run_dir.pairs if p.facts.get("node_group")}
    if multi is not None and multi.facts.get("node_group"):
        groups.add(str(multi.facts["node_group"]))
    group = ", ".join(sorted(groups)) or None
    pass_fraction = load_thresholds()[0]
    per_node = None
    if runs:
        expected, source = _per_node_figure(args.expected_busbw, str(instance_type))
        per_node = node_records(runs, instance_type=str(instance_type), expected_busbw=expected,
                                expected_source=source, pass_fraction=pass_fraction,
                                outlier_fraction=outlier_fraction(), latency_factor=latency_outlier_factor(),
                                stack=args.stack, node_group=group, run=run_dir.name)
        expect = args.expect_nodes
        if expect is None and args.stack and len(groups) == 1:
            expect = _group_max_size(args.stack, next(iter(groups)))
        if expect is not None:
            if not 1 <= expect <= MAX_EXPECT_NODES:
                raise CommandError(f"--expect-nodes must be between 1 and {MAX_EXPECT_NODES:,}, got {expect}")
            require_nodes(per_node, runs, expect)

    def multi_figure(nodes: int) -> tuple[float | None, str | None]:
        if args.expected_pair_busbw is not None:
            return args.expected_pair_busbw, "given with --expected-pair-busbw"
        known = catalog_figure(instance_type, max(nodes, 2)) if instance_type else None
        if known is None or known.expected_busbw_gbps is None:
            return None, None
        return known.expected_busbw_gbps, f"{known.source} ({known.status})"
    pairs = None
    if run_dir.pairs:
        expected_pair, pair_source = multi_figure(2)
        pairs = pair_records(run_dir.pairs, expected_busbw=expected_pair, expected_source=pair_source,
                             pass_fraction=pass_fraction, outlier_fraction=outlier_fraction())
    summary = None
    if multi is not None:
        expected_multi, multi_source = multi_figure(len(multi.nodes))
        summary = multinode_summary(multi, expected_busbw=expected_multi, expected_source=multi_source,
                                    pass_fraction=pass_fraction)
    record = run_record(run_dir, per_node, pairs, summary, stack=args.stack, node_group=group,
                        instance_type=instance_type)
    write(render_json(record) if args.format == "json" else render_run(record), args.output)
    return EXIT_OK if record["passed"] else EXIT_POLICY


def _per_node_figure(given: float | None, instance_type: str) -> tuple[float, str]:
    """The expected per-node (NVLink) bus bandwidth and its source: the one given, else the catalog's."""
    from components.catalog.acceptance import catalog_figure

    if given is not None:
        return given, "given with --expected-busbw"
    known = catalog_figure(instance_type, 1)
    if known is None or known.expected_busbw_gbps is None:
        raise CommandError(f"no per-node bus bandwidth for {instance_type} in components/catalog/"
                           "acceptance.yaml: give --expected-busbw (the stack's acceptance.expected figure for "
                           "nodes 1)")
    return known.expected_busbw_gbps, f"{known.source} ({known.status})"


def _group_max_size(stack_name: str, group: str) -> int | None:
    """A node group's (GKE: pool's) maxSize in the stack file, or None when the stack does not name it."""
    from blueprint.graph.stackfile import load_stack
    from components.spec.decisions import cloud_node_groups

    return next((g.max_size for g in cloud_node_groups(load_stack(stack_name).spec) if g.name == group), None)


def _compare(args: argparse.Namespace) -> int:
    """What changed between two acceptance records; exit 1 when the bandwidth fell."""
    from blueprint.acceptance.records import compare_node_records, compare_records
    from blueprint.acceptance.rundir import read_record_file

    docs = []
    for path in (args.before, args.after):
        try:
            docs.append(_multinode_record(path) if path.is_dir() else read_record_file(path))
        except (OSError, ValueError) as err:
            raise CommandError(f"{path}: {err}") from None
    kinds = {d.get("kind") == "per-node" for d in docs}
    if len(kinds) > 1:
        raise CommandError(f"{args.before} and {args.after}: one is a per-node record and the other is not")
    if kinds == {True}:
        lines, fell = compare_node_records(docs[0], docs[1], args.tolerance)
    else:
        lines, fell = compare_records(docs[0], docs[1], args.tolerance)
    emit(sys.stdout, "\n".join(lines) + "\n")
    return EXIT_POLICY if fell else EXIT_OK


def _multinode_record(path: Path) -> dict[str, Any]:
    """A run directory's multi-node run as a record (multinode/nccl.log and nodes.json, with the run's node.json
    files for the GPU model, driver and CUDA)."""
    from blueprint.acceptance.fabric import multinode_record
    from blueprint.acceptance.nccl import NcclLogError
    from blueprint.acceptance.rundir import read_multinode, read_run

    try:
        multi = read_multinode(path)
        if multi is None:
            raise NcclLogError("a run directory without multinode/nccl.log (nccl compare reads a record, or a run's "
                               "multinode/ run)")
        return multinode_record(multi, read_run(path).nodes, path.name)
    except (NcclLogError, OSError) as err:
        raise CommandError(f"{path}: {err}") from None
