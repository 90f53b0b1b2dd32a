"""Platform facts kept as data: namespaces (``namespaces.yaml``) and FSx for Lustre figures (``fsx.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

NAMESPACES_FILE = Path(__file__).with_name("namespaces.yaml")


@lru_cache(maxsize=1)
def _data() -> dict[str, dict[str, dict[str, object]]]:
    with NAMESPACES_FILE.open(encoding="utf-8") as fh:
        data: dict[str, dict[str, dict[str, object]]] = yaml.safe_load(fh)
    return data


def privileged_namespaces() -> tuple[str, ...]:
    """Namespaces whose pods may run privileged: the node agents' (kube-system first)."""
    data = _data()
    return tuple(n for group in ("kubernetes", "platform") for n, raw in data[group].items() if raw["privileged"])


def system_namespaces() -> tuple[str, ...]:
    """Namespaces no team may take: Kubernetes' own and the platform components'."""
    data = _data()
    return tuple(n for group in ("kubernetes", "platform") for n in data[group])


FSX_FILE = Path(__file__).with_name("fsx.yaml")


@dataclass(frozen=True)
class LustreFacts:
    """FSx for Lustre sizes and throughput tiers."""

    min_capacity_gib: int
    capacity_step_gib: int
    throughput_tiers: dict[str, tuple[int, ...]]


@lru_cache(maxsize=1)
def fsx_lustre() -> LustreFacts:
    """FSx for Lustre sizes and throughput tiers (``fsx.yaml``, with its source)."""
    with FSX_FILE.open(encoding="utf-8") as fh:
        raw = yaml.safe_load(fh)["lustre"]
    return LustreFacts(min_capacity_gib=int(raw["min_capacity_gib"]), capacity_step_gib=int(raw["capacity_step_gib"]),
                       throughput_tiers={str(k): tuple(int(v) for v in vs)
                                         for k, vs in raw["throughput_tiers_mbps_per_tib"].items()})
