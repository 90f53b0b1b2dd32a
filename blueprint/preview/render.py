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

from blueprint.graph.model import GraphResource, ResourceGraph
from blueprint.preview.cloud import CloudPreview, cloud_preview
from blueprint.preview.platform import (
    KUEUE,
    PLANE_ORDER,
    PLANE_TITLES,
    PLATFORM_COMPONENTS,
    SLINKY,
    chart,
    release,
    slurm_accounts,
    slurm_partitions,
    team_queues,
)
from components.clock import utcnow
from components.kubernetes.objects.alerting import RECEIVES_ANNOTATION, SILENT_RECEIVER, secret_refs
from components.kubernetes.objects.jobs import PUSHGATEWAY_RELEASE
from components.spec import ClusterSpec

MPIJOB = "kubernetes:kubeflow.org/v2beta1:MPIJob"
JOB = "kubernetes:batch/v1:Job"


def _short_type(token: str) -> str:
    if token.startswith("gpu-cluster:"):
        return token.split(":")[2]
    pkg, _, rest = token.partition(":")
    module = rest.split("/")[0]
    return f"{pkg}.{module}.{rest.rsplit(':', 1)[-1]}"


def _platform_lines(graph: ResourceGraph, cloud: CloudPreview) -> list[str]:
    lines = []
    gpu_op = release(graph, "gpu-operator")
    if gpu_op:
        values = gpu_op.inputs.get("values", {})
        driver = "driver and toolkit from the node image" if not values.get("driver", {}).get("enabled", True) \
            else "operator-managed driver"
        if values.get("hostPaths", {}).get("driverInstallDir"):
            driver = "GKE-managed driver, toolkit by the operator (CDI)"
        sharing = "time-slicing" if values.get("devicePlugin", {}).get("config") else \
            ("MIG" if values.get("migManager", {}).get("enabled") else "whole GPUs")
        lines.append(f"GPU stack: {chart(gpu_op)} ({driver}, {sharing}); {cloud.gpu_fabric(graph)}")
    elif (own := cloud.gpu_stack_without_operator(graph)) is not None:
        lines.append(own)
    lines += _node_readiness_lines(graph, cloud)
    kueue = release(graph, "kueue")
    if kueue:
        cohorts = [c.inputs["metadata"]["name"] for c in graph.of_type(KUEUE + "Cohort")]
        lines.append(f"queues: {chart(kueue)}; cohort {', '.join(cohorts) or 'none'}; "
                     f"{len(graph.of_type(KUEUE + 'ResourceFlavor'))} flavor(s), "
                     f"{len(graph.of_type(KUEUE + 'WorkloadPriorityClass'))} priority classes")
    for queue in team_queues(graph):
        parts = [f"{f.flavor} {f.describe()}" for f in queue.flavors]
        if queue.acceptance:
            jobs = sorted(str(j.inputs["metadata"]["name"]) for j in graph.of_type(MPIJOB))
            per_node = [j.inputs for j in graph.of_type(JOB) if j.inputs["metadata"].get("namespace") == queue.team]
            suspended = all(j.inputs["spec"]["runPolicy"].get("suspend") for j in graph.of_type(MPIJOB)) and all(
                j["spec"].get("suspend") for j in per_node)
            state = ("suspended; the queue is held (stopPolicy Hold): release it for a run, docs/capacity.md 'Before "
                     "you commit capacity'" if queue.held and suspended else "ADMITTED AS SOON AS CAPACITY ALLOWS")
            lines.append(f"acceptance queue {queue.team}: {', '.join(parts)}, outside the teams' cohort; MPIJobs "
                         f"{', '.join(jobs) or 'none'}; per-node Jobs "
                         + (", ".join(f"{j['metadata']['name']} ({j['spec']['completions']} pods, one per node)"
                                      for j in per_node) or "none") + f" ({state})")
            if per_node:
                lines.append("  each per-node pod writes its record (nccl.log, node.json) to <bucket>/acceptance/"
                             "<group>/<run>/<node>/ as gpu-acceptance/nccl-recorder (write only, that prefix only); "
                             "`blueprint nccl nodes <run dir>` judges them, `blueprint nccl compare` names what "
                             "changed")
            continue
        lines.append(f"team {queue.team}: {', '.join(parts)}; LocalQueue {'yes' if queue.local_queue else 'MISSING'}; "
                     f"namespace GPU ceiling {queue.gpu_ceiling}")
    return lines




