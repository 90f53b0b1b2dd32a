"""kube-prometheus-stack and OpenCost values, the recording and alerting rules, the Grafana dashboard."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.kubernetes.objects.alerting import ALERTING_LABEL
from components.kubernetes.objects.common import (
    MONITORING_NAMESPACE,
    NODE_GROUP_LABEL,
    OPENCOST_NAMESPACE,
    PROMETHEUS_RELEASE,
    Manifest,
    meta,
)
from components.kubernetes.objects.jobs import checkpoint_alert_expr, job_recording_rules, ksm_job_values
from components.kubernetes.objects.serving import ServedModel
from components.kubernetes.objects.serving_telemetry import RUNBOOK as SERVING_RUNBOOK
from components.kubernetes.objects.serving_telemetry import serving_alerts, serving_recording_rules

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
        # Kueue Workloads as metrics (objects/jobs.py): each job's queue time, runtime, evictions and requeues.
        "kube-state-metrics": {"metricLabelsAllowlist": KUBE_STATE_METRICS_LABELS, **ksm_job_values()},
        # The node's name on every node-exporter series (instance is the host's address), so node metrics join
        # DCGM's Hostname and kube-state-metrics' node (the jobs dashboard's I/O-pressure panel).
        "prometheus-node-exporter": {"prometheus": {"monitor": {"relabelings": [
            {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node", "action": "replace"}]}}},
        # Routing comes from the stack's AlertmanagerConfigs (objects/alerting.py), one per receiver, all in the
        # monitoring namespace, where the Alertmanager runs. Only that namespace's are selected (the chart's default
        # {} selects every namespace's); OnNamespaceExceptForAlertmanagerNamespace adds no namespace matcher to the
        # objects of the Alertmanager's own namespace, so their routes see the alerts of every team namespace, and
        # would confine an object selected elsewhere to its namespace's alerts (prometheus-operator v0.88.1
        # pkg/alertmanager/amcfg.go getEnforcer, otherNamespaceEnforcer.processRoute; operator.go
        # selectAlertmanagerConfigs: the namespace selector, then the label selector).
        "alertmanager": {"enabled": True, "alertmanagerSpec": {
            "alertmanagerConfigSelector": {"matchLabels": {ALERTING_LABEL: "true"}},
            "alertmanagerConfigNamespaceSelector": {"matchLabels": {
                "kubernetes.io/metadata.name": MONITORING_NAMESPACE}},
            "alertmanagerConfigMatcherStrategy": {"type": "OnNamespaceExceptForAlertmanagerNamespace"}}},
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
    "SlurmControllerMetricsAbsent": "slurm-controller", "SlurmNodesDown": "slurm-nodes-down-or-drained",
    "SlurmNodesDrained": "slurm-nodes-down-or-drained", "SlurmJobsPendingWhileNodesIdle": "slurm-jobs-waiting",
    "GpuXidError": "gpu-xid-errors", "GpuEccDoubleBitErrors": "gpu-ecc-errors", "GpuRowRemapFailure": "gpu-ecc-errors",
    "GpuTemperatureHigh": "gpu-temperature-and-power", "GpuPowerThrottling": "gpu-temperature-and-power",
    "GpuNvlinkErrors": "nvlink-errors", "NodeNotReady": "node-not-ready", "GpuAllocatedButIdle": "gpu-idle",
    "KueueQueueWaitHigh": "job-stuck-pending", "KueueInadmissibleWorkloads": "job-stuck-pending",
    "KueueQuotaExhausted": "quota-exhausted", "KueueWorkloadsEvicted": "workloads-evicted-or-preempted",
    "KueueWorkloadsPreempted": "workloads-evicted-or-preempted", "TeamSpendOverBudget": "team-spend-over-budget",
    "EfaRetransmitsHigh": "efa-nic-errors", "EfaRetransmitTimeouts": "efa-nic-errors",
    "EfaImpairedConnections": "efa-nic-errors", "EfaDeviceErrors": "efa-nic-errors",
    "FabricMetricsMissing": "telemetry-missing", "StorageMetricsMissing": "telemetry-missing",
    "FilesystemThroughputNearLimit": "storage-throughput-or-capacity",
    "FilesystemCapacityLow": "storage-throughput-or-capacity", "CheckpointBucketErrors": "checkpoint-bucket-errors",
    "CheckpointTooSlow": "checkpoint-too-slow", "LogsNotShipped": "logs-not-shipped",
    "LogShipperUnavailable": "logs-not-shipped", **SERVING_RUNBOOK,
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


RECORDING_INTERVAL_MINUTES = 1  # the recording group's interval: one sample of a rate per minute
SPEND_WINDOW_DAYS = 30  # a budget's window, shortened to Prometheus's retention when that is shorter
# kube-state-metrics exports allow-listed node labels as label_<name with every other character an underscore>.
KSM_NODE_GROUP_LABEL = "label_" + "".join(c if c.isalnum() else "_" for c in NODE_GROUP_LABEL)
GPU_PRICE_BY_GROUP = "gpu_cluster:gpu_unit_hour_usd:by_node_group"
GPU_PRICE_BY_NODE = "gpu_cluster:gpu_unit_hour_usd:by_node"
TEAM_GPU_COST = "gpu_cluster:gpu_cost_usd_per_hour:sum_by_namespace"
# On the PrometheusRule: the GPU groups the spend rules cannot price.
UNPRICED_ANNOTATION = "gpu-cluster/unpriced-gpu-groups"
# On the PrometheusRule: every priced GPU group's figure (catalog key, status, date), once for the whole rule; each
# team's spend alert names only its own groups' (a rule that repeated every group's in every team's alert grew with
# teams x groups: 93.7 MB at 1,000 of each, issue 37). A Kubernetes object's annotations together may hold 256 KiB
# (kubernetes apimachinery pkg/api/validation/objectmeta.go, TotalAnnotationSizeLimitB): some 2,300 groups
# (docs/limits.md).
PRICES_ANNOTATION = "gpu-cluster/gpu-prices"
# On the PrometheusRule: what the cloud's telemetry cannot see (GKE: the GPUDirect NICs), for the preview.
UNSEEN_ANNOTATION = "gpu-cluster/not-visible"


@dataclass(frozen=True)
class FabricSignals:
    """The fabric metrics Prometheus scrapes (``kind`` efa: the EFA node exporter's node_amazonefa_* counters, with a
    ``node`` label) on the node groups listed."""

    kind: str
    node_groups: tuple[str, ...]


@dataclass(frozen=True)
class StorageSignals:
    """The storage metrics Prometheus scrapes from the cloud's monitoring: the filesystem's (``filesystem``: fsx or
    managed-lustre, with its provisioned throughput and capacity where known) and the checkpoint bucket's requests
    (``bucket``: s3 or gcs, or None)."""

    filesystem: str | None
    throughput_bytes_per_s: float | None = None
    capacity_bytes: float | None = None
    bucket: str | None = None


@dataclass(frozen=True)
class LogSignals:
    """The log shipper Prometheus watches (its DaemonSet's name; Fluent Bit's own metrics through its
    ServiceMonitor)."""

    daemonset: str
    namespace: str


# Thresholds of the fabric and storage alerts: the project's choices, not published figures (docs/runbooks.md says
# what each means). SRD retransmits a share of packets by design (it sprays over paths); 1 % sustained is a path
# or a NIC in trouble.
EFA_RETRANSMIT_RATIO = 0.01
FS_THROUGHPUT_SHARE = 0.9  # of the provisioned throughput, for 15 minutes
FS_FREE_SHARE = 0.1  # of the capacity
BUCKET_ERROR_RATIO = 0.01  # of requests, server errors (S3 5xx; GCS UNAVAILABLE, INTERNAL, ...)
# GCS request_count's response_code values read as server-side errors (Cloud Monitoring metrics list, gcp-storage:
# api/request_count, response_code label; secondary: the code values as public alert policies use them).
GCS_SERVER_ERRORS = "UNAVAILABLE|INTERNAL|DEADLINE_EXCEEDED|RESOURCE_EXHAUSTED"


def fabric_alerts(fabric: FabricSignals, ksm_group_label: str) -> list[tuple[str, str, int, str, str]]:
    """(name, expr, minutes, severity, summary) of the fabric alerts. EFA counters from the driver's hw_counters
    (awsome-distributed-training efa-node-exporter amazon_efa_linux.go: retrans_pkts, retrans_timeout_events "SRD
    traffic reached timeout and required network path change", impaired_remote_conn_events "connections entered an
    impaired state, resulting in a reduced throughput rate limit", unresponsive_remote_events)."""
    if fabric.kind != "efa":
        return []
    groups = "|".join(sorted(fabric.node_groups))
    return [
        ("EfaRetransmitsHigh", "sum by (node) (rate(node_amazonefa_retrans_pkts[10m])) / sum by (node) "
         f"(rate(node_amazonefa_tx_pkts[10m])) > {EFA_RETRANSMIT_RATIO}", 15, "warning",
         "EFA on {{ $labels.node }} retransmits {{ $value | humanizePercentage }} of its packets"),
        ("EfaRetransmitTimeouts", "sum by (node) (increase(node_amazonefa_retrans_timeout_events[15m])) > 0", 0,
         "warning", "EFA traffic on {{ $labels.node }} timed out and changed network path"),
        ("EfaImpairedConnections", "sum by (node) (increase({__name__=~\"node_amazonefa_(impaired_remote_conn_events"
         "|unresponsive_remote_events)\"}[15m])) > 0", 0, "warning",
         "EFA connections from {{ $labels.node }} were impaired or their remote unresponsive"),
        ("EfaDeviceErrors", "sum by (node, device) (increase({__name__=~\"node_amazonefa_(rx_drops|cmds_err|"
         "rdma_read_wr_err|rdma_write_wr_err)\"}[10m])) > 0", 10, "warning",
         "EFA device {{ $labels.device }} on {{ $labels.node }} drops packets or fails work requests"),
        ("FabricMetricsMissing", f"count(kube_node_labels{{{ksm_group_label}=~\"{groups}\"}}) > "
         "(count(count by (node) (node_amazonefa_info)) or vector(0))", 30, "warning",
         "{{ $value }} EFA node(s) export no EFA counters: the fabric alerts cannot see them"),
    ]


def storage_alerts(storage: StorageSignals) -> list[tuple[str, str, int, str, str]]:
    """(name, expr, minutes, severity, summary) of the storage alerts, on what yet-another-cloudwatch-exporter (AWS:
    aws_fsx_*, aws_s3_* by dimension) or the stackdriver exporter (GCP) scrape."""
    out: list[tuple[str, str, int, str, str]] = []
    if storage.filesystem == "fsx":
        out.append(("StorageMetricsMissing", "absent(aws_fsx_free_data_storage_capacity_sum)", 30, "warning",
                    "no FSx for Lustre metric reaches Prometheus: the exporter or its IAM role is broken"))
        if storage.throughput_bytes_per_s:
            limit = FS_THROUGHPUT_SHARE * storage.throughput_bytes_per_s
            out.append(("FilesystemThroughputNearLimit", "sum by (dimension_FileSystemId) ({__name__=~"
                        "\"aws_fsx_data_(read|write)_bytes_sum\"}) / 60 > " f"{limit:.0f}", 15, "warning",
                        "FSx {{ $labels.dimension_FileSystemId }} moves {{ $value | humanize }}B/s, over "
                        f"{FS_THROUGHPUT_SHARE:.0%} of its provisioned throughput: checkpoints and reads queue"))
        if storage.capacity_bytes:
            out.append(("FilesystemCapacityLow", "min by (dimension_FileSystemId) "
                        f"(aws_fsx_free_data_storage_capacity_sum) < {FS_FREE_SHARE * storage.capacity_bytes:.0f}",
                        30, "warning", "FSx {{ $labels.dimension_FileSystemId }} has under "
                        f"{FS_FREE_SHARE:.0%} of its capacity free"))
    elif storage.filesystem == "managed-lustre":
        out.append(("StorageMetricsMissing", "absent({__name__=~\"stackdriver_.+_lustre_googleapis_com_.+\"})", 30,
                    "warning", "no Managed Lustre metric reaches Prometheus: the exporter or its Workload Identity "
                    "grant is broken"))
    if storage.bucket == "s3":
        out.append(("CheckpointBucketErrors", "sum by (dimension_BucketName) (aws_s3_5xx_errors_sum) / "
                    "sum by (dimension_BucketName) (aws_s3_all_requests_sum) > " f"{BUCKET_ERROR_RATIO}", 15,
                    "warning", "S3 answers {{ $value | humanizePercentage }} of the checkpoint bucket's requests "
                    "with server errors"))
    elif storage.bucket == "gcs":
        metric = "stackdriver_gcs_bucket_storage_googleapis_com_api_request_count"
        out.append(("CheckpointBucketErrors", f"sum by (bucket_name) (rate({metric}{{response_code=~"
                    f"\"{GCS_SERVER_ERRORS}\"}}[15m])) / sum by (bucket_name) (rate({metric}[15m])) > "
                    f"{BUCKET_ERROR_RATIO}", 15, "warning", "Cloud Storage answers {{ $value | humanizePercentage }} "
                    "of the checkpoint bucket's requests with server errors"))
    return out


def log_alerts(logs: LogSignals) -> list[tuple[str, str, int, str, str]]:
    """(name, expr, minutes, severity, summary) of the log shipper's alerts (Fluent Bit's output metrics,
    fluentbit_output_retries_failed_total and fluentbit_output_dropped_records_total; kube-state-metrics' DaemonSet
    status)."""
    return [
        ("LogsNotShipped", "sum by (name) (rate({__name__=~\"fluentbit_output_(retries_failed|dropped_records)_total"
         "\"}[10m])) > 0", 10, "warning", "Fluent Bit output {{ $labels.name }} drops log records"),
        ("LogShipperUnavailable", f"max(kube_daemonset_status_number_unavailable{{namespace=\"{logs.namespace}\", "
         f"daemonset=\"{logs.daemonset}\"}}) > 0", 15, "warning",
         "{{ $value }} node(s) run no log shipper: their container logs are not in CloudWatch"),
    ]


@dataclass(frozen=True)
class SpendPricing:
    """What a GPU unit-hour costs on each node group (the preview's figures) and the window budgets are watched
    over; ``group_basis`` names each priced group's figure (catalog key, status, date) for the alert's readers."""

    gpu_unit_hour_usd: Mapping[str, float]
    window_days: int
    group_basis: Mapping[str, str]
    unpriced: tuple[str, ...] = ()  # GPU node groups without a price read: their GPU hours are not counted

    def basis_of(self, groups: Sequence[str] | None = None) -> str:
        """The figures of ``groups`` (every priced group when None), by group name: what the PrometheusRule's
        prices annotation (every group) and a team's alert (its own groups) say."""
        names = sorted(self.group_basis) if groups is None else sorted({g for g in groups if g in self.group_basis})
        return "; ".join(f"{name}: {self.group_basis[name]}" for name in names)

    @property
    def basis(self) -> str:
        """Every priced group's figure."""
        return self.basis_of()


def spend_recording_rules(spend: SpendPricing) -> list[Manifest]:
    """The price of a GPU unit by node group (a constant series per group), by node (through the node's group label,
    which kube-state-metrics exports), and each namespace's GPU cost per hour: the GPUs its running pods request
    times their node's price."""
    by_group = " or ".join(f"label_replace(vector({usd:.6g}), \"{KSM_NODE_GROUP_LABEL}\", \"{group}\", \"\", \"\")"
                           for group, usd in sorted(spend.gpu_unit_hour_usd.items()))
    return [
        {"record": GPU_PRICE_BY_GROUP, "expr": by_group},
        {"record": GPU_PRICE_BY_NODE,
         "expr": f"max by (node) (kube_node_labels * 0 + on ({KSM_NODE_GROUP_LABEL}) group_left () "
                 f"{GPU_PRICE_BY_GROUP})"},
        # max by (...) first: two kube-state-metrics replicas (or a rollout) export each series twice.
        {"record": TEAM_GPU_COST,
         "expr": "sum by (namespace) (max by (namespace, pod, container, node) "
                 "(kube_pod_container_resource_requests{resource=\"nvidia_com_gpu\"}) "
                 "* on (namespace, pod) group_left () (max by (namespace, pod) "
                 "(kube_pod_status_phase{phase=\"Running\"}) == 1) "
                 f"* on (node) group_left () {GPU_PRICE_BY_NODE})"},
    ]


def spend_pricing(pools: Sequence[Any], retention_days: int) -> SpendPricing:
    """The spend alert's prices from the GPU pools (``GpuPool``: name, gpu_unit_hour_usd, price_basis, gpus)."""
    priced = {p.name: p.gpu_unit_hour_usd for p in pools if p.gpu_unit_hour_usd is not None}
    basis = {p.name: f"{p.price_basis} / {p.gpus_per_node * p.gpu_units_per_gpu} GPU units"
             for p in pools if p.name in priced}
    return SpendPricing(gpu_unit_hour_usd=priced, window_days=min(SPEND_WINDOW_DAYS, retention_days),
                        group_basis=basis, unpriced=tuple(sorted(p.name for p in pools if p.name not in priced)))


def prometheus_rules(runbook_url: str = "docs/runbooks.md", team_budgets: Mapping[str, float] | None = None,
                     spend: SpendPricing | None = None, slurm: bool = False, *,
                     fabric: FabricSignals | None = None, storage: StorageSignals | None = None,
                     logs: LogSignals | None = None, checkpoint_allowed_s: float | None = None,
                     not_visible: Sequence[str] = (),
                     team_groups: Mapping[str, Sequence[str]] | None = None,
                     serving: Sequence[ServedModel] = ()) -> Manifest:
    """Recording rules and alerts for the seed's minimum telemetry: GPU utilization, errors (XID, ECC,
    row remapping, NVLink), temperature and power, nodes not ready; queue wait time and quota denials (evictions,
    preemptions, inadmissible workloads, exhausted quota); each team's GPU spend against its budget (``spend``).
    Every alert links its runbook section (``runbook_url``, the annotation kube-prometheus-stack's own rules use).
    The telemetry of issue 27: the fabric (``fabric``), the filesystem and bucket (``storage``), the log shipper
    (``logs``) and checkpoints slower than the goodput model allows (``checkpoint_allowed_s``), and each job's
    recording rules (objects/jobs.py); ``not_visible`` names what the cloud's telemetry cannot see. ``team_groups``
    names each team's node groups (its quotas'): its spend alert names their prices, the rule every group's. Each
    served model in ``serving`` gets its recording rules and alerts (objects/serving_telemetry.py)."""
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
    if slurm:
        # slurmctld's own metrics (MetricsType=metrics/openmetrics, scraped by the Slinky operator's ServiceMonitor):
        # slurm_nodes_down, slurm_nodes_drain, slurm_nodes_idle, slurm_jobs_pending (SchedMD slurm-26-05-1-1
        # src/plugins/metrics/openmetrics/openmetrics.c, doc/html/metrics.shtml).
        alerts += [
            alert("SlurmControllerMetricsAbsent", "absent(slurm_nodes_idle)", 10, "critical",
                  "slurmctld's metrics are absent: the Slurm controller is down or no longer scraped"),
            alert("SlurmNodesDown", "max(slurm_nodes_down) > 0", 10, "warning",
                  "{{ $value }} Slurm node(s) are down: paid GPUs no job can use"),
            alert("SlurmNodesDrained", "max(slurm_nodes_drain) > 0", 30, "warning",
                  "{{ $value }} Slurm node(s) are drained: find the reason (sinfo -R) and resume or replace them"),
            alert("SlurmJobsPendingWhileNodesIdle", "max(slurm_jobs_pending) > 0 and max(slurm_nodes_idle) > 0", 30,
                  "info", "Slurm jobs wait while nodes are idle: limits, budgets or partitions hold them"),
        ]
    for name, expr, minutes, severity, summary in [
            *(fabric_alerts(fabric, KSM_NODE_GROUP_LABEL) if fabric is not None else []),
            *(storage_alerts(storage) if storage is not None else []),
            *(log_alerts(logs) if logs is not None else [])]:
        alerts.append(alert(name, expr, minutes, severity, summary))
    if checkpoint_allowed_s is not None:
        alerts.append(alert("CheckpointTooSlow", checkpoint_alert_expr(checkpoint_allowed_s), 0, "warning",
                            "a checkpoint of {{ $labels.exported_job }} in {{ $labels.namespace }} took {{ $value | "
                            f"humanizeDuration }}}}, more than the {checkpoint_allowed_s:.0f} s the goodput model "
                            "allows"))
    serving_rules = []
    for name, expr, minutes, severity, summary, labels in serving_alerts(serving):
        rule = alert(name, expr, minutes, severity, summary)
        rule["labels"].update(labels)
        serving_rules.append(rule)
    budget_rules: list[Manifest] = []
    if spend is not None and spend.gpu_unit_hour_usd:
        recording += spend_recording_rules(spend)
        # Each team's budget seen from inside the cluster: what its running pods' GPUs cost over the window, at the
        # cost preview's prices, against its monthly budget prorated to the window. Cloud budgets cannot see a
        # team's share of shared nodes (components/aws/cost.py, components/gcp/cost.py). Summing what was spent
        # (not projecting a rate over a month) keeps a two-week Capacity Block inside a budget sized for it.
        for team, usd in sorted((team_budgets or {}).items()):
            allowance = usd * spend.window_days * 24 / HOURS_PER_MONTH
            rule = alert("TeamSpendOverBudget",
                         f"sum_over_time({TEAM_GPU_COST}{{namespace=\"{team}\"}}[{spend.window_days}d]) "
                         f"/ {60 // RECORDING_INTERVAL_MINUTES} > {allowance:.2f}", 10, "warning",
                         f"team {team} used {{{{ $value | humanize }}}} USD of GPU time in the last "
                         f"{spend.window_days} days, more than its budget of ${usd:,.0f} a month allows "
                         f"(${allowance:,.0f}); GPU hours priced as the cost preview prices them")
            rule["labels"]["team"] = team
            # Only the team's own groups: Kueue admits its workloads to the flavors of its ClusterQueue, whose
            # quota it borrows in the cohort (kueue.sigs.k8s.io docs, Concepts > Cluster Queue: "the first flavor
            # in the ClusterQueue's flavors list that has enough unused quota in the ClusterQueue or the
            # ClusterQueue's cohort"). Every group's figure is the PrometheusRule's PRICES_ANNOTATION; the expression
            # prices GPU hours on any group at its recorded price either way.
            own = list((team_groups or {}).get(team, ()))
            if prices := spend.basis_of(own):
                rule["annotations"]["prices"] = prices
            if unpriced := sorted({g for g in own if g in spend.unpriced}):
                rule["annotations"]["unpriced"] = (f"{', '.join(unpriced)}: no price read, GPU hours there are "
                                                   "not counted")
            budget_rules.append(rule)
    annotations = {
        **({PRICES_ANNOTATION: spend.basis} if spend is not None and spend.gpu_unit_hour_usd else {}),
        **({UNPRICED_ANNOTATION: ", ".join(spend.unpriced)} if spend is not None and spend.unpriced else {}),
        **({UNSEEN_ANNOTATION: "; ".join(not_visible)} if not_visible else {})}
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {**meta("gpu-cluster", MONITORING_NAMESPACE), **({"annotations": annotations} if annotations
                                                                    else {})},
        "spec": {"groups": [
            {"name": "gpu-cluster.recording", "interval": f"{RECORDING_INTERVAL_MINUTES}m", "rules": recording},
            {"name": "gpu-cluster.jobs", "interval": f"{RECORDING_INTERVAL_MINUTES}m", "rules": job_recording_rules()},
            {"name": "gpu-cluster.alerts", "rules": alerts},
            # Each served model's, at its objectives (objects/serving_telemetry.py).
            *([{"name": "gpu-cluster.serving.recording", "interval": f"{RECORDING_INTERVAL_MINUTES}m",
                "rules": serving_recording_rules(serving)},
               {"name": "gpu-cluster.serving", "rules": serving_rules}] if serving else []),
            # A month of samples per team is read at each evaluation: every 5 minutes is enough for a budget.
            *([{"name": "gpu-cluster.budgets", "interval": "5m", "rules": budget_rules}] if budget_rules else []),
        ]},
    }


