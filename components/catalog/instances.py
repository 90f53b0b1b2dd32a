"""The AWS instance catalog: GPU count, EFA interfaces, network cards and local NVMe per instance type.

The figures live in ``aws_instances.yaml`` beside this module, each with a source, a status and a date,
so that a reviewer can check where a number came from. Unknown figures are ``None``; the program never
guesses them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from components.catalog import yaml_files

CATALOG_FILE = Path(__file__).with_name("aws_instances.yaml")


@dataclass(frozen=True)
class Fact:
    """One figure with its provenance."""

    value: int | None
    status: str
    source: str
    as_of: str


@dataclass(frozen=True)
class InstanceFacts:
    """What the blueprint knows about one instance type."""

    instance_type: str
    arch: str  # x86_64 or arm64
    gpu_model: str | None
    gpu_count: int
    gpu_memory_gib_each: int | None
    vcpu: Fact
    memory_gib: Fact
    efa_interfaces: Fact
    network_cards: Fact
    nvme_disks: int | None
    nvme_disk_gb: int | None
    network_gbps: Fact
    capacity_blocks: Fact  # 1 when EC2 sells the type as a Capacity Block for ML
    mig: Fact  # 1 when the GPU supports Multi-Instance GPU

    @property
    def efa_count(self) -> int:
        """EFA interfaces to wire: the catalog's maximum, 0 when unknown (an unknown count wires none)."""
        return self.efa_interfaces.value or 0

    @property
    def efa_capable(self) -> bool:
        """True when the type supports at least one EFA interface."""
        return self.efa_count > 0

    @property
    def has_local_nvme(self) -> bool | None:
        """True or False when the catalog knows; None when the NVMe layout is unconfirmed."""
        if self.nvme_disks is None:
            return None
        return self.nvme_disks > 0


def _whole(value: Any, where: str) -> int | None:
    """A figure as the catalog holds it: a whole number (true/false for yes-no facts) or null."""
    if value is None or isinstance(value, int):
        return value
    raise ValueError(f"{CATALOG_FILE.name}: {where}: {value!r} is not a whole number; record null with status "
                     "unconfirmed and give the figure in a note")


def _fact(raw: dict[str, Any], sources: dict[str, str], where: str) -> Fact:
    source = str(raw.get("source", raw.get("note", "")))
    return Fact(
        value=_whole(raw.get("value"), f"{where}.value"),
        status=str(raw["status"]),
        source=sources.get(source, source),
        as_of=str(raw.get("as_of", "")),
    )


def _parse(data: dict[str, Any]) -> dict[str, InstanceFacts]:
    sources: dict[str, str] = data["meta"]["sources"]
    out: dict[str, InstanceFacts] = {}
    for name, raw in data["instances"].items():
        gpu = raw["gpu"]
        nvme = raw["local_nvme"]
        facts = InstanceFacts(
            instance_type=name,
            arch=str(raw["arch"]),
            gpu_model=gpu.get("model"),
            gpu_count=int(gpu["count"]),
            gpu_memory_gib_each=_whole(gpu.get("memory_gib_each"), f"{name}.gpu.memory_gib_each"),
            vcpu=_fact(raw["vcpu"], sources, f"{name}.vcpu"),
            memory_gib=_fact(raw["memory_gib"], sources, f"{name}.memory_gib"),
            efa_interfaces=_fact(raw["efa_interfaces"], sources, f"{name}.efa_interfaces"),
            network_cards=_fact(raw["network_cards"], sources, f"{name}.network_cards"),
            nvme_disks=_whole(nvme.get("disks"), f"{name}.local_nvme.disks"),
            nvme_disk_gb=_whole(nvme.get("disk_gb"), f"{name}.local_nvme.disk_gb"),
            network_gbps=_fact(raw["network_gbps"], sources, f"{name}.network_gbps"),
            capacity_blocks=_fact(raw["capacity_blocks"], sources, f"{name}.capacity_blocks"),
            mig=_fact(raw["mig"], sources, f"{name}.mig"),
        )
        cards = facts.network_cards.value
        if cards is not None and facts.efa_count > cards:
            raise ValueError(
                f"{CATALOG_FILE.name}: {name}: efa_interfaces ({facts.efa_count}) exceeds network_cards "
                f"({cards}); each network card takes at most one EFA interface"
            )
        out[name] = facts
    return out


@lru_cache(maxsize=1)
def load_aws_catalog() -> dict[str, InstanceFacts]:
    """Load and check the AWS instance catalog (cached: the file is read once per process)."""
    return _parse(yaml_files.load_file(CATALOG_FILE))
