"""GKE versions a GCP stack is checked against (``gke_versions.yaml``, with sources): the lowest version GKE documents
for each GPUDirect machine family and for the Managed Lustre port, and each release channel's default version."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from components.catalog import yaml_files

GKE_VERSIONS_FILE = Path(__file__).with_name("gke_versions.yaml")
# GKE versions as GKE writes them: 1.X.Y-gke.N; the spec also takes the shorter 1.X and 1.X.Y GKE accepts for
# minMasterVersion (read as their lowest patch: the floor is then checked against the least the cluster may get).
GKE_VERSION_PATTERN = r"^1\.\d{1,3}(\.\d{1,3}(-gke\.\d{1,12})?)?$"
# An exact GKE version, as a node pool's pin takes it (pulumi_gcp NodePool.version: a fuzzy version makes spurious
# diffs).
GKE_EXACT_VERSION_PATTERN = r"^1\.\d{1,3}\.\d{1,3}-gke\.\d{1,12}$"
_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+)(?:-gke\.(\d+))?)?$")

GkeVersion = tuple[int, int, int, int]


# What a missing part of a version prefix stands for when it means the newest: above every real patch and build.
NEWEST = 10**12


def parse_gke_version(text: str, newest: bool = False) -> GkeVersion:
    """``1.33.2-gke.4780000`` as (1, 33, 2, 4780000); ``1.33`` as (1, 33, 0, 0), or with ``newest`` as the newest
    patch of 1.33, which is what GKE makes of a version written so: "1.X picks the highest valid patch+gke.N patch in
    the 1.X version", "1.X.Y picks the highest valid gke.N patch in the 1.X.Y version" (Container API, version aliases
    of desiredMasterVersion, nodeVersion and initialClusterVersion)."""
    m = _VERSION.match(text)
    if m is None:
        raise ValueError(f"'{text}' is not a GKE version (1.X.Y-gke.N)")
    major, minor, patch, build = m.groups()
    missing = NEWEST if newest else 0
    return int(major), int(minor), int(patch) if patch else missing, int(build) if build else missing


@dataclass(frozen=True)
class VersionFloor:
    """The lowest GKE version something needs, per minor version as its source lists it."""

    what: str  # "GPUDirect-TCPXO on A3 Mega"
    versions: tuple[str, ...]  # the lowest version of each listed minor, oldest first
    status: str
    source: str
    as_of: str

    def unmet(self, version: str) -> str | None:
        """The floor ``version`` is below (the version it needs, as the source writes it), or None when it meets it.
        Below the oldest listed minor: that minor's entry; a listed minor: its entry; a newer minor: none. A prefix
        (``1.32``, ``1.32.4``) is the newest patch GKE has of it, as GKE resolves it."""
        v = parse_gke_version(version, newest=True)
        floors = sorted(self.versions, key=parse_gke_version)
        if v < parse_gke_version(floors[0]):
            return floors[0]
        same = [f for f in floors if parse_gke_version(f)[:2] == v[:2]]
        return same[0] if same and v < parse_gke_version(same[0]) else None

    def short(self) -> str:
        """``1.31.4-gke.1183000+``, or with per-minor entries ``1.28.15-gke.3163000+ (patch floors per minor to
        1.32)``."""
        floors = sorted(self.versions, key=parse_gke_version)
        newest = ".".join(map(str, parse_gke_version(floors[-1])[:2]))
        return f"{floors[0]}+" + (f" (patch floors per minor to {newest})" if len(floors) > 1 else "")

    def describe(self) -> str:
        """The floor in words: ``1.31.4-gke.1183000 or later``, and the per-minor entries after the first."""
        floors = sorted(self.versions, key=parse_gke_version)
        if len(floors) == 1:
            return f"{floors[0]} or later"
        return f"{floors[0]} or later, and on a later minor at least its entry of {', '.join(floors[1:])}"


@dataclass(frozen=True)
class ChannelDefault:
    """The version a release channel creates clusters at, as a dated release note says."""

    channel: str
    version: str
    announced: str
    source: str


@dataclass(frozen=True)
class GkeVersions:
    """Everything in ``gke_versions.yaml``."""

    channel_defaults: dict[str, ChannelDefault]
    gpudirect_floors: dict[str, VersionFloor]  # by accelerator type
    lustre_port: int
    lustre_floor: VersionFloor
    inference_pool_floor: VersionFloor  # the InferencePool CRD GKE installs (inference.gateway)
    node_skew_minors: int  # how many minor versions a node pool may trail the control plane
    node_skew_source: str
    end_of_standard_support: dict[str, tuple[str, str]]  # minor -> (date, status)


def _floor(raw: dict[str, object]) -> VersionFloor:
    versions = tuple(str(v) for v in raw["versions"])  # type: ignore[attr-defined]
    for v in versions:
        parse_gke_version(v)
    return VersionFloor(what=str(raw["what"]), versions=versions, status=str(raw["status"]),
                        source=str(raw["source"]), as_of=str(raw["as_of"]))


@lru_cache(maxsize=1)
def load_gke_versions() -> GkeVersions:
    """The GKE version floors and channel defaults (``components/catalog/gke_versions.yaml``)."""
    data = yaml_files.load_file(GKE_VERSIONS_FILE)
    defaults = {}
    for channel, raw in data["channel_defaults"].items():
        parse_gke_version(str(raw["version"]))
        defaults[str(channel)] = ChannelDefault(channel=str(channel), version=str(raw["version"]),
                                                announced=str(raw["announced"]), source=str(raw["source"]))
    floors = data["floors"]
    return GkeVersions(
        channel_defaults=defaults,
        gpudirect_floors={str(acc): _floor(raw) for acc, raw in floors["gpudirect"].items()},
        lustre_port=int(floors["managed_lustre"]["port"]),
        lustre_floor=_floor(floors["managed_lustre"]),
        inference_pool_floor=_floor(floors["inference_pool"]),
        node_skew_minors=int(data["node_skew"]["max_minor_versions_older"]),
        node_skew_source=f"{data['node_skew']['source']} (read {data['node_skew']['as_of']})",
        end_of_standard_support={str(minor): (str(raw["date"]), str(raw["status"]))
                                 for minor, raw in (data.get("end_of_standard_support") or {}).items()},
    )
