"""The served models' private gateway: one Gateway API Gateway per cluster in its own namespace, and per model an
InferencePool (Gateway API Inference Extension, inference.networking.k8s.io/v1) whose endpoint picker routes each
request to the replica with the shortest queue and the most free KV cache, and an HTTPRoute on ``/<team>/<model>``.

The endpoint picker is llm-d-router's (v0.10.0): since the Inference Extension's v1.6.0 its repository ships only a
conformance-test picker, and llm-d-router's is the maintained one (its chart llm-d-router-gateway, the image
ghcr.io/llm-d/llm-d-router-endpoint-picker). Its objects are written here from the chart's templates
(config/charts/routerlib/templates at v0.10.0: _deployment.yaml, _config.yaml, _rbac.yaml, _service.yaml,
_inferencepool.yaml; llm-d-router-gateway/templates/rbac.yaml) rather than installed from the chart, because a pod in a
team namespace must carry what the chart cannot set: the team's group (the team-gid policy), Kueue's queue and
priority labels (the namespace is Kueue-managed) and a restricted security context.

Which Gateway class and what it needs is the cloud's (:class:`ServingGateway`): GKE's managed internal Application
Load Balancer (``gke-l7-rilb``), or on EKS agentgateway behind a ClusterIP Service. Neither is reachable from outside
the VPC; the policy pack refuses a Gateway that would be.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from components.kubernetes.objects.common import NODE_GROUP_LABEL, TENANT_LABEL, Manifest, meta
from components.kubernetes.objects.serving import (
    MODEL_LABEL,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    SERVING_PORT,
    SERVING_PRIORITY,
    ServedModel,
    selector,
    serving_labels,
)
from components.sizing.inference import PICKER_CPU, PICKER_MEMORY_GIB, PICKER_MEMORY_LIMIT_GIB
from components.spec.inference import GatewaySpec

GATEWAY_NAMESPACE = "inference-gateway"
GATEWAY_NAME = "inference"
LISTENER_PORT = 80
INFERENCE_API = "inference.networking.k8s.io/v1"
GATEWAY_API = "gateway.networking.k8s.io/v1"


@dataclass(frozen=True, kw_only=True)
class ServingGateway:
    """How the cloud fronts the served models privately (filled in by components/aws and components/gcp).

    class_name: the GatewayClass (``gke-l7-rilb``, ``agentgateway``).
    addresses: the Gateway's ``spec.addresses`` (GKE: the reserved internal address, ``NamedAddress``).
    parameters: the class's parameters object in the gateway's namespace, named by the Gateway's
        ``spec.infrastructure.parametersRef`` (EKS: AgentgatewayParameters making the proxy's Service ClusterIP).
    releases: the gateway controller's pinned charts, installed in order (EKS: agentgateway-crds, agentgateway);
        each a components.kubernetes.inputs.CloudRelease.
    crd_manifests: (name, pinned URL) of the Gateway API and InferencePool CRDs the stack installs (EKS); empty where
        the cloud installs them (GKE: the cluster's Gateway API and, from 1.34.0-gke.1626000, InferencePool).
    proxy_peers: NetworkPolicy ``from`` peers the gateway's proxies reach the replicas and endpoint pickers from
        (EKS: the gateway namespace's pods; GKE: the proxy-only subnet and Google's health-check ranges).
    client_egress: NetworkPolicy egress rules (``to`` and ``ports``) by which a team's pods reach the gateway.
    pool_objects: the cloud's per-pool objects (GKE: HealthCheckPolicy, GCPBackendPolicy), from the pool's name,
        namespace and labels.
    route_timeout: the HTTPRoute's ``timeouts.request`` where the class honours it (a streamed completion can take
        minutes); None where the cloud sets it elsewhere (GKE: GCPBackendPolicy ``timeoutSec``).
    ready: cloud resources the Gateway waits for (GKE: the proxy-only subnet, the address, the firewall rules).
    """

    class_name: str
    addresses: tuple[Manifest, ...] = ()
    parameters: Manifest | None = None
    releases: tuple[Any, ...] = ()
    crd_manifests: tuple[tuple[str, str], ...] = ()
    proxy_peers: tuple[Manifest, ...] = ()
    client_egress: tuple[Manifest, ...] = ()
    pool_objects: Callable[[str, str, Mapping[str, str]], Sequence[Manifest]] | None = None
    route_timeout: str | None = None
    ready: tuple[Any, ...] = field(default=())


PICKER_GRPC_PORT = 9002  # ext-proc, which the gateway calls per request (endpointPickerRef)
PICKER_HEALTH_PORT = 9003  # gRPC health (GKE's load balancer checks it; the pod's probes too)
PICKER_METRICS_PORT = 9090
PICKER_CONFIG = "default-plugins.yaml"
PICKER_LABEL = "gpu-cluster/endpoint-picker"  # not the model's label: the pool and Service must not select the picker
PICKER_USER = 65532  # the image's USER (llm-d-router v0.10.0 Dockerfile.epp: USER 65532:65532)
# A single picker per pool, replaced by Recreate (the chart's default: "the current recommended EPP deployment pattern
# is to have a single active replica", for the prefix-cache scorer's state); while it restarts the pool fails open
# (failureMode FailOpen: the gateway picks a replica itself), so requests still flow.
PICKER_REPLICAS = 1


def picker_name(model: str) -> str:
    """The endpoint picker's Deployment, Service, account and ConfigMap for a model's pool."""
    return f"{model}-epp"


def route_path(team: str, model: str) -> str:
    """Where the gateway serves a model: ``/<team>/<model>`` (the client's base URL ends there; the route strips it)."""
    return f"/{team}/{model}"


def picker_config() -> str:
    """The picker's EndpointPickerConfig: llm-d-router v0.10.0's default profile for vLLM over HTTP (routerlib
    _config.yaml ``default-plugins.yaml``): vLLM's queue, KV-cache use and prefix-cache hits, scored 2:2:3, read from
    each replica's /metrics (vllm:num_requests_waiting, vllm:kv_cache_usage_perc)."""
    config = {
        "apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
        "plugins": [{"type": "queue-scorer"}, {"type": "kv-cache-utilization-scorer"}, {"type": "prefix-cache-scorer"},
                    {"type": "metrics-data-source",
                     "parameters": {"scheme": "http", "path": "/metrics", "insecureSkipVerify": True}},
                    {"type": "core-metrics-extractor"}],
        "schedulingProfiles": [{"name": "default", "plugins": [
            {"pluginRef": "queue-scorer", "weight": 2}, {"pluginRef": "kv-cache-utilization-scorer", "weight": 2},
            {"pluginRef": "prefix-cache-scorer", "weight": 3}]}],
    }
    return str(yaml.safe_dump(config, sort_keys=False))


def picker_labels(model: ServedModel, billing: Mapping[str, str]) -> dict[str, str]:
    """Billing labels (the team's), the picker's name and its model (a label of its own, not the model's selector)."""
    return {**billing, "app.kubernetes.io/name": "llm-d-router-endpoint-picker",
            "app.kubernetes.io/instance": picker_name(model.name), PICKER_LABEL: model.name}


def picker_objects(model: ServedModel, gateway: GatewaySpec, billing: Mapping[str, str]) -> list[Manifest]:
    """The endpoint picker of a model's pool, in its team's namespace: its account and read access to the pool's pods
    and the pool (routerlib _rbac.yaml, llm-d-router-gateway rbac.yaml), its configuration, one replica and its
    Service. It reaches the API server through the team's HTTPS egress (the rule inference-weights-egress keeps it
    open where a model is served) and each replica's /metrics in its own namespace."""
    from components.kubernetes.objects.tenancy import service_account

    name, ns = picker_name(model.name), model.namespace
    labels = picker_labels(model, billing)
    account = service_account(name, ns, labels, f"watch the pods and the InferencePool of {model.name}")
    read = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "watch", "list"]},
            {"apiGroups": ["inference.networking.k8s.io"], "resources": ["inferencepools"],
             "verbs": ["get", "watch", "list"]},
            # The chart grants these too: the picker watches objectives and model rewrites where their CRDs exist.
            {"apiGroups": ["inference.networking.x-k8s.io", "llm-d.ai"],
             "resources": ["inferenceobjectives", "inferencemodelrewrites"], "verbs": ["get", "watch", "list"]}]
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(name, ns, labels),
            "rules": read}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(name, ns, labels),
               "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}}
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(name, ns, labels),
              "data": {PICKER_CONFIG: picker_config()}}
    memory = f"{PICKER_MEMORY_GIB}Gi"
    container: Manifest = {
        "name": "epp",
        "image": gateway.picker_image,
        # routerlib _deployment.yaml, the pool mode: the pool it serves, JSON logs, its plugins, the health port.
        "args": ["--pool-name", model.name, "--pool-namespace", ns, "--pool-group", "inference.networking.k8s.io",
                 "--zap-encoder", "json", "--config-file", f"/config/{PICKER_CONFIG}",
                 "--grpc-health-port", str(PICKER_HEALTH_PORT), "--tracing=false"],
        "env": [{"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "ports": [{"name": "grpc", "containerPort": PICKER_GRPC_PORT},
                  {"name": "grpc-health", "containerPort": PICKER_HEALTH_PORT},
                  {"name": "metrics", "containerPort": PICKER_METRICS_PORT}],
        "resources": {"requests": {"cpu": str(PICKER_CPU), "memory": memory},
                      "limits": {"memory": f"{PICKER_MEMORY_LIMIT_GIB}Gi"}},
        "livenessProbe": {"grpc": {"port": PICKER_HEALTH_PORT, "service": "inference-extension"},
                          "initialDelaySeconds": 5, "periodSeconds": 10},
        "readinessProbe": {"grpc": {"port": PICKER_HEALTH_PORT, "service": "inference-extension"},
                           "periodSeconds": 2},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                            "runAsNonRoot": True, "runAsUser": PICKER_USER,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": [{"name": "config", "mountPath": "/config", "readOnly": True}],
    }
    # Kueue admits it on the team's CPU quota (the rule inference-picker-quota), at the replicas' priority: routing
    # is part of serving. Pinned to that quota's group, so Kueue gives it that flavor (its toleration of the group's
    # taint with it) and never falls through to a GPU flavor when the CPU quota is in use: it preempts the team's
    # lower-priority CPU work instead.
    pod_labels = {**labels, QUEUE_LABEL: "default", PRIORITY_LABEL: SERVING_PRIORITY}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": meta(name, ns, labels={**labels, QUEUE_LABEL: "default", PRIORITY_LABEL: SERVING_PRIORITY}),
        "spec": {"replicas": PICKER_REPLICAS, "strategy": {"type": "Recreate"},
                 "selector": {"matchLabels": {PICKER_LABEL: model.name}},
                 "template": {"metadata": {"labels": pod_labels}, "spec": {
                     "serviceAccountName": name,
                     **({"nodeSelector": {NODE_GROUP_LABEL: model.picker_group}} if model.picker_group else {}),
                     "securityContext": {"supplementalGroups": [model.gid]},
                     # The chart's: as long as the replicas' own grace, so in-flight picks finish.
                     "terminationGracePeriodSeconds": 130,
                     "containers": [container],
                     "volumes": [{"name": "config", "configMap": {"name": name}}]}}},
    }
    service = {"apiVersion": "v1", "kind": "Service", "metadata": meta(name, ns, labels),
               "spec": {"type": "ClusterIP", "selector": {PICKER_LABEL: model.name},
                        "ports": [{"name": "grpc-ext-proc", "protocol": "TCP", "port": PICKER_GRPC_PORT,
                                   "appProtocol": "kubernetes.io/h2c"},
                                  {"name": "http-metrics", "protocol": "TCP", "port": PICKER_METRICS_PORT}]}}
    return [account, role, binding, config, deployment, service]


