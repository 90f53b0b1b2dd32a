"""Text rendering of a ResourceGraph for people: the resource tree grouped by plane, with the figures
that matter. The cloud's planes (GPUs, fabric interfaces per node, placement, filesystem throughput,
checkpoint write time) are summarised by the stack's cloud module; the platform and telemetry here.

Figures are read from the graph (what the program would create), not from the spec, so the preview
shows the infrastructure itself; the catalog adds hardware facts the graph cannot carry.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from blueprint.graph import GraphResource, ResourceGraph
from components.clock import utcnow
from components.kubernetes.objects import ACCEPTANCE_QUEUE
from components.spec import ClusterSpec

PLANE_ORDER = ("network", "compute", "storage", "control-plane", "platform", "telemetry", "cost")
# The Kubernetes platform's components keep their control-plane type tokens (a new token would change every
# URN under them); the preview shows them under their own heading.
PLATFORM_COMPONENTS = ("GpuStack", "Tenancy", "Queues")
PLANE_TITLES = {
    "network": "network & fabric",
    "compute": "compute",
    "storage": "storage",
    "control-plane": "control plane",
    "platform": "Kubernetes platform",
    "telemetry": "telemetry & cost",
    "cost": "cost plane (budgets, allocation tags, usage export)",
}
RELEASE = "kubernetes:helm.sh/v3:Release"
MPIJOB = "kubernetes:kubeflow.org/v2beta1:MPIJob"
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"


def _short_type(token: str) -> str:
    if token.startswith("gpu-cluster:"):
        return token.split(":")[2]
    pkg, _, rest = token.partition(":")
    module = rest.split("/")[0]
    return f"{pkg}.{module}.{rest.rsplit(':', 1)[-1]}"


def _release(graph: ResourceGraph, name: str) -> GraphResource | None:
    return next((r for r in graph.of_type(RELEASE) if r.inputs.get("name") == name), None)


def _chart(rel: GraphResource | None) -> str:
    return f"{rel.inputs.get('name')} {rel.inputs.get('version')}" if rel else "not installed"


def _platform_lines(graph: ResourceGraph) -> list[str]:
    lines = []
    gpu_op = _release(graph, "gpu-operator")
    if gpu_op:
        values = gpu_op.inputs.get("values", {})
        driver = "driver and toolkit from the node image" if not values.get("driver", {}).get("enabled", True) \
            else "operator-managed driver"
        if values.get("hostPaths", {}).get("driverInstallDir"):
            driver = "GKE-managed driver, toolkit by the operator (CDI)"
        sharing = "time-slicing" if values.get("devicePlugin", {}).get("config") else \
            ("MIG" if values.get("migManager", {}).get("enabled") else "whole GPUs")
        gke_nets = graph.of_type("kubernetes:networking.gke.io/v1:Network")
        if any(r.type.startswith("gcp:") for r in graph.resources):
            fabric = f"GPU networks for pods: {len(gke_nets)} (GKE multi-networking)"
        else:
            fabric = f"EFA device plugin: {_chart(_release(graph, 'aws-efa-k8s-device-plugin'))}"
        lines.append(f"GPU stack: {_chart(gpu_op)} ({driver}, {sharing}); {fabric}")
    elif graph.of_type("kubernetes:monitoring.coreos.com/v1:PodMonitor"):
        pools = [r for r in graph.of_type("gcp:container/nodePool:NodePool")
                 if (r.inputs.get("nodeConfig") or {}).get("guestAccelerators")]
        accelerators = [a for r in pools for a in (r.inputs.get("nodeConfig") or {}).get("guestAccelerators") or []]
        drivers = sorted({str((a.get("gpuDriverInstallationConfig") or {}).get("gpuDriverVersion", "?"))
                          for a in accelerators})
        shared = sorted({int((a.get("gpuSharingConfig") or {}).get("maxSharedClientsPerGpu") or 0)
                         for a in accelerators} - {0})
        sharing = f"time-sharing x{', x'.join(map(str, shared))} (GKE)" if shared else "whole GPUs"
        nets = len(graph.of_type("kubernetes:networking.gke.io/v1:Network"))
        lines.append(f"GPU stack: GKE's own (driver {', '.join(drivers) or '?'}, GKE's device plugin and DCGM "
                     f"exporter, no GPU Operator; PodMonitor cloud-dcgm-exporter feeds the GPU alerts), {sharing}; "
                     f"GPU networks for pods: {nets} (GKE multi-networking)")
    kueue = _release(graph, "kueue")
    if kueue:
        cohorts = [c.inputs["metadata"]["name"] for c in graph.of_type(KUEUE + "Cohort")]
        lines.append(f"queues: {_chart(kueue)}; cohort {', '.join(cohorts) or 'none'}; "
                     f"{len(graph.of_type(KUEUE + 'ResourceFlavor'))} flavor(s), "
                     f"{len(graph.of_type(KUEUE + 'WorkloadPriorityClass'))} priority classes")
    local = {r.inputs["spec"]["clusterQueue"] for r in graph.of_type(KUEUE + "LocalQueue")}
    quotas = {r.inputs["metadata"]["namespace"]: r.inputs["spec"]["hard"]
              for r in graph.of_type("kubernetes:core/v1:ResourceQuota")}
    for cq in graph.of_type(KUEUE + "ClusterQueue"):
        team = cq.inputs["metadata"]["name"]
        parts = []
        for group in cq.inputs["spec"].get("resourceGroups", []):
            for flavor in group.get("flavors", []):
                gpu: dict[str, Any] = next((r for r in flavor["resources"] if r["name"] == "nvidia.com/gpu"), {})
                text = f"{flavor['name']} {gpu.get('nominalQuota', '?')} GPUs"
                if "borrowingLimit" in gpu:
                    text += f" (+{gpu['borrowingLimit']} borrowable)"
                if "lendingLimit" in gpu:
                    text += f" (lends at most {gpu['lendingLimit']})"
                parts.append(text)
        hard = quotas.get(team, {}).get("requests.nvidia.com/gpu", "none")
        if team == ACCEPTANCE_QUEUE:
            jobs = sorted(str(j.inputs["metadata"]["name"]) for j in graph.of_type(MPIJOB))
            suspended = all(j.inputs["spec"]["runPolicy"].get("suspend") for j in graph.of_type(MPIJOB))
            held = cq.inputs["spec"].get("stopPolicy") == "Hold"
            state = ("suspended; the queue is held (stopPolicy Hold): release it for a run, README 'Before you "
                     "commit capacity'" if held and suspended else "ADMITTED AS SOON AS CAPACITY ALLOWS")
            lines.append(f"acceptance queue {team}: {', '.join(parts)}, outside the teams' cohort; MPIJobs "
                         f"{', '.join(jobs)} ({state})")
            continue
        lines.append(f"team {team}: {', '.join(parts)}; LocalQueue {'yes' if team in local else 'MISSING'}; "
                     f"namespace GPU ceiling {hard}")
    return lines


def _telemetry_lines(graph: ResourceGraph) -> list[str]:
    prom = _release(graph, "kube-prometheus-stack")
    gpu_op = _release(graph, "gpu-operator")
    kueue = _release(graph, "kueue")
    dcgm = bool(gpu_op and gpu_op.inputs.get("values", {}).get("dcgmExporter", {}).get("enabled"))
    kueue_metrics = bool(kueue and kueue.inputs.get("values", {}).get("enablePrometheus"))
    rules = graph.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")
    counts = Counter("alert" if "alert" in rule else "record"
                     for r in rules for g in r.inputs.get("spec", {}).get("groups", []) for rule in g.get("rules", []))
    return [
        f"Prometheus: {_chart(prom)}; DCGM exporter {'on' if dcgm else 'OFF'}; Kueue metrics "
        f"{'on' if kueue_metrics else 'OFF'}; {counts['record']} recording rules, {counts['alert']} alerts",
        *_alert_lines(graph, rules),
        f"cost attribution: {_chart(_release(graph, 'opencost'))} (aggregate by label:team, label:cost-center)",
    ]


_CREDENTIALS = {"slackConfigs": "apiURL", "pagerdutyConfigs": "routingKey", "emailConfigs": "authPassword",
                "webhookConfigs": "urlSecret"}


def _alert_lines(graph: ResourceGraph, rules: list[GraphResource]) -> list[str]:
    """Where alerts go, the Secrets the receivers read (to create before alerts flow), and the runbook."""
    configs = graph.of_type("kubernetes:monitoring.coreos.com/v1alpha1:AlertmanagerConfig")
    runbooks = {str(rule.get("annotations", {}).get("runbook_url", "")).partition("#")[0]
                for r in rules for g in r.inputs.get("spec", {}).get("groups", []) for rule in g.get("rules", [])
                if "alert" in rule}
    lines = []
    for config in configs:
        spec = config.inputs.get("spec", {})
        receivers = [r for r in spec.get("receivers", []) if any(k in r for k in _CREDENTIALS)]
        secrets = sorted({f"{c[field]['name']} (key {c[field]['key']})" for r in receivers
                          for kind, field in _CREDENTIALS.items() for c in r.get(kind, []) if field in c})
        routed = spec.get("route", {})
        if not receivers:
            lines.append("alert routing: NO RECEIVER: alerts fire in Prometheus and reach no one "
                         "(platform.monitoring.alerts)")
            continue
        lines.append(f"alert routing: {len(receivers)} receiver(s) ({', '.join(r['name'] for r in receivers)}), "
                     f"{len(routed.get('routes', []))} route(s), default {routed.get('receiver')}; create these "
                     "Secrets "
                     f"in {config.inputs['metadata']['namespace']} before alerts flow: {', '.join(secrets)}")
    if runbooks:
        lines.append(f"runbooks: {', '.join(sorted(runbooks))} (one section per alert)")
    return lines


def _tree(graph: ResourceGraph, root: GraphResource, depth: int, out: list[str]) -> None:
    for child in sorted(graph.children(root.urn), key=lambda r: (r.name, r.type)):
        marker = " [protected]" if child.protect else ""
        out.append(f"{'  ' * depth}- {_short_type(child.type)}  {child.name}{marker}")
        _tree(graph, child, depth + 1, out)


def render_preview(graph: ResourceGraph, spec: ClusterSpec, stack_file: str,
                   outputs: Mapping[str, Any] | None = None, now: datetime | None = None) -> str:
    """The human preview: header, then per plane its figures and its resource tree, then totals.

    The cloud's planes are summarised by the stack's cloud module (``components/<cloud>/summary.py``);
    the Kubernetes platform and telemetry here. ``outputs`` are the program's stack outputs; ``now`` is
    the moment Capacity Block windows and support dates are compared with (default: the program's clock).
    """
    outputs = outputs or {}
    now = now or utcnow()
    cloud = importlib.import_module(f"components.{spec.cloud}.summary").summarize(graph, spec, outputs, now)
    custom = [r for r in graph.resources
              if not r.is_component and not r.is_provider and r.type != "pulumi:pulumi:Stack"]
    wl = spec.workload
    out = [
        f"stack {graph.stack} ({stack_file}): cluster {spec.name}, {spec.environment}, {cloud.location}",
        f"workload: {wl.kind}, {wl.model_parameters_billions:g}B parameters, {wl.target_work_per_month:g} "
        f"{wl.work_unit}/month, peak {wl.peak_gpus} GPUs; accepted when: {wl.acceptance_metric}",
        f"billing labels: {', '.join(f'{k}={v}' for k, v in sorted(spec.billing_labels.items()))}",
    ]
    if spec.teams:
        out.append("teams: " + ", ".join(f"{t.name} ({t.cost_center}, {t.gpu_quota} GPUs)" for t in spec.teams))
    summaries = {**cloud.planes, "platform": _platform_lines(graph), "telemetry": _telemetry_lines(graph)}
    stack_root = next((r for r in graph.resources if r.type == "pulumi:pulumi:Stack"), None)
    # Registration order depends on when the engine answers each request; the preview is sorted so that
    # the same stack always prints the same text.
    ordered = sorted(graph.resources, key=lambda r: (r.name, r.urn))

    def heading(res: GraphResource) -> str:
        comp = res if res.is_component else graph.component_of(res)
        if comp is not None and comp.type.rsplit(":", 1)[-1] in PLATFORM_COMPONENTS:
            return "platform"
        return graph.plane_of(res)

    for plane in PLANE_ORDER:
        members = [r for r in custom if heading(r) == plane]
        out.append("")
        out.append(f"== {PLANE_TITLES[plane]} ({len(members)} resources)")
        out.extend(f"   {line}" for line in summaries.get(plane, []))
        tree: list[str] = []
        for comp in ordered:
            if comp.is_component and heading(comp) == plane and (
                    stack_root is None or comp.parent == stack_root.urn):
                tree.append(f"- {_short_type(comp.type)}  {comp.name}")
                _tree(graph, comp, 1, tree)
        out.extend(f"   {line}" for line in tree)
    protected = sum(1 for r in custom if r.protect)
    out += [
        "",
        f"total: {len(custom)} cloud resources ({protected} protected), GPUs {cloud.gpus_desired} desired / "
        f"{cloud.gpus_max} at max size{cloud.gpus_note}",
        *cloud.notes,
    ]
    return "\n".join(out) + "\n"
