"""Text rendering of a ResourceGraph for people: the resource tree grouped by plane, with the figures
that matter. The cloud's planes (GPUs, fabric interfaces per node, placement, filesystem throughput,
checkpoint write time) are summarised by the stack's cloud module; the platform and telemetry here.

Figures are read from the graph (what the program would create), not from the spec, so the preview
shows the infrastructure itself; the catalog adds hardware facts the graph cannot carry.
"""

from __future__ import annotations

import importlib
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from blueprint.graph.model import GraphResource, ResourceGraph
from components.clock import utcnow
from components.kubernetes.objects import ACCEPTANCE_QUEUE
from components.spec import ClusterSpec

PLANE_ORDER = ("network", "compute", "storage", "control-plane", "platform", "telemetry", "cost")
# The Kubernetes platform's components keep their control-plane type tokens (a new token would change every
# URN under them); the preview shows them under their own heading.
PLATFORM_COMPONENTS = ("GpuStack", "Tenancy", "Queues", "Slurm")
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
JOB = "kubernetes:batch/v1:Job"
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


@dataclass(frozen=True)
class FlavorQuota:
    """A ClusterQueue's GPU quota on one flavor, as written in the object (``None``: no such limit)."""

    flavor: str
    gpus: str
    borrowing: str | None
    lending: str | None

    def describe(self, lends: str = "lends at most") -> str:
        """``N GPUs (+B borrowable) (lends at most L)``: the quota as the preview and the report's diagram say it."""
        text = f"{self.gpus} GPUs"
        if self.borrowing is not None:
            text += f" (+{self.borrowing} borrowable)"
        if self.lending is not None:
            text += f" ({lends} {self.lending})"
        return text


@dataclass(frozen=True)
class TeamQueue:
    """A team's Kueue ClusterQueue (or the acceptance queue): GPU quota per flavor, its LocalQueue and the namespace's
    GPU ceiling (the ResourceQuota behind Kueue)."""

    team: str
    urn: str
    flavors: tuple[FlavorQuota, ...]
    local_queue: bool
    gpu_ceiling: str
    acceptance: bool
    held: bool


def team_queues(graph: ResourceGraph) -> list[TeamQueue]:
    """Every ClusterQueue of the graph, read as the preview shows it."""
    local = {r.inputs["spec"]["clusterQueue"] for r in graph.of_type(KUEUE + "LocalQueue")}
    quotas = {r.inputs["metadata"]["namespace"]: r.inputs["spec"]["hard"]
              for r in graph.of_type("kubernetes:core/v1:ResourceQuota")}
    out = []
    for cq in graph.of_type(KUEUE + "ClusterQueue"):
        team = cq.inputs["metadata"]["name"]
        flavors = []
        for group in cq.inputs["spec"].get("resourceGroups", []):
            for flavor in group.get("flavors", []):
                gpu: dict[str, Any] = next((r for r in flavor["resources"] if r["name"] == "nvidia.com/gpu"), {})
                flavors.append(FlavorQuota(
                    str(flavor["name"]), str(gpu.get("nominalQuota", "?")),
                    str(gpu["borrowingLimit"]) if "borrowingLimit" in gpu else None,
                    str(gpu["lendingLimit"]) if "lendingLimit" in gpu else None))
        out.append(TeamQueue(team=str(team), urn=cq.urn, flavors=tuple(flavors), local_queue=team in local,
                             gpu_ceiling=str(quotas.get(team, {}).get("requests.nvidia.com/gpu", "none")),
                             acceptance=team == ACCEPTANCE_QUEUE,
                             held=cq.inputs["spec"].get("stopPolicy") == "Hold"))
    return out


def flavor_node_groups(graph: ResourceGraph) -> dict[str, str]:
    """Each Kueue ResourceFlavor's node group (its ``gpu-cluster/node-group`` node label)."""
    return {str(f.inputs["metadata"]["name"]): str(labels["gpu-cluster/node-group"])
            for f in graph.of_type(KUEUE + "ResourceFlavor")
            if "gpu-cluster/node-group" in (labels := f.inputs.get("spec", {}).get("nodeLabels") or {})}


SLINKY = "kubernetes:slinky.slurm.net/v1beta1:"
_ACCOUNT = re.compile(r"^Account - '([^']+)'(.*)$")


