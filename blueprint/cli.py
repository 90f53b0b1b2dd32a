"""The ``blueprint`` command: run stacks offline and write what the program would create.

    blueprint preview <stack>            resource tree grouped by plane, with the figures that matter
    blueprint graph <stack> -o FILE      the ResourceGraph as JSON (format in README.md)
    blueprint manifests <stack> -o DIR   every Kubernetes object and Helm release's values as YAML
    blueprint policy <stack | graph.json | events.jsonl> [--format ...] [--config FILE] [--stack-file F]
                                         run the policy pack; exit 1 when a mandatory policy fails
    blueprint schema [--format json|markdown] [-o FILE]
                                         the JSON Schema of the stack file (or its Markdown reference)
    blueprint policy --list | --explain POLICY
                                         the pack's policies with their levels; one explained, with an example
    blueprint cost <stack | graph.json> [--format table|json] [--usage FILE]
    blueprint cost diff --base <graph.json | git ref> <stack | graph.json>... | --combine a.json... | --event-log F
    blueprint sizing <stack> [--format table|json]
                                         the goodput model: checkpoint times, interval, goodput, capacity
    blueprint report <stack | graph.json> [-o report.html] [--usage FILE]
                                         one self-contained HTML page: the cluster diagram, cost, goodput,
                                         Capacity Block timeline and policy verdict (needs Graphviz's dot)
    blueprint preflight <stack> [--format table|json]
                                         check the AWS account or GCP project before pulumi up; exit 1 on a
                                         failed check
    blueprint audit <stack> [--format table|json]
                                         check the deployed account or project against the spec after pulumi up
    blueprint admit <stack | graph.json> WORKLOAD.yaml|JOB.sbatch... [--format text|json]
                                         would these jobs run on the cluster (Kueue, or Slurm for an sbatch
                                         script), and if not why; exit 1 if any not
    blueprint nccl parse LOG             an nccl-tests output as JSON
    blueprint nccl check LOG --instance-type T --nodes N [--format table|json|markdown]
                                         exit 1 below the acceptance threshold or on wrong values
    blueprint nccl nodes RUN_DIR [--instance-type T] [--expected-busbw X] [--format table|json]
                                         the per-node run of a group: each node's bandwidth, latency and
                                         versions, outliers against the median and the expected figure
    blueprint nccl compare A.json B.json what changed between two records (nodes, versions, bandwidth)

``<stack>`` is a stack name (``prod-aws`` reads ``stacks/Pulumi.prod-aws.yaml``) or a path to a stack
file. Exit status: 0 ok, 1 a mandatory policy violation, 2 invalid input (the file, key path and rule
are printed), 3 an internal error (a short report; ``--debug`` writes the traceback to a log file).
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import tempfile
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from blueprint.files.output import (
    OutputError,
    check_output_dir,
    check_output_file,
    output_dir_argument,
    output_file_argument,
    write_atomic,
)
from blueprint.graph.load import GRAPH_SUFFIXES, load_graph
from blueprint.graph.model import GraphFormatError, ResourceGraph, strict_json
from blueprint.policy.runner import (
    PolicyConfigError,
    load_config_file,
    load_pack,
    render_json,
    render_markdown,
    render_table,
    run_policies,
)
from blueprint.schema import stack_file as schema_command

# The program's layers (the engine, the spec with pydantic, the components, the renderers) are imported
# by the commands that run a stack, not by `blueprint policy graph.json`, which needs none of them.

EXIT_OK = 0
EXIT_POLICY = 1
EXIT_INVALID = 2
EXIT_INTERNAL = 3
EXIT_UNCHECKED = 4  # preflight/audit: nothing could be checked (or, with --strict, not everything)
MAX_ERROR_CHARS = 20_000


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="on an internal error, write the traceback to a log file and name it")
    parser = argparse.ArgumentParser(prog="blueprint", description=__doc__.split("\n\n")[0], parents=[common])
    sub = parser.add_subparsers(dest="command", required=True)
    preview = sub.add_parser("preview", parents=[common], help="print the resource tree of a stack, grouped by plane")
    preview.add_argument("stack", help="stack name (prod-aws) or path to a stack file")
    graph = sub.add_parser("graph", parents=[common], help="write the stack's ResourceGraph as JSON")
    graph.add_argument("stack", help="stack name (prod-aws) or path to a stack file")
    graph.add_argument("-o", "--output", type=output_file_argument, help="output file (default: standard output)")
    manifests = sub.add_parser("manifests", parents=[common],
                               help="write the stack's Kubernetes objects and Helm values as YAML")
    manifests.add_argument("stack", help="stack name (prod-aws) or path to a stack file")
    manifests.add_argument("-o", "--output", type=output_dir_argument, required=True, help="output directory")
    policy = sub.add_parser("policy", parents=[common], help="run the policy pack on a stack or a graph file")
    policy.add_argument("target", nargs="?", help="stack name, stack file, or a graph JSON (offline graph, "
                                                  "`pulumi preview --json`, `pulumi stack export`, or the .jsonl "
                                                  "of `pulumi preview --event-log`)")
    policy.add_argument("--format", choices=("table", "markdown", "json", "sarif"), default="table")
    policy.add_argument("--config", type=Path, help="pack config, as given to --policy-pack-config")
    policy.add_argument("--list", action="store_true", help="list the pack's policies: area, level (under "
                        "--config), severity, cloud, what each requires")
    policy.add_argument("--explain", metavar="POLICY", help="what one policy checks, why, how to fix it, its "
                        "config, and an example violation on a shipped stack")
    policy.add_argument("--stack-file", type=Path, help="the stack file findings point at (SARIF lines); default: "
                        "the stack's file, or stacks/Pulumi.<stack>.yaml for a graph")
    policy.add_argument("-o", "--output", type=output_file_argument,
                        help="write the report here instead of standard output")
    cost = sub.add_parser("cost", parents=[common], help="price a stack or a graph file (USD); "
                          "`cost diff --base <graph.json|git ref> <target>` compares two")
    cost.add_argument("target", help="stack name, stack file, or a graph JSON")
    cost.add_argument("--format", choices=("table", "json"), default="table")
    cost.add_argument("-o", "--output", type=output_file_argument,
                      help="write the report here instead of standard output")
    cost.add_argument("--usage", type=Path, help="usage estimates (default: stacks/<stack>.usage.yaml if present)")
    # `blueprint cost diff ...` is routed here by main(); argparse cannot have both a positional target and a
    # sub-command under `cost`.
    diff = sub.add_parser("cost-diff", parents=[common], help="(as `blueprint cost diff`) the cost change "
                          "against a base at desired and at max size, as one pull-request comment")
    diff.add_argument("targets", nargs="*", metavar="target", help="stack names, stack files or graph JSONs (one "
                      "summary table for several); with --combine, per-stack JSON reports of `cost diff`")
    diff.add_argument("--event-log", type=Path, help="a `pulumi preview --event-log` file: the cost of its state "
                      "before the update against after it (no --base or target)")
    diff.add_argument("--base", help="the previous graph JSON, or a git ref to build each stack at (a stack file "
                      "is found at the same path relative to the repository)")
    diff.add_argument("--combine", action="store_true", help="render one comment from per-stack JSON reports "
                      "(`cost diff --format json`, e.g. from parallel CI jobs)")
    diff.add_argument("--format", choices=("markdown", "json"), default="markdown")
    diff.add_argument("--fail-above-usd", type=float, help="exit 1 if the monthly cost rises by more than this")
    diff.add_argument("--fail-above-percent", type=float, help="exit 1 if it rises by more than this percent")
    diff.add_argument("-o", "--output", type=output_file_argument,
                      help="write the report here instead of standard output")
    diff.add_argument("--usage", type=Path, help="usage estimates for both sides (default: the stack's usage file)")
    sizing = sub.add_parser("sizing", parents=[common], help="the goodput model of a stack: checkpoint and restore "
                            "times, optimal interval, goodput, GPU-hours lost, required GPU capacity, storage")
    sizing.add_argument("stack", help="stack name (prod-aws) or path to a stack file")
    sizing.add_argument("--format", choices=("table", "json"), default="table")
    sizing.add_argument("-o", "--output", type=output_file_argument,
                        help="write the report here instead of standard output")
    report = sub.add_parser("report", parents=[common], help="one self-contained HTML page of a stack: the cluster "
                            "diagram (Graphviz), the cost by plane and team, goodput against the checkpoint interval, "
                            "the Capacity Block timeline and the policy verdict linked to the diagram")
    report.add_argument("target", help="stack name, stack file, or a graph JSON")
    report.add_argument("-o", "--output", type=output_file_argument,
                        help="write the page here (report.html) instead of standard output")
    report.add_argument("--usage", type=Path, help="usage estimates (default: stacks/<stack>.usage.yaml if present)")
    preflight = sub.add_parser("preflight", parents=[common], help="check the AWS account (boto3, the usual "
                               "credentials) or the GCP project (Google Cloud client libraries, Application Default "
                               "Credentials) before pulumi up: offerings, catalog facts, quotas, reservations, APIs, "
                               "existing resources, the deployer")
    preflight.add_argument("stack", help="stack name (prod-aws) or path to a stack file")
    preflight.add_argument("--format", choices=("table", "json"), default="table")
    preflight.add_argument("--strict", action="store_true", help="exit 4 when any check could not be made (default: "
                             "only when none could)")
    preflight.add_argument("-o", "--output", type=output_file_argument,
                           help="write the report here instead of standard output")
    audit = sub.add_parser("audit", parents=[common], help="check the deployed account or project against the "
                           "spec after pulumi up: billing tags (labels), bucket protection, endpoint access, EFA "
                           "interfaces (GPU networks), node pools on GCP")
    audit.add_argument("stack", help="stack name (prod-aws) or path to a stack file")
    audit.add_argument("--format", choices=("table", "json"), default="table")
    audit.add_argument("--strict", action="store_true", help="exit 4 when any check could not be made (default: "
                             "only when none could)")
    audit.add_argument("-o", "--output", type=output_file_argument,
                       help="write the report here instead of standard output")
    admit = sub.add_parser("admit", parents=[common], help="walk workloads (Job, JobSet, MPIJob, TrainJob, Pod ... "
                           "YAML) through the cluster a stack builds: schema, namespace, Pod Security, admission "
                           "policies, quotas, Kueue, scheduling, volumes, identity, network; sbatch scripts through "
                           "its Slurm: partition, account, time, nodes, GPUs; exit 1 if any would not run")
    admit.add_argument("target", help="stack name, stack file, or a graph JSON")
    admit.add_argument("workloads", nargs="+", type=Path, help="workload YAML files (several documents each allowed) "
                       "or sbatch scripts (a shebang and #SBATCH lines)")
    admit.add_argument("--format", choices=("text", "json"), default="text")
    admit.add_argument("-o", "--output", type=output_file_argument,
                       help="write the report here instead of standard output")
    nccl = sub.add_parser("nccl", parents=[common], help="read and judge nccl-tests output")
    nccl_sub = nccl.add_subparsers(dest="nccl_command", required=True)
    parse = nccl_sub.add_parser("parse", parents=[common], help="an nccl-tests log as JSON")
    parse.add_argument("log", type=Path)
    parse.add_argument("-o", "--output", type=output_file_argument,
                       help="write the JSON here instead of standard output")
    check = nccl_sub.add_parser("check", parents=[common], help="compare a log with the acceptance threshold; "
                                "exit 1 below it or on any wrong value")
    check.add_argument("log", type=Path)
    check.add_argument("--instance-type", required=True, help="the node group's instance type")
    check.add_argument("--nodes", type=int, required=True, help="nodes the run spanned")
    check.add_argument("--expected-busbw", type=float, help="expected bus bandwidth (GB/s) when the catalog has "
                       "none for the type")
    check.add_argument("--format", choices=("table", "json", "markdown"), default="table")
    check.add_argument("-o", "--output", type=output_file_argument,
                       help="write the report here instead of standard output")
    record = nccl_sub.add_parser("record", parents=[common], help="one acceptance run as JSON: the log, the "
                                 "nodes (kubectl get nodes -o json) and the verdict")
    record.add_argument("log", type=Path)
    record.add_argument("--stack", required=True, help="the stack the run tested")
    record.add_argument("--node-group", required=True, help="the node group the run spanned")
    record.add_argument("--nodes-json", type=Path, required=True,
                        help="kubectl get nodes -l gpu-cluster/node-group=<group> -o json > nodes.json")
    record.add_argument("--instance-type", help="judge the run against this type's threshold too")
    record.add_argument("-o", "--output", type=output_file_argument,
                        help="write the record here instead of standard output")
    nodes = nccl_sub.add_parser("nodes", parents=[common], help="the per-node run of a group (acceptance/<group>/"
                                "<run>/ as downloaded from the bucket): each node's bus bandwidth, small-message time "
                                "and versions; exit 1 when a node is an outlier")
    nodes.add_argument("run_dir", type=Path, help="the run's directory: <node>/nccl.log and <node>/node.json")
    nodes.add_argument("--instance-type", help="the group's instance type (default: the nodes' node.json)")
    nodes.add_argument("--expected-busbw", type=float, help="expected per-node bus bandwidth (GB/s) when the catalog "
                       "has none for the type (the stack's acceptance.expected figure)")
    nodes.add_argument("--stack", help="the stack the run tested (kept in the record; its group's maxSize is the "
                       "node count expected unless --expect-nodes)")
    nodes.add_argument("--expect-nodes", type=int, help="nodes the run was meant to cover: fewer records fail it")
    nodes.add_argument("--format", choices=("table", "json"), default="table")
    nodes.add_argument("-o", "--output", type=output_file_argument,
                       help="write the report here instead of standard output")
    compare = nccl_sub.add_parser("compare", parents=[common], help="what changed between two records (nodes, "
                                  "driver, CUDA and NCCL versions, bandwidth); exit 1 when the later peak or median "
                                  "fell more than the tolerance, or a node became an outlier")
    compare.add_argument("before", type=Path)
    compare.add_argument("after", type=Path)
    compare.add_argument("--tolerance", type=float, default=0.1, help="allowed fall of the peak (default 0.1)")
    schema_command.add_parser(sub, parents=[common])
    prices = sub.add_parser("prices", parents=[common], help="price catalog maintenance")
    prices_sub = prices.add_subparsers(dest="prices_command", required=True)
    refresh = prices_sub.add_parser("refresh", parents=[common], help="fetch on-demand EC2 prices of the catalog's "
                                    "instance types from the AWS Price List API (needs AWS credentials)")
    refresh.add_argument("--region", default="us-east-1", help="region to price (default us-east-1)")
    refresh.add_argument("-o", "--output", type=output_file_argument, help="overlay file (default: "
                         "components/catalog/prices_aws_refreshed.yaml, which the loader reads)")
    return parser


def _emit(stream: TextIO, text: str) -> None:
    """Write text that may carry undecodable bytes of a path (surrogate escapes) without failing."""
    stream.write(text.encode("utf-8", "backslashreplace").decode("utf-8"))


def _write(text: str, output: Path | None) -> None:
    if output is None:
        _emit(sys.stdout, text)
    else:
        write_atomic(output, text)


def _stack_file_for(args: argparse.Namespace, stack: str, artifact: str) -> tuple[str | None, str | None]:
    """(the stack file as the repository names it, its text) for SARIF lines: ``--stack-file``, the stack's own
    file, or ``stacks/Pulumi.<stack>.yaml`` for a graph; (None, None) when none is found."""
    from blueprint.graph.stackfile import default_stacks_dir

    candidates = [args.stack_file] if args.stack_file is not None else (
        [Path(artifact)] if Path(artifact).suffix not in GRAPH_SUFFIXES else
        [Path("stacks") / f"Pulumi.{stack}.yaml", default_stacks_dir() / f"Pulumi.{stack}.yaml"])
    for path in candidates:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            if args.stack_file is not None:
                raise OutputError(f"--stack-file {path}: cannot be read") from None
            continue
        return _repository_relative(path.resolve()), text
    return None, None


def _repository_relative(path: Path) -> str:
    """``path`` relative to the root of the git repository holding it (where code scanning resolves SARIF URIs),
    wherever the command runs from; the absolute path when it is in no repository."""
    import subprocess

    top = subprocess.run(["git", "-C", str(path.parent), "rev-parse", "--show-toplevel"], capture_output=True,
                         text=True, check=False)
    if top.returncode == 0:
        root = Path(top.stdout.strip()).resolve()
        if path.is_relative_to(root):
            return path.relative_to(root).as_posix()
    return path.as_posix()


def _policy_catalog(args: argparse.Namespace) -> int:
    """``blueprint policy --list`` and ``--explain <name>``."""
    from blueprint.policy.catalog import entries, find, render_explain, render_list

    pack = load_pack()
    config = load_config_file(args.config, pack.policies) if args.config else None
    items = entries(pack, config)
    if args.explain is None:
        _write(render_list(items, "json" if args.format == "json" else "table"), args.output)
        return EXIT_OK
    from blueprint.policy.examples import example_violation

    entry = find(items, args.explain)
    _write(render_explain(entry, example_violation(entry.name, pack)), args.output)
    return EXIT_OK


def _policy(args: argparse.Namespace) -> int:
    """``blueprint policy``: exit 0 (no mandatory violation), 1 (mandatory violation), 2 (bad input)."""
    if args.output is not None:
        check_output_file(args.output)
    if args.list or args.explain is not None:
        if args.target is not None:
            raise OutputError("--list and --explain take no stack or graph")
        return _policy_catalog(args)
    if args.target is None:
        raise OutputError("give a stack or a graph file to check (or --list / --explain POLICY)")
    pack = load_pack()
    config = load_config_file(args.config, pack.policies) if args.config else None
    graph, artifact, _ = _target_graph(args.target)
    report = run_policies(graph, config, pack)
    stack = graph.stack or Path(artifact).stem

    def sarif() -> str:
        from blueprint.policy.sarif import render_sarif

        uri, text = _stack_file_for(args, stack, artifact)
        return render_sarif(report, stack, graph, uri, text)
    renderers = {
        "table": lambda: render_table(report),
        "markdown": lambda: render_markdown(report, graph.stack or artifact),
        "json": lambda: render_json(report),
        "sarif": sarif,
    }
    _write(renderers[args.format](), args.output)
    return EXIT_OK if report.passed else EXIT_POLICY


def _target_graph(target_text: str) -> tuple[ResourceGraph, str, Any]:
    """A graph JSON file as given (no spec), or the graph and spec of a stack run through the offline engine."""
    target = Path(target_text)
    if target.suffix in GRAPH_SUFFIXES:
        try:
            return load_graph(target), str(target), None
        except GraphFormatError as err:
            raise GraphFormatError(f"{target}: {err}") from None
    from blueprint.graph.engine import run_program
    from blueprint.graph.stackfile import load_stack

    stack = load_stack(target_text)
    return run_program(stack.name, stack.config, stack.region).graph, stack.display_path, stack.spec


def _usage(explicit: Path | None, target_text: str, graphs: tuple[ResourceGraph, ...]) -> tuple[Any, tuple[str, ...]]:
    """The usage estimates to price with: ``--usage FILE``, else ``<stack>.usage.yaml`` beside a stack file,
    else none; checked against the graphs' resource types (names a graph lacks become notes)."""
    from blueprint.cost.usage import check_usage_types, default_usage_path, load_usage
    from blueprint.graph.stackfile import default_stacks_dir, resolve

    path = explicit
    if path is None and Path(target_text).suffix not in GRAPH_SUFFIXES:
        name, stack_path = resolve(target_text, default_stacks_dir())
        candidate = default_usage_path(stack_path, name)
        path = candidate if candidate.is_file() else None
    if path is None:
        return {}, ()
    shown = _shown(path)
    usage = load_usage(path, shown)
    types = {r.name: r.type for g in graphs for r in g.resources if not r.is_component}
    notes = check_usage_types(usage, types, shown)
    return usage, (f"usage estimates from {shown}", *notes)