def inference_pool(model: ServedModel, billing: Mapping[str, str]) -> Manifest:
    """The model's replicas as one backend (routerlib _inferencepool.yaml): the Deployment's pods on vLLM's port, picked
    by the model's endpoint picker; FailOpen, so a picker down leaves the gateway balancing by itself."""
    return {"apiVersion": INFERENCE_API, "kind": "InferencePool",
            "metadata": meta(model.name, model.namespace, serving_labels(model, billing)),
            "spec": {"targetPorts": [{"number": SERVING_PORT}],
                     "selector": {"matchLabels": selector(model)},
                     "endpointPickerRef": {"name": picker_name(model.name), "port": {"number": PICKER_GRPC_PORT},
                                           "failureMode": "FailOpen"}}}


def http_route(model: ServedModel, gateway: ServingGateway, billing: Mapping[str, str]) -> Manifest:
    """The model's route on the gateway: ``/<team>/<model>`` with that prefix replaced by ``/`` (so
    ``<gateway>/<team>/<model>/v1/completions`` reaches vLLM's ``/v1/completions``), to its InferencePool."""
    rule: Manifest = {
        "matches": [{"path": {"type": "PathPrefix", "value": route_path(model.namespace, model.name)}}],
        "filters": [{"type": "URLRewrite",
                     "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}}}],
        "backendRefs": [{"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": model.name}],
    }
    if gateway.route_timeout is not None:
        rule["timeouts"] = {"request": gateway.route_timeout}
    return {"apiVersion": GATEWAY_API, "kind": "HTTPRoute",
            "metadata": meta(model.name, model.namespace, serving_labels(model, billing)),
            "spec": {"parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": GATEWAY_NAME,
                                     "namespace": GATEWAY_NAMESPACE, "sectionName": "http"}],
                     "rules": [rule]}}


