"""What each GKE node pool of a graph provides (``pool_figures``), read from its inputs and the machine catalog:
pure, in a module light enough for the readers of a saved graph (``blueprint report graph.json``), which load neither
the program nor the cloud SDK. The preview's summary (``components/gcp/summary.py``) prints the same."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from components.catalog.gcp_machines import load_gcp_catalog

if TYPE_CHECKING:
    from components.planes import GraphView

NODE_POOL = "gcp:container/nodePool:NodePool"


@dataclass(frozen=True)
class PoolFigures:
    """What a GKE node pool provides, read from its inputs, with the machine catalog's GPU facts."""

    name: str
    machine_type: str
    min_size: int
    initial_size: int
    max_size: int
    zones: tuple[str, ...]
    gpus_per_node: int
    gpu_model: str | None
    accelerator: str | None  # the accelerator type, when the pool has GPUs
    driver: str
    capacity: str  # "reservation <names>", flex-start, Spot or on-demand
    reservations: tuple[str, ...]  # the specific reservations it consumes
    gpu_networks: int
    gpudirect: str | None
    placement: str | None
    local_ssds: int


def pool_figures(graph: GraphView) -> list[PoolFigures]:
    """Figures of every GKE node pool in the graph, by name."""
    catalog = load_gcp_catalog()
    out = []
    for pool in sorted(graph.of_type(NODE_POOL), key=lambda r: r.name):
        cfg = pool.inputs.get("nodeConfig", {})
        machine = str(cfg.get("machineType", "?"))
        facts = catalog.get(machine)
        scaling = pool.inputs.get("autoscaling") or {}
        if scaling:
            lo, hi = int(scaling.get("totalMinNodeCount", 0)), int(scaling.get("totalMaxNodeCount", 0))
            start = int(pool.inputs.get("initialNodeCount", lo))
        else:
            lo = hi = start = int(pool.inputs.get("nodeCount", 0))
        accel = cfg.get("guestAccelerators") or []
        affinity = cfg.get("reservationAffinity") or {}
        reservations: tuple[str, ...] = ()
        if affinity.get("consumeReservationType") == "SPECIFIC_RESERVATION":
            reservations = tuple(str(v) for v in affinity.get("values", []))
            model = f"reservation {', '.join(reservations)}"
        elif cfg.get("flexStart"):
            model = "flex-start (queued provisioning through Kueue's ProvisioningRequest check)"
        elif cfg.get("spot"):
            model = "Spot"
        else:
            model = "on-demand"
        nets = (pool.inputs.get("networkConfig") or {}).get("additionalNodeNetworkConfigs") or []
        out.append(PoolFigures(
            name=str(pool.inputs.get("name")), machine_type=machine, min_size=lo, initial_size=start, max_size=hi,
            zones=tuple(str(z) for z in pool.inputs.get("nodeLocations", [])),
            gpus_per_node=facts.gpu_count if facts else 0, gpu_model=facts.gpu_model if facts else None,
            accelerator=str(accel[0].get("type")) if accel else None,
            driver=str(accel[0].get("gpuDriverInstallationConfig", {}).get("gpuDriverVersion", "?")) if accel else "",
            capacity=model, reservations=reservations, gpu_networks=len(nets),
            gpudirect=facts.gpudirect if facts else None,
            placement=(pool.inputs.get("placementPolicy") or {}).get("type"),
            local_ssds=int((cfg.get("ephemeralStorageLocalSsdConfig") or {}).get("localSsdCount") or 0)))
    return out
