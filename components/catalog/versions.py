"""Kubernetes versions on Amazon EKS and their support dates (``eks_versions.yaml``, with sources)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path

from components.catalog import yaml_files

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
    data = yaml_files.load_file(VERSIONS_FILE)
    return {
        str(v): EksVersion(version=str(v), released=_day(raw["released"]),
                           end_of_standard_support=_day(raw["end_of_standard_support"]),
                           end_of_extended_support=_day(raw["end_of_extended_support"]), status=str(raw["status"]))
        for v, raw in data["versions"].items()
    }


def days_left(end: datetime, now: datetime) -> int:
    """Whole days from ``now`` to the day ``end`` falls on (UTC calendar days): the day before it is 1, not 0."""
    return (end.astimezone(UTC).date() - now.astimezone(UTC).date()).days


def support_warning(what: str, minor: str, end: datetime, now: datetime, days: int) -> str | None:
    """The preview's warning when ``minor`` leaves standard support within ``days`` days, else None."""
    left = days_left(end, now)
    if left > days or left < 0:
        return None
    when = "today" if left == 0 else f"in {left} day{'' if left == 1 else 's'}"
    return f"Kubernetes {minor} leaves {what} standard support on {end:%Y-%m-%d} ({when})"


def supported_eks_versions(now: datetime) -> list[str]:
    """The Kubernetes versions in EKS standard support at ``now`` (released, standard support not ended), oldest
    first: the versions a stack loads with."""
    return [v for v, r in sorted(load_eks_versions().items(), key=lambda kv: tuple(map(int, kv[0].split("."))))
            if r.released <= now < r.end_of_standard_support]


NODE_RELEASES_FILE = Path(__file__).with_name("eks_node_releases.yaml")


@dataclass(frozen=True)
class NodeRelease:
    """The EKS-optimized AMI release pinned on managed node groups of one Kubernetes minor and AMI family."""

    family: str  # al2023 or bottlerocket
    minor: str
    release_version: str
    status: str
    as_of: str
    source: str


@lru_cache(maxsize=1)
def load_node_releases() -> dict[tuple[str, str], NodeRelease]:
    """Every pinned AMI release, by (family, minor)."""
    data = yaml_files.load_file(NODE_RELEASES_FILE)
    return {(family, str(minor)): NodeRelease(family=family, minor=str(minor),
                                              release_version=str(raw["release_version"]), status=str(raw["status"]),
                                              as_of=str(raw["as_of"]), source=str(raw["source"]))
            for family in ("al2023", "bottlerocket") for minor, raw in (data.get(family) or {}).items()}


def ami_family(ami_type: str) -> str:
    """The release family of an EKS AMI type (AL2023_* -> al2023, BOTTLEROCKET_* -> bottlerocket)."""
    return "bottlerocket" if ami_type.startswith("BOTTLEROCKET") else "al2023"


def minor_of(version: str) -> tuple[int, int]:
    """(1, 35) from "1.35", "1.35.8" or "1.35.8-gke.1036000"."""
    major, minor = version.split("-")[0].split(".")[:2]
    return int(major), int(minor)
