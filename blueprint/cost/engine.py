"""Price a ResourceGraph: every cost line is exactly quantity x unit price, from the cloud's price catalog.

The engine reads only the graph (offline, ``pulumi preview --json`` or ``pulumi stack export``), so users of the real
CLI get the same figures. The graph's cloud prices its resources (:class:`blueprint.cost.cloud.CloudPricing`): what the
graph fixes (node hours at desired and at max size, volumes, filesystem capacity, the control plane, NAT, keys,
budgets); what depends on usage (bucket GB, requests, NAT GB, log volume) from the usage file, or listed as not priced
rather than guessed. Here: each team's share of the GPU node groups (from the Kueue objects), the stack's region and
the notes on prices read for another region.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from blueprint import clouds
from blueprint.cost.cloud import cloud_pricing
from blueprint.cost.lines import CostReport, Usage, dict_input
from blueprint.cost.prices import Price, prices_for
from blueprint.graph.model import ResourceGraph

GPU_RESOURCE = "nvidia.com/gpu"


def _quantity(value: Any) -> float:
    try:
        return float(str(value))
    except ValueError:
        return 0.0


def quota_shares(graph: ResourceGraph) -> dict[str, tuple[tuple[str, float], ...]]:
    """Per node group (its ``gpu-cluster/node-group`` label), each ClusterQueue's share of the nominal GPU quota
    on the flavor that selects it. Nominal, not measured use: a team that borrows pays nothing here."""
    flavor_group: dict[str, str] = {}
    for res in graph.resources:
        if res.type.startswith("kubernetes:kueue.x-k8s.io/") and res.type.endswith(":ResourceFlavor"):
            labels = dict_input(dict_input(res.inputs.get("spec")).get("nodeLabels"))
            name = dict_input(res.inputs.get("metadata")).get("name")
            if isinstance(labels, dict) and labels.get("gpu-cluster/node-group") and name:
                flavor_group[str(name)] = str(labels["gpu-cluster/node-group"])
    quota: dict[str, dict[str, float]] = {}
    for res in graph.resources:
        if not (res.type.startswith("kubernetes:kueue.x-k8s.io/") and res.type.endswith(":ClusterQueue")):
            continue
        meta = dict_input(res.inputs.get("metadata"))
        if dict_input(meta.get("labels")).get("gpu-cluster/acceptance") == "true":
            continue  # the acceptance gate's queue runs on purpose, on idle capacity: no team pays through it
        team = str(meta.get("name") or res.name)
        groups = dict_input(res.inputs.get("spec")).get("resourceGroups")
        for group in groups if isinstance(groups, list) else []:
            flavors = dict_input(group).get("flavors")
            for flavor in map(dict_input, flavors if isinstance(flavors, list) else []):
                node_group = flavor_group.get(str(flavor.get("name")))
                items = flavor.get("resources")
                for item in map(dict_input, items if isinstance(items, list) else []):
                    if node_group and item.get("name") == GPU_RESOURCE:
                        by_team = quota.setdefault(node_group, {})
                        by_team[team] = by_team.get(team, 0.0) + _quantity(item.get("nominalQuota"))
    shares: dict[str, tuple[tuple[str, float], ...]] = {}
    for node_group, by_team in quota.items():
        total = sum(by_team.values())
        if total > 0:
            shares[node_group] = tuple((team, q / total) for team, q in sorted(by_team.items()) if q > 0)
    return shares


def _region(graph: ResourceGraph) -> str:
    """The stack's region: that of the cloud provider most resources use (a second provider, such as the billing
    one in us-east-1, serves a few), ties broken by URN; registration order changes from run to run."""
    providers = [r for r in graph.resources if r.is_provider and clouds.of_type(r.type) is not None
                 and isinstance(r.inputs.get("region"), str)]
    if not providers:
        return ""
    users = Counter(r.provider_urn for r in graph.resources if r.provider_urn)
    return str(min(providers, key=lambda p: (-users[p.urn], p.urn)).inputs["region"])


def price_graph(graph: ResourceGraph, prices: Mapping[str, Price] | None = None, usage: Usage | None = None,
                usage_notes: tuple[str, ...] = ()) -> CostReport:
    """The monthly cost of every priced resource of ``graph``, sorted by URN; usage-priced resources are priced
    from ``usage`` (a usage file: logical name -> quantities) when it has them. A graph that names no cloud (only
    Kubernetes objects) prices nothing."""
    cloud = clouds.of_types(r.type for r in graph.resources)
    if cloud is None:
        return CostReport(stack=graph.stack, region=_region(graph), resources=(), usage_not_priced=(),
                          notes=tuple(usage_notes))
    if prices is None:
        prices = prices_for(cloud)
    costs, not_estimated = cloud_pricing(cloud).price(graph, prices, usage or {}, quota_shares(graph))
    region = _region(graph)
    notes = []
    off_region = sorted({p.region for c in costs for line in c.components
                         if (p := prices.get(line.price_key)) is not None and p.region not in ("all", region)})
    if off_region:
        notes.append(f"some prices are list prices of {', '.join(off_region)}; this stack is in {region or '?'}")
    notes.extend(usage_notes)
    return CostReport(stack=graph.stack, region=region, resources=tuple(costs),
                      usage_not_priced=tuple(not_estimated), notes=tuple(notes))
