"""``blueprint preflight <stack>`` and ``blueprint audit <stack>``: the account (project) before ``pulumi up`` and
after it, through the stack's cloud's checks (:mod:`blueprint.acceptance.cloud`); the audit also reads the cluster's
alert Secrets (:mod:`blueprint.acceptance.alert_secrets`). Exit 0 (nothing failed), 1 (a check
failed), 2 (bad input, or the account cannot be read at all), 4 (nothing could be checked; with --strict: anything)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from blueprint.cli.common import EXIT_OK, EXIT_POLICY, EXIT_UNCHECKED, STACK_HELP, emit, output_option, write
from blueprint.files.output import check_output_file


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    preflight = sub.add_parser("preflight", parents=[common], help="check the AWS account (boto3, the usual "
                               "credentials) or the GCP project (Google Cloud client libraries, Application Default "
                               "Credentials) before pulumi up: offerings, catalog facts, quotas, reservations, APIs, "
                               "existing resources, the deployer")
    audit = sub.add_parser("audit", parents=[common], help="check the deployed account or project against the "
                           "spec after pulumi up: billing tags (labels), bucket protection, endpoint access, EFA "
                           "interfaces (GPU networks), node pools on GCP; and, in the cluster (kubeconfig), the "
                           "Secrets the alert receivers read")
    audit.add_argument("--kube-context", default=None, help="the kubeconfig context of the stack's cluster (default: "
                       "the one the cloud's CLI writes for it: aws eks update-kubeconfig, gcloud container clusters "
                       "get-credentials)")
    for parser in (preflight, audit):
        parser.add_argument("stack", help=STACK_HELP)
        parser.add_argument("--format", choices=("table", "json"), default="table")
        parser.add_argument("--strict", action="store_true", help="exit 4 when any check could not be made "
                            "(default: only when none could)")
        output_option(parser)
        parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from blueprint.acceptance.checks import render_json, render_table
    from blueprint.acceptance.cloud import cloud_checks
    from blueprint.graph.stackfile import load_stack

    if args.output is not None:
        check_output_file(args.output)
    stack = load_stack(args.stack)
    cloud = cloud_checks(stack.spec.cloud)
    session = cloud.session(stack)
    checks = (cloud.audit if args.command == "audit" else cloud.preflight)(stack.spec, session)
    if args.command == "audit":
        from blueprint.acceptance.alert_secrets import alert_secret_checks
        from blueprint.acceptance.kube import secret_reader

        cluster = cloud.kube_cluster(stack.spec)
        checks += alert_secret_checks(stack.spec, lambda: secret_reader(cluster, args.kube_context))
    write(render_json(checks) if args.format == "json" else render_table(checks, args.command), args.output)
    if any(c.status == "fail" for c in checks):
        return EXIT_POLICY
    unchecked = [c for c in checks if c.status == "cannot-check"]
    if not checks or len(unchecked) == len(checks):
        emit(sys.stderr, f"error: {args.command}: nothing could be checked ({len(unchecked)} cannot-check); a "
             "gate must not pass on that: see the reasons above\n")
        return EXIT_UNCHECKED
    if args.strict and unchecked:
        emit(sys.stderr, f"error: {args.command} --strict: {len(unchecked)} check(s) could not be made\n")
        return EXIT_UNCHECKED
    return EXIT_OK
