"""Job telemetry (issue 27): each Kueue workload's queue time, runtime, admissions, evictions, retries and exit
reasons by team, from kube-state-metrics' custom-resource state of Kueue Workloads and its batch Job and pod metrics;
the checkpoint duration jobs push to the Pushgateway; the job dashboard and the PromQL behind its two questions (the
same strings are in docs/runbooks.md, section job-telemetry, and a test keeps them equal).

Sources, read 2026-12-01: kube-state-metrics v2.17.0 docs/metrics/extend/customresourcestate-metrics.md (Gauge and
Info metrics from paths, ``metricNamePrefix``, RFC3339 strings parsed to Unix time, "True"/"False" to 1/0) and
docs/metrics/workload/job-metrics.md, pod-metrics.md (``kube_job_status_failed{reason}``,
``kube_pod_container_status_last_terminated_reason``); kube-state-metrics chart 7.1.0 values (customResourceState,
rbac.extraRules), the subchart of kube-prometheus-stack 81.4.x; the Workload CRD kueue.x-k8s.io/v1beta2 of Kueue
v0.19.2 (blueprint/schemas/crds/kueue: status.conditions, status.admission.clusterQueue and podSetAssignments,
status.requeueState.count, status.schedulingStats.evictions[] with reason and count); prometheus-pushgateway chart
3.8.0 (commit 4fa56e1c: fullnameOverride, serviceMonitor.honorLabels and relabelings, port 9091) and the Pushgateway
v1.11.3 README (``push_time_seconds`` per group, the /metrics/job/<job>/<label>/<value> grouping key, "About the job
and instance labels"); each team's own Pushgateway below.
"""

from __future__ import annotations

import json

from components.kubernetes.objects.common import MONITORING_NAMESPACE, Manifest, meta

WORKLOAD_PREFIX = "kueue_workload"
# kube-state-metrics' custom-resource state for Kueue Workloads: one Info series per workload (its queues), its
# creation time, each condition's status and transition time, requeues, evictions by reason, and the GPUs its
# admission assigned per pod set.
KUEUE_WORKLOAD_STATE: Manifest = {
    "kind": "CustomResourceStateMetrics",
    "spec": {"resources": [{
        "groupVersionKind": {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": "Workload"},
        "metricNamePrefix": WORKLOAD_PREFIX,
        "labelsFromPath": {"namespace": ["metadata", "namespace"], "name": ["metadata", "name"]},
        "metrics": [
            {"name": "info", "help": "A Kueue workload and its queues.", "each": {"type": "Info", "info": {
                "labelsFromPath": {"queue_name": ["spec", "queueName"],
                                   "cluster_queue": ["status", "admission", "clusterQueue"],
                                   "priority_class": ["spec", "priorityClassName"]}}}},
            {"name": "created", "help": "When the workload was created (Unix time).",
             "each": {"type": "Gauge", "gauge": {"path": ["metadata", "creationTimestamp"]}}},
            {"name": "condition", "help": "Each condition's status (1 True, 0 False).",
             "each": {"type": "Gauge", "gauge": {"path": ["status", "conditions"],
                                                 "labelsFromPath": {"type": ["type"], "reason": ["reason"]},
                                                 "valueFrom": ["status"]}}},
            {"name": "condition_time", "help": "When each condition last changed (Unix time).",
             "each": {"type": "Gauge", "gauge": {"path": ["status", "conditions"],
                                                 "labelsFromPath": {"type": ["type"], "reason": ["reason"]},
                                                 "valueFrom": ["lastTransitionTime"]}}},
            {"name": "requeues", "help": "Times the workload was requeued (status.requeueState.count).",
             "each": {"type": "Gauge", "gauge": {"path": ["status", "requeueState", "count"], "nilIsZero": True}}},
            {"name": "evictions", "help": "Evictions by reason (status.schedulingStats.evictions).",
             "each": {"type": "Gauge", "gauge": {"path": ["status", "schedulingStats", "evictions"],
                                                 "labelsFromPath": {"reason": ["reason"],
                                                                    "underlying_cause": ["underlyingCause"]},
                                                 "valueFrom": ["count"]}}},
            {"name": "gpus", "help": "GPUs the admission assigned, per pod set.",
             "each": {"type": "Gauge", "gauge": {"path": ["status", "admission", "podSetAssignments"],
                                                 "labelsFromPath": {"podset": ["name"]},
                                                 "valueFrom": ["resourceUsage", "nvidia.com/gpu"],
                                                 "nilIsZero": True}}},
        ],
    }]},
}
# What kube-state-metrics must be allowed to read for it (chart: "Add (Cluster)Role permissions ... to
# rbac.extraRules").
KSM_EXTRA_RULES = [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["list", "watch"]}]


