"""The GKE side of the served models' private gateway (inference.gateway; components/kubernetes/objects/gateway.py):
GKE's regional internal Application Load Balancer as a Gateway API Gateway (GatewayClass ``gke-l7-rilb``), on a reserved
internal address of the node subnet, with the network paths its Envoy proxies and Google's health checks take to the
replicas and the endpoint pickers, and per InferencePool the GKE policies that set its health check and timeout.

The GCP resources (proxy-only subnet, address, firewall rules) are made by components/gcp/network.py; this module holds
what they are made of and what the cluster-neutral gateway is told. Sources, per value, beside it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

from components.kubernetes.objects.common import Manifest
from components.kubernetes.objects.gateway import (
    LISTENER_PORT,
    PICKER_GRPC_PORT,
    PICKER_HEALTH_PORT,
    ServingGateway,
)
from components.kubernetes.objects.serving import HEALTH_PATH, SERVING_PORT
from components.spec import ClusterSpec

# GKE's regional internal Application Load Balancer as a GatewayClass (GKE "GatewayClass capabilities", "Deploying
# Gateways": gke-l7-rilb, an internal Gateway reachable from the VPC only; GKE Inference Gateway's internal example
# uses it, as does GoogleCloudPlatform/accelerated-platforms inference-ref-arch examples/llmd gateway-internal).
GATEWAY_CLASS = "gke-l7-rilb"
# The cluster's Gateway API (GKE "Enable the Gateway API": the standard channel; pulumi_gcp ClusterGatewayApiConfigArgs
# channel CHANNEL_STANDARD, as accelerated-platforms core/container_cluster and cluster-toolkit's gke-cluster set it).
GATEWAY_API_CHANNEL = "CHANNEL_STANDARD"
# Google's health-check probers (Cloud Load Balancing, "Firewall rules": the health check ranges 35.191.0.0/16 and
# 130.211.0.0/22 for every load balancer with health-checked backends, the regional internal Application Load Balancer
# among them). An Envoy-based load balancer's proxies reach the backends from the proxy-only subnet instead (same page:
# "traffic from the load balancer to the backends is then sent from IP addresses in the proxy-only subnet"), so both
# sets of sources are let in, each on the ports it uses.
HEALTH_CHECK_RANGES = ("35.191.0.0/16", "130.211.0.0/22")
# The ports on the pods: the proxies send requests to the replicas (vLLM, SERVING_PORT) and call each pool's endpoint
# picker (ext-proc, PICKER_GRPC_PORT); the health checks probe the replicas' /health (the pool's HealthCheckPolicy,
# below) and the picker's gRPC health port (GKE's load balancer checks the picker's backend there: llm-d-router and
# gateway-api-inference-extension issues #1604 and #2884, a firewall blocking that port fails the picker's health
# check; objects/gateway.py PICKER_HEALTH_PORT).
PROXY_PORTS = (SERVING_PORT, PICKER_GRPC_PORT)
HEALTH_CHECK_PORTS = (SERVING_PORT, PICKER_HEALTH_PORT)
# A streamed completion can run for many minutes; the backend service's timeout is GCPBackendPolicy timeoutSec (GKE
# "Configure Gateway resources using Policies": the backend service timeout, default 30 s). One hour, as
# accelerated-platforms' llm-d override (examples/llmd/_shared_config/templates/gateway/gcp-backend-policy-override)
# and its troubleshooting note (skills/TROUBLESHOOTING.md: 300 s cut long benchmark requests) set it.
BACKEND_TIMEOUT_S = 3600
GKE_POLICY_API = "networking.gke.io/v1"
INFERENCE_POOL_GROUP = "inference.networking.k8s.io"


def gateway_wanted(spec: ClusterSpec) -> bool:
    """Whether the stack fronts its served models with the private gateway (inference.gateway)."""
    return spec.inference is not None and spec.inference.gateway is not None


def gateway_ip(node_cidr: str) -> str:
    """The Gateway's internal address: the node subnet's highest usable one (GCP reserves the second-to-last and the
    last of a primary range, VPC "Subnets", reserved IPv4 addresses), so clients and the acceptance run know it before
    apply; GCE hands node addresses out of the subnet's free space, and the reservation takes this one first on a new
    stack (the network is built before the cluster). On a stack whose node subnet already gave this address to a node,
    the reservation fails until that node is replaced: a clear error, not a wrong address."""
    net = ipaddress.ip_network(node_cidr)
    return str(net.broadcast_address - 2)


def gateway_host(spec: ClusterSpec) -> str | None:
    """The host a team's pods reach the gateway at (None without one): its internal address."""
    if not gateway_wanted(spec):
        return None
    return gateway_ip(spec.gcp_spec().network.node_cidr)


