"""A served model's autoscaling: KEDA scales its Deployment between ``replicas.min`` and ``replicas.max`` on the
engine's own queue and batch, read from the stack's Prometheus; the node autoscaler (the Cluster Autoscaler on EKS,
GKE's on a node pool with minSize < maxSize) brings the GPU nodes for replicas the scheduler cannot place.

Why KEDA and not the HorizontalPodAutoscaler with prometheus-adapter: both end in an HPA on an external metric; KEDA's
Prometheus scaler takes the PromQL per ScaledObject, in the team's namespace beside its Deployment, where the adapter
needs every query written into its own cluster-wide rules. KEDA 2.20.2 (chart kedacore/charts 2.20.2) is tested on
Kubernetes 1.33 to 1.35 (keda.sh/docs/2.20/operate/cluster, "Kubernetes Compatibility").

The signal (vLLM v0.11 metrics, objects/serving_telemetry.py): the requests in flight, ``vllm:num_requests_running``
(the batch) plus ``vllm:num_requests_waiting`` (the queue: requests no KV-cache block is free for), summed over the
model's replicas. As an ``AverageValue`` target the HPA asks for ceil(in flight / target) replicas (Kubernetes,
"Horizontal Pod Autoscaling", algorithm details; KEDA's default metricType), so a queue adds replicas in proportion to
it and an idle model falls back to the floor. Per replica, by default, the sequences of the full context its KV cache
holds (``blueprint sizing``, the capacity the rule inference-concurrency-fits sizes with): a replica is not asked to
hold more than its cache is sure to; a measured run at shorter requests may justify more
(``inference.models[].autoscaling.requestsPerReplica``). The HPA leaves the count alone while the ratio of the metric
to its target is within its tolerance (0.1 by default, kube-controller-manager --horizontal-pod-autoscaler-tolerance;
per HPA only where the HPAConfigurableTolerance feature is on), so the target is the per-replica figure divided by 1.1,
rounded up to two decimals (KEDA's threshold takes a decimal): the first request past the figure scales, not the
tenth. One selector sums both gauges, so a replica that exports only one of them still counts, and no series at all
(no replica scraped) reads 0 (KEDA's ignoreNullValues default): the floor, while ServedModelDown pages. The HPA reads
the metric at each of its syncs (15 s), KEDA asking Prometheus each time; Prometheus's samples change with its 30 s
scrape.

Scaling down waits as long as a replica takes to come back (a node's boot and the model's cold start, at least the
HPA's default 300 s, at most its 3600 s ceiling), one replica a minute: demand that dips for less than a cold start
does not cost the next peak a cold start. Scaling up has no window (the HPA default).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from components.kubernetes.objects.common import MONITORING_NAMESPACE, PROMETHEUS_RELEASE, Manifest, meta
from components.kubernetes.objects.serving import NODE_PROVISION_S, ServedModel, startup_allowance_s
from components.kubernetes.objects.serving_telemetry import model_matchers

KEDA_NAMESPACE = "keda"
KEDA_RELEASE = "keda"
KEDA_API = "keda.sh/v1alpha1"
# kube-prometheus-stack's Prometheus Service (as OpenCost reads it: objects/telemetry.py).
PROMETHEUS_URL = f"http://{PROMETHEUS_RELEASE}-prometheus.{MONITORING_NAMESPACE}.svc:9090"
IN_FLIGHT_TRIGGER = "requests-in-flight"
IN_FLIGHT_METRICS = ("vllm:num_requests_running", "vllm:num_requests_waiting")
# The HPA's default tolerance (Kubernetes, "Horizontal Pod Autoscaling": no scaling while the ratio of the metric to
# its target is within 0.1 of 1.0).
HPA_TOLERANCE = 0.1
# The per-replica figure the target stands for, for the preview (the target itself is divided by 1 + tolerance).
REQUESTS_PER_REPLICA = "gpu-cluster/requests-per-replica"
# The HPA's own bounds of a stabilization window (autoscaling/v2 HPAScalingRules: default 300 s for scale-down, at
# most 3600 s).
SCALE_DOWN_DEFAULT_S = 300
SCALE_DOWN_MAX_S = 3600


def keda_values() -> Manifest:
    """The chart's values: its CRDs kept if the release is ever removed (they would take every ScaledObject, and with
    it every HPA, along); the operator's metrics scraped (its scaler errors: a query that fails leaves the replicas
    where they are); the chart's own secure defaults (non-root, read-only root, no capabilities) otherwise."""
    return {
        "crds": {"install": True, "additionalAnnotations": {"helm.sh/resource-policy": "keep"}},
        "prometheus": {"operator": {"enabled": True, "serviceMonitor": {"enabled": True}}},
    }


def in_flight_query(model: ServedModel) -> str:
    """The model's requests in flight, running and waiting, over all its replicas."""
    names = "|".join(IN_FLIGHT_METRICS)
    return f'sum({{__name__=~"{names}", {model_matchers(model)}}})'


def scale_down_window_s(model: ServedModel) -> int:
    """How long demand must stay lower before a replica is released: as long as one takes to serve again."""
    back = NODE_PROVISION_S + (model.cold_start_s if model.cold_start_s is not None else startup_allowance_s(None))
    return min(SCALE_DOWN_MAX_S, max(SCALE_DOWN_DEFAULT_S, math.ceil(back)))


def in_flight_target(requests_per_replica: int) -> str:
    """The HPA's target per replica: the figure over 1 + tolerance, rounded up to hundredths, so that the first
    request in flight past the figure is outside the tolerance and scales."""
    return f"{math.ceil(requests_per_replica / (1 + HPA_TOLERANCE) * 100) / 100:g}"


def scaled_object(model: ServedModel, billing: Mapping[str, str]) -> Manifest:
    """The KEDA ScaledObject of an autoscaled model (replicas.min < replicas.max): its Deployment between the two, on
    its requests in flight per replica."""
    metadata = meta(model.name, model.namespace, billing)
    metadata["annotations"] = {REQUESTS_PER_REPLICA: str(model.requests_per_replica)}
    return {
        "apiVersion": KEDA_API, "kind": "ScaledObject", "metadata": metadata,
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": model.name},
            "minReplicaCount": model.spec.replicas.min,
            "maxReplicaCount": model.spec.replicas.max,
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {
                "scaleDown": {"stabilizationWindowSeconds": scale_down_window_s(model),
                              "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]},
            }}},
            "triggers": [{
                "type": "prometheus", "name": IN_FLIGHT_TRIGGER, "metricType": "AverageValue",
                "metadata": {"serverAddress": PROMETHEUS_URL, "query": in_flight_query(model),
                             "threshold": in_flight_target(model.requests_per_replica)},
            }],
        },
    }
