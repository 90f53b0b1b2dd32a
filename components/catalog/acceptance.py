"""The NCCL acceptance thresholds (``acceptance.yaml``, each figure with its source)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from components.catalog import yaml_files

ACCEPTANCE_FILE = Path(__file__).with_name("acceptance.yaml")


@dataclass(frozen=True)
class BusbwThreshold:
    """What ``all_reduce_perf`` should reach on an instance type at large message sizes."""

    instance_type: str
    expected_busbw_gbps: float | None
    nodes: int | None
    status: str
    source: str


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    """The file, read once."""
    data: dict[str, Any] = yaml_files.load_file(ACCEPTANCE_FILE)
    return data


@lru_cache(maxsize=1)
def load_thresholds() -> tuple[float, dict[str, BusbwThreshold]]:
    """The pass fraction and the all_reduce threshold per instance type."""
    data = _data()
    out = {}
    for itype, raw in data["all_reduce"].items():
        value = raw.get("expected_busbw_gbps")
        out[itype] = BusbwThreshold(itype, None if value is None else float(value), raw.get("nodes"),
                                    str(raw["status"]), str(raw.get("source", "")))
    return float(data["pass_fraction"]), out


@lru_cache(maxsize=1)
def load_per_node() -> dict[str, BusbwThreshold]:
    """The per-node (single-node NVLink) all_reduce figure per instance type."""
    out = {}
    for itype, raw in (_data().get("per_node") or {}).items():
        value = raw.get("expected_busbw_gbps")
        out[itype] = BusbwThreshold(itype, None if value is None else float(value), 1, str(raw["status"]),
                                    str(raw.get("source", "")))
    return out


def outlier_fraction() -> float:
    """A node below this share of its group's median per-node bus bandwidth is an outlier."""
    return float(_data()["outlier_fraction"])


def latency_outlier_factor() -> float:
    """A node whose small-message time is above this many times its group's median is an outlier."""
    return float(_data()["latency_outlier_factor"])


def catalog_figure(instance_type: str, nodes: int) -> BusbwThreshold | None:
    """The catalog's expected bus bandwidth for a run of ``nodes`` nodes of a type, or None: the per-node figure for
    one node; for several, the multi-node figure, which stands for every node count from the one it was measured on
    (bus bandwidth does not depend on the rank count, nccl-tests PERFORMANCE.md)."""
    if nodes == 1:
        found = load_per_node().get(instance_type)
    else:
        found = load_thresholds()[1].get(instance_type)
        if found is not None and found.nodes is not None and nodes < found.nodes:
            return None
    return found if found is not None and found.expected_busbw_gbps is not None else None


@dataclass(frozen=True)
class AcceptanceCatalog:
    """How the acceptance jobs are installed and run."""

    operator_version: str
    operator_manifest: str
    operator_namespace: str
    efa_device_rdma: tuple[str, ...]


@lru_cache(maxsize=1)
def load_acceptance() -> AcceptanceCatalog:
    data = _data()
    op = data["mpi_operator"]
    return AcceptanceCatalog(str(op["version"]), str(op["manifest"]), str(op["namespace"]),
                             tuple(str(t) for t in data["efa_device_rdma"]))
