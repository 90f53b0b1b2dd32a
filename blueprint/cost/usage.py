"""Usage estimates for what the graph cannot fix: bucket GB and requests, NAT GB, log volume.

In the spirit of Infracost's ``infracost-usage.yml``: a YAML file beside the stack (``stacks/<stack>.usage.yaml``,
or ``--usage FILE``) gives, per resource (its logical name, as in the preview's tree), the monthly quantities
its price depends on. The documented default of every quantity is 0: a usage-priced resource without an entry
is listed as "usage-dependent, not priced" rather than guessed.

    version: 1
    resources:
      storage-checkpoints: {storageGB: 12000, putRequests: 400000, getRequests: 2000000}

GCP graphs use the same names: a GCS bucket's ``storageGB`` (GiB), ``putRequests`` (Class A operations) and
``getRequests`` (Class B operations); a Cloud NAT's ``processedGB`` (GiB).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from blueprint import clouds
from blueprint.cost.cloud import cloud_pricing
from blueprint.cost.lines import Usage, UsageFields
from blueprint.files.input import read_text_limited
from blueprint.graph.stack_yaml import StackError, parse_stack_yaml

MAX_QUANTITY = 1e15


def usage_fields() -> UsageFields:
    """Every cloud's usage-priced resource types and their quantities (each cloud's pricing ``USAGE_FIELDS``)."""
    return {kind: fields for cloud in clouds.names() for kind, fields in cloud_pricing(cloud).USAGE_FIELDS.items()}


def known_fields() -> list[str]:
    """Every quantity name a usage file may give, sorted."""
    return sorted({name for fields in usage_fields().values() for name in fields})




class UsageError(ValueError):
    """A usage file that cannot be used; the message names the file, the key path and the rule."""


def default_usage_path(stack_path: Path, stack_name: str) -> Path:
    """Where a stack's usage file lives: ``<stack dir>/<stack>.usage.yaml`` (not ``Pulumi.*``: not a stack)."""
    return stack_path.with_name(f"{stack_name}.usage.yaml")


def parse_usage(text: str, shown: str) -> dict[str, dict[str, float]]:
    """The usage of each named resource; :class:`UsageError` on the first problem."""
    def fail(path: str, problem: str, rule: str) -> UsageError:
        return UsageError(f"{shown}: {path}: {problem} [rule: {rule}]")

    try:
        doc = parse_stack_yaml(text, shown)
    except StackError as err:
        raise UsageError(str(err)) from None
    if not isinstance(doc, dict) or set(map(str, doc)) - {"version", "resources"}:
        raise fail("(top level)", "a usage file is a mapping of version and resources", "usage-shape")
    if doc.get("version") != 1:
        raise fail("version", "must be 1", "usage-version")
    resources = doc.get("resources") or {}
    if not isinstance(resources, dict):
        raise fail("resources", "must be a mapping of resource names to quantities", "usage-shape")
    out: dict[str, dict[str, float]] = {}
    for name, fields in resources.items():
        if not isinstance(fields, dict):
            raise fail(f"resources.{name}", "must be a mapping of quantities", "usage-shape")
        out[str(name)] = {}
        for key, value in fields.items():
            where = f"resources.{name}.{key}"
            if key not in known_fields():
                raise fail(where, f"unknown quantity (known: {', '.join(known_fields())})", "usage-field")
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                    or not 0 <= value <= MAX_QUANTITY:
                raise fail(where, f"must be a number from 0 to {MAX_QUANTITY:g} (a monthly quantity)", "usage-value")
            out[str(name)][str(key)] = float(value)
    return out


# A usage file names quantities per resource: what `cost --usage` reads at most (blueprint.files.input).
MAX_USAGE_FILE_BYTES = 16 * 1024 * 1024


def load_usage(path: Path, shown: str | None = None) -> dict[str, dict[str, float]]:
    """Read and check a usage file."""
    shown = shown or str(path)
    try:
        text = read_text_limited(path, MAX_USAGE_FILE_BYTES)
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise UsageError(f"{shown}: cannot be read: {err} [rule: usage-file-readable]") from None
    return parse_usage(text, shown)


def check_usage_types(usage: Usage, types: Mapping[str, str], shown: str) -> list[str]:
    """Quantities that do not apply to the named resource's type raise :class:`UsageError`; names that are not
    in the graph are returned as notes (a usage file may run ahead of, or behind, the graph it prices)."""
    notes = []
    for name, fields in usage.items():
        type_ = types.get(name)
        if type_ is None:
            notes.append(f"usage file names '{name}', which is not a resource of this graph")
            continue
        allowed = usage_fields().get(type_, {})
        for key in fields:
            if key not in allowed:
                raise UsageError(f"{shown}: resources.{name}.{key}: not a usage of {type_} (its quantities: "
                                 f"{', '.join(allowed) or 'none'}) [rule: usage-field]")
    return notes
