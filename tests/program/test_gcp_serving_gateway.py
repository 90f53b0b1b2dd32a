"""The GKE side of the served models' private gateway (inference.gateway; components/gcp/serving_gateway.py): the
proxy-only subnet GKE's internal Application Load Balancer needs (gcp.network.proxyOnlyCidr), its reserved internal
address, the firewall rules for its proxies and Google's health checks, the cluster's Gateway API, and the
ServingGateway the Kubernetes side is handed; and the load-time rules that require and bound proxyOnlyCidr."""

from __future__ import annotations

import copy
import ipaddress
from typing import Any

import pytest

import components.gcp.cloud as gcp_cloud
from blueprint.graph.model import ResourceGraph
from components.kubernetes.inputs import PlatformInputs
from components.spec import SpecError, parse_spec
from tests.conftest import raw_stack_config, run_spec

FILE = "stacks/Pulumi.prod-gcp.yaml"
PREFIX = "prod-train-gke"
PROXY_ONLY = "10.40.48.0/23"
NODE_CIDR = "10.40.0.0/20"
PICKER = ("us-central1-docker.pkg.dev/acme-ml-prod/ml/llm-d-router-endpoint-picker@sha256:"
          "1f3e5a7c9b2d4f6e8a0c1b3d5f7e9a2c4b6d8f0e1a3c5b7d9f2e4a6c8b0d1f3e")
HEALTH_CHECK_RANGES = ["35.191.0.0/16", "130.211.0.0/22"]


def prod_gcp() -> dict[str, Any]:
    return copy.deepcopy(raw_stack_config("prod-gcp")["gpu-cluster:spec"])


def with_gateway(spec: dict[str, Any]) -> dict[str, Any]:
    spec["inference"]["gateway"] = {"pickerImage": PICKER}
    return spec


def without_gateway(spec: dict[str, Any]) -> dict[str, Any]:
    """prod-gcp as it was before inference.gateway (its models reached through their Services)."""
    del spec["inference"]["gateway"]
    return spec


def errors(spec: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(spec, FILE, provider_region="us-central1")
    return str(info.value).splitlines()


def by_name(graph: ResourceGraph, type_: str, name: str) -> dict[str, Any]:
    (found,) = [r.inputs for r in graph.of_type(type_) if r.inputs.get("name") == name]
    return found


@pytest.fixture(scope="module")
def gateway_run() -> tuple[ResourceGraph, list[PlatformInputs]]:
    """prod-gcp with the gateway on, and the PlatformInputs the GCP program handed the platform."""
    seen: list[PlatformInputs] = []
    original = gcp_cloud.platform_inputs

    def recording(*args: Any, **kwargs: Any) -> PlatformInputs:
        inputs = original(*args, **kwargs)
        seen.append(inputs)
        return inputs

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gcp_cloud, "platform_inputs", recording)
        graph = run_spec(with_gateway(prod_gcp()), "prod-gcp").graph
    return graph, seen


def test_the_proxy_only_subnet_is_regional_managed_proxy_and_active(
        gateway_run: tuple[ResourceGraph, list[PlatformInputs]]) -> None:
    subnet = by_name(gateway_run[0], "gcp:compute/subnetwork:Subnetwork", f"{PREFIX}-proxy-only")
    assert subnet["purpose"] == "REGIONAL_MANAGED_PROXY"
    assert subnet["role"] == "ACTIVE"
    assert subnet["ipCidrRange"] == PROXY_ONLY
    assert subnet["region"] == "us-central1"


def test_the_gateway_address_is_internal_and_shareable_in_the_node_subnet(
        gateway_run: tuple[ResourceGraph, list[PlatformInputs]]) -> None:
    address = by_name(gateway_run[0], "gcp:compute/address:Address", f"{PREFIX}-inference-gateway")
    assert address["addressType"] == "INTERNAL"
    assert address["purpose"] == "SHARED_LOADBALANCER_VIP"
    assert address["region"] == "us-central1"
    assert "subnetwork" in address
    # A fixed address, known before apply (clients and the acceptance run name it): the node subnet's highest usable
    # one (GCP reserves the last two of a primary range).
    assert address["address"] == "10.40.15.253"
    assert ipaddress.ip_address(address["address"]) in ipaddress.ip_network(NODE_CIDR)


