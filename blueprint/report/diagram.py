"""The report's cluster diagram: the four planes (network, compute, storage, control plane), the teams with their
queues, quotas and Slurm partitions, and the platform's operations, drawn from the graph (what the program would
create) and laid out by Graphviz's ``dot`` as SVG.

The model (:class:`Diagram`) is built first and is plain data, so tests read it without Graphviz; every resource of
the graph has an anchor in it (:meth:`Diagram.anchor_of`): the node that stands for it, else its plane's box, so a
policy finding links to its place in the picture.
"""

from __future__ import annotations

import html
import shutil
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from blueprint import clouds
from blueprint.graph.model import ResourceGraph
from blueprint.preview.platform import (
    flavor_node_groups,
    slurm_accounts,
    slurm_nodeset_groups,
    slurm_partitions,
    team_queues,
)
from blueprint.report.cloud import cloud_report
from blueprint.report.model import BOXES, PLATFORM_COMPONENTS, Diagram, Edge, Node, box_id, slug

if TYPE_CHECKING:  # the spec's models load with a stack, not for a saved graph
    from components.spec import ClusterSpec

PROMETHEUS_RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"


class GraphvizMissingError(RuntimeError):
    """Graphviz's ``dot`` is not installed: the diagram cannot be laid out."""


DOT_MISSING = ("blueprint report lays out its diagram with Graphviz, and its `dot` program is not installed: install "
               "the system package (Debian/Ubuntu: sudo apt-get install --no-install-recommends graphviz; Fedora: "
               "sudo dnf install graphviz; macOS: brew install graphviz) and run again")


def _teams(graph: ResourceGraph) -> tuple[list[Node], list[Edge]]:
    nodes: list[Node] = []
    edges: list[Edge] = []
    accounts = {a.name: a for a in slurm_accounts(graph)}
    groups = flavor_node_groups(graph)
    namespaced: dict[str, set[str]] = {}
    for res in graph.resources:
        meta = res.inputs.get("metadata") if res.type.startswith("kubernetes:") else None
        if isinstance(meta, dict):
            for key in (str(meta.get("namespace") or ""), str(meta.get("name") or "")
                        if res.type == "kubernetes:core/v1:Namespace" else ""):
                if key:
                    namespaced.setdefault(key, set()).add(res.urn)
    for queue in team_queues(graph):
        lines = []
        for f in queue.flavors:
            lines.append(f"Kueue {f.flavor}: {f.describe(lends='lends <=')}")
            if f.flavor in groups:
                edges.append(Edge(f"n-team-{slug(queue.team)}", f"n-ng:{groups[f.flavor]}",
                                   "CPU-only work" if f.cpu_only is not None else f"{f.gpus} GPUs"))
        if queue.acceptance:
            lines.append("held (stopPolicy Hold)" if queue.held else "admitting")
            nodes.append(Node(f"n-team-{slug(queue.team)}", "teams", f"acceptance queue {queue.team}", lines,
                              "acceptance", {queue.urn}, {queue.urn} | namespaced.get(queue.team, set())))
            continue
        if not queue.flavors:
            lines.append("no Kueue GPU quota")
        lines.append(f"namespace GPU ceiling {queue.gpu_ceiling}")
        account = accounts.get(queue.team)
        if account is not None:
            budget = f", {int(account.budget_gpu_minutes):,} GPU-min/month" if account.budget_gpu_minutes else ""
            lines.append(f"Slurm account: GPU limit {account.gpu_limit}{budget}")
        nodes.append(Node(f"n-team-{slug(queue.team)}", "teams", f"team {queue.team}", lines, "team", {queue.urn},
                          {queue.urn} | namespaced.get(queue.team, set())))
    nodesets = slurm_nodeset_groups(graph)
    controllers = graph.of_type("kubernetes:slinky.slurm.net/v1beta1:Controller")
    cluster = str(controllers[0].inputs["spec"].get("clusterName")) if controllers else ""
    for part in slurm_partitions(graph):
        fields = part.fields
        lines = [f"nodes {fields.get('Nodes', '?')}", f"max time {fields.get('MaxTime', '?')}"]
        if "MaxNodes" in fields:
            lines.append(f"max {fields['MaxNodes']} nodes per job")
        if fields.get("Default") == "YES":
            lines.append("default partition")
        node_id = f"n-partition-{slug(part.name)}"
        nodes.append(Node(node_id, "teams", f"partition {part.name}", lines, "slurm", set(),
                          group=f"Slurm {cluster}"))
        for nodeset in fields.get("Nodes", "").split(","):
            if nodeset in nodesets:
                edges.append(Edge(node_id, f"n-ng:{nodesets[nodeset]}", "slurmd"))
        for allowed in part.accounts:
            if f"n-team-{slug(allowed)}" in {n.id for n in nodes}:
                edges.append(Edge(f"n-team-{slug(allowed)}", node_id, "", "dashed"))
    return nodes, edges


