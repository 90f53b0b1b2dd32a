"""A served model's telemetry: the scrape of its engine, its recording rules and alerts at its objectives, and the
serving view of the jobs dashboard.

What vLLM exports (v0.11, vllm/v1/metrics/loggers.py ``PrometheusStatLogger``, every series labelled ``model_name``,
the ``--served-model-name``, and ``engine``): the histograms ``vllm:time_to_first_token_seconds`` and
``vllm:inter_token_latency_seconds`` (the gap between two output tokens: the objective's time per output token; its
older name ``vllm:time_per_output_token_seconds`` is deprecated in 0.11), the gauges ``vllm:num_requests_waiting``,
``vllm:num_requests_running`` and ``vllm:kv_cache_usage_perc`` (0 to 1), the counter
``vllm:generation_tokens_total``; and, from the HTTP server (prometheus-fastapi-instrumentator, which vLLM's API server
mounts), ``http_requests_total`` by ``handler`` and ``status`` grouped as 2xx/4xx/5xx. All on ``/metrics`` of the
serving port (vLLM docs, "Production Metrics").

The scrape is a PodMonitor in the team's namespace (kube-prometheus-stack selects every namespace's: objects/
telemetry.py), which the team's allow-metrics-scrape NetworkPolicy lets Prometheus reach; it copies the pod's
served-model label to ``served_model``, so the engine's series and the HTTP server's (which has no model label) are
told apart by the same label. The rules sit in the stack's PrometheusRule (objects/telemetry.py), their alerts
labelled with the team's namespace, so the team's routes (objects/alerting.py) take them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from components.kubernetes.objects.common import Manifest, meta
from components.kubernetes.objects.gateway import picker_name
from components.kubernetes.objects.serving import (
    MODEL_LABEL,
    NODE_PROVISION_S,
    ServedModel,
    selector,
    startup_allowance_s,
)

SERVED_MODEL = "served_model"  # the scrape's label of a series' model (the pod's MODEL_LABEL)
# What the Deployment says of its objectives, for the policy that wants an alert at each (policies/gpu_policies/
# inference.py inference-objective-alerted) and for the preview.
OBJECTIVE_PERCENTILE = "gpu-cluster/objective-percentile"
OBJECTIVE_TTFT = "gpu-cluster/objective-ttft-seconds"
OBJECTIVE_TPOT = "gpu-cluster/objective-tpot-seconds"
OBJECTIVE_FAILOVER = "gpu-cluster/objective-failover-seconds"  # when stated
# The computed cold start (components/sizing/inference.py: the weights at the measured read rate plus the engine's
# measured start), when known: the policy inference-failover-within-objective judges the failover objective by it.
COLD_START = "gpu-cluster/cold-start-seconds"
OBJECTIVE_LABEL = "objective"  # on each objective's alert: ttft or tpot
TTFT_METRIC = "vllm:time_to_first_token_seconds_bucket"
TPOT_METRIC = "vllm:inter_token_latency_seconds_bucket"
SCRAPE_INTERVAL = "30s"
RATE_WINDOW = "5m"  # ten scrapes: a percentile over fewer swings with every long request
# Thresholds of the saturation and error alerts: the project's choices (docs/runbooks.md says what each means).
KV_CACHE_FULL = 0.95  # of the KV-cache blocks, sustained: new requests wait or running ones are preempted
ERROR_RATIO = 0.01  # of the API's requests answered 5xx
RUNBOOK = {"ServedModelTtftOverObjective": "served-model-latency", "ServedModelTpotOverObjective":
           "served-model-latency", "ServedModelRequestsQueued": "served-model-saturated",
           "ServedModelKvCacheFull": "served-model-saturated", "ServedModelOverPeak": "served-model-saturated",
           "ServedModelErrors": "served-model-errors", "ServedModelDown": "served-model-down",
           "ServedModelReplicasUnavailable": "served-model-down",
           "ServedModelAutoscalerFailing": "served-model-saturated",
           "ServedModelPickerUnavailable": "served-model-saturated"}
# KEDA's operator counts each failed read of a ScaledObject's triggers (keda_scaled_object_errors_total, labels
# namespace and scaledObject: kedacore/keda v2.20.2 pkg/metricscollector/prommetrics.go). Scraped through the chart's
# ServiceMonitor in namespace keda, its own namespace label becomes exported_namespace (Prometheus keeps the target's
# namespace unless honor_labels, which the chart's ServiceMonitor does not set).
KEDA_ERRORS = "keda_scaled_object_errors_total"
# Recorded per model (labels namespace, served_model; the latency ones also quantile): what the dashboard reads.
TTFT_RECORD = "gpu_cluster:serving_ttft_seconds:objective_quantile"
TPOT_RECORD = "gpu_cluster:serving_tpot_seconds:objective_quantile"
TOKENS_RECORD = "gpu_cluster:serving_output_tokens:rate5m"
WAITING_RECORD = "gpu_cluster:serving_requests_waiting:sum"
KV_RECORD = "gpu_cluster:serving_kv_cache_usage:max"
ERRORS_RECORD = "gpu_cluster:serving_error_ratio:rate5m"


@dataclass(frozen=True)
class Objective:
    """One latency objective of a model as its alert states it."""

    name: str  # ttft or tpot
    alert: str
    metric: str
    seconds: float
    record: str
    what: str


def objectives(model: ServedModel) -> tuple[Objective, Objective]:
    """The model's time-to-first-token and time-per-output-token objectives."""
    o = model.spec.objectives
    return (Objective("ttft", "ServedModelTtftOverObjective", TTFT_METRIC, o.ttft_ms / 1000, TTFT_RECORD,
                      "time to first token"),
            Objective("tpot", "ServedModelTpotOverObjective", TPOT_METRIC, o.tpot_ms / 1000, TPOT_RECORD,
                      "time per output token"))