def gateway_address_name(prefix: str) -> str:
    """The reserved internal address the Gateway takes (its ``NamedAddress``), known before apply."""
    return f"{prefix}-inference-gateway"


def pool_objects(pool_name: str, namespace: str, labels: Mapping[str, str]) -> Sequence[Manifest]:
    """An InferencePool's GKE policies, both targeting the pool (GKE Inference Gateway: policies attach to the
    InferencePool; gateway-api-inference-extension config/charts/inferencepool/templates/gke.yaml gives the same two):

    - HealthCheckPolicy: an HTTP check of each replica's ``/health`` on the serving port (vLLM answers 200 once its
      engine is up; the chart names the pool's target port, as here, rather than GKE's default serving-port choice).
    - GCPBackendPolicy: the backend service's timeout, ``timeoutSec`` (a streamed completion outlives GKE's 30 s).

    Field names: GKE Gateway API reference (googlecloudplatform.github.io/gke-gateway-api, networking.gke.io/v1:
    HealthCheckPolicy spec.default.config.type/httpHealthCheck.requestPath/port, GCPBackendPolicy
    spec.default.timeoutSec, spec.targetRef group/kind/name)."""
    target = {"group": INFERENCE_POOL_GROUP, "kind": "InferencePool", "name": pool_name}
    meta = {"name": pool_name, "namespace": namespace, "labels": dict(labels)}
    health: Manifest = {
        "apiVersion": GKE_POLICY_API, "kind": "HealthCheckPolicy", "metadata": meta,
        "spec": {"targetRef": target, "default": {"config": {
            "type": "HTTP", "httpHealthCheck": {"requestPath": HEALTH_PATH, "port": SERVING_PORT}}}}}
    backend: Manifest = {
        "apiVersion": GKE_POLICY_API, "kind": "GCPBackendPolicy", "metadata": dict(meta),
        "spec": {"targetRef": dict(target), "default": {"timeoutSec": BACKEND_TIMEOUT_S}}}
    return (health, backend)


def gke_serving_gateway(*, address_name: str, address_ip: str, proxy_only_cidr: str,
                        ready: Sequence[Any]) -> ServingGateway:
    """The gateway as GKE fronts it: class ``gke-l7-rilb`` on the reserved address, reached by team pods on the
    listener port inside the node subnet, its replicas and pickers reached from the proxy-only subnet and Google's
    health-check ranges, and per pool the policies above. ``ready``: the proxy-only subnet, the address and the
    firewall rules (the Gateway waits for them).

    No CRDs: GKE installs the Gateway API's with its Gateway controller, and InferencePool from 1.34.0-gke.1626000
    (components/spec/rules/gcp_gateway.py holds the stack to it). No route timeout: the class's timeout is the backend
    service's (GCPBackendPolicy timeoutSec above); whether gke-l7-rilb also honours HTTPRoute ``timeouts`` was not
    confirmed in GKE's GatewayClass capabilities, so the one GKE documents is used."""
    return ServingGateway(
        class_name=GATEWAY_CLASS,
        # GKE "Deploying Gateways", a static address for an internal Gateway: spec.addresses NamedAddress naming a
        # regional internal address of the cluster's subnet (accelerated-platforms examples/llmd gateway-internal).
        addresses=({"type": "NamedAddress", "value": address_name},),
        # The proxies and the probers come from outside the cluster, so NetworkPolicy names them by address: on
        # Dataplane V2 the policy applies to the pod-addressed (container-native, NEG) traffic they send. The two
        # health-check ranges are allowed in Google's own namespace policies for load-balanced pods
        # (accelerated-platforms inference-ref-arch comfyui namespace/network-policy and the playground's team
        # network-policy: ipBlock 35.191.0.0/16 and 130.211.0.0/22).
        proxy_peers=tuple({"ipBlock": {"cidr": c}} for c in (proxy_only_cidr, *HEALTH_CHECK_RANGES)),
        # Team pods reach the Gateway's address (reserved at :func:`gateway_ip`, network.py) on the listener port.
        client_egress=({"to": [{"ipBlock": {"cidr": f"{address_ip}/32"}}],
                        "ports": [{"protocol": "TCP", "port": LISTENER_PORT}]},),
        pool_objects=pool_objects,
        route_timeout=None,
        ready=tuple(ready),
    )