def _slurm_lines(graph: ResourceGraph) -> list[str]:
    """What Slurm runs on, its partitions and accounts (the teams' GPU limits and budgets), accounting and login."""
    controllers = graph.of_type(SLINKY + "Controller")
    if not controllers:
        return []
    ctl = controllers[0].inputs["spec"]
    operator = _release(graph, "slurm-operator")
    image = str(ctl.get("slurmctld", {}).get("image", "?")).rsplit(":", 1)[-1]
    nodesets = graph.of_type(SLINKY + "NodeSet")
    lines = [f"Slurm: {_chart(operator)} (Slinky), Slurm {image}, cluster {ctl.get('clusterName')}; node groups "
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
    dbs = graph.of_type("aws:rds/instance:Instance") + graph.of_type("gcp:sql/databaseInstance:DatabaseInstance")
    if accounting and dbs:
        db = dbs[0].inputs
        what = (f"RDS {db.get('engine')} {db.get('engineVersion')} {db.get('instanceClass')}, "
                f"{'Multi-AZ' if db.get('multiAz') else 'single-AZ'}, backups {db.get('backupRetentionPeriod')} days, "
                f"deletion protection {'on' if db.get('deletionProtection') else 'off'}") \
            if dbs[0].type.startswith("aws:") else f"Cloud SQL {db.get('databaseVersion')}"
        lines.append(f"  accounting: slurmdbd on {what}, encrypted, private; accounts loaded by Job "
                     f"{', '.join(str(r.inputs['metadata']['name']) for r in graph.of_type('kubernetes:batch/v1:Job') if str(r.inputs['metadata']['name']).startswith('slurm-accounts'))} "  # noqa: E501
                     "(sacctmgr load)")
    else:
        lines.append("  accounting: none (no job history, fair share or GPU limits per account)")
    for login in graph.of_type(SLINKY + "LoginSet"):
        spec = login.inputs["spec"]
        service = spec.get("service", {})
        lines.append(f"  login: {spec.get('replicas')} pod(s) behind an internal load balancer (Service "
                     f"{login.inputs['metadata']['name']} in slurm) from "
                     f"{', '.join(service.get('spec', {}).get('loadBalancerSourceRanges', []))}; users from sssd "
                     f"(Secret {spec.get('sssdConfRef', {}).get('name')}); ssh <user>@<its address> "
                     "(kubectl -n slurm get service " f"{login.inputs['metadata']['name']})")
    mapped = bool(ctl.get("prologScriptRefs"))
    lines.append("  telemetry: slurmctld's metrics (jobs, nodes, partitions, scheduler) through the operator's "
                 "ServiceMonitor into the same Prometheus; GPU metrics "
                 + ("carry the Slurm job id (dcgm-exporter hpc_job, written by the prolog)" if mapped else
                    "are not joined to Slurm jobs (the cloud's DCGM exporter reads no job mapping)")
                 + "; Slurm pods carry the stack's billing labels (OpenCost, the CUR split by namespace: slurm); "
                 "each team's share of them is its account's usage (sreport cluster AccountUtilizationByUser)")
    return lines


@dataclass(frozen=True)
class SlurmPartition:
    """A partition of the Slurm controller's configuration: its ``PartitionName=`` line and its fields."""

    name: str
    conf: str  # the line after PartitionName=
    fields: dict[str, str]

    @property
    def accounts(self) -> list[str]:
        """The accounts allowed on it (AllowAccounts), empty when it names none."""
        return [a for a in self.fields.get("AllowAccounts", "").split(",") if a]


@dataclass(frozen=True)
class SlurmAccount:
    """A Slurm account of the accounts file sacctmgr loads: a team's GPU limit, fair share and budget."""

    name: str
    gpu_limit: str
    fairshare: str | None
    budget_gpu_minutes: str  # "" when it has none


def slurm_partitions(graph: ResourceGraph) -> list[SlurmPartition]:
    """The partitions of every Slinky Controller in the graph."""
    out = []
    for ctl in graph.of_type(SLINKY + "Controller"):
        for line in str(ctl.inputs["spec"].get("extraConf", "")).splitlines():
            if line.startswith("PartitionName="):
                conf = line.removeprefix("PartitionName=")
                name, _, rest = conf.partition(" ")
                fields = dict(f.split("=", 1) for f in rest.split() if "=" in f)
                out.append(SlurmPartition(name, conf, fields))
    return out


def slurm_accounts(graph: ResourceGraph) -> list[SlurmAccount]:
    """The accounts of the ``slurm-accounts`` ConfigMaps (``Account - '<name>':<field>=<value>:...`` lines)."""
    out = []
    for cm in graph.of_type("kubernetes:core/v1:ConfigMap"):
        if not str(cm.inputs["metadata"]["name"]).startswith("slurm-accounts"):
            continue
        for line in str(cm.inputs.get("data", {}).get("accounts.cfg", "")).splitlines():
            m = _ACCOUNT.match(line)
            if not m:
                continue
            fields = dict(f.split("=", 1) for f in m.group(2).split(":") if "=" in f)
            out.append(SlurmAccount(m.group(1), fields.get("GrpTRES", "").removeprefix("gres/gpu="),
                                    fields.get("Fairshare"), fields.get("GrpTRESMins", "").removeprefix("gres/gpu=")))
    return out


def slurm_nodeset_groups(graph: ResourceGraph) -> dict[str, str]:
    """Each Slinky NodeSet's node group (its pods' ``gpu-cluster/node-group`` node selector)."""
    out = {}
    for n in graph.of_type(SLINKY + "NodeSet"):
        selector = n.inputs["spec"].get("template", {}).get("spec", {}).get("nodeSelector") or {}
        if "gpu-cluster/node-group" in selector:
            out[str(n.inputs["metadata"]["name"])] = str(selector["gpu-cluster/node-group"])
    return out


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
        *_seed_telemetry_lines(graph, rules),
        *_alert_lines(graph, rules),
        f"cost attribution: {_chart(_release(graph, 'opencost'))} (aggregate by label:team, label:cost-center)",
    ]


