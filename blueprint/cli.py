"""The ``blueprint`` command: run stacks offline and write what the program would create.

    blueprint preview <stack>            resource tree grouped by plane, with the figures that matter
    blueprint graph <stack> -o FILE      the ResourceGraph as JSON (format in README.md)
    blueprint manifests <stack> -o DIR   every Kubernetes object and Helm release's values as YAML

``<stack>`` is a stack name (``prod-aws`` reads ``stacks/Pulumi.prod-aws.yaml``) or a path to a stack
file. A stack file that breaks a rule prints the file, key path and rule, and exits with status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from blueprint.engine import run_program
from blueprint.manifests import write_manifests
from blueprint.render import render_preview
from blueprint.stackfile import StackError, StackFile, load_stack

EXIT_OK = 0
EXIT_INVALID = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="blueprint", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    preview = sub.add_parser("preview", help="print the resource tree of a stack, grouped by plane")
    preview.add_argument("stack", help="stack name (prod-aws) or path to a stack file")
    graph = sub.add_parser("graph", help="write the stack's ResourceGraph as JSON")
    graph.add_argument("stack", help="stack name (prod-aws) or path to a stack file")
    graph.add_argument("-o", "--output", type=Path, help="output file (default: standard output)")
    manifests = sub.add_parser("manifests", help="write the stack's Kubernetes objects and Helm values as YAML")
    manifests.add_argument("stack", help="stack name (prod-aws) or path to a stack file")
    manifests.add_argument("-o", "--output", type=Path, required=True, help="output directory")
    return parser


def _load(stack: str) -> StackFile:
    return load_stack(stack)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``blueprint`` and ``python -m blueprint``; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        stack = _load(args.stack)
    except StackError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_INVALID
    run = run_program(stack.name, stack.config, stack.region)
    if args.command == "preview":
        sys.stdout.write(render_preview(run.graph, stack.spec, stack.display_path))
    elif args.command == "graph":
        text = run.graph.to_json()
        if args.output is None:
            sys.stdout.write(text)
        else:
            args.output.write_text(text, encoding="utf-8")
            print(f"wrote {args.output} ({len(run.graph.resources)} resources)", file=sys.stderr)
    elif args.command == "manifests":
        files = write_manifests(run.graph, args.output)
        print(f"wrote {len(files)} files under {args.output}", file=sys.stderr)
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
