"""``blueprint cost diff``: the cost change of each target against a base (a graph JSON, or a git ref at which each
stack is built again), at desired and at max size, as one pull-request comment; ``--combine`` renders per-stack JSON
reports as one comment, ``--event-log`` compares the two sides of a real preview. Exit 1 when a guardrail is
crossed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from blueprint.cli.common import (
    EXIT_OK,
    EXIT_POLICY,
    CommandError,
    emit,
    non_negative,
    output_option,
    target_graph,
    usage_for,
    write,
)
from blueprint.files.input import read_text_limited
from blueprint.files.output import check_output_file
from blueprint.graph.load import GRAPH_SUFFIXES, load_graph
from blueprint.graph.model import ResourceGraph


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    # `blueprint cost diff ...` is routed here by main(); argparse cannot have both a positional target and a
    # sub-command under `cost`.
    parser = sub.add_parser("cost-diff", parents=[common], help="(as `blueprint cost diff`) the cost change "
                            "against a base at desired and at max size, as one pull-request comment")
    parser.add_argument("targets", nargs="*", metavar="target", help="stack names, stack files or graph JSONs (one "
                        "summary table for several); with --combine, per-stack JSON reports of `cost diff`")
    parser.add_argument("--event-log", type=Path, help="a `pulumi preview --event-log` file: the cost of its state "
                        "before the update against after it (no --base or target)")
    parser.add_argument("--base", help="the previous graph JSON, or a git ref to build each stack at (a stack file "
                        "is found at the same path relative to the repository)")
    parser.add_argument("--combine", action="store_true", help="render one comment from per-stack JSON reports "
                        "(`cost diff --format json`, e.g. from parallel CI jobs)")
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown")
    parser.add_argument("--fail-above-usd", type=non_negative,
                        help="exit 1 if the monthly cost rises by more than this (with --combine: all stacks together)")
    parser.add_argument("--fail-above-percent", type=non_negative, help="exit 1 if it rises by more than this percent")
    output_option(parser)
    parser.add_argument("--usage", type=Path, help="usage estimates for both sides (default: the stack's usage file)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from blueprint.changes.render import day_two
    from blueprint.cost.diff import diff_document, diff_reports, graph_changes, render_diff_json, render_diff_markdown
    from blueprint.cost.engine import price_graph

    if args.output is not None:
        check_output_file(args.output)
    if args.combine:
        return _combine(args)
    if args.event_log is not None:
        return _event_log(args)
    if not args.targets:
        raise CommandError("cost diff needs a target (a stack, stack file or graph), or --event-log")
    if args.base is None:
        raise CommandError("cost diff needs --base (a graph JSON or a git ref), or --combine, or --event-log")
    base_is_file = Path(args.base).suffix in GRAPH_SUFFIXES or Path(args.base).is_file()
    if base_is_file and len(args.targets) > 1:
        raise CommandError("--base as a graph JSON compares one target; give a git ref to compare several stacks")
    if not base_is_file and any(Path(t).suffix in GRAPH_SUFFIXES for t in args.targets):
        raise CommandError("--base as a git ref needs stack names or stack files as targets, not graphs")
    bases = {args.targets[0]: (target_graph(args.base)[0], None)} if base_is_file else \
        _graphs_at_ref(args.base, args.targets)
    diffs = []
    for target in args.targets:
        graph, _, spec = target_graph(target)
        base_graph, note = bases[target]
        usage, notes = usage_for(args.usage, target, (graph, base_graph))
        new_report = price_graph(graph, usage=usage, usage_notes=notes)
        diff = diff_reports(price_graph(base_graph, usage=usage), new_report, [note] if note else [])
        allowed = {a.resource: a.reason for a in spec.upgrades.allow_replace} if spec is not None else {}
        changes = day_two(base_graph, graph, allowed)
        diffs.append(replace(diff, changes=graph_changes(base_graph, graph, replaced=changes.replaced_urns),
                             day_two=changes, serving=_serving_lines(spec, new_report)))
    if args.format == "json":
        write(render_diff_json(diffs), args.output)
    else:
        write(render_diff_markdown([diff_document(d) for d in diffs]), args.output)
    return _gate(diffs, args)


def _serving_lines(spec: Any, report: Any) -> tuple[str, ...]:
    """The served models' sizing lines (replicas, GPUs, money, cost per million tokens against the baseline) of the
    new revision, for the PR comment; none for a graph without its spec or a stack that serves nothing."""
    if spec is None or getattr(spec, "inference", None) is None:
        return ()
    from blueprint.sizing.inference import render_inference, served_sizing

    return tuple(render_inference(served_sizing(spec, report)))


def _gate(diffs: list[Any], args: argparse.Namespace) -> int:
    """Exit 1 when a cost guardrail is crossed, or the change replaces or removes what holds data or identity
    without the stack allowing it, or changes a version the way the service refuses; each reason on stderr."""
    from blueprint.changes.render import failures
    from blueprint.cost.diff import breaches

    crossed = [f"cost guardrail: {line}" for d in diffs
               for line in breaches(d, args.fail_above_usd, args.fail_above_percent)]
    crossed += [f"day two: {line}" for d in diffs
                for line in failures({"stack": d.stack, **d.day_two.document()})]
    for line in crossed:
        emit(sys.stderr, f"{line}\n")
    return EXIT_POLICY if crossed else EXIT_OK


# One stack's `cost diff --format json` report: what `--combine` reads at most of each (blueprint.files.input).
MAX_REPORT_BYTES = 64 * 1024 * 1024


def _combine(args: argparse.Namespace) -> int:
    """Per-stack JSON reports (``cost diff --format json`` of parallel jobs) as one comment."""
    from blueprint.cost.combine import combined_breaches, load_documents
    from blueprint.cost.diff import render_diff_markdown

    if args.base is not None:
        raise CommandError("--combine reads finished reports: it takes no --base")
    if not args.targets:
        raise CommandError("--combine needs the per-stack reports to combine (cost diff --format json of each)")
    texts = []
    for name in args.targets:
        try:
            texts.append((name, read_text_limited(Path(name), MAX_REPORT_BYTES)))
        except (OSError, UnicodeDecodeError, ValueError) as err:
            raise CommandError(f"{name}: cannot be read ({err})") from None
    try:
        docs = load_documents(texts)
    except ValueError as err:
        raise CommandError(str(err)) from None
    write(render_diff_markdown(docs), args.output)
    # The comment is written first, so a workflow posts it and then fails on the guardrails of the sum.
    crossed = combined_breaches(docs, args.fail_above_usd, args.fail_above_percent)
    for line in crossed:
        emit(sys.stderr, f"cost guardrail: {line}\n")
    return EXIT_POLICY if crossed else EXIT_OK


def _event_log(args: argparse.Namespace) -> int:
    """The state before the update a real preview plans against the state after it."""
    from blueprint.cost.diff import diff_document, diff_event_log, render_diff_json, render_diff_markdown
    from blueprint.graph.eventlog import load_event_log
    from blueprint.graph.stackfile import available_stacks

    if args.base is not None or args.targets:
        raise CommandError("--event-log diffs the log's state before the update against after it: give no "
                           "--base and no target")
    log = load_event_log(args.event_log)
    # The stack's usage file, as for a stack target: the log names its stack.
    named = log.new.stack if log.new.stack in available_stacks() else None
    usage, notes = usage_for(args.usage, named or str(args.event_log), (log.old, log.new)) \
        if args.usage or named else ({}, ())
    diff = diff_event_log(log, usage=usage, usage_notes=notes)
    write(render_diff_json([diff]) if args.format == "json" else render_diff_markdown([diff_document(diff)]),
          args.output)
    return _gate([diff], args)


def _repo_path(target: str) -> str | None:
    """A stack file target as a path relative to the repository root (the same file at another ref), or None for a
    stack name; CommandError when the file lies outside the repository."""
    import subprocess

    if not (target.endswith((".yaml", ".yml")) or "/" in target or "\\" in target):
        return None
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False)
    if top.returncode != 0:
        raise CommandError(f"--base as a git ref needs a git checkout: {top.stderr.strip()[:200]}")
    path = Path(target).resolve()
    root = Path(top.stdout.strip()).resolve()
    if not path.is_relative_to(root):
        raise CommandError(f"--base: {target} is outside the repository ({root}), so it has no version at a git "
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
            raise CommandError(f"--base {ref}: not a graph JSON file nor a git ref of this repository "
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
                raise CommandError(f"--base {ref}: the stack {stack} does not build at that ref: "
                                   f"{built.stderr.decode(errors='replace').strip()[:300]}")
            out[stack] = (load_graph(target), None)
    return out
