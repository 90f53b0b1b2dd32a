"""The served models behind the private gateway: a Gateway of the cloud's internal class, per model an InferencePool
whose endpoint picker (llm-d-router) routes by queue and KV cache, and an HTTPRoute on /<team>/<model>; each object
valid against its CRD, each path open in the NetworkPolicies that govern it, each pod admissible in its namespace, and
nothing reachable from outside the VPC."""

from __future__ import annotations

import copy
import ipaddress
from typing import Any

import pytest
import yaml

from blueprint.admit.cluster import ClusterView
from blueprint.admit.network import Peer, allowed
from blueprint.graph.model import GraphResource, ResourceGraph
from components.catalog.charts import load_charts
from components.kubernetes.objects.gateway import (
    GATEWAY_NAME,
    GATEWAY_NAMESPACE,
    PICKER_GRPC_PORT,
    PICKER_HEALTH_PORT,
    picker_name,
)
from components.kubernetes.objects.serving import SERVING_PORT
from components.sizing.inference import PICKER_CPU, PICKER_MEMORY_GIB
from components.spec import SpecError, parse_spec
from tests.conftest import kubernetes_version, offline_run, raw_stack_config, run_spec, stack
from tests.inference.test_serving_objects import served
from tests.k8s_checks import validate_builtin, validate_crd_object

GATEWAY = "kubernetes:gateway.networking.k8s.io/v1:Gateway"
ROUTE = "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"
POOL = "kubernetes:inference.networking.k8s.io/v1:InferencePool"
PARAMETERS = "kubernetes:agentgateway.dev/v1alpha1:AgentgatewayParameters"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVICE = "kubernetes:core/v1:Service"
POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
NAMESPACE = "kubernetes:core/v1:Namespace"
RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"
STACKS = ["prod-aws", "prod-gcp"]


def _one(graph: ResourceGraph, type_: str, name: str) -> GraphResource:
    (found,) = [r for r in graph.of_type(type_) if r.name == name]
    return found


def _pool(graph: ResourceGraph, model: str) -> GraphResource:
    return _one(graph, POOL, f"serving-{model}-pool")


def _route(graph: ResourceGraph, model: str) -> GraphResource:
    return _one(graph, ROUTE, f"serving-{model}-route")


def _gateway(graph: ResourceGraph) -> GraphResource:
    return _one(graph, GATEWAY, "inference-gateway-gateway")


PICKER_TYPES = {"Deployment": DEPLOYMENT, "Service": SERVICE, "ServiceAccount": "kubernetes:core/v1:ServiceAccount",
                "ConfigMap": "kubernetes:core/v1:ConfigMap", "Role": "kubernetes:rbac.authorization.k8s.io/v1:Role",
                "RoleBinding": "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"}


def _picker(graph: ResourceGraph, model: str, kind: str) -> dict[str, Any]:
    """One of the model's endpoint picker's objects."""
    return _one(graph, PICKER_TYPES[kind], f"serving-{model}-picker-{kind.lower()}").inputs


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _pod_labels(graph: ResourceGraph, namespace: str) -> list[dict[str, str]]:
    """The pod labels of every Deployment in the namespace."""
    return [d.inputs["spec"]["template"]["metadata"]["labels"] for d in graph.of_type(DEPLOYMENT)
            if d.inputs["metadata"].get("namespace") == namespace]


@pytest.mark.parametrize("name", STACKS)
def test_the_gateway_objects_are_valid_against_their_crds(name: str) -> None:
    graph = offline_run(name).graph
    model = served(name).name
    objects = [_gateway(graph).inputs, _route(graph, model).inputs, _pool(graph, model).inputs,
               *[r.inputs for r in graph.of_type(PARAMETERS)]]
    for o in objects:
        validate_crd_object(copy.deepcopy(o))
    for kind in PICKER_TYPES:
        validate_builtin(dict(_picker(graph, model, kind)), kubernetes_version(name))


