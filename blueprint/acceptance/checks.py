"""What ``blueprint preflight`` and ``blueprint audit`` report, whatever the cloud: checks that pass, fail or cannot be
made (with the reason), and the error that stops a run when nothing of the account or project can be read. The
checks themselves are each cloud's (:class:`blueprint.acceptance.cloud.CloudChecks`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Literal

Status = Literal["pass", "fail", "cannot-check"]


@dataclass(frozen=True)
class Check:
    """One finding of a preflight or audit."""

    check: str
    subject: str
    status: Status
    detail: str


class AccountAccessError(Exception):
    """The account or project cannot be read at all (no or partial credentials, an unknown profile, credentials the
    cloud refuses, an endpoint that is malformed or does not answer): an input error of the environment, not a
    finding (exit 2)."""


def render_table(checks: Iterable[Check], title: str = "preflight") -> str:
    """One line per check, then the counts."""
    rows = list(checks)
    width = max((len(c.check) for c in rows), default=5)
    lines = [f"{c.status.upper():<13} {c.check:<{width}}  {c.subject}: {c.detail}" for c in rows]
    failed = sum(c.status == "fail" for c in rows)
    unknown = sum(c.status == "cannot-check" for c in rows)
    lines.append(f"{title}: {len(rows) - failed - unknown} pass, {failed} fail, {unknown} cannot-check")
    return "\n".join(lines) + "\n"


def render_json(checks: Iterable[Check]) -> str:
    """``{"passed", "checks": [...]}``: passed unless a check failed."""
    rows = list(checks)
    return json.dumps({"passed": not any(c.status == "fail" for c in rows),
                       "checks": [asdict(c) for c in rows]}, indent=2, sort_keys=True) + "\n"
