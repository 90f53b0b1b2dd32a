"""The program's clock: the time a Capacity Block window is compared with.

A real ``pulumi up`` uses the machine's UTC time. ``GPU_CLUSTER_NOW`` (ISO 8601, e.g.
``2026-11-29T00:00:00Z``) pins it, so offline runs, golden graphs and tests do not change as days pass.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

CLOCK_ENV = "GPU_CLUSTER_NOW"


class ClockError(ValueError):
    """``GPU_CLUSTER_NOW`` is set to something that is not an ISO 8601 time."""


def utcnow() -> datetime:
    """Now, in UTC (or the pinned time of ``GPU_CLUSTER_NOW``)."""
    value = os.environ.get(CLOCK_ENV)
    if not value:
        return datetime.now(UTC)
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ClockError(f"{CLOCK_ENV}={value!r} is not an ISO 8601 time (e.g. 2026-11-29T00:00:00Z)") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)
