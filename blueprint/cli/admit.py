"""``blueprint admit <stack | graph.json> WORKLOAD...``: would these jobs run on the cluster the stack builds (Kueue,
or Slurm for an sbatch script), and if not why; exit 1 if any would not."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from blueprint.cli.common import EXIT_OK, EXIT_POLICY, cache_option, output_option, target_graph, write
from blueprint.files.output import check_output_file


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("admit", parents=[common], help="walk workloads (Job, JobSet, MPIJob, TrainJob, Pod ... "
                            "YAML) through the cluster a stack builds: schema, namespace, Pod Security, admission "
                            "policies, quotas, Kueue, scheduling, volumes, identity, network; sbatch scripts through "
                            "its Slurm: partition, account, time, nodes, GPUs; exit 1 if any would not run")
    parser.add_argument("target", help="stack name, stack file, or a graph JSON")
    parser.add_argument("workloads", nargs="+", type=Path, help="workload YAML files (several documents each "
                        "allowed) or sbatch scripts (a shebang and #SBATCH lines)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    output_option(parser)
    cache_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Exit 0 (every workload admitted and schedulable), 1 (one is not), 2 (bad input)."""
    from blueprint.admit.engine import admit_workloads
    from blueprint.admit.render import render_json, render_text
    from blueprint.admit.workloads import load_workloads

    if args.output is not None:
        check_output_file(args.output)
    items = load_workloads(args.workloads)
    graph, _, _ = target_graph(args.target, need_spec=False, use_cache=not args.no_cache)
    report = admit_workloads(graph, items)
    write(render_json(report) if args.format == "json" else render_text(report), args.output)
    return EXIT_OK if report.admitted else EXIT_POLICY