def gateway_object(gateway: ServingGateway, labels: Mapping[str, str]) -> Manifest:
    """The cluster's one inference Gateway: HTTP on :data:`LISTENER_PORT`, routes from team namespaces only (their
    tenant label); its address is the cloud's (an internal one on GKE, a ClusterIP Service on EKS)."""
    spec: Manifest = {
        "gatewayClassName": gateway.class_name,
        "listeners": [{"name": "http", "protocol": "HTTP", "port": LISTENER_PORT, "allowedRoutes": {
            "namespaces": {"from": "Selector", "selector": {"matchLabels": {TENANT_LABEL: "true"}}},
            "kinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}]}}],
    }
    if gateway.addresses:
        spec["addresses"] = [dict(a) for a in gateway.addresses]
    if gateway.parameters is not None:
        api_group = str(gateway.parameters["apiVersion"]).split("/")[0]
        spec["infrastructure"] = {"parametersRef": {"group": api_group, "kind": gateway.parameters["kind"],
                                                    "name": gateway.parameters["metadata"]["name"]}}
    return {"apiVersion": GATEWAY_API, "kind": "Gateway",
            "metadata": meta(GATEWAY_NAME, GATEWAY_NAMESPACE, labels), "spec": spec}


def gateway_network_policies(namespace: str, gateway: ServingGateway, serves: bool) -> list[Manifest]:
    """A team namespace's paths to and from the gateway: every team's pods may call it (egress); where the team
    serves a model, its replicas (vLLM's port) and endpoint pickers (ext-proc and health) admit the gateway's proxies
    and, on GKE, Google's health checks (ingress)."""
    from components.kubernetes.objects.egress import network_policy

    out = [network_policy("allow-inference-gateway-egress", namespace, {
        "podSelector": {}, "policyTypes": ["Egress"], "egress": [dict(r) for r in gateway.client_egress]})]
    if serves and gateway.proxy_peers:
        peers = [dict(p) for p in gateway.proxy_peers]
        out.append(network_policy("allow-inference-gateway-replicas", namespace, {
            "podSelector": {"matchExpressions": [{"key": MODEL_LABEL, "operator": "Exists"}]},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": peers, "ports": [{"protocol": "TCP", "port": SERVING_PORT}]}]}))
        out.append(network_policy("allow-inference-gateway-pickers", namespace, {
            "podSelector": {"matchExpressions": [{"key": PICKER_LABEL, "operator": "Exists"}]},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": peers, "ports": [{"protocol": "TCP", "port": PICKER_GRPC_PORT},
                                                  {"protocol": "TCP", "port": PICKER_HEALTH_PORT}]}]}))
    return out
