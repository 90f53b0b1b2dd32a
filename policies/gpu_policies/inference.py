"""Served models (inference.models): reached privately only, and watched at their objectives. A model server answers
whoever reaches it, with the weights and the GPU-hours the stack pays for; in production nothing may put it on the
internet. An objective nobody is alerted on is a number in a file: every objective a served model's Deployment states
has an alert at its percentile and threshold, on metrics that are scraped."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pulumi_policy import EnforcementLevel, Severity, StackValidationArgs

from gpu_policies.common import Reporter, get, k8s_name, k8s_namespace, of_type, seen, stack_policy
from gpu_policies.slurm import INTERNAL

SERVICE = "kubernetes:core/v1:Service"
PROMETHEUS_RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
MONITORS = ("kubernetes:monitoring.coreos.com/v1:PodMonitor", "kubernetes:monitoring.coreos.com/v1:ServiceMonitor")
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
# The pods of a served model carry this label (components/kubernetes/objects/serving.py MODEL_LABEL).
MODEL_LABEL = "gpu-cluster/served-model"
GATEWAY = "kubernetes:gateway.networking.k8s.io/v1:Gateway"
HTTP_ROUTE = "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"
AGENTGATEWAY_PARAMETERS = "kubernetes:agentgateway.dev/v1alpha1:AgentgatewayParameters"
# Gateway classes whose addresses are internal by construction: GKE's regional internal Application Load Balancer
# (single- and multi-cluster; GKE "GatewayClass capabilities": gke-l7-rilb, gke-l7-rilb-mc). Every other GKE class
# named gke-l7-* is external. agentgateway's exposure is its proxy Service's, set by its AgentgatewayParameters.
INTERNAL_GATEWAY_CLASSES = ("gke-l7-rilb", "gke-l7-rilb-mc")
# Service types that open a port outside the cluster: a load balancer (internet-facing unless made internal) and a
# node port (every node's address) (Kubernetes "Service", Type values).
OPEN_TYPES = ("LoadBalancer", "NodePort")


def _served_deployments(resources: Any) -> list[tuple[Any, Mapping[str, Any], Mapping[str, Any]]]:
    """(Deployment, its pod labels, its annotations) of every served model: a Deployment whose pods carry the model
    label."""
    out = []
    for d in of_type(resources, DEPLOYMENT):
        labels = get(d.props, "spec", "template", "metadata", "labels", default={}) or {}
        if isinstance(labels, Mapping) and MODEL_LABEL in labels:
            annotations = get(d.props, "metadata", "annotations", default={}) or {}
            out.append((d, labels, annotations if isinstance(annotations, Mapping) else {}))
    return out


def _serving_pods(args: StackValidationArgs) -> dict[str, list[Mapping[str, Any]]]:
    """Per namespace, the pod labels of the served models' Deployments."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for d, labels, _ in _served_deployments(args.resources):
        out.setdefault(k8s_namespace(d.props), []).append(labels)
    return out


def _selects_served(selector: Any, pods: list[Mapping[str, Any]]) -> bool:
    """A Service's selector picks the pods of a served model (the pod labels of its namespace's served models)."""
    return isinstance(selector, Mapping) and bool(selector) and any(
        all(labels.get(k) == v for k, v in selector.items()) for labels in pods)