def ksm_job_values() -> Manifest:
    """The kube-state-metrics (subchart) values that add the Workload metrics."""
    return {"customResourceState": {"enabled": True, "config": KUEUE_WORKLOAD_STATE},
            "rbac": {"extraRules": KSM_EXTRA_RULES}}


def _when(condition: str) -> str:
    """When a workload's condition last became True (a series per workload that has it True)."""
    return (f"max by (namespace, name) (kueue_workload_condition_time{{type=\"{condition}\"}} "
            f"and on (namespace, name, type) kueue_workload_condition{{type=\"{condition}\"}} == 1)")


CREATED = "max by (namespace, name) (kueue_workload_created)"
QUEUE_SECONDS = "gpu_cluster:workload_queue_seconds"
RUNTIME_SECONDS = "gpu_cluster:workload_runtime_seconds"
GPUS_HELD = "gpu_cluster:workload_gpus"
CHECKPOINT_METRIC = "gpu_cluster_checkpoint_duration_seconds"
CHECKPOINT_FRESH_SECONDS = 6 * 3600  # a pushed duration counts for this long (the Pushgateway keeps the last forever)


def job_recording_rules() -> list[Manifest]:
    """Per workload (each Kueue Workload, so every Job, JobSet, MPIJob or TrainJob): its queue time (creation to quota
    reserved, or until now), its runtime (admission to finish, or until now) and the GPUs it holds; by team
    (namespace): averages, requeues, evictions by reason, pod failures and container exits by reason; by ClusterQueue
    (the team's): admissions per hour."""
    return [
        {"record": QUEUE_SECONDS,
         "expr": f"({_when('QuotaReserved')} or on (namespace, name) ({CREATED} * 0 + time())) "
                 f"- on (namespace, name) {CREATED}"},
        {"record": RUNTIME_SECONDS,
         "expr": f"({_when('Finished')} or on (namespace, name) "
                 "(max by (namespace, name) (kueue_workload_condition{type=\"Admitted\"} == 1) * 0 + time())) "
                 f"- on (namespace, name) {_when('Admitted')}"},
        {"record": GPUS_HELD,
         "expr": "sum by (namespace, name) (kueue_workload_gpus) and on (namespace, name) "
                 "(max by (namespace, name) (kueue_workload_condition{type=\"Admitted\"} == 1)) unless on "
                 "(namespace, name) (max by (namespace, name) (kueue_workload_condition{type=\"Finished\"} == 1))"},
        {"record": "gpu_cluster:workload_queue_seconds:avg_by_namespace",
         "expr": f"avg by (namespace) ({QUEUE_SECONDS})"},
        {"record": "gpu_cluster:workload_runtime_seconds:avg_by_namespace",
         "expr": f"avg by (namespace) ({RUNTIME_SECONDS})"},
        {"record": "gpu_cluster:workload_admissions:increase1h_by_cluster_queue",
         "expr": "sum by (cluster_queue) (increase(kueue_admitted_workloads_total[1h]))"},
        {"record": "gpu_cluster:workload_evictions:sum_by_namespace_reason",
         "expr": "sum by (namespace, reason) (kueue_workload_evictions)"},
        {"record": "gpu_cluster:workload_requeues:sum_by_namespace",
         "expr": "sum by (namespace) (kueue_workload_requeues)"},
        {"record": "gpu_cluster:job_pod_failures:sum_by_namespace_reason",
         "expr": "sum by (namespace, reason) (max by (namespace, job_name, reason) (kube_job_status_failed))"},
        {"record": "gpu_cluster:container_exits:sum_by_namespace_reason",
         "expr": "sum by (namespace, reason) (max by (namespace, pod, container, reason) "
                 "(kube_pod_container_status_last_terminated_reason))"},
        {"record": "gpu_cluster:checkpoint_duration_seconds:max_by_namespace",
         "expr": f"max by (namespace) ({CHECKPOINT_METRIC} and on (namespace, {PUSHED_JOB}) "
                 f"(time() - push_time_seconds < {CHECKPOINT_FRESH_SECONDS}))"},
    ]


