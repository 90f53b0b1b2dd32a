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
    blueprint deployer-policy <stack> [--format text|json] [-o FILE]
                                         the IAM policy (AWS) or custom role (GCP) the deployer needs for exactly
                                         the stack's resource types and invokes
    blueprint nccl parse LOG             an nccl-tests output as JSON
    blueprint nccl check LOG --instance-type T --nodes N [--format table|json|markdown]
                                         exit 1 below the acceptance threshold or on wrong values
    blueprint nccl nodes RUN_DIR [--instance-type T] [--expected-busbw X] [--format table|json]
                                         the per-node run of a group: each node's bandwidth, latency and
                                         versions, outliers against the median and the expected figure
    blueprint nccl compare A.json B.json what changed between two records (nodes, versions, bandwidth)
    blueprint inference benchmark <stack> [--model M] [-o FILE]
                                         the inference-perf ConfigMap and Job that measure a served model at its
                                         objectives (the team submits them)
    blueprint inference check RECORD --stack S [--model M] [--format table|json|markdown]
                                         a run's record (or the Job's log) against the model's objectives; exit 1
                                         when one is missed
    blueprint prices refresh [--cloud C] the price catalog from a cloud's price API

``<stack>`` is a stack name (``prod-aws`` reads ``stacks/Pulumi.prod-aws.yaml``) or a path to a stack
file. Exit status: 0 ok, 1 a mandatory policy violation, 2 invalid input (the file, key path and rule
are printed), 3 an internal error (a short report; ``--debug`` writes the traceback to a log file).

Each command is one module of this package (its arguments and a handler that calls the package that does the work);
this module only assembles them, routes ``cost diff``, and turns exceptions into exit statuses.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import traceback
from collections.abc import Sequence
from types import ModuleType

from blueprint.cli import (
    admit,
    checks,
    cost,
    cost_diff,
    deployer_policy,
    graph,
    inference,
    manifests,
    nccl,
    policy,
    preview,
    prices,
    report,
    schema,
    sizing,
)
from blueprint.cli.common import EXIT_INTERNAL, EXIT_INVALID, common_parser, emit, invalid_input_errors

# The program's layers (the engine, the spec with pydantic, the components, the renderers) are imported by the
# handlers that run a stack, not at start: `blueprint policy graph.json` needs none of them.
COMMANDS: tuple[ModuleType, ...] = (preview, graph, manifests, policy, cost, cost_diff, sizing, report, checks, admit,
                                    deployer_policy, nccl, inference, schema, prices)  # in the order --help lists them
MAX_ERROR_CHARS = 20_000


def parser() -> argparse.ArgumentParser:
    """The ``blueprint`` parser: each command module adds its own sub-command."""
    common = common_parser()
    top = argparse.ArgumentParser(prog="blueprint", description=(__doc__ or "").split("\n\n")[0], parents=[common])
    sub = top.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub, common)
    return top


def _route_cost_diff(words: list[str]) -> list[str]:
    """``cost diff ...`` is the ``cost-diff`` sub-command, with or without options before it
    (``blueprint --debug cost diff --base ...``)."""
    first = next((i for i, w in enumerate(words) if not w.startswith("-")), len(words))
    if words[first:first + 2] == ["cost", "diff"]:
        return [*words[:first], "cost-diff", *words[first + 2:]]
    return words


def _internal_error(err: BaseException, debug: bool) -> int:
    """Exit 3 with a short report; the traceback goes to a log file only when asked (``--debug``)."""
    summary = f"{type(err).__name__}: {err}".replace("\n", " ")[:500]
    hint = "run again with --debug to write the traceback to a log file"
    if debug:
        fd, log = tempfile.mkstemp(prefix="blueprint-debug-", suffix=".log")
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write("".join(traceback.format_exception(err)))
        hint = f"the traceback is in {log}"
    emit(sys.stderr, f"internal error: {summary}\nthis is a bug in blueprint, not in your input; {hint}\n")
    return EXIT_INTERNAL


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``blueprint`` and ``python -m blueprint``; returns the exit status.

    0: success; 1: a mandatory policy violation; 2: invalid input (stack file, graph, policy config, output
    path), with the message on standard error; 3: an internal error, reported in one short paragraph.
    """
    words = _route_cost_diff(list(sys.argv[1:] if argv is None else argv))
    args = parser().parse_args(words)
    debug = bool(getattr(args, "debug", False))
    try:
        code: int = args.handler(args)
        return code
    except invalid_input_errors() as err:
        text = str(err)
        if len(text) > MAX_ERROR_CHARS:
            text = text[:MAX_ERROR_CHARS] + " ... (truncated)"
        emit(sys.stderr, f"error: {text}\n")
        return EXIT_INVALID
    except KeyboardInterrupt:
        return 130
    except Exception as err:
        return _internal_error(err, debug)


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
