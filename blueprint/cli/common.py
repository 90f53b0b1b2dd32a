"""What every command shares: exit statuses, writing to standard output or ``-o``, the graph of a target (a graph
file, or a stack run through the offline engine), the usage file that goes with it, and the errors that mean "your
input is invalid" (exit 2)."""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from blueprint.files.output import output_file_argument, write_atomic
from blueprint.graph.load import GRAPH_SUFFIXES, load_graph
from blueprint.graph.model import GraphFormatError, ResourceGraph

if TYPE_CHECKING:
    from blueprint.graph.engine import ProgramRun
    from blueprint.graph.stackfile import StackFile

EXIT_OK = 0
EXIT_POLICY = 1  # a mandatory policy violation, a failed check, a workload that would not run, a guardrail crossed
EXIT_INVALID = 2
EXIT_INTERNAL = 3
EXIT_UNCHECKED = 4  # preflight/audit: nothing could be checked (or, with --strict, not everything)
STACK_HELP = "stack name (prod-aws) or path to a stack file"
TARGET_HELP = "stack name, stack file, or a graph JSON"


class CommandError(ValueError):
    """Arguments that do not fit together, or a file a command cannot use (exit 2, with the message)."""


class ToolMissingError(RuntimeError):
    """A program the command needs is not installed (exit 2, with how to install it)."""


def common_parser() -> argparse.ArgumentParser:
    """The options every command takes (``--debug``)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="on an internal error, write the traceback to a log file and name it")
    return common


def output_option(parser: argparse.ArgumentParser, what: str = "the report") -> None:
    """``-o/--output FILE``: write ``what`` there (whole, or not at all) instead of standard output."""
    parser.add_argument("-o", "--output", type=output_file_argument,
                        help=f"write {what} here instead of standard output")


# Control characters but newline and tab (C0, DEL, C1): written as \xNN, so that a name read from a file (a node's,
# a resource's) cannot move the cursor, recolour or retitle the terminal the report is read in.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def emit(stream: TextIO, text: str) -> None:
    """Write text that may carry undecodable bytes of a path (surrogate escapes) without failing, its control
    characters shown as escapes."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    stream.write(text.encode("utf-8", "backslashreplace").decode("utf-8"))


def write(text: str, output: Path | None) -> None:
    """To standard output, or whole to ``output``."""
    if output is None:
        emit(sys.stdout, text)
    else:
        write_atomic(output, text)


def target_graph(target_text: str, *, need_spec: bool = True, use_cache: bool = True) -> tuple[ResourceGraph, str, Any]:
    """A graph JSON file as given (no spec), or the graph and spec of a stack run through the offline engine; a
    stack's graph comes from the graph cache when it has it (:mod:`blueprint.graph.cache`; ``use_cache`` False or
    ``BLUEPRINT_NO_CACHE=1``: never). ``need_spec`` False: the spec is not returned (None) when the cache serves the
    graph, and the spec's models are not loaded."""
    target = Path(target_text)
    if target.suffix in GRAPH_SUFFIXES:
        try:
            return load_graph(target), str(target), None
        except GraphFormatError as err:
            raise GraphFormatError(f"{target}: {err}") from None
    if use_cache:
        from blueprint.graph import cache

        if cache.enabled():
            return _cached_stack_graph(target_text, need_spec)
    from blueprint.graph.engine import run_program
    from blueprint.graph.stackfile import load_stack

    stack = load_stack(target_text)
    return run_program(stack.name, stack.config, stack.region).graph, stack.display_path, stack.spec


def _cached_stack_graph(target_text: str, need_spec: bool) -> tuple[ResourceGraph, str, Any]:
    """:func:`target_graph` of a stack through the graph cache; a stack file that cannot be read, or is too large,
    goes to the loader, which says why."""
    from blueprint.graph import cache
    from blueprint.graph.stack_paths import MAX_STACK_FILE_BYTES, default_stacks_dir, display, resolve
    from components.clock import utcnow

    name, path = resolve(target_text, default_stacks_dir())
    try:
        text = path.read_bytes() if path.is_file() and path.stat().st_size <= MAX_STACK_FILE_BYTES else None
    except OSError:
        text = None
    if text is None:
        return target_graph(target_text, need_spec=need_spec, use_cache=False)
    loaded: list[Any] = []

    def compute() -> tuple[ResourceGraph, list[Any]]:
        from blueprint.graph.engine import run_program
        from blueprint.graph.stackfile import load_stack

        stack = load_stack(target_text)
        loaded.append(stack.spec)
        return run_program(stack.name, stack.config, stack.region).graph, cache.block_boundaries(stack.spec)

    found = cache.cached_graph(name, text, utcnow(), compute)
    spec = loaded[0] if loaded else None
    if spec is None and need_spec:
        from blueprint.graph.stackfile import load_stack

        spec = load_stack(target_text).spec
    return found.graph, display(path), spec


def cache_option(parser: argparse.ArgumentParser) -> None:
    """``--no-cache``: run the stack's program even when the graph cache has its graph."""
    parser.add_argument("--no-cache", action="store_true", help="run the stack's program even when the graph cache "
                        "(BLUEPRINT_CACHE_DIR, docs/cli.md) has its graph for the same stack file, day and source")