def spend_watch_lines(rules: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the preview says of the in-cluster spend alerts in ``rules`` (PrometheusRule objects): the teams and
    budgets watched, the window, the prices used and the GPU groups left unpriced (the rule's annotations; a graph
    saved before issue 37 has them on each alert instead)."""
    watched: list[tuple[str, str, Mapping[str, Any]]] = []
    for rule in rules:
        for group in (rule.get("spec") or {}).get("groups") or []:
            for r in group.get("rules") or []:
                if r.get("alert") == "TeamSpendOverBudget":
                    watched.append((str(r["labels"].get("team")), str(r.get("expr", "")), r.get("annotations") or {}))
    notes = [(r.get("metadata") or {}).get("annotations") or {} for r in rules]
    unpriced = [str(n.get(UNPRICED_ANNOTATION, "")) for n in notes]
    if not watched:
        missing = ", ".join(u for u in unpriced if u)
        return [f"warning: no in-cluster spend alert: no price read for the GPU groups {missing} (components/catalog/"
                "prices_*.yaml), so team budgets on shared nodes are watched by nothing; add the price with its "
                "source, or run `blueprint prices refresh` (AWS on-demand)"] if missing else []
    window = re.search(r"\[(\d+)d\]", watched[0][1])
    prices = "; ".join(str(n[PRICES_ANNOTATION]) for n in notes if n.get(PRICES_ANNOTATION))
    left = ", ".join(u for u in unpriced if u)
    if not prices:  # a graph saved before issue 37: every alert repeated every group's figures
        prices = str(watched[0][2].get("prices", "?"))
        left = str(watched[0][2].get("unpriced", "")).split(": no price read", 1)[0]
    lines = [f"team GPU spend watched in the cluster (TeamSpendOverBudget: GPU hours of running pods over the last "
             f"{window.group(1) if window else '?'} days, at this preview's prices): "
             + ", ".join(sorted(team for team, _, _ in watched)),
             f"  prices: {prices}"]
    if left:
        lines.append(f"  warning: {left}: no price read, GPU hours there are not counted")
    return lines


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


