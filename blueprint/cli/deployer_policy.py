"""``blueprint deployer-policy <stack> [--format text|json] [-o FILE]``: the IAM policy (AWS) or custom role (GCP) the
deployer needs for exactly the resource types and invokes of the stack's graph (docs/aws.md, docs/gcp.md)."""

from __future__ import annotations

import argparse
from typing import Any

from blueprint.cli.common import EXIT_OK, STACK_HELP, output_option, run_stack, write
from blueprint.files.output import check_output_file


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "deployer-policy", parents=[common],
        help="the IAM policy (AWS) or custom role (GCP) the deployer needs for exactly the stack's resource types",
        description="Writes the least-privilege grant of the role pulumi up runs as: the actions each resource type "
        "and invoke of the stack's graph needs (create, read, update, delete, tag, pass role), from the cloud's "
        "deployer_permissions.yaml. --format json writes one object: the document under 'policy' (AWS) or 'role' "
        "(GCP), the grants it cannot hold, and what it does not cover. A type missing from the table exits 2.")
    parser.add_argument("stack", help=STACK_HELP)
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="text: a header, then the document; json: the object that holds it")
    output_option(parser, "the policy")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from blueprint.deployer.cloud import cloud_deployer
    from blueprint.deployer.render import render_json, render_text
    from blueprint.deployer.table import used_entries
    from blueprint.graph.stackfile import load_stack

    if args.output is not None:
        check_output_file(args.output)
    stack = load_stack(args.stack)
    program = run_stack(stack, None)[0]
    cloud = cloud_deployer(stack.spec.cloud)
    used = used_entries(program.graph, program.invokes, cloud.table())
    policy = cloud.deployer_policy(program.graph, used)
    write(render_json(policy) if args.format == "json" else render_text(policy), args.output)
    return EXIT_OK
