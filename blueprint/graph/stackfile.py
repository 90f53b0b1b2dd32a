"""Read a stack file (``stacks/Pulumi.<env>.yaml``) the way Pulumi does, with clear errors.

Every failure, from a missing file to a bad spec, is a :class:`StackError` whose message names the
file, the key path and the rule; the command-line tool prints it and exits with status 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blueprint.files.input import InputTooLargeError, read_limited
from blueprint.graph.stack_paths import MAX_STACK_FILE_BYTES as MAX_STACK_FILE_BYTES
from blueprint.graph.stack_paths import STACKS_DIR as STACKS_DIR
from blueprint.graph.stack_paths import available_stacks as available_stacks
from blueprint.graph.stack_paths import default_stacks_dir as default_stacks_dir
from blueprint.graph.stack_paths import display as _display
from blueprint.graph.stack_paths import resolve as resolve
from blueprint.graph.stack_yaml import StackError as StackError
from blueprint.graph.stack_yaml import parse_stack_yaml as parse_stack_yaml
from components.spec import SPEC_KEY, ClusterSpec, SpecError, parse_spec
from components.spec.providers import PROVIDER_PROJECT_KEYS, PROVIDER_REGION_KEYS


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