def objective_annotations(model: ServedModel) -> dict[str, str]:
    """The Deployment's statement of its objectives (seconds, and the percentile they hold at), and of its computed
    cold start when known."""
    ttft, tpot = objectives(model)
    failover = model.spec.objectives.failover_seconds
    return {OBJECTIVE_PERCENTILE: str(model.spec.objectives.percentile), OBJECTIVE_TTFT: f"{ttft.seconds:g}",
            OBJECTIVE_TPOT: f"{tpot.seconds:g}",
            **({OBJECTIVE_FAILOVER: f"{failover:g}"} if failover is not None else {}),
            **({COLD_START: f"{model.cold_start_s:.0f}"} if model.cold_start_s is not None else {})}


def pod_monitor(model: ServedModel, billing: Mapping[str, str]) -> Manifest:
    """The engine's scrape: ``/metrics`` on the serving port of the model's pods, with the model as ``served_model``."""
    source = "__meta_kubernetes_pod_label_" + "".join(c if c.isalnum() else "_" for c in MODEL_LABEL)
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
            "metadata": meta(model.name, model.namespace, labels=dict(billing)),
            "spec": {"selector": {"matchLabels": selector(model)},
                     "podMetricsEndpoints": [{"port": "http", "path": "/metrics", "interval": SCRAPE_INTERVAL,
                                              "relabelings": [{"sourceLabels": [source], "targetLabel": SERVED_MODEL,
                                                               "action": "replace"}]}]}}


def model_matchers(model: ServedModel) -> str:
    """The label matchers of a model's series: its team's namespace and its served_model label."""
    return f'namespace="{model.namespace}", {SERVED_MODEL}="{model.name}"'


def quantile_expr(model: ServedModel, metric: str) -> str:
    """The model's latency at its objective's percentile, over :data:`RATE_WINDOW`, across its replicas."""
    q = model.spec.objectives.percentile / 100
    return (f"histogram_quantile({q:g}, sum by (le, namespace, {SERVED_MODEL}) "
            f"(rate({metric}{{{model_matchers(model)}}}[{RATE_WINDOW}])))")


_BY = f"sum by (namespace, {SERVED_MODEL})"


def tokens_expr(model: ServedModel) -> str:
    """Output tokens per second over the model's replicas."""
    return f"{_BY} (rate(vllm:generation_tokens_total{{{model_matchers(model)}}}[{RATE_WINDOW}]))"


def waiting_expr(model: ServedModel) -> str:
    """Requests waiting for a KV-cache slot over the model's replicas."""
    return f"{_BY} (vllm:num_requests_waiting{{{model_matchers(model)}}})"


def kv_expr(model: ServedModel) -> str:
    """The fullest replica's KV cache, 0 to 1."""
    return f"max by (namespace, {SERVED_MODEL}) (vllm:kv_cache_usage_perc{{{model_matchers(model)}}})"


def errors_expr(model: ServedModel) -> str:
    """The share of the API's requests answered 5xx."""
    return (f"{_BY} (rate(http_requests_total{{{model_matchers(model)}, status=\"5xx\"}}[{RATE_WINDOW}])) / "
            f"{_BY} (rate(http_requests_total{{{model_matchers(model)}}}[{RATE_WINDOW}]))")


