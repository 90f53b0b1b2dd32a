"""What each EKS node group of a graph provides (``node_group_figures``), read from its inputs and the instance
catalog: pure, in a module light enough for the readers of a saved graph (``blueprint report graph.json``), which load
neither the program nor the cloud SDK. The preview's summary (``components/aws/summary.py``) prints the same."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from components.catalog import load_aws_catalog

if TYPE_CHECKING:
    from components.planes import GraphView


@dataclass(frozen=True)
class NodeGroupFigures:
    """What a node group provides, read from its node group and launch template inputs."""

    name: str
    instance_type: str
    min_size: int
    desired_size: int
    max_size: int
    capacity_type: str
    gpus_per_node: int
    gpu_model: str | None
    efa_per_node: int
    efa_catalog: int
    placement_group: bool
    reservation_id: str | None
    raid0: bool
    existing_placement_group: str | None = None


def node_group_figures(graph: GraphView) -> list[NodeGroupFigures]:
    """Figures of every EKS node group in the graph."""
    catalog = load_aws_catalog()
    out = []
    for ng in sorted(graph.of_type("aws:eks/nodeGroup:NodeGroup"), key=lambda r: r.urn):
        inputs = ng.inputs
        siblings = graph.children(ng.parent) if ng.parent else []
        lt = next((s for s in siblings if s.type == "aws:ec2/launchTemplate:LaunchTemplate"), None)
        lt_in: dict[str, Any] = lt.inputs if lt else {}
        nis = lt_in.get("networkInterfaces") or []
        efa = sum(1 for ni in nis if isinstance(ni, dict) and ni.get("interfaceType") in ("efa", "efa-only"))
        itype = str((inputs.get("instanceTypes") or [lt_in.get("instanceType", "?")])[0])
        facts = catalog.get(itype)
        scaling = inputs.get("scalingConfig") or {}
        target = (lt_in.get("capacityReservationSpecification") or {}).get("capacityReservationTarget") or {}
        out.append(NodeGroupFigures(
            name=str(inputs.get("nodeGroupName", ng.name)),
            instance_type=itype,
            min_size=int(scaling.get("minSize", 0)),
            desired_size=int(scaling.get("desiredSize", 0)),
            max_size=int(scaling.get("maxSize", 0)),
            capacity_type=str(inputs.get("capacityType", "ON_DEMAND")),
            gpus_per_node=facts.gpu_count if facts else 0,
            gpu_model=facts.gpu_model if facts else None,
            efa_per_node=efa,
            efa_catalog=facts.efa_count if facts else 0,
            placement_group=bool((lt_in.get("placement") or {}).get("groupName")),
            reservation_id=target.get("capacityReservationId") or target.get("capacityReservationResourceGroupArn"),
            existing_placement_group=(lt_in.get("placement") or {}).get("groupName")
            if not any(s.type == "aws:ec2/placementGroup:PlacementGroup" for s in siblings) else None,
            raid0="strategy: RAID0" in _decoded(lt_in.get("userData")),
        ))
    return out


def _decoded(user_data: Any) -> str:
    """A launch template's base64 user data as text ('' when absent or not decodable)."""
    try:
        return base64.b64decode(str(user_data or "")).decode()
    except (ValueError, UnicodeDecodeError):
        return ""