def previous_option(parser: argparse.ArgumentParser) -> None:
    """``--previous FILE``: the run before this one, as a second ``pulumi up`` meets it."""
    parser.add_argument("--previous", type=Path, metavar="FILE",
                        help="the previous run: its offline graph (blueprint graph -o) or `pulumi stack export` of "
                        "the deployed stack; its ids and outputs answer the resources it had, and a version step "
                        "EKS or GKE refuses (two minors, a downgrade) is an error")


def run_stack(stack: StackFile, previous_path: Path | None) -> tuple[ProgramRun, ResourceGraph | None]:
    """Run a loaded stack through the offline engine, after ``previous_path`` when given: (the run, the previous
    graph). A version step the service refuses between the two is a StackError naming the stack file, the key and
    the rule."""
    from blueprint.changes.steps import step_problems
    from blueprint.graph.engine import run_program
    from blueprint.graph.previous import load_previous
    from blueprint.graph.stackfile import StackError

    if previous_path is None:
        return run_program(stack.name, stack.config, stack.region), None
    try:
        previous = load_previous(previous_path, stack.region)
    except GraphFormatError as err:
        raise GraphFormatError(f"{shown_path(previous_path)}: {err}") from None
    if previous.graph.stack and previous.graph.stack != stack.name:
        raise CommandError(f"{shown_path(previous_path)} is a run of stack {previous.graph.stack}, not "
                           f"{stack.name}: its resources would match none of this stack's")
    run = run_program(stack.name, stack.config, stack.region, previous=previous.answers)
    problems = step_problems(previous.graph, run.graph)
    if problems:
        raise StackError("\n".join(
            f"{stack.display_path}: gpu-cluster:spec.{p.key}: {p.message} (from {shown_path(previous_path)}) "
            f"[rule: {p.rule}]" for p in problems))
    return run, previous.graph


def usage_for(explicit: Path | None, target_text: str,
              graphs: tuple[ResourceGraph, ...]) -> tuple[Any, tuple[str, ...]]:
    """The usage estimates to price with: ``--usage FILE``, else ``<stack>.usage.yaml`` beside a stack file,
    else none; checked against the graphs' resource types (names a graph lacks become notes)."""
    from blueprint.cost.usage import check_usage_types, default_usage_path, load_usage

    path = explicit
    if path is None and Path(target_text).suffix not in GRAPH_SUFFIXES:
        from blueprint.graph.stackfile import default_stacks_dir, resolve

        name, stack_path = resolve(target_text, default_stacks_dir())
        candidate = default_usage_path(stack_path, name)
        path = candidate if candidate.is_file() else None
    if path is None:
        return {}, ()
    shown = shown_path(path)
    usage = load_usage(path, shown)
    types = {r.name: r.type for g in graphs for r in g.resources if not r.is_component}
    notes = check_usage_types(usage, types, shown)
    return usage, (f"usage estimates from {shown}", *notes)


def shown_path(path: Path) -> str:
    """A path as the user would type it: relative to the working directory when under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def invalid_input_errors() -> tuple[type[Exception], ...]:
    """The exceptions that mean "your input is invalid" (exit 2), from the modules that raise them."""
    from blueprint.acceptance.checks import AccountAccessError
    from blueprint.admit.workloads import WorkloadFileError
    from blueprint.cost.cloud import PriceRefreshError
    from blueprint.cost.usage import UsageError
    from blueprint.deployer.table import DeployerTableError
    from blueprint.files.output import OutputError
    from blueprint.graph.stackfile import StackError
    from blueprint.policy.runner import PolicyConfigError
    from components.clock import ClockError

    return (StackError, PolicyConfigError, GraphFormatError, OutputError, ClockError, CommandError, UsageError,
            AccountAccessError, WorkloadFileError, ToolMissingError, PriceRefreshError, DeployerTableError)


# More nodes than any group the stacks allow (EKS's and GKE's node group and pool limits are in the thousands).
MAX_EXPECT_NODES = 100_000


def node_count(text: str) -> int:
    """argparse ``type`` of a node count: 1 to :data:`MAX_EXPECT_NODES`, in ASCII digits (``int`` would read a
    fullwidth or Arabic-Indic number too)."""
    try:
        if not text.isascii():
            raise ValueError(text)
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of nodes") from None
    if not 1 <= value <= MAX_EXPECT_NODES:
        raise argparse.ArgumentTypeError(f"{value} nodes: give 1 to {MAX_EXPECT_NODES:,}")
    return value


def _ascii_number(text: str) -> float:
    """``text`` as a number written in ASCII (``float`` would read fullwidth digits too), else a usage error."""
    try:
        if not text.isascii():
            raise ValueError(text)
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def fraction(text: str) -> float:
    """argparse ``type`` of a tolerance: a finite fraction from 0 to 1 (NaN would make every comparison pass)."""
    value = _ascii_number(text)
    if not (math.isfinite(value) and 0 <= value <= 1):
        raise argparse.ArgumentTypeError(f"{text}: give a fraction from 0 to 1 (0.1 allows a 10 % fall)")
    return value


def non_negative(text: str) -> float:
    """argparse ``type`` of a guardrail (``--fail-above-usd``, ``--fail-above-percent``): a finite number of at least
    0 in ASCII digits (NaN would let every increase through: no comparison with it is true)."""
    value = _ascii_number(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text}: give a finite number of at least 0")
    return value
