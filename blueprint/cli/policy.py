"""``blueprint policy <stack | graph.json | events.jsonl>``: the policy pack on a stack or a graph, as a table,
Markdown, JSON or SARIF (exit 1 on a mandatory violation); ``--list`` and ``--explain POLICY`` describe the pack."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from blueprint.cli.common import EXIT_OK, EXIT_POLICY, cache_option, output_option, target_graph, write
from blueprint.files.output import OutputError, check_output_file
from blueprint.graph.load import GRAPH_SUFFIXES
from blueprint.graph.model import ResourceGraph

if TYPE_CHECKING:
    from blueprint.policy.runner import PolicyReport, StackKey


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("policy", parents=[common], help="run the policy pack on a stack or a graph file")
    parser.add_argument("target", nargs="?", help="stack name, stack file, or a graph JSON (offline graph, "
                                                  "`pulumi preview --json`, `pulumi stack export`, or the .jsonl "
                                                  "of `pulumi preview --event-log`)")
    parser.add_argument("--format", choices=("table", "markdown", "json", "sarif"), default="table")
    parser.add_argument("--config", type=Path, help="pack config, as given to --policy-pack-config")
    parser.add_argument("--list", action="store_true", help="list the pack's policies: area, level (under "
                        "--config), severity, cloud, what each requires")
    parser.add_argument("--explain", metavar="POLICY", help="what one policy checks, why, how to fix it, its "
                        "config, and an example violation on a shipped stack")
    parser.add_argument("--stack-file", type=Path, help="the stack file findings point at (SARIF lines); default: "
                        "the stack's file, or stacks/Pulumi.<stack>.yaml for a graph")
    output_option(parser)
    cache_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Exit 0 (no mandatory violation), 1 (mandatory violation), 2 (bad input)."""
    if args.output is not None:
        check_output_file(args.output)
    if args.list or args.explain is not None:
        if args.target is not None:
            raise OutputError("--list and --explain take no stack or graph")
        return _catalog(args)
    if args.target is None:
        raise OutputError("give a stack or a graph file to check (or --list / --explain POLICY)")
    # The pack (and the analyzer it runs through) is imported here, not when the CLI starts: the other commands
    # need none of it.
    from blueprint.policy.runner import (
        load_config_file,
        load_pack,
        render_json,
        render_markdown,
        render_table,
        run_policies,
    )

    pack = load_pack()
    config = load_config_file(args.config, pack.policies) if args.config else None
    graph, artifact, _ = target_graph(args.target, need_spec=False, use_cache=not args.no_cache)
    report = run_policies(graph, config, pack)
    stack = graph.stack or Path(artifact).stem

    uri, text = _stack_file_for(args, stack, artifact)

    def sarif() -> str:
        from blueprint.policy.sarif import render_sarif

        return render_sarif(report, stack, graph, uri, text)
    renderers = {
        "table": lambda: render_table(report, _keys(report, graph, uri, text)),
        "markdown": lambda: render_markdown(report, graph.stack or artifact, _keys(report, graph, uri, text)),
        "json": lambda: render_json(report, _keys(report, graph, uri, text)),
        "sarif": sarif,
    }
    write(renderers[args.format](), args.output)
    return EXIT_OK if report.passed else EXIT_POLICY


def _keys(report: PolicyReport, graph: ResourceGraph, uri: str | None, text: str | None) -> list[StackKey]:
    """Per violation, the stack-file key its fix changes and, when the stack file was read, its line there."""
    from blueprint.graph.provenance import locate
    from blueprint.policy.runner import StackKey
    from blueprint.policy.spec_keys import finding_key

    keys = []
    for v in report.violations:
        path = finding_key(graph, v)
        if uri is None or text is None:
            keys.append(StackKey(path))
            continue
        found = locate(text, path)
        keys.append(StackKey(path, f"{uri}:{found.line}", not found.exact))
    return keys


def _catalog(args: argparse.Namespace) -> int:
    """``blueprint policy --list`` and ``--explain <name>``."""
    from blueprint.policy.catalog import entries, find, render_explain, render_list
    from blueprint.policy.runner import load_config_file, load_pack

    pack = load_pack()
    config = load_config_file(args.config, pack.policies) if args.config else None
    items = entries(pack, config)
    if args.explain is None:
        write(render_list(items, "json" if args.format == "json" else "table"), args.output)
        return EXIT_OK
    from blueprint.policy.examples import example_violation

    entry = find(items, args.explain)
    write(render_explain(entry, example_violation(entry.name, pack)), args.output)
    return EXIT_OK


def _stack_file_for(args: argparse.Namespace, stack: str, artifact: str) -> tuple[str | None, str | None]:
    """(the stack file as the repository names it, its text) for SARIF lines: ``--stack-file``, the stack's own
    file, or ``stacks/Pulumi.<stack>.yaml`` for a graph; (None, None) when none is found."""
    from blueprint.graph.stack_paths import default_stacks_dir

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
