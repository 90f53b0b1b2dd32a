"""The ``blueprint`` command: run stacks offline and write what the program would create.

    blueprint preview <stack>            resource tree grouped by plane, with the figures that matter
    blueprint graph <stack> -o FILE      the ResourceGraph as JSON (format in README.md)
    blueprint manifests <stack> -o DIR   every Kubernetes object and Helm release's values as YAML
    blueprint policy <stack | graph.json> [--format table|markdown|json|sarif] [--config FILE]
                                         run the policy pack; exit 1 when a mandatory policy fails

``<stack>`` is a stack name (``prod-aws`` reads ``stacks/Pulumi.prod-aws.yaml``) or a path to a stack
file. A stack file that breaks a rule prints the file, key path and rule, and exits with status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from blueprint.engine import run_program
from blueprint.graph import GraphFormatError, ResourceGraph
from blueprint.manifests import write_manifests
from blueprint.policy import (
    PolicyConfigError,
    load_config_file,
    load_pack,
    render_json,
    render_markdown,
    render_sarif,
    render_table,
    run_policies,
)
from blueprint.render import render_preview
from blueprint.stackfile import StackError, load_stack

EXIT_OK = 0
EXIT_POLICY = 1
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
    policy = sub.add_parser("policy", help="run the policy pack on a stack or a graph file")
    policy.add_argument("target", help="stack name, stack file, or a graph JSON (offline graph, "
                                       "`pulumi preview --json`, or `pulumi stack export`)")
    policy.add_argument("--format", choices=("table", "markdown", "json", "sarif"), default="table")
    policy.add_argument("--config", type=Path, help="pack config, as given to --policy-pack-config")
    policy.add_argument("-o", "--output", type=Path, help="write the report here instead of standard output")
    return parser


def _policy(args: argparse.Namespace) -> int:
    """``blueprint policy``: exit 0 (no mandatory violation), 1 (mandatory violation), 2 (bad input)."""
    target = Path(args.target)
    try:
        pack = load_pack()
        config = load_config_file(args.config, pack.policies) if args.config else None
        if target.suffix == ".json":
            graph = ResourceGraph.load(target)
            artifact = str(target)
        else:
            stack = load_stack(args.target)
            graph = run_program(stack.name, stack.config, stack.region).graph
            artifact = stack.display_path
    except (StackError, PolicyConfigError, GraphFormatError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_INVALID
    except (OSError, ValueError) as err:
        print(f"error: {target}: cannot read the graph: {err}", file=sys.stderr)
        return EXIT_INVALID
    report = run_policies(graph, config, pack)
    renderers = {
        "table": lambda: render_table(report),
        "markdown": lambda: render_markdown(report, graph.stack or artifact),
        "json": lambda: render_json(report),
        "sarif": lambda: render_sarif(report, artifact),
    }
    text = renderers[args.format]()
    if args.output is not None:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return EXIT_OK if report.passed else EXIT_POLICY


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``blueprint`` and ``python -m blueprint``; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.command == "policy":
        return _policy(args)
    try:
        stack = load_stack(args.stack)
    except StackError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_INVALID
    run = run_program(stack.name, stack.config, stack.region)
    if args.command == "preview":
        report = run_policies(run.graph)
        sys.stdout.write(render_preview(run.graph, stack.spec, stack.display_path, run.outputs))
        sys.stdout.write("\n" + render_table(report))
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