# The dashboard's two questions, as their PromQL (the runbook's section job-telemetry shows the same strings).
# GPU-hours lost to failures this week, by reason: every GPU-hour held this week by a workload that ended failed
# (Kueue's Finished condition with a reason other than Succeeded) or was evicted (each eviction reason it had). An
# upper bound: the work its checkpoints kept is not subtracted.
LOST_GPU_HOURS_EXPR = (
    f"sum by (reason) ((sum by (namespace, name) (sum_over_time({GPUS_HELD}[7d])) / 60) "
    "* on (namespace, name) group_right () ("
    "label_replace(max by (namespace, name, reason) (max_over_time(kueue_workload_evictions[7d]) > 0), "
    "\"reason\", \"evicted: $1\", \"reason\", \"(.*)\") * 0 + 1 or "
    "label_replace(max by (namespace, name, reason) "
    "(max_over_time(kueue_workload_condition{type=\"Finished\", reason!=\"Succeeded\"}[7d]) == 1), "
    "\"reason\", \"failed: $1\", \"reason\", \"(.*)\")))")
# GPUs idle (under 10 % utilization, allocated to a pod) on nodes where I/O waits (Linux pressure stall information:
# some task waited on I/O more than 10 % of the time), by node: jobs waiting on the shared filesystem or the bucket.
IDLE_GPU = ("count by (node) (label_replace(DCGM_FI_DEV_GPU_UTIL{namespace!=\"\"} < 10, "
            "\"node\", \"$1\", \"Hostname\", \"(.*)\"))")
IDLE_ON_STORAGE_EXPR = (f"{IDLE_GPU} and on (node) "
                        "(max by (node) (rate(node_pressure_io_waiting_seconds_total[5m])) > 0.1)")
# GPUs idle on nodes whose fabric reports trouble in the last 10 minutes (EFA: retransmit timeouts, impaired or
# unresponsive connections): jobs stalled in a collective. GKE documents no GPUDirect NIC metric: empty there.
IDLE_ON_NETWORK_EXPR = (
    f"{IDLE_GPU} and on (node) (sum by (node) (increase("
    "{__name__=~\"node_amazonefa_(retrans_timeout_events|impaired_remote_conn_events|unresponsive_remote_events)\"}"
    "[10m])) > 0)")


def _panel(panel_id: int, title: str, expr: str, legend: str, unit: str, x: int, y: int,
           kind: str = "timeseries", description: str = "") -> Manifest:
    return {
        "id": panel_id, "type": kind, "title": title, "description": description,
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "datasource": {"type": "prometheus", "uid": "prometheus"},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [{"refId": "A", "expr": expr, "legendFormat": legend,
                     **({"instant": True} if kind == "bargauge" else {})}],
    }


JOBS_DASHBOARD = "gpu-cluster-jobs-dashboard"