@pytest.mark.parametrize("name", STACKS)
def test_the_pool_is_the_models_replicas_and_its_picker_is_not_in_it(name: str) -> None:
    graph = offline_run(name).graph
    model = served(name)
    pool = _pool(graph, model.name).inputs
    assert pool["metadata"]["namespace"] == model.team
    deployment = _one(graph, DEPLOYMENT, f"serving-{model.name}-deployment").inputs
    selector = pool["spec"]["selector"]["matchLabels"]
    # The pool selects the replicas exactly as their Deployment does, on vLLM's port.
    assert selector == deployment["spec"]["selector"]["matchLabels"]
    (port,) = deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert pool["spec"]["targetPorts"] == [{"number": port["containerPort"]}] == [{"number": SERVING_PORT}]
    picker_pods = _picker(graph, model.name, "Deployment")["spec"]["template"]["metadata"]["labels"]
    selected = [labels for labels in _pod_labels(graph, model.team) if _matches(selector, labels)]
    assert selected == [deployment["spec"]["template"]["metadata"]["labels"]]
    assert not _matches(selector, picker_pods)
    # The picker is the pool's: its Service on the ext-proc port selects the picker's pods, and only them.
    ref = pool["spec"]["endpointPickerRef"]
    assert ref["name"] == picker_name(model.name) and ref["port"] == {"number": PICKER_GRPC_PORT}
    assert ref["failureMode"] == "FailOpen"
    service = _picker(graph, model.name, "Service")
    assert service["metadata"]["name"] == ref["name"] and service["metadata"]["namespace"] == model.team
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert ports["grpc-ext-proc"] == PICKER_GRPC_PORT
    assert [labels for labels in _pod_labels(graph, model.team)
            if _matches(service["spec"]["selector"], labels)] == [picker_pods]


@pytest.mark.parametrize("name", STACKS)
def test_the_picker_serves_its_pool_with_the_pinned_image_and_reads_what_it_routes_on(name: str) -> None:
    graph = offline_run(name).graph
    model = served(name)
    gateway = stack(name).spec.inference.gateway  # type: ignore[union-attr]
    pod = _picker(graph, model.name, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == gateway.picker_image and "@sha256:" in container["image"]
    args = container["args"]
    assert args[args.index("--pool-name") + 1] == model.name
    assert args[args.index("--pool-namespace") + 1] == model.team
    assert args[args.index("--pool-group") + 1] == "inference.networking.k8s.io"
    # Its configuration scores the replicas' queues and KV cache from their /metrics.
    config = yaml.safe_load(_picker(graph, model.name, "ConfigMap")["data"]["default-plugins.yaml"])
    scorers = {p["pluginRef"] for p in config["schedulingProfiles"][0]["plugins"]}
    assert {"queue-scorer", "kv-cache-utilization-scorer"} <= scorers
    assert container["readinessProbe"]["grpc"]["port"] == PICKER_HEALTH_PORT
    # It watches the pool's pods and the pool in its own namespace, and nothing else.
    role = _picker(graph, model.name, "Role")
    grants = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
              if {"watch", "list"} <= set(rule["verbs"])}
    assert {("", "pods"), ("inference.networking.k8s.io", "inferencepools")} <= grants
    assert role["metadata"]["namespace"] == model.team


