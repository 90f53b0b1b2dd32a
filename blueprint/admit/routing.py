"""A serving workload's routing objects, walked as the gateway meets them: an ``InferencePool`` (the Gateway API
Inference Extension, ``inference.networking.k8s.io/v1``) and an ``HTTPRoute`` (Gateway API) submitted beside their
Deployment, or against the cluster's.

Steps (:data:`ROUTING_STEPS`): the object's schema (its CRD, shipped in blueprint/schemas/crds) and that the cluster
serves it (a Gateway of the stack, whose class routes to InferencePools: components/kubernetes/objects/gateway.py); its
namespace; what it refers to (routing):

- a pool selects the pods of a Deployment (submitted with it or in the cluster) in its namespace, on a port their
  containers declare, and its endpoint picker (``endpointPickerRef``) is a Service of the namespace on that port;
- a route's parents are Gateways of the cluster whose listeners admit routes from its namespace, and its backends are
  pools of its namespace;

and the network: the gateway's proxies reach the pool's pods on its target port and its picker on the picker's port
through the namespace's NetworkPolicies (agentgateway's proxy pods in the Gateway's namespace; a cloud's managed
proxies from the address its admit module names).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from blueprint.admit.cloud import cloud_admit, cluster_cloud
from blueprint.admit.cluster import ClusterView, K8sObject, as_list, as_mapping, as_str_map, matches_selector
from blueprint.admit.network import Peer, allowed
from blueprint.admit.results import Step, WorkloadResult
from blueprint.admit.schema import schema_problems
from blueprint.admit.workloads import Submitted

ROUTING_STEPS = ("schema", "namespace", "routing", "network")
POOL_GROUP = "inference.networking.k8s.io"
ROUTE_GROUP = "gateway.networking.k8s.io"
ROUTING_KINDS = {(POOL_GROUP, "InferencePool"), (ROUTE_GROUP, "HTTPRoute")}
# The label agentgateway (and every Gateway API implementation that deploys its proxy) puts on a Gateway's proxy pods
# (agentgateway v1.4.1 controller/pkg/wellknown/controller.go GatewayNameLabel).
GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name"
TENANT_LABEL = "gpu-cluster/tenant"


def is_routing(item: Submitted) -> bool:
    """Whether the object is one of the routing kinds this module walks."""
    return (item.api_version.rpartition("/")[0], item.kind) in ROUTING_KINDS


def _pods(view: ClusterView, namespace: str, submitted: Sequence[Submitted]) -> list[tuple[str, dict[str, Any]]]:
    """(ref, pod template) of every Deployment and StatefulSet of the namespace: the file's, then the cluster's."""
    out: list[tuple[str, dict[str, Any]]] = []
    for s in submitted:
        if s.kind in ("Deployment", "StatefulSet") and s.namespace == namespace:
            out.append((s.ref, as_mapping(as_mapping(s.manifest.get("spec")).get("template"))))
    for kind in ("Deployment", "StatefulSet"):
        for o in view.of_kind(kind, namespace):
            out.append((o.ref, as_mapping(o.spec.get("template"))))
    return out


def _labels(template: dict[str, Any]) -> dict[str, str]:
    return as_str_map(as_mapping(template.get("metadata")).get("labels"))


def _ports(template: dict[str, Any]) -> set[int]:
    return {int(p["containerPort"]) for c in as_list(as_mapping(template.get("spec")).get("containers"))
            for p in as_list(as_mapping(c).get("ports")) if isinstance(as_mapping(p).get("containerPort"), int)}


def _find(view: ClusterView, submitted: Sequence[Submitted], kind: str, name: str,
          namespace: str) -> dict[str, Any] | None:
    """The object of the file or of the cluster (the file's wins: it is what will be applied)."""
    for s in submitted:
        if s.kind == kind and s.namespace == namespace and as_mapping(s.manifest.get("metadata")).get("name") == name:
            return s.manifest
    found = view.get(kind, name, namespace)
    return found.manifest if found is not None else None


def _gateways(view: ClusterView) -> list[K8sObject]:
    return view.of_kind("Gateway")


def _proxy_peer(view: ClusterView, gateway: K8sObject) -> Peer | None:
    """Where the Gateway's proxies send from, as the cluster's class puts them (None: not known)."""
    cls = str(gateway.spec.get("gatewayClassName"))
    if cls == "agentgateway":
        ns = str(gateway.namespace)
        return Peer(f"the proxies of Gateway {ns}/{gateway.name}", namespace=ns,
                    namespace_labels=view.namespace_labels(ns) or {"kubernetes.io/metadata.name": ns},
                    pod_labels={GATEWAY_NAME_LABEL: gateway.name})
    cloud = cluster_cloud(view)
    source = cloud_admit(cloud).gateway_proxy_source(view) if cloud is not None else None
    if source is not None:
        return Peer(f"the proxies of Gateway {gateway.namespace}/{gateway.name} ({source}, the cloud's proxies)",
                    ip=source)
    return None


def _schema(view: ClusterView, item: Submitted, step: Step, version: str) -> None:
    problems, notes = schema_problems(item.manifest, version)
    step.notes += notes
    for problem in problems:
        step.fail(item.ref, "schema", f"{problem}: the API server refuses the object; fix the field")
    step.detail = f"{item.api_version} {item.kind}"
    if not _gateways(view):
        step.fail(item.ref, "gateway-installed", f"{item.kind} routes requests through a Gateway, and the cluster has "
                  "none: set inference.gateway in the stack (docs/inference.md, 'The gateway')")


def _pool(view: ClusterView, item: Submitted, submitted: Sequence[Submitted], result: WorkloadResult) -> None:
    step, net = result.steps["routing"], result.steps["network"]
    spec = as_mapping(item.manifest.get("spec"))
    selector = as_mapping(as_mapping(spec.get("selector")).get("matchLabels"))
    ports = {int(p["number"]) for p in as_list(spec.get("targetPorts")) if isinstance(as_mapping(p).get("number"), int)}
    selected = [(ref, t) for ref, t in _pods(view, item.namespace, submitted)
                if selector and matches_selector({"matchLabels": selector}, _labels(t))]
    if not selected:
        step.fail(item.ref, "pool-selects-pods", f"spec.selector {selector} selects the pods of no Deployment in "
                  f"{item.namespace}: the pool would be empty and every request answered 503; select the model "
                  "server's pod labels")
    for ref, template in selected:
        declared = _ports(template)
        if declared and not ports <= declared:
            step.fail(item.ref, "pool-target-port", f"spec.targetPorts {sorted(ports)} are not ports {ref}'s "
                      f"containers declare ({sorted(declared)}): point them at the model server's port")
    picker = as_mapping(spec.get("endpointPickerRef"))
    picker_name, picker_port = str(picker.get("name")), as_mapping(picker.get("port")).get("number")
    service = _find(view, submitted, "Service", picker_name, item.namespace)
    if service is None:
        step.fail(item.ref, "pool-picker", f"spec.endpointPickerRef names Service {picker_name}, which is neither in "
                  f"the file nor in {item.namespace}: the gateway would have no picker to ask")
    elif picker_port not in {as_mapping(p).get("port") for p in as_list(as_mapping(service.get("spec")).get("ports"))}:
        step.fail(item.ref, "pool-picker", f"Service {picker_name} has no port {picker_port} "
                  "(spec.endpointPickerRef.port): the gateway would not reach the picker")
    step.detail = ", ".join(ref for ref, _ in selected) + (f", picker {picker_name}" if service is not None else "")
    picker_pods = []
    if service is not None:
        wanted = as_str_map(as_mapping(service.get("spec")).get("selector"))
        picker_pods = [t for _, t in _pods(view, item.namespace, submitted)
                       if wanted and matches_selector({"matchLabels": wanted}, _labels(t))]
    for gateway in _gateways(view):
        peer = _proxy_peer(view, gateway)
        if peer is None:
            net.notes.append(f"where the proxies of {gateway.ref} send from is not known: their path is not checked")
            continue
        for ref, template in selected:
            for port in sorted(ports):
                ok, policies = allowed(view, item.namespace, _labels(template),
                                       Peer(peer.what, port=port, ip=peer.ip, namespace=peer.namespace,
                                            namespace_labels=peer.namespace_labels, pod_labels=peer.pod_labels),
                                       "Ingress")
                if not ok:
                    net.fail(policies[0].ref, "ingress-blocked", f"{peer.what} cannot reach {ref}'s pods on port "
                             f"{port}: {', '.join(p.ref for p in policies)} isolate them; add a NetworkPolicy in "
                             f"{item.namespace} that admits the gateway")
        for template in picker_pods:
            ok, policies = allowed(view, item.namespace, _labels(template),
                                   Peer(peer.what, port=int(picker_port) if isinstance(picker_port, int) else None,
                                        ip=peer.ip, namespace=peer.namespace, namespace_labels=peer.namespace_labels,
                                        pod_labels=peer.pod_labels), "Ingress")
            if not ok:
                net.fail(policies[0].ref, "ingress-blocked", f"{peer.what} cannot reach the endpoint picker "
                         f"{picker_name} on port {picker_port}: {', '.join(p.ref for p in policies)} isolate it; add "
                         f"a NetworkPolicy in {item.namespace} that admits the gateway")


def _route(view: ClusterView, item: Submitted, submitted: Sequence[Submitted], result: WorkloadResult) -> None:
    step = result.steps["routing"]
    spec = as_mapping(item.manifest.get("spec"))
    ns_labels = view.namespace_labels(item.namespace) or {}
    parents = []
    for parent in as_list(spec.get("parentRefs")):
        ref = as_mapping(parent)
        ns, name = str(ref.get("namespace") or item.namespace), str(ref.get("name"))
        gateway = view.get("Gateway", name, ns)
        if gateway is None:
            step.fail(item.ref, "route-parent", f"spec.parentRefs names Gateway {ns}/{name}, which the cluster does "
                      f"not have (its Gateways: {', '.join(g.ref for g in _gateways(view)) or 'none'})")
            continue
        parents.append(gateway.ref)
        listeners = [as_mapping(li) for li in as_list(gateway.spec.get("listeners"))
                     if not ref.get("sectionName") or as_mapping(li).get("name") == ref.get("sectionName")]
        if not any(_admits(li, item.namespace, ns, ns_labels) for li in listeners):
            step.fail(item.ref, "route-not-allowed", f"no listener of {gateway.ref} admits routes from namespace "
                      f"{item.namespace} (spec.listeners[].allowedRoutes): the route would not be attached")
    for rule in as_list(spec.get("rules")):
        for backend in as_list(as_mapping(rule).get("backendRefs")):
            b = as_mapping(backend)
            if b.get("kind") != "InferencePool":
                continue
            if _find(view, submitted, "InferencePool", str(b.get("name")), item.namespace) is None:
                step.fail(item.ref, "route-backend", f"a backend is InferencePool {b.get('name')}, which is neither "
                          f"in the file nor in {item.namespace}: its requests would be answered 500")
    step.detail = ", ".join(parents)
    result.steps["network"].skipped = "a route carries no traffic of its own (its pool's path is checked)"


def _admits(listener: dict[str, Any], route_ns: str, gateway_ns: str, ns_labels: dict[str, str]) -> bool:
    """Whether a listener's ``allowedRoutes.namespaces`` admits a route of ``route_ns`` (Gateway API: from Same by
    default, All, or Selector)."""
    namespaces = as_mapping(as_mapping(listener.get("allowedRoutes")).get("namespaces"))
    origin = str(namespaces.get("from") or "Same")
    if origin == "All":
        return True
    if origin == "Selector":
        return matches_selector(as_mapping(namespaces.get("selector")), ns_labels)
    return route_ns == gateway_ns


def admit_routing(view: ClusterView, item: Submitted, submitted: Sequence[Submitted], version: str,
                  namespace_step: Any) -> WorkloadResult:
    """The verdict on an InferencePool or HTTPRoute (``namespace_step``: the engine's namespace check)."""
    result = WorkloadResult(item.ref, item.source, item.namespace, ROUTING_STEPS,
                            {name: Step(name) for name in ROUTING_STEPS})
    _schema(view, item, result.steps["schema"], version)
    if namespace_step(view, item, result) is None:
        return result
    if item.kind == "InferencePool":
        _pool(view, item, submitted, result)
    else:
        _route(view, item, submitted, result)
    return result