def _node_readiness_lines(graph: ResourceGraph, cloud: CloudPreview) -> list[str]:
    """The readiness gate: the controller, and per GPU group how its nodes are held and what releases them."""
    controller = release(graph, "node-readiness-controller")
    if not controller:
        return []
    # group -> mode -> spec (the rules' names end with a digest of their spec)
    rules: dict[str, dict[str, Any]] = {}
    for r in graph.of_type("kubernetes:readiness.node.x-k8s.io/v1alpha1:NodeReadinessRule"):
        group = str((r.inputs["metadata"].get("labels") or {}).get("gpu-cluster/node-check", ""))
        rules.setdefault(group, {})[str(r.inputs["spec"].get("enforcementMode"))] = r.inputs["spec"]
    registered = cloud.registration_taints(graph)  # group -> the taint keys its nodes register with
    lines = [f"node readiness: {chart(controller)} (GPU nodes take jobs once their check passed; "
             "docs/capacity.md 'When every node proves itself')"]
    for ds in graph.of_type("kubernetes:apps/v1:DaemonSet"):
        meta = ds.inputs["metadata"]
        if not str(meta["name"]).startswith("gpu-node-check-"):
            continue
        group = str(meta["name"]).removeprefix("gpu-node-check-")
        boot = rules.get(group, {}).get("bootstrap-only", {})
        health = rules.get(group, {}).get("continuous", {})
        inits = [c for c in ds.inputs["spec"]["template"]["spec"]["initContainers"]]
        script = next((c["command"][2] for c in inits if c["name"] == "dcgm"), "")
        level = "dcgmi diag -r " + script.split("dcgmi diag -r ", 1)[1][:1] if "dcgmi diag -r " in script else "no DCGM"
        held = ("registers with " if boot.get("taint", {}).get("key") in registered.get(group, set())
                else "tainted on join with ") + \
            str(boot.get("taint", {}).get("key", "NO BOOT RULE"))
        lines.append(f"  {group}: {held}; check: nvidia-smi, fabric devices, {level}"
                     + (", NVLink all_reduce" if any(c["name"] == "nvlink" for c in inits) else "")
                     + f"; unhealthy: {health.get('taint', {}).get('key', 'NO HEALTH RULE')} "
                       f"{health.get('taint', {}).get('effect', '')}")
    return lines


def _slurm_lines(graph: ResourceGraph, cloud: CloudPreview) -> list[str]:
    """What Slurm runs on, its partitions and accounts (the teams' GPU limits and budgets), accounting and login."""
    controllers = graph.of_type(SLINKY + "Controller")
    if not controllers:
        return []
    ctl = controllers[0].inputs["spec"]
    operator = release(graph, "slurm-operator")
    image = str(ctl.get("slurmctld", {}).get("image", "?")).rsplit(":", 1)[-1]
    nodesets = graph.of_type(SLINKY + "NodeSet")
    lines = [f"Slurm: {chart(operator)} (Slinky), Slurm {image}, cluster {ctl.get('clusterName')}; node groups "
             f"{', '.join(str(n.inputs['metadata']['name']) for n in nodesets) or 'none'} run slurmd, one pod per node "
             "holding the node's every GPU, and are not Kueue's (no ResourceFlavor: Kueue cannot admit Slinky "
             "NodeSets, and no node is shared by the two schedulers)"]
    for n in nodesets:
        spec = n.inputs["spec"]
        limits = spec.get("slurmd", {}).get("resources", {}).get("limits", {})
        devices = ", ".join(f"{k} {v}" for k, v in limits.items())
        mounts = ", ".join(m["mountPath"] for m in spec.get("slurmd", {}).get("volumeMounts", []))
        lines.append(f"  NodeSet {n.inputs['metadata']['name']}: nodes {spec['template']['spec'].get('nodeSelector')}; "
                     f"{devices}; slurmd {spec.get('extraConf', '')}; mounts {mounts}")
    for part in slurm_partitions(graph):
        lines.append(f"  partition {part.conf}")
    for account in slurm_accounts(graph):
        budget = account.budget_gpu_minutes
        lines.append(f"  account {account.name}: GPU limit {account.gpu_limit} at "
                     f"once (its quota on Slurm's groups), fair share {account.fairshare}"
                     + (f", budget {int(budget):,} GPU-minutes a month (GrpTRESMins, usage reset monthly: "
                        "jobs wait once it is spent)" if budget else ", no budget in GPU-minutes (no price read)"))
    accounting = graph.of_type(SLINKY + "Accounting")
    db = cloud.database(graph)
    if accounting and db is not None:
        what = cloud.database_text(db)
        lines.append(f"  accounting: slurmdbd on {what}, encrypted, private; accounts loaded by Job "
                     f"{', '.join(str(r.inputs['metadata']['name']) for r in graph.of_type('kubernetes:batch/v1:Job') if str(r.inputs['metadata']['name']).startswith('slurm-accounts'))} "  # noqa: E501
                     "(sacctmgr load)")
    else:
        lines.append("  accounting: none (no job history, fair share or GPU limits per account)")
    synced = {str(r.inputs["spec"]["target"]["name"]): str(r.inputs["spec"]["data"][0]["remoteRef"]["key"])
              for r in graph.of_type("kubernetes:external-secrets.io/v1:ExternalSecret")}
    for login in graph.of_type(SLINKY + "LoginSet"):
        spec = login.inputs["spec"]
        service = spec.get("service", {})
        secret = str(spec.get("sssdConfRef", {}).get("name"))
        origin = (f"written by External Secrets from the cloud's secret store ({synced[secret]})" if secret in synced
                  else "create it in the slurm namespace before the login pods can start")
        lines.append(f"  login: {spec.get('replicas')} pod(s) behind an internal load balancer (Service "
                     f"{login.inputs['metadata']['name']} in slurm) from "
                     f"{', '.join(service.get('spec', {}).get('loadBalancerSourceRanges', []))}; users from sssd "
                     f"(Secret {secret}: {origin}); ssh <user>@<its address> "
                     "(kubectl -n slurm get service " f"{login.inputs['metadata']['name']})")
    mapped = bool(ctl.get("prologScriptRefs"))
    lines.append("  telemetry: slurmctld's metrics (jobs, nodes, partitions, scheduler) through the operator's "
                 "ServiceMonitor into the same Prometheus; GPU metrics "
                 + ("carry the Slurm job id (dcgm-exporter hpc_job, written by the prolog)" if mapped else
                    "are not joined to Slurm jobs (the cloud's DCGM exporter reads no job mapping)")
                 + "; Slurm pods carry the stack's billing labels (OpenCost, the CUR split by namespace: slurm); "
                 "each team's share of them is its account's usage (sreport cluster AccountUtilizationByUser)")
    return lines