def test_the_firewall_lets_the_proxies_and_health_checks_reach_the_pods(
        gateway_run: tuple[ResourceGraph, list[PlatformInputs]]) -> None:
    graph = gateway_run[0]
    firewall = "gcp:compute/firewall:Firewall"
    proxies = by_name(graph, firewall, f"{PREFIX}-allow-gateway-proxies")
    assert proxies["sourceRanges"] == [PROXY_ONLY]
    assert proxies["direction"] == "INGRESS"
    assert proxies["allows"] == [{"protocol": "tcp", "ports": ["8000", "9002"]}]
    probes = by_name(graph, firewall, f"{PREFIX}-allow-gateway-health-checks")
    assert probes["sourceRanges"] == HEALTH_CHECK_RANGES
    assert probes["allows"] == [{"protocol": "tcp", "ports": ["8000", "9003"]}]


def test_the_cluster_turns_the_gateway_api_on_only_with_a_gateway(
        gateway_run: tuple[ResourceGraph, list[PlatformInputs]]) -> None:
    (cluster,) = gateway_run[0].of_type("gcp:container/cluster:Cluster")
    assert cluster.inputs["gatewayApiConfig"] == {"channel": "CHANNEL_STANDARD"}
    plain = run_spec(without_gateway(prod_gcp()), "prod-gcp").graph
    (cluster,) = plain.of_type("gcp:container/cluster:Cluster")
    assert "gatewayApiConfig" not in cluster.inputs
    # and without a gateway none of its GCP resources exist
    assert not [r for r in plain.of_type("gcp:compute/address:Address")]
    assert not [r for r in plain.of_type("gcp:compute/subnetwork:Subnetwork")
                if r.inputs.get("purpose") == "REGIONAL_MANAGED_PROXY"]


def test_the_platform_is_handed_gke_s_serving_gateway(
        gateway_run: tuple[ResourceGraph, list[PlatformInputs]]) -> None:
    (inputs,) = gateway_run[1]
    gateway = inputs.serving_gateway
    assert gateway is not None
    assert gateway.class_name == "gke-l7-rilb"
    assert gateway.addresses == ({"type": "NamedAddress", "value": f"{PREFIX}-inference-gateway"},)
    assert gateway.proxy_peers == tuple({"ipBlock": {"cidr": c}} for c in (PROXY_ONLY, *HEALTH_CHECK_RANGES))
    # Team pods reach the reserved address, the node subnet's highest usable one, on the listener port.
    assert gateway.client_egress == ({"to": [{"ipBlock": {"cidr": "10.40.15.253/32"}}],
                                      "ports": [{"protocol": "TCP", "port": 80}]},)
    assert gateway.crd_manifests == () and gateway.releases == () and gateway.parameters is None
    assert gateway.route_timeout is None
    # the Gateway waits for the proxy-only subnet, the address and both firewall rules
    assert len(gateway.ready) == 5  # and the cluster (its Gateway API installs the CRDs)
    assert gateway.pool_objects is not None
    health, backend = gateway.pool_objects("llama", "applied", {"team": "applied"})
    target = {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "llama"}
    assert health["apiVersion"] == backend["apiVersion"] == "networking.gke.io/v1"
    assert health["kind"] == "HealthCheckPolicy" and health["spec"]["targetRef"] == target
    assert health["spec"]["default"]["config"] == {
        "type": "HTTP", "httpHealthCheck": {"requestPath": "/health", "port": 8000}}
    assert backend["kind"] == "GCPBackendPolicy" and backend["spec"]["targetRef"] == target
    assert backend["spec"]["default"] == {"timeoutSec": 3600}
    assert health["metadata"] == {"name": "llama", "namespace": "applied", "labels": {"team": "applied"}}


