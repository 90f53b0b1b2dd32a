"""``blueprint cost <stack | graph.json>``: the monthly cost of a stack or a graph (USD), and the unit cost of its
accepted work when the stack gives the economics."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from blueprint.cli.common import EXIT_OK, cache_option, output_option, target_graph, usage_for, write
from blueprint.files.output import check_output_file


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("cost", parents=[common], help="price a stack or a graph file (USD); "
                            "`cost diff --base <graph.json|git ref> <target>` compares two")
    parser.add_argument("target", help="stack name, stack file, or a graph JSON")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    output_option(parser)
    parser.add_argument("--usage", type=Path, help="usage estimates (default: stacks/<stack>.usage.yaml if present)")
    cache_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from blueprint.cost.engine import price_graph
    from blueprint.cost.render import render_cost_json, render_cost_table
    from blueprint.cost.unit import modelled_goodput, render_unit_cost, unit_cost, unit_cost_document, unit_reason

    if args.output is not None:
        check_output_file(args.output)
    graph, _, spec = target_graph(args.target, use_cache=not args.no_cache)
    usage, notes = usage_for(args.usage, args.target, (graph,))
    report = price_graph(graph, usage=usage, usage_notes=notes)
    goodput = modelled_goodput(spec)
    unit = None
    if spec is not None:  # a stack: a saved graph carries no workload, and a reader imports no spec for it
        from blueprint.sizing.inference import serving_resources

        unit = unit_cost(report, spec.workload, goodput, serving_resources(spec))
    reason = unit_reason(spec, goodput)
    if args.format == "json":
        write(render_cost_json(report, unit_cost_document(unit, reason)), args.output)
    else:
        write(render_cost_table(report) + render_unit_cost(unit, reason), args.output)
    return EXIT_OK
