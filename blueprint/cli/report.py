"""``blueprint report <stack | graph.json>``: one self-contained HTML page: the cluster diagram (Graphviz), the cost by
plane and team, goodput against the checkpoint interval, the Capacity Block timeline and the policy verdict linked to
the diagram."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from blueprint.cli.common import EXIT_OK, ToolMissingError, cache_option, emit, target_graph, usage_for, write
from blueprint.files.output import check_output_file, output_file_argument


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("report", parents=[common], help="one self-contained HTML page of a stack: the cluster "
                            "diagram (Graphviz), the cost by plane and team, goodput against the checkpoint interval, "
                            "the Capacity Block timeline and the policy verdict linked to the diagram")
    parser.add_argument("target", help="stack name, stack file, or a graph JSON")
    parser.add_argument("-o", "--output", type=output_file_argument,
                        help="write the page here (report.html) instead of standard output")
    parser.add_argument("--usage", type=Path, help="usage estimates (default: stacks/<stack>.usage.yaml if present)")
    cache_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Exit 0 with the page written (whatever the verdict: the page shows it), 2 on bad input or when Graphviz's dot
    is missing."""
    from blueprint.cost.engine import price_graph
    from blueprint.policy.runner import run_policies
    from blueprint.report.diagram import DOT_MISSING, GraphvizMissingError, dot_available
    from blueprint.report.page import ReportInputs, render_report
    from components.clock import utcnow

    if args.output is not None:
        check_output_file(args.output)
    if not dot_available():
        raise ToolMissingError(DOT_MISSING)
    graph, artifact, spec = target_graph(args.target, use_cache=not args.no_cache)
    usage, notes = usage_for(args.usage, args.target, (graph,))
    cost = price_graph(graph, usage=usage, usage_notes=notes)
    try:
        page = render_report(ReportInputs(graph=graph, spec=spec, source=artifact, cost=cost,
                                          policy=run_policies(graph), now=utcnow()))
    except GraphvizMissingError as err:
        raise ToolMissingError(str(err)) from None
    write(page, args.output)
    if args.output is not None:
        emit(sys.stderr, f"wrote {args.output}\n")
    return EXIT_OK