def test_no_gateway_no_serving_gateway() -> None:
    seen: list[PlatformInputs] = []
    original = gcp_cloud.platform_inputs

    def recording(*args: Any, **kwargs: Any) -> PlatformInputs:
        seen.append(original(*args, **kwargs))
        return seen[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gcp_cloud, "platform_inputs", recording)
        run_spec(without_gateway(prod_gcp()), "prod-gcp")
    assert [i.serving_gateway for i in seen] == [None]


def test_a_gateway_without_a_proxy_only_subnet_is_refused_naming_the_key() -> None:
    spec = with_gateway(prod_gcp())
    del spec["gcp"]["network"]["proxyOnlyCidr"]
    problems = [e for e in errors(spec) if "gke-gateway-proxy-only-subnet" in e]
    assert len(problems) == 1
    assert "gcp.network.proxyOnlyCidr" in problems[0]
    assert "gke-l7-rilb" in problems[0]


def test_proxy_only_cidr_is_not_required_without_a_gateway() -> None:
    spec = without_gateway(prod_gcp())
    del spec["gcp"]["network"]["proxyOnlyCidr"]
    parse_spec(spec, FILE, provider_region="us-central1")


@pytest.mark.parametrize(("cidr", "other"), [("10.40.8.0/23", "nodeCidr"), ("10.40.32.0/23", "servicesCidr"),
                                             ("10.44.0.0/23", "podsCidr"), ("172.16.0.0/23", "controlPlaneCidr"),
                                             ("192.168.0.0/23", "gpuNetworksCidr")])
def test_a_proxy_only_range_overlapping_another_is_refused(cidr: str, other: str) -> None:
    spec = with_gateway(prod_gcp())
    spec["gcp"]["network"]["proxyOnlyCidr"] = cidr
    problems = [e for e in errors(spec) if "cidr-no-overlap" in e]
    assert len(problems) == 1
    assert "gcp.network.proxyOnlyCidr" in problems[0] and other in problems[0]


def test_a_proxy_only_subnet_smaller_than_a_26_is_refused() -> None:
    spec = with_gateway(prod_gcp())
    spec["gcp"]["network"]["proxyOnlyCidr"] = "10.40.48.0/27"
    (problem,) = [e for e in errors(spec) if "gke-gateway-proxy-only-subnet" in e]
    assert "/26" in problem and "/27" in problem
    spec["gcp"]["network"]["proxyOnlyCidr"] = "10.40.48.0/26"
    parse_spec(spec, FILE, provider_region="us-central1")


def test_a_control_plane_below_the_inference_pool_version_is_refused() -> None:
    spec = with_gateway(prod_gcp())
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.34.0-gke.1500000"
    (problem,) = [e for e in errors(spec) if "gke-version-floor" in e and "InferencePool" in e]
    assert "minMasterVersion" in problem and "1.34.0-gke.1626000" in problem
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.34.0-gke.1626000"
    parse_spec(spec, FILE, provider_region="us-central1")
    # the channel's default (REGULAR, 1.35.8-gke.1036000 in components/catalog/gke_versions.yaml) meets it
    del spec["gcp"]["cluster"]["minMasterVersion"]
    parse_spec(spec, FILE, provider_region="us-central1")


def test_the_private_service_access_range_is_allocated_after_the_proxy_only_subnet(
        gateway_run: tuple[ResourceGraph, list[PlatformInputs]]) -> None:
    # GCP allocates the peering range from the VPC's free space: it must not take the proxy-only range first
    graph = gateway_run[0]
    (psa,) = [r for r in graph.of_type("gcp:compute/globalAddress:GlobalAddress")
              if r.inputs["name"] == f"{PREFIX}-psa"]
    (subnet,) = [r for r in graph.of_type("gcp:compute/subnetwork:Subnetwork")
                 if r.inputs["name"] == f"{PREFIX}-proxy-only"]
    assert subnet.urn in psa.dependencies