def _telemetry_lines(graph: ResourceGraph, cloud: CloudPreview) -> list[str]:
    prom = release(graph, "kube-prometheus-stack")
    gpu_op = release(graph, "gpu-operator")
    kueue = release(graph, "kueue")
    dcgm = bool(gpu_op and gpu_op.inputs.get("values", {}).get("dcgmExporter", {}).get("enabled"))
    kueue_metrics = bool(kueue and kueue.inputs.get("values", {}).get("enablePrometheus"))
    rules = graph.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")
    counts = Counter("alert" if "alert" in rule else "record"
                     for r in rules for g in r.inputs.get("spec", {}).get("groups", []) for rule in g.get("rules", []))
    return [
        f"Prometheus: {chart(prom)}; DCGM exporter {'on' if dcgm else 'OFF'}; Kueue metrics "
        f"{'on' if kueue_metrics else 'OFF'}; {counts['record']} recording rules, {counts['alert']} alerts",
        *_seed_telemetry_lines(graph, rules, cloud),
        *_alert_lines(graph, rules),
        f"cost attribution: {chart(release(graph, 'opencost'))} (aggregate by label:team, label:cost-center)",
    ]


def _seed_telemetry_lines(graph: ResourceGraph, rules: list[GraphResource], cloud: CloudPreview) -> list[str]:
    """The telemetry of issue 27 as the graph holds it: fabric, storage, logs, checkpoints, jobs, and what is not
    visible (the PrometheusRule's annotation)."""
    lines = []
    lines += cloud.fabric_telemetry(graph)
    storage = cloud.storage_telemetry(graph)
    if storage is not None:
        lines.append(storage)
    lines += cloud.log_lines(graph)
    gateways = sorted(str(r.inputs.get("name")) for r in graph.of_type("kubernetes:helm.sh/v3:Release")
                      if str(r.inputs.get("name", "")).startswith(f"{PUSHGATEWAY_RELEASE}-"))
    if gateways:
        allowed = next((r.inputs["data"].get("CHECKPOINT_WRITE_ALLOWED_SECONDS") for r in graph.of_type(
            "kubernetes:core/v1:ConfigMap") if r.inputs["metadata"]["name"] == "checkpoint-policy"), "?")
        lines.append(f"checkpoints: jobs push gpu_cluster_checkpoint_duration_seconds to their team's Pushgateway "
                     f"({', '.join(gateways)}: only the team may push there, and its series carry the team's "
                     "namespace whatever the push says; each team's checkpoint-policy ConfigMap says how); "
                     f"CheckpointTooSlow above {allowed} s, the longest write the goodput model allows")
    groups = {g.get("name") for r in rules for g in r.inputs.get("spec", {}).get("groups", [])}
    if "gpu-cluster.jobs" in groups:
        lines.append("jobs: Kueue Workloads through kube-state-metrics (queue time, runtime, admissions, evictions, "
                     "requeues, exit reasons by team); dashboard 'GPU cluster: jobs, failures and waits'")
    lines += _serving_telemetry_lines(graph, rules, cloud)
    for r in rules:
        unseen = (r.inputs.get("metadata", {}).get("annotations") or {}).get("gpu-cluster/not-visible")
        if unseen:
            lines.append(f"not visible: {unseen}")
    return lines


