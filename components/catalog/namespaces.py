"""Platform facts kept as data: namespaces (``namespaces.yaml``) and FSx for Lustre figures (``fsx.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from components.catalog import yaml_files

NAMESPACES_FILE = Path(__file__).with_name("namespaces.yaml")


@lru_cache(maxsize=1)
def _data() -> dict[str, dict[str, dict[str, object]]]:
    data: dict[str, dict[str, dict[str, object]]] = yaml_files.load_file(NAMESPACES_FILE)
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
    """FSx for Lustre deployment types, sizes and throughput tiers (SSD, and HDD with each tier's capacity step)."""

    min_capacity_gib: int
    capacity_step_gib: int
    throughput_tiers: dict[str, tuple[int, ...]]
    deployment_types: tuple[str, ...] = ()
    hdd_capacity_steps: dict[str, dict[int, int]] = field(default_factory=dict)
    capacity_steps: dict[str, int] = field(default_factory=dict)  # a type's step other than capacity_step_gib

    def capacity_problem(self, deployment_type: str, storage_type: str, tier: int | None, gib: int) -> str | None:
        """Why FSx refuses ``gib`` for this deployment type, storage type and throughput tier (None: it accepts
        it, or the combination has no rule here, such as Intelligent-Tiering)."""
        if storage_type == "HDD":
            step = self.hdd_capacity_steps.get(deployment_type, {}).get(tier or 0)
            if step is None or (gib > 0 and gib % step == 0):
                return None
            return f"a multiple of {step:,} GiB for {deployment_type} HDD at {tier} MB/s/TiB"
        if storage_type != "SSD":
            return None
        step = self.capacity_steps.get(deployment_type, self.capacity_step_gib)
        small = (self.min_capacity_gib, 2 * self.min_capacity_gib)
        if gib in small or (gib > 0 and gib % step == 0):
            return None
        return f"{small[0]:,}, {small[1]:,} or a multiple of {step:,} GiB for {deployment_type} SSD"


@lru_cache(maxsize=1)
def fsx_lustre() -> LustreFacts:
    """FSx for Lustre sizes and throughput tiers (``fsx.yaml``, with its source)."""
    raw = yaml_files.load_file(FSX_FILE)["lustre"]
    return LustreFacts(min_capacity_gib=int(raw["min_capacity_gib"]), capacity_step_gib=int(raw["capacity_step_gib"]),
                       throughput_tiers={str(k): tuple(int(v) for v in vs)
                                         for k, vs in raw["throughput_tiers_mbps_per_tib"].items()},
                       deployment_types=tuple(str(t) for t in raw["deployment_types"]),
                       hdd_capacity_steps={str(k): {int(t): int(s) for t, s in v.items()}
                                           for k, v in raw["hdd_capacity_step_gib_by_tier"].items()},
                       capacity_steps={str(k): int(v) for k, v in raw["capacity_step_gib_by_type"].items()})