def _operations(graph: ResourceGraph) -> list[Node]:
    """The platform's GPU stack and job controllers, telemetry and the cost plane, compactly."""
    rules = graph.of_type(PROMETHEUS_RULE)
    alerts = sum(1 for r in rules for g in r.inputs.get("spec", {}).get("groups", []) for rule in g.get("rules", [])
                 if "alert" in rule)
    releases = sorted(str(r.inputs.get("name")) for r in graph.of_type("kubernetes:helm.sh/v3:Release"))
    cloud = clouds.of_types(r.type for r in graph.resources)
    cost_plane = cloud_report(cloud).cost_plane(graph) if cloud is not None else ["0 budget(s)"]
    nodes = [
        Node("n-platform", "operations", "GPU stack and job controllers",
             [", ".join(releases[i:i + 3]) for i in range(0, len(releases), 3)] or ["no Helm release"], "ops", set()),
        Node("n-telemetry", "operations", "telemetry",
             [f"{alerts} alerts, {len(rules)} rule groups", "runbooks: docs/runbooks.md"], "ops", set()),
        Node("n-cost-plane", "operations", "cost plane",
             cost_plane, "ops", set()),
    ]
    return nodes


def build_diagram(graph: ResourceGraph, spec: ClusterSpec | None = None) -> Diagram:
    """The picture's model, read from the graph (the spec adds what an existing network, filesystem or bucket is,
    which the graph cannot carry)."""
    cloud = clouds.of_types(r.type for r in graph.resources)
    part = cloud_report(cloud) if cloud is not None else None
    nodes = part.planes(graph, spec) + part.databases(graph) if part is not None else []
    team_nodes, edges = _teams(graph)
    nodes += team_nodes + _operations(graph)
    # Node groups by their gpu-cluster/node-group label, for the teams' and partitions' edges.
    by_label: dict[str, str] = {}
    for n in nodes:
        for urn in sorted(n.keys):
            res = graph.get(urn)
            label = part.node_group_label(res) if res is not None and part is not None else None
            if label is not None:
                by_label[label] = n.id
    edges = [Edge(e.tail, by_label[e.head.removeprefix("n-ng:")], e.label, e.style) if e.head.startswith("n-ng:")
             else e for e in edges if not e.head.startswith("n-ng:") or e.head.removeprefix("n-ng:") in by_label]
    for n in nodes:
        n.urns |= n.keys
    edges += _dependency_edges(graph, nodes) + _existing_edges(graph, nodes)
    _claim_the_rest(graph, nodes)
    return Diagram(nodes, _unique(edges), graph)


def _dependency_edges(graph: ResourceGraph, nodes: list[Node]) -> list[Edge]:
    """A line from a node to each node whose drawn resource one of its own depends on."""
    key_owner = {urn: n.id for n in nodes for urn in n.keys}
    out = []
    for n in nodes:
        if n.box in ("teams", "operations"):
            continue
        for urn in sorted(n.keys):  # sets iterate in a per-process order: edges are numbered in this order
            res = graph.get(urn)
            for dep in sorted(res.dependencies) if res is not None else []:
                other = key_owner.get(dep)
                if other is not None and other != n.id:
                    out.append(Edge(n.id, other))
    return out