def _serving_telemetry_lines(graph: ResourceGraph, rules: list[GraphResource], cloud: CloudPreview) -> list[str]:
    """Each served model's objectives (its Deployment's annotations), the alerts that watch them, and how to measure
    them (components/kubernetes/objects/serving_telemetry.py, inference_perf.py)."""
    from components.kubernetes.objects.autoscaling import HPA_TOLERANCE, REQUESTS_PER_REPLICA
    from components.kubernetes.objects.serving import MODEL_LABEL
    from components.kubernetes.objects.serving_telemetry import (
        OBJECTIVE_PERCENTILE,
        OBJECTIVE_TPOT,
        OBJECTIVE_TTFT,
        SERVED_MODEL,
    )

    alerts: Counter[str] = Counter(str(rule.get("labels", {}).get(SERVED_MODEL)) for r in rules
                                   for g in r.inputs.get("spec", {}).get("groups", []) for rule in g.get("rules", [])
                                   if "alert" in rule and SERVED_MODEL in rule.get("labels", {}))
    scalers = {(str(r.inputs["metadata"].get("namespace")), str(r.inputs["spec"]["scaleTargetRef"]["name"])): r.inputs
               for r in graph.of_type("kubernetes:keda.sh/v1alpha1:ScaledObject")}
    routes = _route_lines(graph, cloud)
    lines = []
    for d in graph.of_type("kubernetes:apps/v1:Deployment"):
        model = d.inputs.get("metadata", {}).get("labels", {}).get(MODEL_LABEL)
        notes = d.inputs.get("metadata", {}).get("annotations") or {}
        if not model or OBJECTIVE_TTFT not in notes:
            continue
        team = d.inputs["metadata"].get("namespace")
        lines.append(f"served model {model} ({team}): p{notes.get(OBJECTIVE_PERCENTILE)} "
                     f"time to first token within {float(notes[OBJECTIVE_TTFT]) * 1000:g} ms, per output token within "
                     f"{float(notes.get(OBJECTIVE_TPOT, 0)) * 1000:g} ms; {alerts[model]} alerts watch it "
                     "(ServedModel*), dashboard row 'Serving'; measure it: blueprint inference benchmark "
                     f"{graph.stack}, then blueprint inference check")
        route = routes.get((str(team), str(d.inputs["metadata"].get("name"))))
        if route is not None:
            lines.append(route)
        scaler = scalers.get((str(team), str(d.inputs["metadata"].get("name"))))
        if scaler is None:
            lines.append(f"  replicas: {d.inputs['spec'].get('replicas')}, fixed (replicas.min = max)")
            continue
        spec = scaler["spec"]
        trigger = spec["triggers"][0]["metadata"]
        per = (scaler["metadata"].get("annotations") or {}).get(REQUESTS_PER_REPLICA, "?")
        down = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
        lines.append(f"  replicas: {spec['minReplicaCount']} to {spec['maxReplicaCount']}, scaled by KEDA on the "
                     f"requests in flight (running and waiting): more than {per} per replica adds one (HPA target "
                     f"{trigger['threshold']}, inside its {HPA_TOLERANCE:.0%} tolerance); a replica "
                     f"is released after {down['stabilizationWindowSeconds']} s of lower demand; the node autoscaler "
                     "adds the nodes (GPUs and money at each end: below the cost)")
    return lines


def _gateway_host(graph: ResourceGraph, gateway: GraphResource, cloud: CloudPreview) -> str:
    """Where a Gateway is reached, as far as the graph says: its reserved address (a NamedAddress the cloud's graph
    reserves), agentgateway's proxy Service (named after the Gateway), or its status once applied."""
    meta = gateway.inputs.get("metadata", {})
    for address in gateway.inputs.get("spec", {}).get("addresses") or []:
        if address.get("type") == "NamedAddress":
            found = cloud.named_address(graph, str(address.get("value")))
            if found:
                return found
        elif address.get("value"):
            return str(address["value"])
    if gateway.inputs.get("spec", {}).get("gatewayClassName") == "agentgateway":
        return f"{meta.get('name')}.{meta.get('namespace')}.svc"
    return "<the Gateway's address once applied>"


