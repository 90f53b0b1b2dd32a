"""kube-prometheus-stack and OpenCost values, the recording and alerting rules, the Grafana dashboard."""

from __future__ import annotations

import json
from collections.abc import Mapping

from components.kubernetes.objects.common import (
    MONITORING_NAMESPACE,
    NODE_GROUP_LABEL,
    OPENCOST_NAMESPACE,
    PROMETHEUS_RELEASE,
    Manifest,
    meta,
)
from components.spec.platform import AlertReceiverSpec, AlertsSpec

KUBE_STATE_METRICS_LABELS = [
    "namespaces=[team,cost-center,environment,owner]",
    "pods=[team,cost-center,model,experiment,kueue.x-k8s.io/queue-name]",
    f"nodes=[{NODE_GROUP_LABEL},node.kubernetes.io/instance-type,topology.kubernetes.io/zone]",
]

def prometheus_stack_values(retention_days: int, storage_gib: int, storage_class_name: str,
                            grafana_secret: str) -> Manifest:
    """kube-prometheus-stack values: scrape every ServiceMonitor and rule in the cluster, keep data on
    an encrypted volume, export the billing labels of namespaces and pods (OpenCost aggregates by them),
    and take Grafana's admin credentials from a generated Secret instead of the chart's default."""
    return {
        "prometheus": {"prometheusSpec": {
            "retention": f"{retention_days}d",
            "serviceMonitorSelectorNilUsesHelmValues": False,
            "podMonitorSelectorNilUsesHelmValues": False,
            "ruleSelectorNilUsesHelmValues": False,
            "storageSpec": {"volumeClaimTemplate": {"spec": {
                "storageClassName": storage_class_name,
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": f"{storage_gib}Gi"}},
            }}},
        }},
        "grafana": {
            "admin": {"existingSecret": grafana_secret, "userKey": "admin-user", "passwordKey": "admin-password"},
            "sidecar": {"dashboards": {"enabled": True, "label": "grafana_dashboard", "searchNamespace": "ALL"}},
        },
        "kube-state-metrics": {"metricLabelsAllowlist": KUBE_STATE_METRICS_LABELS},
        # Routing comes from the stack's AlertmanagerConfig (objects/telemetry.py alertmanager_config); without a
        # namespace matcher its routes see every alert (matcher strategy None).
        "alertmanager": {"enabled": True, "alertmanagerSpec": {
            "alertmanagerConfigSelector": {"matchLabels": {ALERTING_LABEL: "true"}},
            "alertmanagerConfigMatcherStrategy": {"type": "None"}}},
    }


def opencost_values(cluster_name: str) -> Manifest:
    """OpenCost reading the in-cluster Prometheus; cost per team, cost-center and model is the
    allocation API aggregated by label (``/allocation?aggregate=label:team``)."""
    return {"opencost": {
        "exporter": {"defaultClusterId": cluster_name},
        "prometheus": {"internal": {
            "enabled": True, "namespaceName": MONITORING_NAMESPACE,
            "serviceName": f"{PROMETHEUS_RELEASE}-prometheus", "port": 9090,
        }},
        # honorLabels keeps the metrics' own namespace label (the team), which the spend rules group by.
        "metrics": {"serviceMonitor": {"enabled": True, "namespace": OPENCOST_NAMESPACE, "honorLabels": True}},
        "ui": {"enabled": True},
    }}


def _alert(name: str, expr: str, minutes: int, severity: str, summary: str, runbook: str) -> Manifest:
    return {"alert": name, "expr": expr, "for": f"{minutes}m", "labels": {"severity": severity},
            "annotations": {"summary": summary, "runbook_url": runbook}}


