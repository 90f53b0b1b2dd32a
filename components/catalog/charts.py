"""Pinned Helm charts and EKS managed add-ons (``charts.yaml``): version, and where the version was read."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

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


@dataclass(frozen=True)
class AddonPin:
    """One EKS managed add-on at one exact version, for one Kubernetes minor version."""

    name: str
    version: str
    status: str
    source: str
    as_of: str


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    with CHARTS_FILE.open(encoding="utf-8") as fh:
        data: dict[str, Any] = yaml.safe_load(fh)
    return data


def load_charts() -> dict[str, ChartPin]:
    """Every pinned chart by key."""
    return {key: ChartPin(key=key, **{k: str(v) for k, v in raw.items()}) for key, raw in _data()["charts"].items()}


def addon_names() -> list[str]:
    """Every EKS managed add-on the program installs."""
    return list(_data()["eksAddons"])


def load_addon_pins(kubernetes_version: str) -> dict[str, AddonPin]:
    """The pinned add-ons for one Kubernetes minor version; add-ons without a pin for it are left out
    (the spec rule ``addon-versions-pinned`` reports them before anything is built)."""
    out = {}
    for name, raw in _data()["eksAddons"].items():
        version = (raw.get("versions") or {}).get(kubernetes_version)
        if version is not None:
            out[name] = AddonPin(name=name, version=str(version), status=str(raw["status"]),
                                 source=str(raw["source"]), as_of=str(raw["as_of"]))
    return out