def _seed_telemetry_lines(graph: ResourceGraph, rules: list[GraphResource]) -> list[str]:
    """The telemetry of issue 27 as the graph holds it: fabric, storage, logs, checkpoints, jobs, and what is not
    visible (the PrometheusRule's annotation)."""
    lines = []
    efa_templates = [lt for lt in graph.of_type("aws:ec2/launchTemplate:LaunchTemplate")
                     if any(str(n.get("interfaceType")) in ("efa", "efa-only")
                            for n in lt.inputs.get("networkInterfaces") or [])]
    efa = _release(graph, "efa-node-exporter")
    if efa is not None:
        groups = efa.inputs["values"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
        lines.append(f"fabric: EFA node exporter ({_chart(efa)}, image by digest) on {', '.join(groups)}: each EFA "
                     "device's hw_counters (retransmits, timeouts, impaired connections, drops) into Prometheus")
    elif efa_templates:
        lines.append("warning: fabric: EFA node groups without fabric metrics (give aws.telemetry.efaExporterImage); "
                     "the pack refuses this in production (aws-fabric-metrics-in-production)")
    storage = _release(graph, "cloudwatch-exporter") or _release(graph, "stackdriver-exporter")
    if storage is not None:
        what = ("FSx and the checkpoint bucket's S3 request metrics" if storage.inputs.get("name") ==
                "cloudwatch-exporter" else "Managed Lustre and the checkpoint bucket's request count")
        lines.append(f"storage: {_chart(storage)} scrapes {what} from the cloud's monitoring (read-only identity)")
    shipper = _release(graph, "aws-for-fluent-bit")
    groups_by_name = {str(g.inputs.get("name")): g.inputs for g in graph.of_type("aws:cloudwatch/logGroup:LogGroup")}
    if shipper is not None:
        values = shipper.inputs["values"]
        shipped = [values["cloudWatchLogs"]["logGroupName"]]
        if "additionalOutputs" in values:
            shipped += re.findall(r"log_group_name (\S+)", values["additionalOutputs"])
        described = ", ".join(f"{g} ({groups_by_name.get(g, {}).get('retentionInDays', '?')} days, KMS)"
                              for g in shipped)
        lines.append(f"logs: {_chart(shipper)} ships container{' and node' if len(shipped) > 1 else ''} logs to "
                     f"{described}")
    elif graph.of_type("gcp:container/cluster:Cluster"):
        lines.append("logs: GKE ships container and system logs to Cloud Logging (loggingConfig; the project's "
                     "_Default bucket keeps them 30 days unless changed)")
    elif graph.of_type("aws:eks/cluster:Cluster"):
        lines.append("warning: logs: container logs are not shipped (aws.telemetry.containerLogs.enabled false)")
    if _release(graph, "pushgateway") is not None:
        allowed = next((r.inputs["data"].get("CHECKPOINT_WRITE_ALLOWED_SECONDS") for r in graph.of_type(
            "kubernetes:core/v1:ConfigMap") if r.inputs["metadata"]["name"] == "checkpoint-policy"), "?")
        lines.append(f"checkpoints: jobs push gpu_cluster_checkpoint_duration_seconds to the Pushgateway (each "
                     f"team's checkpoint-policy ConfigMap says how); CheckpointTooSlow above {allowed} s, the longest "
                     "write the goodput model allows")
    groups = {g.get("name") for r in rules for g in r.inputs.get("spec", {}).get("groups", [])}
    if "gpu-cluster.jobs" in groups:
        lines.append("jobs: Kueue Workloads through kube-state-metrics (queue time, runtime, admissions, evictions, "
                     "requeues, exit reasons by team); dashboard 'GPU cluster: jobs, failures and waits'")
    for r in rules:
        unseen = (r.inputs.get("metadata", {}).get("annotations") or {}).get("gpu-cluster/not-visible")
        if unseen:
            lines.append(f"not visible: {unseen}")
    return lines


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
    summaries = {**cloud.planes, "platform": _platform_lines(graph) + _slurm_lines(graph),
                 "telemetry": _telemetry_lines(graph)}
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