def _shown(path: Path) -> str:
    """A path as the user would type it: relative to the working directory when under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


class CostUsageError(ValueError):
    """``blueprint cost`` called with arguments that do not fit together."""


def _repo_path(target: str) -> str | None:
    """A stack file target as a path relative to the repository root (the same file at another ref), or None for a
    stack name; CostUsageError when the file lies outside the repository."""
    import subprocess

    if not (target.endswith((".yaml", ".yml")) or "/" in target or "\\" in target):
        return None
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False)
    if top.returncode != 0:
        raise CostUsageError(f"--base as a git ref needs a git checkout: {top.stderr.strip()[:200]}")
    path = Path(target).resolve()
    root = Path(top.stdout.strip()).resolve()
    if not path.is_relative_to(root):
        raise CostUsageError(f"--base: {target} is outside the repository ({root}), so it has no version at a git "
                             "ref; give a graph JSON as --base instead")
    return path.relative_to(root).as_posix()


def _graphs_at_ref(ref: str, stacks: Sequence[str]) -> dict[str, tuple[ResourceGraph, str | None]]:
    """Each stack's graph as the program stood at git ``ref``, built in one scratch copy of that tree: a stack file
    is taken at the same path relative to the repository (never the working tree's file); a stack the ref does not
    have yet comes back empty, with a note."""
    import io
    import subprocess
    import tarfile
    import tempfile

    out: dict[str, tuple[ResourceGraph, str | None]] = {}
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False)
    root = top.stdout.strip() if top.returncode == 0 else "."
    with tempfile.TemporaryDirectory(prefix="blueprint-base-") as tmp:
        # From the repository's root: run from a subdirectory, git archive would hold only that subdirectory.
        archive = subprocess.run(["git", "-C", root, "archive", "--format=tar", ref], capture_output=True,
                                 check=False)
        if archive.returncode != 0:
            raise CostUsageError(f"--base {ref}: not a graph JSON file nor a git ref of this repository "
                                 f"({archive.stderr.decode(errors='replace').strip()[:200]})")
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(tmp, filter="data")
        for stack in stacks:
            relative = _repo_path(stack)
            at_ref = relative if relative is not None else stack
            exists = (Path(tmp) / relative).is_file() if relative is not None else \
                (Path(tmp) / "stacks" / f"Pulumi.{stack}.yaml").is_file()
            if not exists:
                out[stack] = (ResourceGraph(stack, []), f"{stack} is new: {ref} has no such stack file, so everything "
                                                         "in it is added")
                continue
            target = Path(tmp) / "base-graph.json"
            built = subprocess.run([sys.executable, "-m", "blueprint", "graph", at_ref, "-o", str(target)], cwd=tmp,
                                   capture_output=True, check=False)
            if built.returncode != 0:
                raise CostUsageError(f"--base {ref}: the stack {stack} does not build at that ref: "
                                     f"{built.stderr.decode(errors='replace').strip()[:300]}")
            out[stack] = (load_graph(target), None)
    return out


def _cost(args: argparse.Namespace) -> int:
    """``blueprint cost``: the cost of a stack or a graph, as a table or JSON."""
    from blueprint.cost.engine import price_graph
    from blueprint.cost.render import render_cost_json, render_cost_table
    from blueprint.cost.unit import render_unit_cost, unit_cost, unit_cost_document

    if args.output is not None:
        check_output_file(args.output)
    graph, _, spec = _target_graph(args.target)
    usage, notes = _usage(args.usage, args.target, (graph,))
    report = price_graph(graph, usage=usage, usage_notes=notes)
    goodput = _modelled_goodput(spec)
    unit = unit_cost(report, spec.workload, goodput) if spec is not None else None
    reason = _unit_reason(spec, goodput)
    if args.format == "json":
        _write(render_cost_json(report, unit_cost_document(unit, reason)), args.output)
    else:
        _write(render_cost_table(report) + render_unit_cost(unit, reason), args.output)
    return EXIT_OK


def _cost_diff(args: argparse.Namespace) -> int:
    """``blueprint cost diff``: the change of each target against ``--base`` (or ``--combine`` per-stack JSON
    reports into one comment); exit 1 when a guardrail is crossed."""
    from dataclasses import replace

    from blueprint.cost.diff import (
        breaches,
        diff_reports,
        graph_changes,
        load_documents,
        render_diff_json,
        render_diff_markdown,
    )
    from blueprint.cost.engine import price_graph

    if args.output is not None:
        check_output_file(args.output)
    if args.combine:
        if args.base is not None:
            raise CostUsageError("--combine reads finished reports: it takes no --base")
        texts = []
        for name in args.targets:
            try:
                texts.append((name, Path(name).read_text(encoding="utf-8")))
            except (OSError, UnicodeDecodeError) as err:
                raise CostUsageError(f"{name}: cannot be read ({err})") from None
        try:
            docs = load_documents(texts)
        except ValueError as err:
            raise CostUsageError(str(err)) from None
        _write(render_diff_markdown(docs), args.output)
        return EXIT_OK
    if args.event_log is not None:
        if args.base is not None or args.targets:
            raise CostUsageError("--event-log diffs the log's state before the update against after it: give no "
                                 "--base and no target")
        from blueprint.cost.diff import diff_document, diff_event_log
        from blueprint.graph.eventlog import load_event_log

        log = load_event_log(args.event_log)
        # The stack's usage file, as for a stack target: the log names its stack.
        from blueprint.graph.stackfile import available_stacks

        named = log.new.stack if log.new.stack in available_stacks() else None
        usage, notes = _usage(args.usage, named or str(args.event_log), (log.old, log.new)) \
            if args.usage or named else ({}, ())
        diff = diff_event_log(log, usage=usage, usage_notes=notes)
        _write(render_diff_json([diff]) if args.format == "json" else render_diff_markdown([diff_document(diff)]),
               args.output)
        return EXIT_OK
    if not args.targets:
        raise CostUsageError("cost diff needs a target (a stack, stack file or graph), or --event-log")
    if args.base is None:
        raise CostUsageError("cost diff needs --base (a graph JSON or a git ref), or --combine, or --event-log")
    base_is_file = Path(args.base).suffix in GRAPH_SUFFIXES or Path(args.base).is_file()
    if base_is_file and len(args.targets) > 1:
        raise CostUsageError("--base as a graph JSON compares one target; give a git ref to compare several stacks")
    if not base_is_file and any(Path(t).suffix in GRAPH_SUFFIXES for t in args.targets):
        raise CostUsageError("--base as a git ref needs stack names or stack files as targets, not graphs")
    bases = {args.targets[0]: (_target_graph(args.base)[0], None)} if base_is_file else \
        _graphs_at_ref(args.base, args.targets)
    diffs = []
    for target in args.targets:
        graph, _, _ = _target_graph(target)
        base_graph, note = bases[target]
        usage, notes = _usage(args.usage, target, (graph, base_graph))
        diff = diff_reports(price_graph(base_graph, usage=usage), price_graph(graph, usage=usage, usage_notes=notes),
                            [note] if note else [])
        diffs.append(replace(diff, changes=graph_changes(base_graph, graph)))
    if args.format == "json":
        _write(render_diff_json(diffs), args.output)
    else:
        from blueprint.cost.diff import diff_document

        _write(render_diff_markdown([diff_document(d) for d in diffs]), args.output)
    crossed = [line for d in diffs for line in breaches(d, args.fail_above_usd, args.fail_above_percent)]
    for line in crossed:
        _emit(sys.stderr, f"cost guardrail: {line}\n")
    return EXIT_POLICY if crossed else EXIT_OK


def _unit_reason(spec: Any, goodput: float | None) -> str:
    """Why the unit cost is not computed, for the stack at hand (``goodput``: the model's figure, if any)."""
    if spec is None:
        return "a graph holds no workload economics: run `blueprint cost` on the stack"
    econ = spec.workload.economics
    if econ is None:
        return "set workload.economics in the stack file"
    if econ.from_goodput and goodput is None:
        return "workload.goodput cannot be modelled (`blueprint sizing` says why)"
    return "the goodput model gives no useful work (`blueprint sizing` says why)"


def _modelled_goodput(spec: Any) -> float | None:
    """The goodput model's figure when the stack gives its inputs (for the unit cost), else None."""
    if spec is None or spec.workload.goodput is None:
        return None
    from components.sizing import SizingError, goodput_model

    try:
        return goodput_model(spec).goodput
    except SizingError:
        return None


def _sizing(args: argparse.Namespace) -> int:
    """``blueprint sizing``: the goodput model, what its losses cost, and the storage that reaches the target."""
    from blueprint.cost.engine import price_graph
    from blueprint.cost.prices import prices_for
    from blueprint.graph.engine import run_program
    from blueprint.graph.stackfile import load_stack
    from blueprint.sizing.report import gpu_compute_usd, price_options, render_sizing, render_sizing_json
    from components.sizing import SizingError, goodput_model

    if args.output is not None:
        check_output_file(args.output)
    stack = load_stack(args.stack)
    try:
        model = goodput_model(stack.spec)
    except SizingError as err:
        raise CostUsageError(f"{stack.display_path}: {err}") from None
    run = run_program(stack.name, stack.config, stack.region)
    usage, notes = _usage(None, args.stack, (run.graph,))
    report = price_graph(run.graph, usage=usage, usage_notes=notes)
    gpu = gpu_compute_usd(report)
    options = price_options(model, prices_for(stack.spec.cloud))
    text = (render_sizing_json(model, gpu, options) if args.format == "json"
            else render_sizing(model, gpu, options, stack.name))
    _write(text, args.output)
    return EXIT_OK


def _aws_session(region: str) -> Any:
    """A boto3 client factory for the region, after checking that credentials exist; every way the account cannot
    be reached at all (no, partial or refused credentials, an unknown profile, a malformed endpoint) is an
    :class:`AccountAccessError`, exit 2."""
    import boto3
    import botocore.exceptions

    from blueprint.clouds.aws.preflight import AccountAccessError, account_access_problem

    try:
        session = boto3.Session()
        credentials = session.get_credentials()
    except botocore.exceptions.BotoCoreError as err:
        raise AccountAccessError(account_access_problem(err) or str(err)) from None
    if credentials is None:
        raise AccountAccessError(account_access_problem(botocore.exceptions.NoCredentialsError()) or "")

    def client(name: str) -> Any:
        try:
            return session.client(name, region_name=region)
        except ValueError as err:  # botocore: "Invalid endpoint: <url>" (AWS_ENDPOINT_URL and friends)
            raise AccountAccessError(f"{err}: check AWS_ENDPOINT_URL and the endpoint settings of the profile") \
                from None
        except botocore.exceptions.BotoCoreError as err:
            raise AccountAccessError(account_access_problem(err) or str(err)) from None
    return client


def _preflight(args: argparse.Namespace) -> int:
    """``blueprint preflight`` and ``blueprint audit``: exit 0 (nothing failed), 1 (a check failed), 2 (bad
    input, or the account cannot be read at all), 4 (nothing could be checked; with --strict: anything)."""
    from blueprint.clouds.aws.audit import run_audit
    from blueprint.clouds.aws.preflight import render_json, render_table, run_preflight
    from blueprint.graph.stackfile import load_stack

    if args.output is not None:
        check_output_file(args.output)
    stack = load_stack(args.stack)
    if stack.spec.cloud == "gcp":
        from blueprint.clouds.gcp import api as gcp_api
        from blueprint.clouds.gcp import audit as audit_gcp
        from blueprint.clouds.gcp import preflight as preflight_gcp

        api = gcp_api.gcp_session(stack.spec.gcp_spec().project)
        checks = (audit_gcp.run_gcp_audit if args.command == "audit" else preflight_gcp.run_gcp_preflight)(
            stack.spec, api)
    else:
        client = _aws_session(stack.region)
        run = run_audit if args.command == "audit" else run_preflight
        checks = run(stack.spec, client)
    _write(render_json(checks) if args.format == "json" else render_table(checks, args.command), args.output)
    if any(c.status == "fail" for c in checks):
        return EXIT_POLICY
    unchecked = [c for c in checks if c.status == "cannot-check"]
    if not checks or len(unchecked) == len(checks):
        _emit(sys.stderr, f"error: {args.command}: nothing could be checked ({len(unchecked)} cannot-check); a "
              "gate must not pass on that: see the reasons above\n")
        return EXIT_UNCHECKED
    if args.strict and unchecked:
        _emit(sys.stderr, f"error: {args.command} --strict: {len(unchecked)} check(s) could not be made\n")
        return EXIT_UNCHECKED
    return EXIT_OK


def _report(args: argparse.Namespace) -> int:
    """``blueprint report``: exit 0 with the page written (whatever the verdict: the page shows it), 2 on bad input
    or when Graphviz's dot is missing."""
    from blueprint.cost.engine import price_graph
    from blueprint.report.diagram import DOT_MISSING, GraphvizMissingError, dot_available
    from blueprint.report.page import ReportInputs, render_report
    from components.clock import utcnow

    if args.output is not None:
        check_output_file(args.output)
    if not dot_available():
        raise ToolMissingError(DOT_MISSING)
    graph, artifact, spec = _target_graph(args.target)
    usage, notes = _usage(args.usage, args.target, (graph,))
    cost = price_graph(graph, usage=usage, usage_notes=notes)
    try:
        page = render_report(ReportInputs(graph=graph, spec=spec, source=artifact, cost=cost,
                                          policy=run_policies(graph), now=utcnow()))
    except GraphvizMissingError as err:
        raise ToolMissingError(str(err)) from None
    _write(page, args.output)
    if args.output is not None:
        _emit(sys.stderr, f"wrote {args.output}\n")
    return EXIT_OK


class ToolMissingError(RuntimeError):
    """A program the command needs is not installed (exit 2, with how to install it)."""


def _admit(args: argparse.Namespace) -> int:
    """``blueprint admit``: exit 0 (every workload admitted and schedulable), 1 (one is not), 2 (bad input)."""
    from blueprint.admit.engine import admit_workloads
    from blueprint.admit.render import render_json, render_text
    from blueprint.admit.workloads import load_workloads

    if args.output is not None:
        check_output_file(args.output)
    items = load_workloads(args.workloads)
    graph, _, _ = _target_graph(args.target)
    report = admit_workloads(graph, items)
    _write(render_json(report) if args.format == "json" else render_text(report), args.output)
    return EXIT_OK if report.admitted else EXIT_POLICY


def _verdict(run: Any, instance_type: str, nodes: int, expected_busbw: float | None) -> Any:
    """The run against the catalog's threshold for the type (or the one given)."""
    from blueprint.acceptance.nccl import Verdict
    from components.catalog.acceptance import catalog_figure, load_thresholds

    fraction, thresholds = load_thresholds()
    known = thresholds.get(instance_type)
    if nodes < 1:
        raise CostUsageError("--nodes must be at least 1")
    if expected_busbw is not None and not (math.isfinite(expected_busbw) and expected_busbw > 0):
        raise CostUsageError(f"--expected-busbw must be a finite positive number of GB/s, got {expected_busbw}")
    per_node = catalog_figure(instance_type, 1) if nodes == 1 else None
    if expected_busbw is not None:
        expected, source = expected_busbw, "given with --expected-busbw"
    elif per_node is not None and per_node.expected_busbw_gbps is not None:
        expected, source = per_node.expected_busbw_gbps, f"{per_node.source} (per-node figure, {per_node.status})"
    elif known is not None and known.expected_busbw_gbps is not None and nodes == 1 and (known.nodes or 2) > 1:
        raise CostUsageError(f"the {instance_type} threshold was measured across {known.nodes} nodes over the "
                             "fabric; a single-node (NVLink) run needs --expected-busbw")
    elif known is not None and known.expected_busbw_gbps is not None:
        expected, source = known.expected_busbw_gbps, known.source + (
            f" (measured on {known.nodes} nodes)" if known.nodes and known.nodes != nodes else "")
    else:
        raise CostUsageError(f"no expected bus bandwidth for {instance_type} in components/catalog/"
                             "acceptance.yaml: give --expected-busbw (GB/s) with its source in your ticket")
    return Verdict(run, instance_type, nodes, expected, fraction, source)


def _nccl_nodes(args: argparse.Namespace) -> int:
    """``blueprint nccl nodes``: exit 0, 1 (a node is an outlier), 2 (no records, or no expected figure)."""
    from blueprint.acceptance.nccl import (
        NcclLogError,
        node_records,
        read_node_runs,
        render_json,
        render_node_table,
        require_nodes,
    )
    from components.catalog.acceptance import catalog_figure, latency_outlier_factor, load_thresholds, outlier_fraction

    if args.output is not None:
        check_output_file(args.output)
    try:
        runs, run_name = read_node_runs(args.run_dir)
    except (NcclLogError, OSError) as err:
        raise CostUsageError(f"{args.run_dir}: {err}") from None
    types = {str(r.facts["instance_type"]) for r in runs if r.facts.get("instance_type")}
    instance_type = args.instance_type or (types.pop() if len(types) == 1 else None)
    if instance_type is None:
        raise CostUsageError(f"{args.run_dir}: the nodes name {len(types) or 'no'} instance type(s): give "
                             "--instance-type")
    if args.expected_busbw is not None:
        if not (math.isfinite(args.expected_busbw) and args.expected_busbw > 0):
            raise CostUsageError("--expected-busbw must be a finite positive number of GB/s, got "
                                 f"{args.expected_busbw}")
        expected, source = args.expected_busbw, "given with --expected-busbw"
    else:
        known = catalog_figure(instance_type, 1)
        if known is None or known.expected_busbw_gbps is None:
            raise CostUsageError(f"no per-node bus bandwidth for {instance_type} in components/catalog/"
                                 "acceptance.yaml: give --expected-busbw (the stack's acceptance.expected figure for "
                                 "nodes 1)")
        expected, source = known.expected_busbw_gbps, f"{known.source} ({known.status})"
    groups = {str(r.facts["node_group"]) for r in runs if r.facts.get("node_group")}
    record = node_records(runs, instance_type=instance_type, expected_busbw=expected, expected_source=source,
                          pass_fraction=load_thresholds()[0], outlier_fraction=outlier_fraction(),
                          latency_factor=latency_outlier_factor(), stack=args.stack,
                          node_group=", ".join(sorted(groups)) or None, run=run_name)
    expect = args.expect_nodes
    if expect is None and args.stack and len(groups) == 1:
        expect = _group_max_size(args.stack, next(iter(groups)))
    if expect is not None:
        if expect < 1:
            raise CostUsageError(f"--expect-nodes must be at least 1, got {expect}")
        require_nodes(record, runs, expect)
    _write(render_json(record) if args.format == "json" else render_node_table(record), args.output)
    return EXIT_OK if record["passed"] else EXIT_POLICY


def _group_max_size(stack_name: str, group: str) -> int | None:
    """A node group's (GKE: pool's) maxSize in the stack file, or None when the stack does not name it."""
    from blueprint.graph.stackfile import load_stack
    from components.spec.decisions import cloud_node_groups

    return next((g.max_size for g in cloud_node_groups(load_stack(stack_name).spec) if g.name == group), None)


def _nccl_compare(args: argparse.Namespace) -> int:
    from blueprint.acceptance.nccl import compare_node_records, compare_records

    docs = []
    for path in (args.before, args.after):
        try:
            doc = strict_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise CostUsageError(f"{path}: not an acceptance record: {err}") from None
        if not isinstance(doc, dict) or ("max_busbw_gbps" not in doc and doc.get("kind") != "per-node"):
            raise CostUsageError(f"{path}: not an acceptance record (no max_busbw_gbps, not a per-node record)")
        if doc.get("kind") == "per-node" and not isinstance(doc.get("nodes"), list):
            raise CostUsageError(f"{path}: a per-node record without its nodes list")
        docs.append(doc)
    kinds = {d.get("kind") == "per-node" for d in docs}
    if len(kinds) > 1:
        raise CostUsageError(f"{args.before} and {args.after}: one is a per-node record and the other is not")
    if kinds == {True}:
        lines, fell = compare_node_records(docs[0], docs[1], args.tolerance)
    else:
        lines, fell = compare_records(docs[0], docs[1], args.tolerance)
    _emit(sys.stdout, "\n".join(lines) + "\n")
    return EXIT_POLICY if fell else EXIT_OK


def _nccl(args: argparse.Namespace) -> int:
    """``blueprint nccl parse|check``: exit 0, 1 (check failed), 2 (not an nccl-tests log, or no threshold)."""
    from blueprint.acceptance.nccl import NcclLogError, parse_nccl, render_json

    if args.nccl_command == "compare":
        return _nccl_compare(args)
    if args.nccl_command == "nodes":
        return _nccl_nodes(args)
    if args.output is not None:
        check_output_file(args.output)
    try:
        data = args.log.read_bytes()
    except OSError as err:
        raise CostUsageError(f"{args.log}: cannot be read: {err.strerror or err}") from None
    try:
        run = parse_nccl(data.decode("utf-8", errors="replace"))
    except NcclLogError as err:
        raise CostUsageError(f"{args.log}: not an nccl-tests log: {err}") from None
    if args.nccl_command == "parse":
        _write(render_json(run.to_dict()), args.output)
        return EXIT_OK
    if args.nccl_command == "record":
        from blueprint.acceptance.nccl import acceptance_record, node_facts

        try:
            facts = node_facts(strict_json(args.nodes_json.read_text(encoding="utf-8")))
        except (OSError, ValueError) as err:
            raise CostUsageError(f"{args.nodes_json}: {err}") from None
        verdict = _verdict(run, args.instance_type, len(facts["nodes"]), None) if args.instance_type else None
        text = data.decode("utf-8", errors="replace")
        _write(render_json(acceptance_record(run, text, args.stack, args.node_group, facts, verdict)), args.output)
        return EXIT_OK
    verdict = _verdict(run, args.instance_type, args.nodes, args.expected_busbw)
    fraction = verdict.pass_fraction
    expected = verdict.expected_busbw
    if args.format == "json":
        text = render_json(verdict.to_dict())
    elif args.format == "markdown":
        text = verdict.to_markdown()
    else:
        text = (f"{'PASS' if verdict.passed else 'FAIL'}: peak busbw {run.max_busbw or 0:.2f} GB/s, required "
                f"{verdict.required_busbw:.2f} ({fraction:.0%} of {expected:.2f}), wrong values "
                f"{run.wrong_summary}\n"
                + "".join(f"  - {p}\n" for p in verdict.problems))
    _write(text, args.output)
    return EXIT_OK if verdict.passed else EXIT_POLICY


def _prices_refresh(args: argparse.Namespace) -> int:
    """``blueprint prices refresh``: exit 0 with the count written, 2 when the API cannot be read."""
    from datetime import UTC, datetime

    from blueprint.clouds.aws.refresh import RefreshError, pricing_client, refresh
    from components.catalog.instances import load_aws_catalog
    from components.catalog.prices import AWS_REFRESHED_FILE

    out = args.output or AWS_REFRESHED_FILE
    check_output_file(out)
    try:
        import botocore.exceptions

        count = refresh(pricing_client(), sorted(load_aws_catalog()), args.region, out, datetime.now(UTC).date())
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError, RefreshError) as err:
        raise CostUsageError(f"prices refresh: the AWS Price List API could not be read: {err}") from None
    _emit(sys.stderr, f"wrote {count} on-demand prices ({args.region}) to {out}\n")
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    if args.command == "schema":
        return schema_command.run(args)
    if args.command == "policy":
        return _policy(args)
    if args.command == "cost":
        return _cost(args)
    if args.command == "cost-diff":
        return _cost_diff(args)
    if args.command == "prices":
        return _prices_refresh(args)
    if args.command == "sizing":
        return _sizing(args)
    if args.command == "nccl":
        return _nccl(args)
    if args.command == "admit":
        return _admit(args)
    if args.command == "report":
        return _report(args)
    if args.command in ("preflight", "audit"):
        return _preflight(args)
    from blueprint.graph.engine import run_program
    from blueprint.graph.manifests import write_manifests
    from blueprint.graph.stackfile import load_stack
    from blueprint.preview.render import render_preview

    output: Path | None = getattr(args, "output", None)
    if output is not None:
        (check_output_dir if args.command == "manifests" else check_output_file)(output)
    stack = load_stack(args.stack)
    run = run_program(stack.name, stack.config, stack.region)
    if args.command == "preview":
        report = run_policies(run.graph)
        from blueprint.cost.engine import price_graph
        from blueprint.cost.render import render_cost_summary
        from blueprint.cost.unit import render_unit_cost, unit_cost

        _emit(sys.stdout, render_preview(run.graph, stack.spec, stack.display_path, run.outputs))
        usage, notes = _usage(None, args.stack, (run.graph,))
        cost = price_graph(run.graph, usage=usage, usage_notes=notes)
        goodput = _modelled_goodput(stack.spec)
        _emit(sys.stdout, "\n" + render_cost_summary(cost)
              + render_unit_cost(unit_cost(cost, stack.spec.workload, goodput), _unit_reason(stack.spec, goodput)))
        _emit(sys.stdout, "\n" + render_table(report))
        # As `pulumi preview --policy-pack` fails on a mandatory violation (and `make preview` with it).
        return EXIT_OK if report.passed else EXIT_POLICY
    elif args.command == "graph":
        if output is None:
            _write(run.graph.to_json(), output)
        else:
            gc.freeze()  # the run's objects are done changing: the collector need not scan them again
            write_atomic(output, run.graph.iter_json())
        if output is not None:
            _emit(sys.stderr, f"wrote {output} ({len(run.graph.resources)} resources)\n")
    elif args.command == "manifests":
        assert output is not None
        files = write_manifests(run.graph, output)
        _emit(sys.stderr, f"wrote {len(files)} files under {output}\n")
    return EXIT_OK


def _internal_error(err: BaseException, debug: bool) -> int:
    """Exit 3 with a short report; the traceback goes to a log file only when asked (``--debug``)."""
    summary = f"{type(err).__name__}: {err}".replace("\n", " ")[:500]
    hint = "run again with --debug to write the traceback to a log file"
    if debug:
        fd, log = tempfile.mkstemp(prefix="blueprint-debug-", suffix=".log")
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write("".join(traceback.format_exception(err)))
        hint = f"the traceback is in {log}"
    _emit(sys.stderr, f"internal error: {summary}\nthis is a bug in blueprint, not in your input; {hint}\n")
    return EXIT_INTERNAL


def _invalid_input_errors() -> tuple[type[Exception], ...]:
    """The exceptions that mean "your input is invalid" (exit 2), from the modules that raise them."""
    from blueprint.admit.workloads import WorkloadFileError
    from blueprint.clouds.aws.preflight import AccountAccessError
    from blueprint.cost.usage import UsageError
    from blueprint.graph.stackfile import StackError
    from components.clock import ClockError

    return (StackError, PolicyConfigError, GraphFormatError, OutputError, ClockError, CostUsageError, UsageError,
            AccountAccessError, WorkloadFileError, ToolMissingError)


def run() -> None:
    """The console script: :func:`main`, then leave at once.

    Tearing down hundreds of thousands of SDK objects at interpreter exit was 17 % of a preview; the
    output is flushed and the process exits without that finalization.
    """
    gc.freeze()  # everything imported so far is permanent: the collector need not scan it again
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _route_cost_diff(words: list[str]) -> list[str]:
    """``cost diff ...`` is the ``cost-diff`` sub-command, with or without options before it
    (``blueprint --debug cost diff --base ...``)."""
    first = next((i for i, w in enumerate(words) if not w.startswith("-")), len(words))
    if words[first:first + 2] == ["cost", "diff"]:
        return [*words[:first], "cost-diff", *words[first + 2:]]
    return words


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``blueprint`` and ``python -m blueprint``; returns the exit status.

    0: success; 1: a mandatory policy violation; 2: invalid input (stack file, graph, policy config, output
    path), with the message on standard error; 3: an internal error, reported in one short paragraph.
    """
    words = _route_cost_diff(list(sys.argv[1:] if argv is None else argv))
    args = _parser().parse_args(words)
    debug = bool(getattr(args, "debug", False))
    try:
        return _run(args)
    except _invalid_input_errors() as err:
        text = str(err)
        if len(text) > MAX_ERROR_CHARS:
            text = text[:MAX_ERROR_CHARS] + " ... (truncated)"
        _emit(sys.stderr, f"error: {text}\n")
        return EXIT_INVALID
    except KeyboardInterrupt:
        return 130
    except Exception as err:
        return _internal_error(err, debug)


if __name__ == "__main__":
    run()
