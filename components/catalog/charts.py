"""Pinned Helm charts and EKS managed add-ons (``charts.yaml``): version, and where the version was read."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from components.catalog import yaml_files

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
    """One EKS managed add-on for one Kubernetes minor version: its exact version and where it was read, or
    ``version`` None when the catalog has no sourced version for that Kubernetes version (status ``unpinned``):
    the add-on is then created without a version, so EKS installs its default for the cluster's version."""

    name: str
    version: str | None
    status: str
    source: str
    as_of: str

    @property
    def pinned(self) -> bool:
        return self.version is not None


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    data: dict[str, Any] = yaml_files.load_file(CHARTS_FILE)
    return data


def load_charts() -> dict[str, ChartPin]:
    """Every pinned chart by key."""
    return {key: ChartPin(key=key, **{k: str(v) for k, v in raw.items()}) for key, raw in _data()["charts"].items()}


def addon_names() -> list[str]:
    """Every EKS managed add-on the program installs."""
    return list(_data()["eksAddons"])


def load_addon_pins(kubernetes_version: str) -> dict[str, AddonPin]:
    """Every add-on the program installs, for one Kubernetes minor version. A version entry is a string (the
    add-on's status and source apply) or a mapping with its own ``version``, ``status`` and ``source``; an add-on
    with no entry for the version comes back unpinned (the preview warns and says how to pin it)."""
    out = {}
    for name, raw in _data()["eksAddons"].items():
        entry = (raw.get("versions") or {}).get(kubernetes_version)
        if entry is None:
            out[name] = AddonPin(name=name, version=None, status="unpinned",
                                 source=f"no sourced version for Kubernetes {kubernetes_version} in "
                                        "components/catalog/charts.yaml", as_of=str(raw["as_of"]))
        elif isinstance(entry, dict):
            out[name] = AddonPin(name=name, version=str(entry["version"]), status=str(entry["status"]),
                                 source=str(entry["source"]), as_of=str(entry.get("as_of", raw["as_of"])))
        else:
            out[name] = AddonPin(name=name, version=str(entry), status=str(raw["status"]),
                                 source=str(raw["source"]), as_of=str(raw["as_of"]))
    return out


def pytorch_image() -> str:
    """The default image of the platform's torch-distributed training runtime (``charts.yaml`` ``images``)."""
    return str(_data()["images"]["pytorch"]["image"])


def recorder_image(cloud: str) -> str:
    """The image the acceptance gate's per-node pods upload their record with: the cloud's CLI (``charts.yaml``
    ``images``: aws-cli on AWS, google-cloud-cli on GCP)."""
    return str(_data()["images"]["aws-cli" if cloud == "aws" else "google-cloud-cli"]["image"])


def node_check_images() -> tuple[str, str]:
    """The per-node check's pinned images (``charts.yaml`` ``images``): DCGM and the readiness reporter."""
    images = _data()["images"]
    return str(images["dcgm"]["image"]), str(images["readiness-reporter"]["image"])


def tool_image() -> str:
    """The small image of the platform's own Jobs (a shell with coreutils), pinned in ``charts.yaml`` ``images``."""
    return str(_data()["images"]["tools"]["image"])


@dataclass(frozen=True)
class AutoscalerImage:
    """The Cluster Autoscaler release for one Kubernetes minor: its image and where the tag was read."""

    kubernetes_version: str
    image: str
    tag: str
    source: str
    as_of: str

    @property
    def reference(self) -> str:
        """``registry/repository:tag``."""
        return f"{self.image}:{self.tag}"


def cluster_autoscaler_image(kubernetes_version: str) -> AutoscalerImage | None:
    """The Cluster Autoscaler image of a Kubernetes minor (``charts.yaml`` clusterAutoscaler), or None when the catalog
    has no release for it (no autoscaler can run on that version)."""
    raw = _data()["clusterAutoscaler"]
    entry = (raw.get("versions") or {}).get(kubernetes_version)
    if entry is None:
        return None
    return AutoscalerImage(kubernetes_version=kubernetes_version, image=str(raw["image"]), tag=str(entry["tag"]),
                           source=str(entry["source"]), as_of=str(raw["as_of"]))


def cluster_autoscaler_versions() -> list[str]:
    """The Kubernetes minors the catalog has a Cluster Autoscaler release for, oldest first."""
    versions = _data()["clusterAutoscaler"].get("versions") or {}
    return sorted((str(v) for v in versions), key=lambda v: tuple(map(int, v.split("."))))


def autoscaler_gpu_types() -> tuple[str, ...]:
    """The ``k8s.amazonaws.com/accelerator`` values Cluster Autoscaler's AWS provider knows (``charts.yaml``)."""
    return tuple(str(t) for t in _data()["clusterAutoscaler"]["gpuTypes"])


def slurm_images() -> dict[str, str]:
    """The pinned Slurm images (charts.yaml ``slurm``): slurmctld, slurmd, slurmdbd, slurmrestd, login, sidecar."""
    return {str(k): str(v) for k, v in _data()["slurm"]["images"].items()}


def slurm_version() -> str:
    """The Slurm release those images hold."""
    return str(_data()["slurm"]["version"])