def _route_lines(graph: ResourceGraph, cloud: CloudPreview) -> dict[tuple[str, str], str]:
    """Per served model (namespace, name), how clients reach it through the gateway: the route's URL, the Gateway's
    class and the pool's endpoint picker (components/kubernetes/objects/gateway.py)."""
    gateways = {(str(g.inputs.get("metadata", {}).get("namespace")), str(g.inputs.get("metadata", {}).get("name"))): g
                for g in graph.of_type("kubernetes:gateway.networking.k8s.io/v1:Gateway")}
    pools = {(str(p.inputs["metadata"].get("namespace")), str(p.inputs["metadata"].get("name"))): p.inputs
             for p in graph.of_type("kubernetes:inference.networking.k8s.io/v1:InferencePool")}
    out: dict[tuple[str, str], str] = {}
    for r in graph.of_type("kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"):
        ns = str(r.inputs.get("metadata", {}).get("namespace"))
        for rule in r.inputs.get("spec", {}).get("rules", []):
            for backend in rule.get("backendRefs", []):
                pool = pools.get((ns, str(backend.get("name"))))
                if backend.get("kind") != "InferencePool" or pool is None:
                    continue
                for parent in r.inputs["spec"].get("parentRefs", []):
                    gateway = gateways.get((str(parent.get("namespace") or ns), str(parent.get("name"))))
                    if gateway is None:
                        continue
                    prefix = rule.get("matches", [{}])[0].get("path", {}).get("value", "/")
                    picker = pool["spec"].get("endpointPickerRef", {}).get("name")
                    model = pool["spec"].get("selector", {}).get("matchLabels", {})
                    key = (ns, next(iter(model.values()), str(pool["metadata"].get("name"))))
                    out[key] = (f"  reached at http://{_gateway_host(graph, gateway, cloud)}{prefix} (Gateway "
                                f"{gateway.inputs['metadata'].get('namespace')}/{gateway.inputs['metadata'].get('name')}"
                                f", class {gateway.inputs['spec'].get('gatewayClassName')}), each request sent by "
                                f"its endpoint picker {picker} to the replica with the shortest queue and the most "
                                "free KV cache")
    return out


def _alert_lines(graph: ResourceGraph, rules: list[GraphResource]) -> list[str]:
    """Where alerts go (one AlertmanagerConfig per receiver, and what each gets), the Secrets the receivers read (to
    create before alerts flow), and the runbook."""
    configs = graph.of_type("kubernetes:monitoring.coreos.com/v1alpha1:AlertmanagerConfig")
    runbooks = {str(rule.get("annotations", {}).get("runbook_url", "")).partition("#")[0]
                for r in rules for g in r.inputs.get("spec", {}).get("groups", []) for rule in g.get("rules", [])
                if "alert" in rule}
    refs = [ref for c in configs for ref in secret_refs(c.inputs)]
    lines = []
    if not refs and release(graph, "kube-prometheus-stack") is not None:
        lines.append("alert routing: NO RECEIVER: alerts fire in Prometheus and reach no one "
                     "(platform.monitoring.alerts)")
    elif refs:
        lines.append(f"alert routing: {len(configs)} AlertmanagerConfig(s), one per receiver (a missing Secret "
                     "silences only the receivers that read it):")
        for c in configs:
            receivers = [r["name"] for r in c.inputs.get("spec", {}).get("receivers", [])
                         if r.get("name") != SILENT_RECEIVER]
            receives = (c.inputs["metadata"].get("annotations") or {}).get(RECEIVES_ANNOTATION, "?")
            lines.append(f"  {', '.join(receivers)}: {receives}")
        by_secret: dict[tuple[str, str, str], list[str]] = {}
        for namespace, name, key, receiver, _ in refs:
            by_secret.setdefault((namespace, name, key), []).append(receiver)
        namespaces = sorted({ns for ns, _, _ in by_secret})
        lines.append(f"  create these Secrets in {', '.join(namespaces)} before alerts flow (`blueprint audit` "
                     "checks them): " + ", ".join(f"{name} (key {key})" for _, name, key in sorted(by_secret)))
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
    part = cloud_preview(spec.cloud)
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
    summaries = {**cloud.planes, "platform": _platform_lines(graph, part) + _slurm_lines(graph, part),
                 "telemetry": _telemetry_lines(graph, part)}
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