def _public_endpoint(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    pods = _serving_pods(args)
    for svc in of_type(args.resources, SERVICE):
        served = _selects_served(get(svc.props, "spec", "selector", default={}), pods.get(k8s_namespace(svc.props), []))
        if not served or get(svc.props, "metadata", "labels", "environment") != "prod":
            continue
        kind = get(svc.props, "spec", "type", default="ClusterIP")
        annotations = get(svc.props, "metadata", "annotations", default={}) or {}
        name = f"{k8s_namespace(svc.props)}/{k8s_name(svc.props)}"
        if kind == "LoadBalancer" and not any(annotations.get(k) == v for k, v in INTERNAL.items()):
            report(f"Service {name} puts a served model on an internet-facing load balancer: it must be ClusterIP "
                   "or an internal load balancer.", svc.urn, field="spec.type", value=kind)
        elif kind == "NodePort":
            report(f"Service {name} opens a served model on every node's address (NodePort): it must be ClusterIP "
                   "or an internal load balancer.", svc.urn, field="spec.type", value=kind)
        if get(svc.props, "spec", "externalIPs"):
            report(f"Service {name} gives a served model external IPs: it must have none.", svc.urn,
                   field="spec.externalIPs", value=seen(svc.props, "spec", "externalIPs"))
    _public_gateway(args, report)


def _model_gateways(resources: list[Any], pods: Mapping[str, list[Mapping[str, Any]]]) -> set[tuple[str, str]]:
    """(namespace, name) of every Gateway an HTTPRoute to a served model attaches to: to an InferencePool (a served
    model's pool), or to a Service of the route's namespace that selects a served model's pods."""
    services = {(k8s_namespace(s.props), k8s_name(s.props)): get(s.props, "spec", "selector", default={}) or {}
                for s in of_type(resources, SERVICE)}

    def serves(ns: str, backend: Mapping[str, Any]) -> bool:
        if backend.get("kind") == "InferencePool":
            return True
        if backend.get("kind", "Service") != "Service" or backend.get("group", "") not in ("", "core"):
            return False
        return _selects_served(services.get((str(backend.get("namespace") or ns), str(backend.get("name")))),
                               pods.get(ns, []))

    out: set[tuple[str, str]] = set()
    for route in of_type(resources, HTTP_ROUTE):
        ns = k8s_namespace(route.props)
        rules = get(route.props, "spec", "rules", default=[]) or []
        if not any(isinstance(b, Mapping) and serves(ns, b)
                   for r in rules if isinstance(r, Mapping) for b in r.get("backendRefs") or []):
            continue
        for parent in get(route.props, "spec", "parentRefs", default=[]) or []:
            if isinstance(parent, Mapping) and parent.get("kind", "Gateway") == "Gateway":
                out.add((str(parent.get("namespace") or ns), str(parent.get("name"))))
    return out


def _gateway_exposure(gateway: Any, resources: list[Any]) -> tuple[str, Any, str, Any] | None:
    """Why the Gateway may be reached from outside the VPC, and the resource, field and value that make it so (None:
    it may not)."""
    cls = get(gateway.props, "spec", "gatewayClassName", default="")
    if cls in INTERNAL_GATEWAY_CLASSES:
        return None
    if cls != "agentgateway":
        return (f"its class {cls} is not one this pack knows to be internal ({', '.join(INTERNAL_GATEWAY_CLASSES)}, "
                "or agentgateway behind a ClusterIP Service)", gateway, "spec.gatewayClassName",
                seen(gateway.props, "spec", "gatewayClassName"))
    ref = get(gateway.props, "spec", "infrastructure", "parametersRef", default=None)
    if not isinstance(ref, Mapping) or ref.get("kind") != "AgentgatewayParameters":
        return ("agentgateway puts its proxy behind a LoadBalancer Service unless its AgentgatewayParameters say "
                "otherwise, and it names none", gateway, "spec.infrastructure.parametersRef",
                seen(gateway.props, "spec", "infrastructure", "parametersRef"))
    params = [p for p in of_type(resources, AGENTGATEWAY_PARAMETERS)
              if k8s_name(p.props) == ref.get("name") and k8s_namespace(p.props) == k8s_namespace(gateway.props)]
    if not params:
        return (f"its AgentgatewayParameters {ref.get('name')} is not in the stack", gateway,
                "spec.infrastructure.parametersRef", seen(gateway.props, "spec", "infrastructure", "parametersRef"))
    if get(params[0].props, "spec", "service", "spec", "externalIPs"):
        return ("its proxy's Service has external IPs", params[0], "spec.service.spec.externalIPs",
                seen(params[0].props, "spec", "service", "spec", "externalIPs"))
    kind = get(params[0].props, "spec", "service", "spec", "type", default="LoadBalancer")
    annotations = get(params[0].props, "spec", "service", "metadata", "annotations", default={}) or {}
    if kind == "ClusterIP" or (kind == "LoadBalancer" and any(annotations.get(k) == v for k, v in INTERNAL.items())):
        return None
    return (f"its proxy's Service is {kind}" + (" without an internal annotation" if kind == "LoadBalancer" else ""),
            params[0], "spec.service.spec.type", seen(params[0].props, "spec", "service", "spec", "type"))


def _public_gateway(args: StackValidationArgs, report: Reporter) -> None:
    resources = list(args.resources)
    wanted = _model_gateways(resources, _serving_pods(args))
    for gw in of_type(resources, GATEWAY):
        if (k8s_namespace(gw.props), k8s_name(gw.props)) not in wanted:
            continue
        if get(gw.props, "metadata", "labels", "environment") != "prod":
            continue
        found = _gateway_exposure(gw, resources)
        if found is not None:
            why, where, field, value = found
            report(f"Gateway {k8s_namespace(gw.props)}/{k8s_name(gw.props)} routes to served models and may be "
                   f"reached from outside the VPC: {why}.", where.urn, field=field, value=value)


inference_endpoint_private = stack_policy(
    "inference-endpoint-private", "security",
    "In production a served model is reached privately: no internet-facing load balancer, node port or external IP "
    "in front of its pods, and no Gateway routing to it that is reachable from outside the VPC.",
    "Keep the model's Service ClusterIP (the program's) or behind an internal load balancer, and its Gateway of an "
    "internal class (gke-l7-rilb) or agentgateway behind a ClusterIP Service; serve the public through your own "
    "authenticated front door, outside this stack.",
    Severity.CRITICAL, _public_endpoint, enforcement=EnforcementLevel.MANDATORY,  # it judges prod Services only
)

# What a served model's Deployment states of its objectives (components/kubernetes/objects/serving_telemetry.py), and
# the engine's histogram each is read from (vLLM v0.11: time to first token; inter-token latency, the time per output
# token).
PERCENTILE = "gpu-cluster/objective-percentile"
OBJECTIVES = (("ttft", "gpu-cluster/objective-ttft-seconds", "vllm:time_to_first_token_seconds_bucket",
               "time to first token"),
              ("tpot", "gpu-cluster/objective-tpot-seconds", "vllm:inter_token_latency_seconds_bucket",
               "time per output token"))
SERVED_MODEL = "served_model"  # the scrape's label of the model (the PodMonitor copies the pod's MODEL_LABEL)
_QUANTILE = re.compile(r"histogram_quantile\(\s*([0-9.eE+-]+)\s*,")
_THRESHOLD = re.compile(r">\s*([0-9.eE+-]+)\s*$")


def _number(text: Any) -> float | None:
    try:
        return float(str(text))
    except ValueError:
        return None


def _watches(rule: Mapping[str, Any], metric: str, model: str, quantile: float, seconds: float) -> str | None:
    """Why ``rule`` does not alert on ``model``'s ``metric`` at ``quantile`` above at most ``seconds`` (None: it
    does)."""
    expr = str(rule.get("expr", "")).strip()
    if metric not in expr or f'{SERVED_MODEL}="{model}"' not in expr:
        return f"its expression does not read {metric} of {SERVED_MODEL}=\"{model}\""
    q = _QUANTILE.search(expr)
    if q is None or _number(q.group(1)) is None or abs(float(q.group(1)) - quantile) > 1e-9:
        return f"it does not take the {quantile:g} quantile"
    t = _THRESHOLD.search(expr)
    if t is None or _number(t.group(1)) is None or float(t.group(1)) > seconds * (1 + 1e-9):
        return f"it does not fire above {seconds:g} s"
    return None


def _labels_model(monitor: Any) -> bool:
    """The monitor's endpoints set ``served_model``, the label the alerts select the model's series by."""
    endpoints = [*(get(monitor.props, "spec", "podMetricsEndpoints", default=None) or []),
                 *(get(monitor.props, "spec", "endpoints", default=None) or [])]
    return any(isinstance(r, Mapping) and r.get("targetLabel") == SERVED_MODEL
               for e in endpoints if isinstance(e, Mapping) for r in e.get("relabelings") or [])


def _scraped(monitors: list[Any], namespace: str, pod_labels: Mapping[str, Any]) -> bool:
    """A PodMonitor or ServiceMonitor of the pods' namespace (or naming it) selects them (matchLabels; a Service's
    pods are the Service's selector's, which the program makes the model's label) and labels their series with the
    model (``served_model``)."""
    for m in monitors:
        names = get(m.props, "spec", "namespaceSelector", "matchNames", default=None) or []
        anywhere = get(m.props, "spec", "namespaceSelector", "any", default=False) is True
        if k8s_namespace(m.props) != namespace and namespace not in names and not anywhere:
            continue
        wanted = get(m.props, "spec", "selector", "matchLabels", default=None) or {}
        if isinstance(wanted, Mapping) and wanted and all(pod_labels.get(k) == v for k, v in wanted.items()) \
                and _labels_model(m):
            return True
    return False


def _objective_alerted(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    resources = list(args.resources)
    rules = [rule for r in of_type(resources, PROMETHEUS_RULE)
             for g in get(r.props, "spec", "groups", default=[]) or [] if isinstance(g, Mapping)
             for rule in g.get("rules") or [] if isinstance(rule, Mapping) and rule.get("alert")]
    monitors = of_type(resources, *MONITORS)
    rule_urn = [r.urn for r in of_type(resources, PROMETHEUS_RULE)][:1]
    for d, labels, notes in _served_deployments(resources):
        model, namespace = str(labels[MODEL_LABEL]), k8s_namespace(d.props)
        stated = [o for o in OBJECTIVES if o[1] in notes]
        if len(stated) < len(OBJECTIVES):  # the spec requires both: a Deployment without them hides them
            missing = [o[1] for o in OBJECTIVES if o[1] not in notes]
            report(f"Served model {namespace}/{model} does not state its objectives ({', '.join(missing)}): every "
                   "served model has them (inference.models[].objectives), and without them nothing can check "
                   "they are watched.", d.urn, field="metadata.annotations", value=seen(d.props, "metadata",
                                                                                         "annotations"))
            if not stated:
                continue
        percentile = _number(notes.get(PERCENTILE))
        if percentile is None:
            report(f"Deployment {namespace}/{model} states objectives without the percentile they hold at.", d.urn,
                   field=f"metadata.annotations[\"{PERCENTILE}\"]", value=seen(d.props, "metadata", "annotations"))
            continue
        for name, key, metric, what in stated:
            seconds = _number(notes[key])
            if seconds is None:
                report(f"Deployment {namespace}/{model}: {key} is not a number of seconds.", d.urn,
                       field=f"metadata.annotations[\"{key}\"]", value=notes[key])
                continue
            mine = [r for r in rules if get(r, "labels", SERVED_MODEL) == model
                    and get(r, "labels", "namespace") == namespace and get(r, "labels", "objective") == name]
            why = [w for r in mine if (w := _watches(r, metric, model, percentile / 100, seconds)) is not None]
            if not mine or len(why) == len(mine):
                reason = f" ({'; '.join(sorted(set(why)))})" if why else ""
                report(f"Served model {namespace}/{model} states a p{percentile:g} {what} objective of {seconds:g} s "
                       f"that no alert watches{reason}: a PrometheusRule alert labelled {SERVED_MODEL}={model}, "
                       f"namespace={namespace}, objective={name} must fire when histogram_quantile("
                       f"{percentile / 100:g}, ... {metric}{{{SERVED_MODEL}=\"{model}\"}} ...) exceeds it.",
                       *rule_urn or [d.urn])
        if not _scraped(monitors, namespace, labels):
            report(f"Served model {namespace}/{model} states objectives but no PodMonitor or ServiceMonitor scrapes "
                   f"its pods and labels their series {SERVED_MODEL}: its alerts would never see a sample.", d.urn)


inference_objective_alerted = stack_policy(
    "inference-objective-alerted", "telemetry",
    "Every latency objective a served model states (time to first token, time per output token, at a percentile) "
    "has an alert at that percentile that fires above it, and the model's engine is scraped.",
    "Keep the Monitoring component's serving rules (components/kubernetes/objects/serving_telemetry.py) and the "
    "model's PodMonitor; change the objective in inference.models[].objectives, not the alert.",
    Severity.HIGH, _objective_alerted, enforcement=EnforcementLevel.MANDATORY,
)

FAILOVER = "gpu-cluster/objective-failover-seconds"
COLD_START = "gpu-cluster/cold-start-seconds"


def _failover(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    for d, labels, notes in _served_deployments(args.resources):
        if FAILOVER not in notes:
            continue
        name = f"{k8s_namespace(d.props)}/{labels[MODEL_LABEL]}"
        target, cold = _number(notes[FAILOVER]), _number(notes.get(COLD_START))
        if target is None:
            continue
        if cold is None:
            report(f"Served model {name} promises to serve again within {target:g} s of a lost replica, but its cold "
                   "start is not known: measure one replica's read of its weights (inference.models[].weights."
                   "readMBps) and the engine's start (engine.startSeconds).", d.urn,
                   field=f"metadata.annotations[\"{FAILOVER}\"]", value=notes[FAILOVER])
        elif cold > target:
            report(f"Served model {name} takes {cold:g} s to load a replica (its weights at the measured read rate "
                   f"and the engine's start), more than its failover objective of {target:g} s: a lost replica "
                   "leaves the others short for longer than promised.", d.urn,
                   field=f"metadata.annotations[\"{COLD_START}\"]", value=notes[COLD_START])


inference_failover_within_objective = stack_policy(
    "inference-failover-within-objective", "sizing",
    "A served model's computed cold start (weights at the measured read rate plus the engine's start) is within its "
    "failover objective, and is known when one is stated.",
    "Give weights.readMBps and engine.startSeconds from a measurement; then load faster (a faster path or a smaller "
    "model) or restate objectives.failoverSeconds; more replicas.min shortens nothing but leaves more serving "
    "meanwhile.",
    Severity.MEDIUM, _failover,
)

POLICIES = [inference_endpoint_private, inference_objective_alerted, inference_failover_within_objective]
