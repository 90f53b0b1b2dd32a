"""Where a stack's file is: a stack name (``prod-aws``: ``stacks/Pulumi.prod-aws.yaml``) or a path. Apart from
:mod:`blueprint.graph.stackfile` (which validates the spec with its models) so that a command served from the graph
cache (:mod:`blueprint.graph.cache`) finds the file without loading them."""

from __future__ import annotations

from pathlib import Path

# The largest stack file read (StackError beyond it, blueprint.graph.stackfile).
MAX_STACK_FILE_BYTES = 1024 * 1024
# The source tree's stacks; an installed ``blueprint`` reads ``./stacks`` of the project it runs in.
STACKS_DIR = Path(__file__).resolve().parents[2] / "stacks"


def default_stacks_dir() -> Path:
    """``./stacks`` when the current directory is a Pulumi project of this blueprint, else the source tree's."""
    here = Path.cwd() / "stacks"
    return here if here.is_dir() else STACKS_DIR


def available_stacks(stacks_dir: Path | None = None) -> list[str]:
    """Stack names that have a file in ``stacks/``."""
    stacks_dir = stacks_dir or default_stacks_dir()
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in stacks_dir.glob("Pulumi.*.yaml"))


def resolve(stack: str, stacks_dir: Path | None = None) -> tuple[str, Path]:
    """A stack name (``prod-aws``) or a path to a stack file, as (stack name, path)."""
    stacks_dir = stacks_dir or default_stacks_dir()
    candidate = Path(stack)
    if candidate.suffix in (".yaml", ".yml"):
        name = candidate.name.removeprefix("Pulumi.").rsplit(".", 1)[0]
        return name, candidate
    return stack, stacks_dir / f"Pulumi.{stack}.yaml"


def display(path: Path) -> str:
    """A path as the user would type it: relative to the working directory when under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
