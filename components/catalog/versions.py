"""Kubernetes versions on Amazon EKS and their support dates (``eks_versions.yaml``, with sources)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path

import yaml

VERSIONS_FILE = Path(__file__).with_name("eks_versions.yaml")


@dataclass(frozen=True)
class EksVersion:
    """One Kubernetes minor version's EKS support window."""

    version: str
    released: datetime
    end_of_standard_support: datetime
    end_of_extended_support: datetime
    status: str


def _day(value: object) -> datetime:
    return datetime.fromisoformat(str(value)).replace(tzinfo=UTC)


@lru_cache(maxsize=1)
def load_eks_versions() -> dict[str, EksVersion]:
    """Every Kubernetes version the catalog knows, by ``1.xx``."""
    with VERSIONS_FILE.open(encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    return {
        str(v): EksVersion(version=str(v), released=_day(raw["released"]),
                           end_of_standard_support=_day(raw["end_of_standard_support"]),
                           end_of_extended_support=_day(raw["end_of_extended_support"]), status=str(raw["status"]))
        for v, raw in data["versions"].items()
    }


def supported_eks_versions(now: datetime) -> list[str]:
    """The Kubernetes versions in EKS standard support at ``now`` (released, standard support not ended), oldest
    first: the versions a stack loads with."""
    return [v for v, r in sorted(load_eks_versions().items(), key=lambda kv: tuple(map(int, kv[0].split("."))))
            if r.released <= now < r.end_of_standard_support]
