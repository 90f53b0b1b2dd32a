"""Served models (inference.models): reached privately only. A model server answers whoever reaches it, with the
weights and the GPU-hours the stack pays for; in production nothing may put it on the internet."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import EnforcementLevel, Severity, StackValidationArgs

from gpu_policies.common import Reporter, get, k8s_name, k8s_namespace, of_type, seen, stack_policy
from gpu_policies.slurm import INTERNAL

SERVICE = "kubernetes:core/v1:Service"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
# The pods of a served model carry this label (components/kubernetes/objects/serving.py MODEL_LABEL).
MODEL_LABEL = "gpu-cluster/served-model"
# Service types that open a port outside the cluster: a load balancer (internet-facing unless made internal) and a
# node port (every node's address) (Kubernetes "Service", Type values).
OPEN_TYPES = ("LoadBalancer", "NodePort")


def _serving_pods(args: StackValidationArgs) -> dict[str, list[Mapping[str, Any]]]:
    """Per namespace, the pod labels of the served models' Deployments."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for d in of_type(args.resources, DEPLOYMENT):
        labels = get(d.props, "spec", "template", "metadata", "labels", default={}) or {}
        if isinstance(labels, Mapping) and MODEL_LABEL in labels:
            out.setdefault(k8s_namespace(d.props), []).append(labels)
    return out


def _public_endpoint(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    pods = _serving_pods(args)
    for svc in of_type(args.resources, SERVICE):
        selector = get(svc.props, "spec", "selector", default={}) or {}
        served = isinstance(selector, Mapping) and selector and any(
            all(labels.get(k) == v for k, v in selector.items()) for labels in pods.get(k8s_namespace(svc.props), []))
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


inference_endpoint_private = stack_policy(
    "inference-endpoint-private", "security",
    "In production a served model is reached privately: no internet-facing load balancer, node port or external IP "
    "in front of its pods.",
    "Keep the model's Service ClusterIP (the program's) or behind an internal load balancer; serve the public "
    "through your own authenticated front door, outside this stack.",
    Severity.CRITICAL, _public_endpoint, enforcement=EnforcementLevel.MANDATORY,  # it judges prod Services only
)

POLICIES = [inference_endpoint_private]