def serving_recording_rules(models: Sequence[ServedModel]) -> list[Manifest]:
    """Per model: its latencies at the objective's percentile, output tokens per second, requests waiting, the
    fullest replica's KV cache and the API's 5xx share (the alerts compare the same expressions)."""
    out: list[Manifest] = []
    for m in models:
        q = f"{m.spec.objectives.percentile / 100:g}"
        out += [
            *({"record": o.record, "expr": quantile_expr(m, o.metric), "labels": {"quantile": q}}
              for o in objectives(m)),
            {"record": TOKENS_RECORD, "expr": tokens_expr(m)},
            {"record": WAITING_RECORD, "expr": waiting_expr(m)},
            {"record": KV_RECORD, "expr": kv_expr(m)},
            {"record": ERRORS_RECORD, "expr": errors_expr(m)},
        ]
    return out


def serving_alerts(models: Sequence[ServedModel]) -> list[tuple[str, str, int, str, str, dict[str, str]]]:
    """(name, expr, minutes, severity, summary, labels) of each model's alerts: each latency objective at its
    percentile (the alert the policy inference-objective-alerted looks for), requests queued, KV cache full, demand
    over the design peak, 5xx answers, no replica scraped, fewer replicas available than the floor, and, when
    autoscaled, KEDA failing to read its signal."""
    out: list[tuple[str, str, int, str, str, dict[str, str]]] = []
    for m in models:
        labels = {"namespace": m.namespace, SERVED_MODEL: m.name}
        p = m.spec.objectives.percentile
        for o in objectives(m):
            out.append((o.alert, f"{quantile_expr(m, o.metric)} > {o.seconds:g}", 10, "warning",
                        f"p{p} {o.what} of {m.name} is {{{{ $value | humanizeDuration }}}}, over its objective of "
                        f"{o.seconds * 1000:g} ms", {**labels, OBJECTIVE_LABEL: o.name}))
        out += [
            ("ServedModelRequestsQueued", f"{waiting_expr(m)} > 0", 15, "warning",
             f"requests to {m.name} have waited for a free KV-cache slot for 15 minutes: more than its replicas hold",
             labels),
            ("ServedModelKvCacheFull", f"{kv_expr(m)} > {KV_CACHE_FULL:g}", 15, "warning",
             f"a replica of {m.name} has used over {KV_CACHE_FULL:.0%} of its KV cache for 15 minutes: requests queue "
             "or are preempted", labels),
            ("ServedModelErrors", f"{errors_expr(m)} > {ERROR_RATIO:g}", 10, "warning",
             f"{m.name} answers {{{{ $value | humanizePercentage }}}} of its requests with server errors", labels),
            # Not before a new node has joined and a replica has had its startup probe's allowance to load the weights.
            ("ServedModelDown", f"absent(vllm:num_requests_running{{{model_matchers(m)}}})",
             -(-(startup_allowance_s(m.cold_start_s) + NODE_PROVISION_S) // 60), "critical",
             f"no replica of {m.name} is scraped: the model is down, still loading, or no longer scraped", labels),
            ("ServedModelReplicasUnavailable", f"max(kube_deployment_status_replicas_available{{namespace="
             f"\"{m.namespace}\", deployment=\"{m.name}\"}}) < {m.spec.replicas.min}", 15, "warning",
             f"{m.name} has {{{{ $value }}}} replica(s) available, under its floor of {m.spec.replicas.min}", labels),
        ]
        if m.routed:
            # The picker fails open: requests still flow, balanced without regard to the replicas' queues.
            out.append(("ServedModelPickerUnavailable", f"max(kube_deployment_status_replicas_available{{namespace="
                        f"\"{m.namespace}\", deployment=\"{picker_name(m.name)}\"}}) < 1", 10, "warning",
                        f"the endpoint picker of {m.name} is not available: the gateway sends its requests to any "
                        "replica, whatever its queue and KV cache", labels))
        if m.autoscaled:
            # A query that fails leaves the replicas where they are: demand then grows unanswered.
            out.append(("ServedModelAutoscalerFailing", f"sum(increase({KEDA_ERRORS}{{exported_namespace="
                        f"\"{m.namespace}\", scaledObject=\"{m.name}\"}}[10m])) > 0", 10, "warning",
                        f"KEDA cannot read the requests in flight of {m.name}: its replicas stay where they are "
                        "whatever the demand", labels))
        if (peak := m.spec.objectives.peak_output_tokens_per_second) is not None:
            out.append(("ServedModelOverPeak", f"{tokens_expr(m)} > {peak:g}", 30, "warning",
                        f"{m.name} generates {{{{ $value | humanize }}}} tokens/s, over the {peak:g} it was sized for",
                        labels))
    return out