def serving_panels(first_id: int, y: int) -> list[Manifest]:
    """The serving view: a row, then each served model's latencies at its objective's percentile, output tokens per
    second, requests waiting, KV-cache use and server-error share (the recording rules of objects/
    serving_telemetry.py)."""
    from components.kubernetes.objects.serving_telemetry import (
        ERRORS_RECORD,
        KV_RECORD,
        TOKENS_RECORD,
        TPOT_RECORD,
        TTFT_RECORD,
        WAITING_RECORD,
    )

    row: Manifest = {"id": first_id, "type": "row", "title": "Serving", "collapsed": False, "panels": [],
                     "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}}
    legend = "{{namespace}}/{{served_model}}"
    specs = [
        ("Time to first token at the objective's percentile", TTFT_RECORD, legend + " p{{quantile}}", "s",
         "Alert ServedModelTtftOverObjective fires above the model's objective. Runbook: served-model-latency."),
        ("Time per output token at the objective's percentile", TPOT_RECORD, legend + " p{{quantile}}", "s",
         "vLLM's inter-token latency. Runbook: served-model-latency."),
        ("Output tokens per second", TOKENS_RECORD, legend, "short", ""),
        ("Requests waiting for a KV-cache slot", WAITING_RECORD, legend, "short",
         "Sustained waiting means more demand than the replicas hold. Runbook: served-model-saturated."),
        ("KV-cache use (fullest replica)", KV_RECORD, legend, "percentunit", ""),
        ("Share of requests answered 5xx", ERRORS_RECORD, legend, "percentunit", "Runbook: served-model-errors."),
    ]
    return [row, *(_panel(first_id + 1 + i, title, expr, leg, unit, 12 * (i % 2), y + 1 + 8 * (i // 2),
                          description=description)
                   for i, (title, expr, leg, unit, description) in enumerate(specs))]


def jobs_dashboard(fabric_visible: bool, serving: bool = False) -> Manifest:
    """A ConfigMap the Grafana sidecar loads: the two questions first, then each team's queue time, runtime,
    admissions, evictions, retries, exit reasons and checkpoint durations. ``fabric_visible``: the cloud exposes fabric
    metrics (EFA); else the network panel says what cannot be seen. ``serving``: the stack serves models; a serving
    view follows."""
    network_note = ("" if fabric_visible else
                    "Not visible on this cloud: GKE documents no metric of the GPUDirect NICs (README, 'Telemetry the "
                    "seed asks for'); the panel stays empty.")
    dashboard = {
        "title": "GPU cluster: jobs, failures and waits",
        "uid": "gpu-cluster-jobs",
        "schemaVersion": 39,
        "time": {"from": "now-7d", "to": "now"},
        "panels": [
            _panel(1, "GPU-hours lost to failures this week, by reason", LOST_GPU_HOURS_EXPR, "{{reason}}", "h", 0,
                   0, "bargauge", "GPU-hours held this week by workloads that failed or were evicted (an upper "
                   "bound: checkpointed work is not subtracted). Runbook: job-telemetry."),
            _panel(2, "GPUs idle while their job waited on storage", IDLE_ON_STORAGE_EXPR, "{{node}}", "short", 12, 0,
                   description="Allocated GPUs under 10 % utilization on nodes with I/O pressure above 10 %."),
            _panel(3, "GPUs idle while their job waited on the network", IDLE_ON_NETWORK_EXPR, "{{node}}", "short",
                   0, 8, description="Allocated GPUs under 10 % utilization on nodes whose fabric reported "
                   "retransmit timeouts or impaired connections. " + network_note),
            _panel(4, "Queue time by team (average per workload)",
                   "gpu_cluster:workload_queue_seconds:avg_by_namespace", "{{namespace}}", "s", 12, 8),
            _panel(5, "Runtime by team (average per workload)",
                   "gpu_cluster:workload_runtime_seconds:avg_by_namespace", "{{namespace}}", "s", 0, 16),
            _panel(6, "Admissions per hour by team", "gpu_cluster:workload_admissions:increase1h_by_cluster_queue",
                   "{{cluster_queue}}", "short", 12, 16),
            _panel(7, "Evictions by team and reason", "gpu_cluster:workload_evictions:sum_by_namespace_reason",
                   "{{namespace}} {{reason}}", "short", 0, 24),
            _panel(8, "Requeues and failed pods by team",
                   "gpu_cluster:workload_requeues:sum_by_namespace or "
                   "sum by (namespace) (gpu_cluster:job_pod_failures:sum_by_namespace_reason)",
                   "{{namespace}}", "short", 12, 24),
            _panel(9, "Container exits by team and reason", "gpu_cluster:container_exits:sum_by_namespace_reason",
                   "{{namespace}} {{reason}}", "short", 0, 32),
            _panel(10, "Checkpoint duration by team (latest push)",
                   "gpu_cluster:checkpoint_duration_seconds:max_by_namespace", "{{namespace}}", "s", 12, 32),
            *(serving_panels(11, 40) if serving else []),
        ],
    }
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": meta(JOBS_DASHBOARD, MONITORING_NAMESPACE, {"grafana_dashboard": "1"}),
            "data": {"gpu-cluster-jobs.json": json.dumps(dashboard, indent=1)}}


# Each team pushes to a Pushgateway of its own, and the series it pushes carry its namespace whatever labels it
# pushes. The Pushgateway authenticates no pusher and any client may write any group (Pushgateway v1.11.3 README,
# "URL": the grouping key is whatever the path says), and with honor_labels a pushed namespace label would win
# over the scrape's; so a shared gateway scraped with honorLabels let one team overwrite, or fake, another team's
# checkpoint durations. Instead:
# - one release per team (pushgateway-<team>, in the monitoring namespace, where teams create nothing), which a
#   NetworkPolicy lets only pods of the team's namespace (kubernetes.io/metadata.name, a label the API server sets
#   and nobody can change) and Prometheus reach;
# - its ServiceMonitor with honorLabels false and the target's namespace label set to the team: on a conflict the
#   scrape's labels win and the pushed ones are kept as exported_<name> (Prometheus docs/configuration/
#   configuration.md, <scrape_config> honor_labels: "label conflicts are resolved by renaming conflicting labels in
#   the scraped data to exported_<original-label>"), so the pushed job becomes exported_job, and a pushed namespace
#   exported_namespace. The Pushgateway README's advice to set honor_labels true ("About the job and instance
#   labels") is for keeping job and instance; here the team is the label that matters and the rules read
#   exported_job. The user relabelings come after the operator's own namespace relabeling (prometheus-operator
#   v0.88.1 pkg/prometheus/promcfg.go generateServiceMonitorConfig), so the team's name is the one kept.
PUSHGATEWAY_RELEASE = "pushgateway"  # each team's is pushgateway-<team>
PUSHGATEWAY_PORT = 9091
PUSHGATEWAY_CHART_NAME = "prometheus-pushgateway"  # the chart's app.kubernetes.io/name on its pods
# The Prometheus operator's label on the Prometheus server's pods (v0.88.1 pkg/prometheus/server/operator.go
# applicationNameLabelValue), in the monitoring namespace.
PROMETHEUS_POD_LABELS = {"app.kubernetes.io/name": "prometheus"}
PUSHED_JOB = "exported_job"  # the job label a team pushed, as Prometheus keeps it


def pushgateway_name(team: str) -> str:
    """The team's Pushgateway: its Helm release, and the chart's full name (Service, ServiceMonitor)."""
    return f"{PUSHGATEWAY_RELEASE}-{team}"


def pushgateway_pod_labels(team: str) -> dict[str, str]:
    """The labels the chart puts on the team's Pushgateway pod (prometheus-pushgateway 3.8.0 _helpers.tpl
    selectorLabels: app.kubernetes.io/name and app.kubernetes.io/instance, the release's name)."""
    return {"app.kubernetes.io/name": PUSHGATEWAY_CHART_NAME, "app.kubernetes.io/instance": pushgateway_name(team)}


def pushgateway_url(team: str) -> str:
    """Where the team's jobs push their checkpoint durations (the chart's Service, named by fullnameOverride)."""
    return f"http://{pushgateway_name(team)}.{MONITORING_NAMESPACE}.svc.cluster.local:{PUSHGATEWAY_PORT}"


def pushgateway_values(team: str) -> Manifest:
    """The team's Pushgateway: one replica on nodes without GPUs (it tolerates no taint), scraped with the scrape's
    labels winning (honorLabels false) and the team's namespace as the series' namespace."""
    # The chart's pod labels (pushgateway_pod_labels) are not set again here (a duplicate key that Helm accepts and
    # Flux and kustomize refuse).
    return {"fullnameOverride": pushgateway_name(team),
            "serviceMonitor": {"enabled": True, "namespace": MONITORING_NAMESPACE, "honorLabels": False,
                               "relabelings": [{"action": "replace", "targetLabel": "namespace",
                                                "replacement": team}]},
            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}}


