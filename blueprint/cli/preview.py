"""``blueprint preview <stack> [--previous FILE]``: the resource tree grouped by plane with the figures that matter,
what the run does to the cluster of a previous run (the node groups that roll, what is replaced), the cost, then the
policy pack's verdict; exit 1 on a mandatory violation, as ``pulumi preview --policy-pack`` fails, or on a replacement
of what holds data that the stack does not allow."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from blueprint.cli.common import (
    EXIT_OK,
    EXIT_POLICY,
    STACK_HELP,
    emit,
    previous_option,
    run_stack,
    shown_path,
    usage_for,
)


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("preview", parents=[common], help="print the resource tree of a stack, grouped by plane")
    parser.add_argument("stack", help=STACK_HELP)
    previous_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from blueprint.changes.render import day_two, text
    from blueprint.cost.engine import price_graph
    from blueprint.cost.render import render_cost_summary
    from blueprint.cost.unit import modelled_goodput, render_unit_cost, unit_cost, unit_reason
    from blueprint.graph.stackfile import load_stack
    from blueprint.policy.runner import render_table, run_policies
    from blueprint.preview.render import render_preview
    from blueprint.sizing.inference import render_inference, served_sizing, serving_resources

    stack = load_stack(args.stack)
    program, previous = run_stack(stack, args.previous)
    report = run_policies(program.graph)
    emit(sys.stdout, render_preview(program.graph, stack.spec, stack.display_path, program.outputs))
    blocked = False
    if previous is not None and args.previous is not None:
        allowed = {a.resource: a.reason for a in stack.spec.upgrades.allow_replace}
        changes = day_two(previous, program.graph, allowed)
        emit(sys.stdout, "\n" + text(changes, shown_path(args.previous)))
        blocked = any(r.blocks for r in changes.replacements)
    usage, notes = usage_for(None, args.stack, (program.graph,))
    cost = price_graph(program.graph, usage=usage, usage_notes=notes)
    goodput = modelled_goodput(stack.spec)
    served = render_inference(served_sizing(stack.spec, cost))
    emit(sys.stdout, "\n" + render_cost_summary(cost)
         + render_unit_cost(unit_cost(cost, stack.spec.workload, goodput, serving_resources(stack.spec)),
                            unit_reason(stack.spec, goodput))
         + "".join(f"{line}\n" for line in served))
    emit(sys.stdout, "\n" + render_table(report))
    # As `pulumi preview --policy-pack` fails on a mandatory violation (and `make preview` with it); and, after a
    # previous run, on a replacement of what holds data that the stack does not allow (as the PR check does).
    return EXIT_OK if report.passed and not blocked else EXIT_POLICY
