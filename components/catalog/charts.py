"""Pinned Helm charts (``charts.yaml``): repository, chart, version, and where the version was read."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

CHARTS_FILE = Path(__file__).with_name("charts.yaml")


@dataclass(frozen=True)
class ChartPin:
    """One chart at one exact version."""

    key: str
    repository: str
    chart: str
    version: str
    source: str
    as_of: str

    @property
    def is_oci(self) -> bool:
        """OCI charts are addressed by URL, not through a repository index."""
        return self.repository.startswith("oci://")


@lru_cache(maxsize=1)
def load_charts() -> dict[str, ChartPin]:
    """Every pinned chart by key (cached)."""
    with CHARTS_FILE.open(encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    return {key: ChartPin(key=key, **{k: str(v) for k, v in raw.items()}) for key, raw in data["charts"].items()}
