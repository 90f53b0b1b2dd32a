"""``blueprint manifests <stack> -o DIR``: every Kubernetes object and Helm release's values of the stack as YAML."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from blueprint.cli.common import EXIT_OK, STACK_HELP, emit
from blueprint.files.output import check_output_dir, output_dir_argument


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("manifests", parents=[common],
                            help="write the stack's Kubernetes objects and Helm values as YAML")
    parser.add_argument("stack", help=STACK_HELP)
    parser.add_argument("-o", "--output", type=output_dir_argument, required=True, help="output directory")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from blueprint.graph.engine import run_program
    from blueprint.graph.manifests import write_manifests
    from blueprint.graph.stackfile import load_stack

    check_output_dir(args.output)
    stack = load_stack(args.stack)
    files = write_manifests(run_program(stack.name, stack.config, stack.region).graph, args.output)
    emit(sys.stderr, f"wrote {len(files)} files under {args.output}\n")
    return EXIT_OK
