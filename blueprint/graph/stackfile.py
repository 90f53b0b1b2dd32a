"""Read a stack file (``stacks/Pulumi.<env>.yaml``) the way Pulumi does, with clear errors.

Every failure, from a missing file to a bad spec, is a :class:`StackError` whose message names the
file, the key path and the rule; the command-line tool prints it and exits with status 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blueprint.files.input import InputTooLargeError, read_limited
from blueprint.graph.stack_yaml import StackError as StackError
from blueprint.graph.stack_yaml import parse_stack_yaml as parse_stack_yaml
from components.spec import SPEC_KEY, ClusterSpec, SpecError, parse_spec
from components.spec.providers import PROVIDER_PROJECT_KEYS, PROVIDER_REGION_KEYS

# The source tree's stacks; an installed ``blueprint`` reads ``./stacks`` of the project it runs in.
STACKS_DIR = Path(__file__).resolve().parents[2] / "stacks"


def default_stacks_dir() -> Path:
    """``./stacks`` when the current directory is a Pulumi project of this blueprint, else the source tree's."""
    here = Path.cwd() / "stacks"
    return here if here.is_dir() else STACKS_DIR


MAX_STACK_FILE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class StackFile:
    """A loaded and validated stack file."""

    name: str
    path: Path
    display_path: str
    config: dict[str, Any]
    spec: ClusterSpec

    @property
    def region(self) -> str:
        """The region the stack deploys to (its cloud's)."""
        return self.spec.region


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


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def load_stack(stack: str, stacks_dir: Path | None = None) -> StackFile:
    """Load, parse and validate a stack; raise :class:`StackError` with a clear message otherwise."""
    stacks_dir = stacks_dir or default_stacks_dir()
    name, path = resolve(stack, stacks_dir)
    shown = _display(path)
    if not path.is_file():
        known = ", ".join(available_stacks(stacks_dir)) or "none"
        raise StackError(f"{shown}: stack file not found (stacks in {_display(stacks_dir)}: {known})")
    try:
        data = read_limited(path, MAX_STACK_FILE_BYTES)
    except InputTooLargeError:
        raise StackError(f"{shown}: more than {MAX_STACK_FILE_BYTES:,} bytes; a stack file is at most "
                         f"{MAX_STACK_FILE_BYTES:,} bytes [rule: stack-file-size]") from None
    except OSError as err:
        raise StackError(f"{shown}: cannot be read: {err.strerror or err} [rule: stack-file-readable]") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise StackError(f"{shown}: not UTF-8 text [rule: yaml-syntax]") from None
    doc = parse_stack_yaml(text, shown)
    if not isinstance(doc, dict):
        raise StackError(f"{shown}: a stack file is a mapping with a 'config' key [rule: stack-file-shape]")
    config = doc.get("config")
    if not isinstance(config, dict):
        raise StackError(f"{shown}: config: required mapping is missing [rule: stack-file-shape]")
    if SPEC_KEY not in config:
        raise StackError(f"{shown}: config.{SPEC_KEY}: required key is missing [rule: schema-required-key]")
    raw_spec = config[SPEC_KEY]
    region_key = PROVIDER_REGION_KEYS.get(str(raw_spec.get("cloud"))) if isinstance(raw_spec, dict) else None
    region = config.get(region_key) if region_key is not None else None
    if region is not None and not isinstance(region, str):
        raise StackError(f"{shown}: config.{region_key}: must be a string [rule: schema-type]")
    project_key = PROVIDER_PROJECT_KEYS.get(str(raw_spec.get("cloud"))) if isinstance(raw_spec, dict) else None
    project = config.get(project_key) if project_key is not None else None
    if project is not None and not isinstance(project, str):
        raise StackError(f"{shown}: config.{project_key}: must be a string [rule: schema-type]")
    try:
        spec = parse_spec(config[SPEC_KEY], shown, provider_region=region, provider_project=project)
    except SpecError as err:
        raise StackError(str(err)) from None
    return StackFile(name=name, path=path, display_path=shown, config=dict(config), spec=spec)