def _existing_edges(graph: ResourceGraph, nodes: list[Node]) -> list[Edge]:
    """Lines to existing subnets (not in the graph, so no dependency names them), from the resources that list
    their ids in ``subnetIds``."""
    by_cloud_id = {cid: n.id for n in nodes for cid in n.cloud_ids}
    if not by_cloud_id:
        return []
    out = []
    for n in nodes:
        for urn in sorted(n.keys):
            res = graph.get(urn)
            listed = res.inputs.get("subnetIds") if res is not None else None
            for sid in listed if isinstance(listed, list) else [listed] if isinstance(listed, str) else []:
                if str(sid) in by_cloud_id:
                    out.append(Edge(n.id, by_cloud_id[str(sid)]))
    return out


def _claim_the_rest(graph: ResourceGraph, nodes: list[Node]) -> None:
    """Anchor the resources no node stands for: a drawn resource's own configuration (``<name>-versioning`` beside
    a bucket, ``<name>-sg`` beside a filesystem) to it, network resources to the VPC, the control plane's to the
    cluster, telemetry and cost to their nodes, the platform's GPU stack and controllers to theirs (the rest anchor
    to their plane's box)."""
    claimed = {urn for n in nodes for urn in n.urns}
    by_id = {n.id: n for n in nodes}
    vpc = next((n for n in nodes if n.kind == "vpc"), None)
    cluster = next((n for n in nodes if n.kind == "control-plane"), None)
    prefixes: list[tuple[str, str, Node]] = []
    for n in nodes:
        for urn in sorted(n.keys):
            res = graph.get(urn)
            if res is not None and res.parent:
                prefixes.append((res.parent, f"{res.name}-", n))
    for res in sorted(graph.resources, key=lambda r: r.urn):
        if res.urn in claimed or res.is_provider or res.type == "pulumi:pulumi:Stack":
            continue
        plane = graph.plane_of(res)
        comp = res if res.is_component else graph.component_of(res)
        token = comp.type.rsplit(":", 1)[-1] if comp is not None else ""
        target = next((n for parent, prefix, n in prefixes if res.parent == parent and res.name.startswith(prefix)),
                      None)
        if target is not None:
            pass
        elif plane == "network" and vpc is not None:
            target = vpc
        elif plane == "control-plane" and token not in (*PLATFORM_COMPONENTS, "GpuStack") and cluster is not None:
            target = cluster
        elif plane == "telemetry":
            target = by_id.get("n-telemetry")
        elif plane == "cost":
            target = by_id.get("n-cost-plane")
        elif plane == "platform" or token == "GpuStack":
            target = by_id.get("n-platform")
        if target is not None:
            target.urns.add(res.urn)


def _unique(edges: Iterable[Edge]) -> list[Edge]:
    seen: dict[tuple[str, str], Edge] = {}
    for e in edges:
        if (e.tail, e.head) not in seen and (e.head, e.tail) not in seen:
            seen[(e.tail, e.head)] = e
    return list(seen.values())


# --- layout and SVG -------------------------------------------------------------------------------------------------

FILL = {"gpu": "#e3f0fb", "cpu": "#f2f2f2", "reserved": "#fff1c7", "vpc": "#eaf6ea", "subnet": "#f5fbf5",
        "fabric": "#dff3f1", "filesystem": "#f3e8fb", "bucket": "#f8eefb", "database": "#f8eefb",
        "control-plane": "#fde9e1", "team": "#eef0ff", "acceptance": "#f4f4f4", "slurm": "#e9f4ff", "ops": "#f7f7f7"}
BOX_FILL = {"network": "#fbfefb", "compute": "#fafcff", "storage": "#fdfaff", "control-plane": "#fffaf8",
            "teams": "#fbfbff", "operations": "#fcfcfc"}
FONT = "Helvetica,Arial,sans-serif"