@pytest.mark.parametrize("name", STACKS)
def test_the_picker_is_admitted_in_the_team_namespace_on_its_cpu_quota(name: str) -> None:
    graph = offline_run(name).graph
    spec = stack(name).spec
    model = served(name)
    team = next(t for t in spec.teams if t.name == model.team)
    deployment = _picker(graph, model.name, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    pod = deployment["spec"]["template"]["spec"]
    assert labels["kueue.x-k8s.io/queue-name"] == "default" and labels["team"] == model.team
    assert team.posix_gid in pod["securityContext"]["supplementalGroups"]
    assert any(pod["containers"][0]["image"].startswith(p) for p in spec.platform.allowed_registries)
    requests = pod["containers"][0]["resources"]["requests"]
    assert requests == {"cpu": str(PICKER_CPU), "memory": f"{PICKER_MEMORY_GIB}Gi"}
    assert "nvidia.com/gpu" not in requests
    # Pinned to the team's largest CPU quota's group, which holds it: Kueue gives it that flavor and no GPU flavor.
    largest = max(team.cpu_quotas, key=lambda q: q.cpu)
    assert pod["nodeSelector"] == {"gpu-cluster/node-group": largest.node_group}
    assert largest.cpu >= PICKER_CPU and largest.memory_gib >= PICKER_MEMORY_GIB


@pytest.mark.parametrize("name", STACKS)
def test_the_route_serves_the_model_on_its_team_path_from_the_gateway(name: str) -> None:
    graph = offline_run(name).graph
    model = served(name)
    route = _route(graph, model.name).inputs
    gateway = _gateway(graph).inputs
    assert gateway["metadata"] == {**gateway["metadata"], "name": GATEWAY_NAME, "namespace": GATEWAY_NAMESPACE}
    (parent,) = route["spec"]["parentRefs"]
    (listener,) = gateway["spec"]["listeners"]
    assert (parent["name"], parent["namespace"], parent["sectionName"]) == (GATEWAY_NAME, GATEWAY_NAMESPACE,
                                                                            listener["name"])
    # The listener admits routes from the team's namespace (its labels match the selector), and only HTTPRoutes.
    ns = _one(graph, NAMESPACE, f"tenancy-ns-{model.team}").inputs
    allowed = listener["allowedRoutes"]
    assert allowed["namespaces"]["from"] == "Selector"
    assert _matches(allowed["namespaces"]["selector"]["matchLabels"], ns["metadata"]["labels"])
    (rule,) = route["spec"]["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": f"/{model.team}/{model.name}"}}]
    assert rule["filters"] == [{"type": "URLRewrite", "urlRewrite": {
        "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}}}]
    assert rule["backendRefs"] == [{"group": "inference.networking.k8s.io", "kind": "InferencePool",
                                    "name": _pool(graph, model.name).inputs["metadata"]["name"]}]


def _proxy(name: str, port: int) -> Peer:
    """The gateway's proxies as the team's NetworkPolicies meet them: EKS, agentgateway's proxy pods in the gateway's
    namespace; GKE, an address of the proxy-only subnet (Cloud Load Balancing: the proxies' packets to the backends
    carry one)."""
    if name == "prod-aws":
        return Peer("proxy", port=port, namespace=GATEWAY_NAMESPACE,
                    namespace_labels={"kubernetes.io/metadata.name": GATEWAY_NAMESPACE},
                    pod_labels={"gateway.networking.k8s.io/gateway-name": GATEWAY_NAME})
    cidr = stack(name).spec.gcp_spec().network.proxy_only_cidr
    assert cidr is not None
    return Peer("proxy", port=port, ip=str(next(ipaddress.ip_network(cidr).hosts())))


@pytest.mark.parametrize("name", STACKS)
def test_the_gateways_proxies_reach_the_replicas_and_the_picker_through_the_team_policies(name: str) -> None:
    graph = offline_run(name).graph
    model = served(name)
    replica = _one(graph, DEPLOYMENT, f"serving-{model.name}-deployment").inputs["spec"]["template"]["metadata"][
        "labels"]
    picker = _picker(graph, model.name, "Deployment")["spec"]["template"]["metadata"]["labels"]
    view = ClusterView(graph)  # admit's NetworkPolicy semantics (blueprint/admit/network.py)

    def reaches(labels: dict[str, str], port: int) -> bool:
        return allowed(view, model.team, labels, _proxy(name, port), "Ingress")[0]

    assert reaches(replica, SERVING_PORT) and reaches(picker, PICKER_GRPC_PORT)
    # Nothing else of the team is opened to the gateway: a training pod's port is not, nor another port.
    assert not reaches({"team": model.team}, SERVING_PORT) and not reaches(replica, 22)
    # Every team may call the gateway, on what the Gateway listens at.
    listener = _gateway(graph).inputs["spec"]["listeners"][0]["port"]
    for team in stack(name).spec.teams:
        (egress,) = [p.inputs for p in graph.of_type(POLICY) if p.inputs["metadata"]["namespace"] == team.name
                     and p.inputs["metadata"]["name"] == "allow-inference-gateway-egress"]
        (rule,) = egress["spec"]["egress"]
        if name == "prod-aws":
            assert rule["to"] == [{"namespaceSelector": {"matchLabels": {
                "kubernetes.io/metadata.name": GATEWAY_NAMESPACE}}}]
        else:
            (address,) = [r.inputs["address"] for r in graph.of_type("gcp:compute/address:Address")
                          if r.inputs["name"] == _gateway(graph).inputs["spec"]["addresses"][0]["value"]]
            assert rule == {"to": [{"ipBlock": {"cidr": f"{address}/32"}}],
                            "ports": [{"protocol": "TCP", "port": listener}]}


def test_gke_serves_through_its_internal_load_balancer_with_a_health_check_and_timeout_per_pool() -> None:
    graph = offline_run("prod-gcp").graph
    model = served("prod-gcp")
    gateway = _gateway(graph).inputs
    assert gateway["spec"]["gatewayClassName"] == "gke-l7-rilb"
    (address,) = gateway["spec"]["addresses"]
    assert address["type"] == "NamedAddress"
    (reserved,) = [r for r in graph.of_type("gcp:compute/address:Address") if r.inputs["name"] == address["value"]]
    assert reserved.inputs["addressType"] == "INTERNAL"
    # The Gateway waits for the address and the proxy-only subnet (GCP refuses an internal ALB without it).
    subnet = [r for r in graph.of_type("gcp:compute/subnetwork:Subnetwork")
              if r.inputs.get("purpose") == "REGIONAL_MANAGED_PROXY"]
    assert len(subnet) == 1
    assert {reserved.urn, subnet[0].urn} <= set(_gateway(graph).dependencies)
    pool = _pool(graph, model.name)
    target = {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": model.name}
    for kind in ("HealthCheckPolicy", "GCPBackendPolicy"):
        (policy,) = [r for r in graph.of_type(f"kubernetes:networking.gke.io/v1:{kind}")
                     if r.inputs["metadata"]["namespace"] == model.team]
        validate_crd_object(copy.deepcopy(policy.inputs))
        assert policy.inputs["spec"]["targetRef"] == target and pool.urn in policy.dependencies
    # No CRDs applied and no controller installed: GKE's own.
    assert not [r for r in graph.of_type(CONFIG_FILE) if r.name.startswith("inference-gateway-")]
    assert not [r for r in graph.of_type(RELEASE) if r.name.startswith("agentgateway")]
    (cluster,) = graph.of_type("gcp:container/cluster:Cluster")
    assert cluster.inputs["gatewayApiConfig"] == {"channel": "CHANNEL_STANDARD"}


def test_eks_runs_agentgateway_pinned_with_the_inference_extension_behind_a_cluster_ip() -> None:
    graph = offline_run("prod-aws").graph
    charts = load_charts()
    releases = {r.name: r.inputs for r in graph.of_type(RELEASE)}
    for chart in ("agentgateway-crds", "agentgateway"):
        assert releases[chart]["version"] == charts[chart].version == "v1.4.1"
        assert releases[chart]["chart"] == f"oci://cr.agentgateway.dev/charts/{chart}"
    assert releases["agentgateway"]["values"]["inferenceExtension"] == {"enabled": True}
    gateway = _gateway(graph).inputs
    assert gateway["spec"]["gatewayClassName"] == "agentgateway"
    ref = gateway["spec"]["infrastructure"]["parametersRef"]
    (params,) = [r.inputs for r in graph.of_type(PARAMETERS)]
    assert (ref["kind"], ref["name"]) == ("AgentgatewayParameters", params["metadata"]["name"])
    assert params["metadata"]["namespace"] == GATEWAY_NAMESPACE
    assert params["spec"]["service"]["spec"]["type"] == "ClusterIP"
    # Streamed completions are not cut by a default timeout.
    assert _route(graph, served("prod-aws").name).inputs["spec"]["rules"][0]["timeouts"] == {"request": "3600s"}
    # The Gateway API and InferencePool CRDs are installed from their releases, pinned.
    sources = {r.inputs.get("file") for r in graph.of_type(CONFIG_FILE) if r.name.startswith("inference-gateway-")}
    assert any("gateway-api/releases/download/v1.6.1/standard-install.yaml" in str(s) for s in sources)
    assert any("gateway-api-inference-extension/releases/download/v1.6.0/" in str(s) for s in sources)


def test_the_route_waits_for_its_gateway_and_pool_and_the_pool_for_the_crds() -> None:
    graph = offline_run("prod-aws").graph
    model = served("prod-aws").name
    route, pool, gateway = _route(graph, model), _pool(graph, model), _gateway(graph)
    assert {pool.urn, gateway.urn} <= set(route.dependencies)
    crd_urns = {r.urn for r in graph.of_type(CONFIG_FILE) if r.name.startswith("inference-gateway-")}
    controller = {r.urn for r in graph.of_type(RELEASE) if r.name == "agentgateway"}
    assert crd_urns | controller <= set(pool.dependencies)
    assert controller <= set(gateway.dependencies)


def _spec() -> dict[str, Any]:
    return copy.deepcopy(raw_stack_config("prod-aws")["gpu-cluster:spec"])


def test_a_picker_image_outside_the_allowed_registries_is_refused() -> None:
    spec = _spec()
    spec["inference"]["gateway"]["pickerImage"] = "ghcr.io/llm-d/llm-d-router-endpoint-picker@sha256:" + "a" * 64
    with pytest.raises(SpecError) as err:
        parse_spec(spec, "stacks/Pulumi.prod-aws.yaml")
    assert ".inference.gateway.pickerImage" in str(err.value) and "inference-image-registry" in str(err.value)


def test_a_team_without_cpu_quota_for_its_pickers_is_refused() -> None:
    spec = _spec()
    team = next(t for t in spec["teams"] if t["name"] == "applied")
    team["cpuQuotas"] = [{"nodeGroup": "cpu", "cpu": 1, "memoryGiB": 28}]
    with pytest.raises(SpecError) as err:
        parse_spec(spec, "stacks/Pulumi.prod-aws.yaml")
    message = str(err.value)
    assert "inference-picker-quota" in message and "inference.models[llama-3-1-8b-instruct].team" in message


def test_without_a_gateway_the_models_are_served_through_their_services_only() -> None:
    spec = _spec()
    del spec["inference"]["gateway"]
    graph = run_spec(spec, "prod-aws").graph
    assert not graph.of_type(GATEWAY) and not graph.of_type(POOL) and not graph.of_type(ROUTE)
    assert not [r for r in graph.of_type(RELEASE) if r.name.startswith("agentgateway")]
    assert graph.of_type(SERVICE)


@pytest.mark.parametrize("name", STACKS)
def test_the_preview_says_where_clients_reach_each_model(name: str) -> None:
    from blueprint.preview.render import render_preview
    from components.cluster import gateway_host

    run = offline_run(name)
    spec = stack(name).spec
    text = render_preview(run.graph, spec, f"stacks/Pulumi.{name}.yaml", run.outputs)
    model = served(name)
    host = gateway_host(spec)
    (line,) = [li for li in text.splitlines() if "reached at" in li]
    # The host the benchmark and the clients are given, and the route's prefix in the graph.
    assert f"reached at http://{host}/{model.team}/{model.name} " in line
    assert picker_name(model.name) in line and _gateway(run.graph).inputs["spec"]["gatewayClassName"] in line


@pytest.mark.parametrize("name", STACKS)
def test_a_picker_that_is_down_is_alerted_to_the_team(name: str) -> None:
    import promql_parser

    graph = offline_run(name).graph
    model = served(name)
    (rule,) = [r.inputs for r in graph.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")]
    (alert,) = [r for g in rule["spec"]["groups"] for r in g["rules"] if r.get("alert") ==
                "ServedModelPickerUnavailable" and r["labels"].get("served_model") == model.name]
    promql_parser.parse(alert["expr"])
    # The picker's own Deployment, in the team's namespace (kube-state-metrics' series), and the team's routes.
    deployment = _picker(graph, model.name, "Deployment")["metadata"]
    assert (f'namespace="{model.team}", deployment="{deployment["name"]}"' in alert["expr"]
            and alert["expr"].endswith("< 1"))
    assert alert["labels"]["namespace"] == model.team
    assert alert["annotations"]["runbook_url"].endswith("#served-model-saturated")


def _with_resources(name: str, added: list[tuple[str, str, dict[str, Any]]]) -> ResourceGraph:
    """The stack's graph with more Kubernetes objects, beside (same parent and provider) its Gateway."""
    import dataclasses

    graph = offline_run(name).graph
    base = _gateway(graph)
    extra = [dataclasses.replace(base, urn=f"{base.urn.rsplit('::', 2)[0]}::{type_}::{res}", type=type_, name=res,
                                 inputs=inputs, dependencies=[base.urn]) for type_, res, inputs in added]
    return ResourceGraph(graph.stack, [*graph.resources, *extra])


def test_a_route_to_the_models_service_through_an_external_gateway_is_refused() -> None:
    from blueprint.policy.runner import run_policies

    model = served("prod-gcp")
    labels = {"environment": "prod"}
    public = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
              "metadata": {"name": "public", "namespace": GATEWAY_NAMESPACE, "labels": labels},
              "spec": {"gatewayClassName": "gke-l7-global-external-managed",
                       "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}}
    # Around the pool: straight to the model's ClusterIP Service.
    route = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
             "metadata": {"name": "around", "namespace": model.team},
             "spec": {"parentRefs": [{"name": "public", "namespace": GATEWAY_NAMESPACE}],
                      "rules": [{"backendRefs": [{"name": model.name, "port": SERVING_PORT}]}]}}
    graph = _with_resources("prod-gcp", [(GATEWAY, "public-gateway", public), (ROUTE, "around-route", route)])
    hits = [v for v in run_policies(graph).violations if v.policy == "inference-endpoint-private"]
    assert len(hits) == 1 and "Gateway inference-gateway/public" in hits[0].message
    assert hits[0].field == "spec.gatewayClassName"
    # A route to something that is not a served model's does not make the Gateway a model's.
    route["spec"]["rules"][0]["backendRefs"][0]["name"] = "grafana"
    graph = _with_resources("prod-gcp", [(GATEWAY, "public-gateway", public), (ROUTE, "around-route", route)])
    assert not [v for v in run_policies(graph).violations if v.policy == "inference-endpoint-private"]


def test_an_agentgateway_proxy_with_external_ips_is_refused() -> None:
    from blueprint.policy.mutations import edit
    from blueprint.policy.mutations import set_path as _set
    from blueprint.policy.runner import run_policies

    graph = edit(offline_run("prod-aws").graph, PARAMETERS, "inference-gateway-parameters",
                 _set(["spec", "service", "spec", "externalIPs"], ["203.0.113.7"]))
    (hit,) = [v for v in run_policies(graph).violations if v.policy == "inference-endpoint-private"]
    assert hit.field == "spec.service.spec.externalIPs" and "external IPs" in hit.message
