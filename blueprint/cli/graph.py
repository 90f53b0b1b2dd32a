"""``blueprint graph <stack> [-o FILE] [--previous FILE]``: the stack's ResourceGraph as JSON (docs/graph-format.md);
with ``--previous``, as a second ``pulumi up`` after that run would send it."""

from __future__ import annotations

import argparse
import gc
import sys
from typing import Any

from blueprint.cli.common import EXIT_OK, STACK_HELP, emit, previous_option, run_stack, write
from blueprint.files.output import check_output_file, output_file_argument, write_atomic


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("graph", parents=[common], help="write the stack's ResourceGraph as JSON")
    parser.add_argument("stack", help=STACK_HELP)
    parser.add_argument("-o", "--output", type=output_file_argument, help="output file (default: standard output)")
    previous_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from blueprint.graph.stackfile import load_stack

    if args.output is not None:
        check_output_file(args.output)
    stack = load_stack(args.stack)
    graph = run_stack(stack, args.previous)[0].graph
    if args.output is None:
        write(graph.to_json(), None)
        return EXIT_OK
    gc.freeze()  # the run's objects are done changing: the collector need not scan them again
    write_atomic(args.output, graph.iter_json())
    emit(sys.stderr, f"wrote {args.output} ({len(graph.resources)} resources)\n")
    return EXIT_OK