def pushgateway_network_policy(team: str) -> Manifest:
    """Who may reach the team's Pushgateway: pods of the team's namespace (to push), and Prometheus (to scrape)."""
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": meta(pushgateway_name(team), MONITORING_NAMESPACE),
            "spec": {"podSelector": {"matchLabels": pushgateway_pod_labels(team)}, "policyTypes": ["Ingress"],
                     "ingress": [{"from": [
                         {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team}}},
                         {"podSelector": {"matchLabels": dict(PROMETHEUS_POD_LABELS)}}],
                         "ports": [{"protocol": "TCP", "port": PUSHGATEWAY_PORT}]}]}}


def checkpoint_push_settings(team: str) -> dict[str, str]:
    """What a team's checkpoint-policy ConfigMap says about the metric (environment variables of its jobs)."""
    return {"CHECKPOINT_METRIC": CHECKPOINT_METRIC,
            "CHECKPOINT_PUSHGATEWAY_URL": pushgateway_url(team),
            # One group per job; the namespace comes from the gateway (the team's), not from the push.
            "CHECKPOINT_PUSH_PATH": "/metrics/job/<job name>"}


def checkpoint_alert_expr(allowed_seconds: float) -> str:
    """A job's last pushed checkpoint took longer than the goodput model allows (pushed in the last hours); by the
    team's namespace (its Pushgateway's) and the job it pushed as."""
    by = f"namespace, {PUSHED_JOB}"
    return (f"max by ({by}) ({CHECKPOINT_METRIC}) > {allowed_seconds:.0f} and on ({by}) "
            f"(time() - max by ({by}) (push_time_seconds) < {CHECKPOINT_FRESH_SECONDS})")