# Each alert's section of docs/runbooks.md (the anchor is the section's heading).
RUNBOOK_SECTIONS = {
    "GpuXidError": "gpu-xid-errors", "GpuEccDoubleBitErrors": "gpu-ecc-errors", "GpuRowRemapFailure": "gpu-ecc-errors",
    "GpuTemperatureHigh": "gpu-temperature-and-power", "GpuPowerThrottling": "gpu-temperature-and-power",
    "GpuNvlinkErrors": "nvlink-errors", "NodeNotReady": "node-not-ready", "GpuAllocatedButIdle": "gpu-idle",
    "KueueQueueWaitHigh": "job-stuck-pending", "KueueInadmissibleWorkloads": "job-stuck-pending",
    "KueueQuotaExhausted": "quota-exhausted", "KueueWorkloadsEvicted": "workloads-evicted-or-preempted",
    "KueueWorkloadsPreempted": "workloads-evicted-or-preempted", "TeamSpendOverBudget": "team-spend-over-budget",
}
HOURS_PER_MONTH = 730  # the hours in an average month, as cloud price pages and OpenCost's own examples use
# A namespace's spend per hour from OpenCost's metrics (opencost.io "OpenCost Metrics": container_*_allocation by
# container with its node, node_*_hourly_cost by node): each resource's allocation times its node's price, told
# apart by a resource label so that the three sums add up instead of one hiding another.
TEAM_COST_EXPR = (
    "sum by (namespace) ("
    "label_replace(container_gpu_allocation * on (node) group_left () node_gpu_hourly_cost, "
    "\"resource\", \"gpu\", \"\", \"\") or "
    "label_replace(container_cpu_allocation * on (node) group_left () node_cpu_hourly_cost, "
    "\"resource\", \"cpu\", \"\", \"\") or "
    "label_replace(container_memory_allocation_bytes / 1073741824 * on (node) group_left () node_ram_hourly_cost, "
    "\"resource\", \"ram\", \"\", \"\"))")


