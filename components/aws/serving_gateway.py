"""EKS's private inference gateway (components/kubernetes/objects/gateway.py): agentgateway, a Gateway API
implementation with the Inference Extension (it calls each InferencePool's endpoint picker per request), its proxy
behind a ClusterIP Service, so only pods in the cluster reach it.

Why agentgateway: EKS ships no Gateway API implementation that knows InferencePools (the AWS Load Balancer
Controller's Gateway support routes to Services), and of the conformant in-cluster ones agentgateway honours HTTPRoute
``timeouts.request`` (a streamed completion runs for minutes), where NGINX Gateway Fabric refuses route timeouts.

EKS installs neither the Gateway API nor the Inference Extension CRDs: the stack applies the releases' own install
manifests, pinned (Gateway API v1.6.1 standard channel, which agentgateway v1.4.1 is built against; InferencePool
v1.6.0, whose inference.networking.k8s.io/v1 API is the v1.5.0 agentgateway reads)."""

from __future__ import annotations

from components.kubernetes.inputs import CloudRelease
from components.kubernetes.objects.gateway import GATEWAY_NAME, GATEWAY_NAMESPACE, ServingGateway
from components.provenance import spec_path
from components.spec import ClusterSpec

AGENTGATEWAY_NAMESPACE = "agentgateway-system"
# The releases' install manifests (kubernetes-sigs/gateway-api releases: standard-install.yaml, the standard channel's
# CRDs and its safe-upgrades admission policy; gateway-api-inference-extension releases: manifests.yaml, the
# InferencePool CRD, hack/release-quickstart.sh and Makefile "artifacts"). Copies of the CRDs the program's objects
# are validated against: blueprint/schemas/crds/gateway-api and gateway-api-inference-extension.
GATEWAY_API_CRDS = ("gateway-api-crds",
                    "https://github.com/kubernetes-sigs/gateway-api/releases/download/v1.6.1/standard-install.yaml")
INFERENCE_POOL_CRDS = ("inference-extension-crds",
                       "https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/v1.6.0/"
                       "manifests.yaml")
# The longest a request may take through the gateway: a completion streamed for up to an hour (vLLM sets no limit of
# its own). Gateway API HTTPRoute timeouts.request (GEP-1742), which agentgateway applies.
ROUTE_TIMEOUT = "3600s"


def agentgateway_parameters() -> dict[str, object]:
    """The Gateway's proxy settings: its Service ClusterIP (the controller's default is LoadBalancer, which on EKS
    without the AWS Load Balancer Controller becomes an internet-facing Classic Load Balancer). AgentgatewayParameters
    ``service.spec`` is merged into the generated Service (agentgateway.dev_agentgatewayparameters.yaml, v1.4.1)."""
    return {"apiVersion": "agentgateway.dev/v1alpha1", "kind": "AgentgatewayParameters",
            "metadata": {"name": GATEWAY_NAME, "namespace": GATEWAY_NAMESPACE},
            "spec": {"service": {"spec": {"type": "ClusterIP"}}}}


def eks_serving_gateway(spec: ClusterSpec) -> ServingGateway | None:
    """The gateway of a stack whose inference names one (None otherwise)."""
    if spec.inference is None or spec.inference.gateway is None:
        return None
    where = spec_path("inference", "gateway")
    from_gateway = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": GATEWAY_NAMESPACE}}}
    return ServingGateway(
        class_name="agentgateway",
        parameters=agentgateway_parameters(),
        releases=(
            # Its CRDs are in the chart's templates, without Helm's keep policy: kept when the gateway is removed.
            CloudRelease(release="agentgateway-crds", chart="agentgateway-crds", namespace=AGENTGATEWAY_NAMESPACE,
                         values={}, spec_path=where, keep=True),
            # The Inference Extension on: the controller watches InferencePools and calls their pickers.
            CloudRelease(release="agentgateway", chart="agentgateway", namespace=AGENTGATEWAY_NAMESPACE,
                         values={"inferenceExtension": {"enabled": True}}, spec_path=where),
        ),
        crd_manifests=(GATEWAY_API_CRDS, INFERENCE_POOL_CRDS),
        # The proxy runs in the Gateway's namespace (the controller deploys it beside its Gateway).
        proxy_peers=(from_gateway,),
        client_egress=({"to": [from_gateway]},),
        route_timeout=ROUTE_TIMEOUT,
    )


def gateway_host(spec: ClusterSpec) -> str | None:
    """The host a team's pods reach the gateway at (None without one): the agentgateway proxy's Service, named after
    its Gateway (agentgateway v1.4.1 controller/pkg/deployer/agentgateway_parameters.go: the Service takes the
    Gateway's name) in the gateway's namespace."""
    if spec.inference is None or spec.inference.gateway is None:
        return None
    return f"{GATEWAY_NAME}.{GATEWAY_NAMESPACE}.svc"