def _label(node: Node) -> str:
    """An HTML-like Graphviz label: the title in bold, then one line per figure; findings in red."""
    rows = [f'<TR><TD ALIGN="LEFT"><B>{html.escape(node.title)}</B></TD></TR>']
    rows += [f'<TR><TD ALIGN="LEFT"><FONT POINT-SIZE="10">{html.escape(line)}</FONT></TD></TR>' for line in node.lines]
    if node.findings:
        text = f"policy: {len(node.findings)} finding(s): {', '.join(sorted(set(node.findings)))}"
        rows.append(f'<TR><TD ALIGN="LEFT"><FONT POINT-SIZE="10" COLOR="#b00020">{html.escape(text)}</FONT></TD></TR>')
    return f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="1">{"".join(rows)}</TABLE>>'


def dot_source(diagram: Diagram, title: str) -> Any:
    """The Graphviz graph (``graphviz.Digraph``) of the diagram: one cluster per box, sub-clusters per zone or Slurm
    cluster; every node and box carries its id, so the SVG keeps it."""
    import graphviz

    dot = graphviz.Digraph("cluster", graph_attr={
        "rankdir": "LR", "fontname": FONT, "fontsize": "12", "labelloc": "t", "label": title, "nodesep": "0.25",
        "ranksep": "0.6", "compound": "true", "newrank": "true", "id": "diagram-root", "bgcolor": "white"},
        node_attr={"shape": "box", "style": "rounded,filled", "fontname": FONT, "fontsize": "11",
                   "color": "#7a869a", "margin": "0.12,0.06"},
        edge_attr={"color": "#8895a7", "fontname": FONT, "fontsize": "9", "arrowsize": "0.6"})
    for box, box_title in BOXES.items():
        members = [n for n in diagram.nodes if n.box == box]
        if not members:
            continue
        with dot.subgraph(name=f"cluster_{slug(box)}") as sub:
            sub.attr(label=box_title, id=box_id(box), style="rounded,filled", fillcolor=BOX_FILL[box],
                     color="#c3cad5", fontsize="13", fontname=FONT, margin="12")
            groups = sorted({n.group for n in members if n.group})
            for group in groups:
                with sub.subgraph(name=f"cluster_{slug(box)}_{slug(group)}") as inner:
                    inner.attr(label=group, id=f"{box_id(box)}-{slug(group)}", style="rounded,dashed",
                               color="#a9b3c1", fillcolor="none", fontsize="10")
                    for n in members:
                        if n.group == group:
                            _add_node(inner, n)
            for n in members:
                if not n.group:
                    _add_node(sub, n)
    for e in diagram.edges:
        dot.edge(e.tail, e.head, label=e.label, style=e.style)
    return dot


def _add_node(graph: Any, node: Node) -> None:
    attrs = {"id": node.id, "class": f"kind-{node.kind}" + (" has-finding" if node.findings else ""),
             "fillcolor": FILL.get(node.kind, "#ffffff")}
    if node.kind == "reserved":
        attrs.update(peripheries="2", color="#b7791f", penwidth="1.4")
    if node.findings:
        attrs.update(color="#b00020", penwidth="2.2")
    graph.node(node.id, label=_label(node), **attrs)


def dot_available() -> bool:
    """Whether Graphviz's ``dot`` is on the PATH."""
    return shutil.which("dot") is not None


def render_svg(diagram: Diagram, title: str) -> str:
    """The diagram as an SVG element (no XML declaration or doctype), laid out by ``dot``;
    :class:`GraphvizMissingError` when ``dot`` is not installed."""
    if not dot_available():
        raise GraphvizMissingError(DOT_MISSING)
    import graphviz

    try:
        svg = dot_source(diagram, title).pipe(format="svg", encoding="utf-8")
    except graphviz.ExecutableNotFound:
        raise GraphvizMissingError(DOT_MISSING) from None
    # dot writes every hyphen as the character reference &#45;: the same character, kept plain so the page's text
    # and ids read as they are.
    return str(svg[svg.index("<svg"):]).replace("&#45;", "-")