def prometheus_rules(runbook_url: str = "docs/runbooks.md",
                     team_budgets: Mapping[str, float] | None = None) -> Manifest:
    """Recording rules and alerts for the seed's minimum telemetry: GPU utilization, errors (XID, ECC,
    row remapping, NVLink), temperature and power, nodes not ready; queue wait time and quota denials (evictions,
    preemptions, inadmissible workloads, exhausted quota). Every alert links its runbook section (``runbook_url``,
    the annotation kube-prometheus-stack's own rules use)."""
    recording = [
        {"record": "gpu_cluster:gpu_utilization:avg_by_namespace",
         "expr": "avg by (namespace) (DCGM_FI_DEV_GPU_UTIL{namespace!=\"\"})"},
        {"record": "gpu_cluster:gpu_allocated:sum_by_namespace",
         "expr": "sum by (namespace) (kube_pod_container_resource_requests{resource=\"nvidia_com_gpu\"})"},
        {"record": "gpu_cluster:gpu_power_watts:sum_by_node",
         "expr": "sum by (Hostname) (DCGM_FI_DEV_POWER_USAGE)"},
        {"record": "gpu_cluster:queue_wait_seconds:p90_by_cluster_queue",
         "expr": "histogram_quantile(0.9, sum by (le, cluster_queue) "
                 "(rate(kueue_admission_wait_time_seconds_bucket[30m])))"},
        {"record": "gpu_cluster:cost_usd_per_hour:sum_by_namespace", "expr": TEAM_COST_EXPR},
        {"record": "gpu_cluster:quota_usage_ratio:by_cluster_queue",
         "expr": "sum by (cluster_queue, resource) (kueue_cluster_queue_resource_usage) / "
                 "sum by (cluster_queue, resource) (kueue_cluster_queue_nominal_quota)"},
    ]

    def alert(name: str, expr: str, minutes: int, severity: str, summary: str) -> Manifest:
        return _alert(name, expr, minutes, severity, summary, f"{runbook_url}#{RUNBOOK_SECTIONS[name]}")
    alerts = [
        alert("GpuXidError", "max by (Hostname, gpu) (DCGM_FI_DEV_XID_ERRORS) > 0", 0, "critical",
              "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} reported XID {{ $value }}"),
        alert("GpuEccDoubleBitErrors", "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m]) > 0", 0, "critical",
              "uncorrectable ECC errors on GPU {{ $labels.gpu }} of {{ $labels.Hostname }}"),
        alert("GpuRowRemapFailure", "max by (Hostname, gpu) (DCGM_FI_DEV_ROW_REMAP_FAILURE) > 0", 0, "critical",
              "row remapping failed on GPU {{ $labels.gpu }} of {{ $labels.Hostname }}: replace the node"),
        alert("GpuNvlinkErrors", "sum by (Hostname, gpu) (increase(DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL[10m]) "
              "+ increase(DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL[10m]) "
              "+ increase(DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL[10m])) > 0", 10, "warning",
              "NVLink errors rising on GPU {{ $labels.gpu }} of {{ $labels.Hostname }}"),
        alert("GpuTemperatureHigh", "max by (Hostname, gpu) (DCGM_FI_DEV_GPU_TEMP) > 85", 10, "warning",
              "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} above 85 C"),
        alert("GpuPowerThrottling", "rate(DCGM_FI_DEV_POWER_VIOLATION[10m]) > 0", 15, "warning",
              "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} is throttled by its power limit"),
        alert("NodeNotReady", "max by (node) (kube_node_status_condition{condition=\"Ready\",status!=\"true\"}) > 0",
              10, "warning", "node {{ $labels.node }} is not Ready"),
        alert("GpuAllocatedButIdle",
              "gpu_cluster:gpu_utilization:avg_by_namespace < 10 and "
              "gpu_cluster:gpu_allocated:sum_by_namespace > 0", 60, "warning",
              "namespace {{ $labels.namespace }} holds GPUs at under 10% utilization"),
        alert("KueueQueueWaitHigh", "gpu_cluster:queue_wait_seconds:p90_by_cluster_queue > 3600", 30, "warning",
              "90% of workloads in {{ $labels.cluster_queue }} waited more than an hour for admission"),
        alert("KueueInadmissibleWorkloads", "sum by (cluster_queue) "
              "(kueue_pending_workloads{status=\"inadmissible\"}) > 0", 30, "warning",
              "{{ $labels.cluster_queue }} has workloads its quota cannot admit"),
        alert("KueueQuotaExhausted", "gpu_cluster:quota_usage_ratio:by_cluster_queue{resource=\"nvidia.com/gpu\"} >= 1",
              60, "info", "{{ $labels.cluster_queue }} uses all of its nominal GPU quota"),
        alert("KueueWorkloadsEvicted", "sum by (cluster_queue, reason) "
              "(increase(kueue_evicted_workloads_total[30m])) > 0", 0, "info",
              "{{ $labels.cluster_queue }} evicted workloads ({{ $labels.reason }})"),
        alert("KueueWorkloadsPreempted", "sum by (preempting_cluster_queue, reason) "
              "(increase(kueue_preempted_workloads_total[30m])) > 0", 0, "info",
              "workloads were preempted ({{ $labels.reason }})"),
    ]
    # Each team's budget seen from inside the cluster: its spend rate (OpenCost's list prices for what its pods
    # request) projected over a month, against its monthly budget. Cloud budgets cannot see a team's share of shared
    # nodes (components/aws/cost.py, components/gcp/cost.py).
    for team, usd in sorted((team_budgets or {}).items()):
        rule = alert("TeamSpendOverBudget",
                     f"gpu_cluster:cost_usd_per_hour:sum_by_namespace{{namespace=\"{team}\"}} * {HOURS_PER_MONTH} "
                     f"> {usd:g}", 360, "warning",
                     f"at its spend rate of the last 6 hours team {team} would cost more than its monthly budget of "
                     f"${usd:,.0f} ({{{{ $value | humanize }}}} USD a month, OpenCost list prices)")
        rule["labels"]["team"] = team
        alerts.append(rule)
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": meta("gpu-cluster", MONITORING_NAMESPACE),
        "spec": {"groups": [
            {"name": "gpu-cluster.recording", "interval": "1m", "rules": recording},
            {"name": "gpu-cluster.alerts", "rules": alerts},
        ]},
    }


ALERTING_LABEL = "gpu-cluster/alerting"
ALERTING_CONFIG = "gpu-cluster-alerts"
SILENT_RECEIVER = "none"


def _receiver(r: AlertReceiverSpec) -> Manifest:
    """An AlertmanagerConfig receiver (monitoring.coreos.com/v1alpha1) whose credential is a Secret key reference."""
    ref = {"name": r.secret, "key": r.key}
    if r.type == "slack":
        return {"name": r.name, "slackConfigs": [{"apiURL": ref, "sendResolved": True,
                                                  **({"channel": r.channel} if r.channel else {})}]}
    if r.type == "pagerduty":
        return {"name": r.name, "pagerdutyConfigs": [{"routingKey": ref, "sendResolved": True}]}
    if r.type == "email":
        return {"name": r.name, "emailConfigs": [{"to": ", ".join(r.to), "from": r.sender, "smarthost": r.smarthost,
                                                  **({"authUsername": r.username} if r.username else {}),
                                                  "authPassword": ref, "sendResolved": True}]}
    return {"name": r.name, "webhookConfigs": [{"urlSecret": ref, "sendResolved": True}]}


def alertmanager_config(alerts: AlertsSpec) -> Manifest:
    """The stack's alert routing as an AlertmanagerConfig in the monitoring namespace, selected by the chart's
    Alertmanager (matcher strategy None, so its routes see alerts of every namespace). The Prometheus operator makes its
    routes first children of the root route with continue, and resolves the Secret references when it builds the
    configuration: while a Secret is missing it rejects this object (an event, a warning in its log) and Alertmanager
    keeps running (prometheus-operator v0.88.0 pkg/alertmanager/operator.go selectAlertmanagerConfigs). Team routes
    match the alert's namespace or ClusterQueue (both are the team's name)."""
    # kube-prometheus-stack's always-firing Watchdog and its InfoInhibitor are plumbing, not news: stopped here (the
    # chart's own routes still send them to its null receiver).
    routes: list[Manifest] = [{"receiver": SILENT_RECEIVER, "continue": False, "matchers": [
        {"name": "alertname", "matchType": "=~", "value": "Watchdog|InfoInhibitor"}]}]
    for route in alerts.routes:
        severity = [{"name": "severity", "matchType": "=~", "value": "|".join(route.severity)}] if route.severity \
            else []
        if not route.teams:
            routes.append({"receiver": route.receiver, "matchers": severity, "continue": True})
        for team in route.teams:
            for label in ("namespace", "cluster_queue"):
                routes.append({"receiver": route.receiver, "continue": True,
                               "matchers": [*severity, {"name": label, "matchType": "=", "value": team}]})
    receivers = [_receiver(r) for r in alerts.receivers] + [{"name": SILENT_RECEIVER}]  # no config: sends nothing
    root = alerts.default_receiver or SILENT_RECEIVER
    return {
        "apiVersion": "monitoring.coreos.com/v1alpha1", "kind": "AlertmanagerConfig",
        "metadata": meta(ALERTING_CONFIG, MONITORING_NAMESPACE, {ALERTING_LABEL: "true"}),
        "spec": {"route": {"receiver": root, "groupBy": ["alertname", "cluster_queue", "namespace"],
                           "groupWait": "30s", "groupInterval": "5m", "repeatInterval": "4h", "routes": routes},
                 "receivers": receivers},
    }


def _panel(panel_id: int, title: str, expr: str, legend: str, unit: str, x: int, y: int) -> Manifest:
    return {
        "id": panel_id, "type": "timeseries", "title": title,
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "datasource": {"type": "prometheus", "uid": "prometheus"},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [{"refId": "A", "expr": expr, "legendFormat": legend}],
    }


def grafana_dashboard() -> Manifest:
    """A ConfigMap the Grafana sidecar loads: GPU utilization and queue time by team."""
    dashboard = {
        "title": "GPU cluster: utilization and queues by team",
        "uid": "gpu-cluster-teams",
        "schemaVersion": 39,
        "time": {"from": "now-24h", "to": "now"},
        "panels": [
            _panel(1, "GPU utilization by team", "gpu_cluster:gpu_utilization:avg_by_namespace",
                   "{{namespace}}", "percent", 0, 0),
            _panel(2, "GPUs allocated by team", "gpu_cluster:gpu_allocated:sum_by_namespace",
                   "{{namespace}}", "short", 12, 0),
            _panel(3, "Queue wait p90 by team", "gpu_cluster:queue_wait_seconds:p90_by_cluster_queue",
                   "{{cluster_queue}}", "s", 0, 8),
            _panel(4, "Quota usage / nominal", "gpu_cluster:quota_usage_ratio:by_cluster_queue",
                   "{{cluster_queue}} {{resource}}", "percentunit", 12, 8),
            _panel(5, "Pending workloads", "sum by (cluster_queue, status) (kueue_pending_workloads)",
                   "{{cluster_queue}} {{status}}", "short", 0, 16),
            _panel(6, "GPU power", "gpu_cluster:gpu_power_watts:sum_by_node", "{{Hostname}}", "watt", 12, 16),
        ],
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta("gpu-cluster-dashboard", MONITORING_NAMESPACE, {"grafana_dashboard": "1"}),
        "data": {"gpu-cluster.json": json.dumps(dashboard, indent=1)},
    }


