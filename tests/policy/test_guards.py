"""Guards the pack requires: on every shipped production stack (AWS, GCP, Slurm), deleting or weakening each one fails
the pack with a mandatory violation that names it; outside production the same change is advised, not refused."""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest

from blueprint.graph.model import GraphResource, ResourceGraph
from blueprint.policy.runner import PolicyReport, run_policies
from tests.conftest import SHIPPED_STACKS, offline_run

VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
NAMESPACE = "kubernetes:core/v1:Namespace"
NETPOL = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
AMC = "kubernetes:monitoring.coreos.com/v1alpha1:AlertmanagerConfig"
PRODUCTION = ["prod-aws", "prod-gcp", "prod-aws-slurm"]
Mutation = Callable[[ResourceGraph], ResourceGraph]


@cache
def graph_of(stack: str) -> ResourceGraph:
    return offline_run(stack).graph


def _teams(graph: ResourceGraph) -> set[str]:
    return {r.inputs["metadata"]["name"] for r in graph.of_type(NAMESPACE)
            if r.inputs["metadata"].get("labels", {}).get("gpu-cluster/tenant") == "true"}


def _without(predicate: Callable[[GraphResource], bool]) -> Mutation:
    return lambda g: ResourceGraph(g.stack, [r for r in g.resources if not predicate(r)])


def _editing(predicate: Callable[[GraphResource], bool], change: Callable[[dict[str, Any]], None]) -> Mutation:
    def mutate(graph: ResourceGraph) -> ResourceGraph:
        out, hit = [], False
        for r in graph.resources:
            if predicate(r):
                inputs = copy.deepcopy(r.inputs)
                change(inputs)
                r, hit = dataclasses.replace(r, inputs=inputs), True
            out.append(r)
        assert hit, "the mutation found nothing to change"
        return ResourceGraph(graph.stack, out)
    return mutate


def _named(type_: str, name: str) -> Callable[[GraphResource], bool]:
    return lambda r: r.type == type_ and r.inputs.get("metadata", {}).get("name") == name


def _registry_expressions_true(inputs: dict[str, Any]) -> None:
    for v in inputs["spec"]["validations"]:
        v["expression"] = "true"


def _empty_prefix(inputs: dict[str, Any]) -> None:
    for v in inputs["spec"]["validations"]:
        v["expression"] = re.sub(r"\[[^\]]*\]\.exists", '[""].exists', v["expression"])


def _warn_only(inputs: dict[str, Any]) -> None:
    inputs["spec"]["validationActions"] = ["Warn"]


def _privileged_teams(graph: ResourceGraph) -> ResourceGraph:
    def change(inputs: dict[str, Any]) -> None:
        labels = inputs["metadata"]["labels"]
        labels["pod-security.kubernetes.io/enforce"] = "privileged"
        labels.pop("gpu-cluster/pod-security-reason", None)
    teams = _teams(graph)
    return _editing(lambda r: r.type == NAMESPACE and r.inputs["metadata"]["name"] in teams, change)(graph)


def _team_policies_gone(graph: ResourceGraph) -> ResourceGraph:
    teams = _teams(graph)
    return _without(lambda r: r.type == NETPOL and r.inputs["metadata"].get("namespace") in teams)(graph)


def _team_allow(rule: dict[str, Any]) -> Mutation:
    """One more NetworkPolicy in a team namespace with this egress rule."""
    def mutate(graph: ResourceGraph) -> ResourceGraph:
        team = sorted(_teams(graph))[0]
        base = next(r for r in graph.of_type(NETPOL) if r.inputs["metadata"].get("namespace") == team)
        added = dataclasses.replace(
            base, urn=base.urn.rsplit("::", 1)[0] + "::allow-more", name="allow-more",
            inputs={"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                    "metadata": {"name": "allow-more", "namespace": team},
                    "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [rule]}})
        return ResourceGraph(graph.stack, [*graph.resources, added])
    return mutate


def _platform_deny_gone(graph: ResourceGraph) -> ResourceGraph:
    return _without(lambda r: r.type == NETPOL and r.inputs["metadata"]["name"] == "default-deny-egress"
                    and r.inputs["metadata"].get("namespace") == "monitoring")(graph)


def _platform_open(graph: ResourceGraph) -> ResourceGraph:
    def change(inputs: dict[str, Any]) -> None:
        inputs["spec"]["egress"] = [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]  # every port, every address
    return _editing(lambda r: r.type == NETPOL and r.inputs["metadata"]["name"] == "allow-https"
                    and r.inputs["metadata"].get("namespace") == "monitoring", change)(graph)


def _drop_alerts(pattern: str) -> Mutation:
    def change(inputs: dict[str, Any]) -> None:
        for group in inputs["spec"]["groups"]:
            group["rules"] = [r for r in group["rules"] if not ("alert" in r and re.search(pattern, r["expr"]))]
    return _editing(lambda r: r.type == RULE, change)


def _route_to_nobody(inputs: dict[str, Any]) -> None:
    inputs["spec"]["route"] = {"receiver": "none", "matchers": [{"name": "severity", "value": "critical"}]}


# (guard, mutation, the stacks it applies to: None for every production stack)
GUARDS: dict[str, tuple[str, Mutation, tuple[str, ...] | None]] = {
    "delete every ValidatingAdmissionPolicy": ("kubernetes-team-admission-policies", _without(lambda r: r.type == VAP),
                                               None),
    "delete every ValidatingAdmissionPolicyBinding": ("kubernetes-team-admission-policies",
                                                      _without(lambda r: r.type == BINDING), None),
    "registry policy's expressions made true": (
        "kubernetes-team-admission-policies",
        _editing(_named(VAP, "gpu-cluster-allowed-registries"), _registry_expressions_true), None),
    "registry policy allows the empty prefix": (
        "kubernetes-team-admission-policies",
        _editing(_named(VAP, "gpu-cluster-allowed-registries"), _empty_prefix), None),
    "no-privileged binding only warns": (
        "kubernetes-team-admission-policies",
        _editing(_named(BINDING, "gpu-cluster-no-privileged-pods"), _warn_only), None),
    "GPUDirect bounds deleted": (
        "kubernetes-team-admission-policies",
        _without(lambda r: r.type == VAP and r.inputs["metadata"]["name"] == "gpu-cluster-gpudirect-pod-limits"),
        ("prod-gcp",)),
    "team GID policy deleted": (
        "kubernetes-team-admission-policies",
        _without(lambda r: r.type in (VAP, BINDING) and r.inputs["metadata"]["name"] == "gpu-cluster-team-gid"), None),
    "team GID policy reads no namespace label": (
        "kubernetes-team-admission-policies",
        _editing(_named(VAP, "gpu-cluster-team-gid"), lambda i: i["spec"].update(
            variables=[{"name": "gid", "expression": "0"}, *i["spec"]["variables"][1:]])), None),
    "team priority policy on pods deleted": (
        "kubernetes-team-admission-policies",
        _without(lambda r: r.type in (VAP, BINDING)
                 and r.inputs["metadata"]["name"] == "gpu-cluster-team-priority-pods"), None),
    "team priority policy on pods allows system-node-critical": (
        "kubernetes-team-admission-policies",
        _editing(_named(VAP, "gpu-cluster-team-priority-pods"), lambda i: [
            v.update(expression=f"({v['expression']}) || object.spec.priorityClassName == 'system-node-critical'")
            for v in i["spec"]["validations"]]), None),
    **{f"team priority policy on {kind} deleted": (
        "kubernetes-team-admission-policies",
        _without(lambda r, kind=kind: r.type in (VAP, BINDING)
                 and r.inputs["metadata"]["name"] == f"gpu-cluster-team-priority-{kind}"), ("prod-aws",))
       for kind in ("templates", "jobsets", "mpijobs", "workloads")},
    "team priority policy on MPIJobs ignores the run policy": (
        "kubernetes-team-admission-policies",
        _editing(_named(VAP, "gpu-cluster-team-priority-mpijobs"), lambda i: [
            v.update(expression=v["expression"].replace("has(object.spec.runPolicy) &&", "false &&"))
            for v in i["spec"]["validations"]]), ("prod-aws",)),
    "exec into the RxDM sidecar allowed": (
        "kubernetes-team-admission-policies",
        _without(lambda r: r.type == BINDING and r.inputs["metadata"]["name"] == "gpu-cluster-gpudirect-sidecar-exec"),
        ("prod-gcp",)),
    # Weakenings a reviewer tried (issue 33 review): each passed the first, text-matching version of the guard.
    "registry binding lets pods opt out by a label": (
        "kubernetes-team-admission-policies",
        _editing(_named(BINDING, "gpu-cluster-allowed-registries"), lambda i: i["spec"]["matchResources"].update(
            objectSelector={"matchLabels": {"registry-check": "on"}})), None),
    "registry policy matches another API group": (
        "kubernetes-team-admission-policies",
        _editing(_named(VAP, "gpu-cluster-allowed-registries"), lambda i: [
            r.update(apiGroups=["example.com"]) for r in i["spec"]["matchConstraints"]["resourceRules"]]), None),
    "registry policy excludes pods": (
        "kubernetes-team-admission-policies",
        _editing(_named(VAP, "gpu-cluster-allowed-registries"), lambda i: i["spec"]["matchConstraints"].update(
            excludeResourceRules=[{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                                   "resources": ["pods"]}])), None),
    "registry checks made always true": (
        "kubernetes-team-admission-policies",
        _editing(_named(VAP, "gpu-cluster-allowed-registries"), lambda i: [
            v.update(expression=f"({v['expression']}) || 1 == 1") for v in i["spec"]["validations"]]), None),
    "registry checks moved into unused variables": (
        "kubernetes-team-admission-policies",
        _editing(_named(VAP, "gpu-cluster-allowed-registries"), lambda i: i["spec"].update(
            variables=[{"name": f"v{n}", "expression": v["expression"]}
                       for n, v in enumerate(i["spec"]["validations"])],
            validations=[{"expression": "1 == 1"}])), None),
    "a team policy opens every port by range": ("kubernetes-team-namespaces-isolated", _team_allow(
        {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"protocol": "TCP", "port": 1, "endPort": 65535}]}),
        None),
    "a team policy opens every port by omitting it": ("kubernetes-team-namespaces-isolated", _team_allow(
        {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"protocol": "TCP"}]}), None),
    "a team policy opens two halves of the internet": ("kubernetes-team-namespaces-isolated", _team_allow(
        {"to": [{"ipBlock": {"cidr": "0.0.0.0/1"}}, {"ipBlock": {"cidr": "128.0.0.0/1"}}]}), None),
    "a team policy reaches every namespace by expression": ("kubernetes-team-namespaces-isolated", _team_allow(
        {"to": [{"namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "Exists"}]}}]}), None),
    "a team policy reaches the instance metadata service": ("kubernetes-team-namespaces-isolated", _team_allow(
        {"to": [{"ipBlock": {"cidr": "169.254.0.0/16"}}], "ports": [{"protocol": "TCP", "port": 80}]}),
        ("prod-aws", "prod-aws-slurm")),
    "team namespaces at Pod Security privileged": ("kubernetes-team-namespaces-pod-security", _privileged_teams, None),
    "delete every team NetworkPolicy": ("kubernetes-team-namespaces-isolated", _team_policies_gone, None),
    "a team policy opens all egress": ("kubernetes-team-namespaces-isolated", _team_allow({}), None),
    "monitoring loses its default-deny egress": ("kubernetes-platform-namespaces-deny-egress", _platform_deny_gone,
                                                 None),
    "a platform allow opens every port": ("kubernetes-platform-namespaces-deny-egress", _platform_open, None),
    "no XID alert": ("alerts-minimum-telemetry", _drop_alerts("DCGM_FI_DEV_XID_ERRORS"), None),
    "no ECC alert": ("alerts-minimum-telemetry", _drop_alerts("DCGM_FI_DEV_ECC_DBE"), None),
    "no NVLink alert": ("alerts-minimum-telemetry", _drop_alerts("NVLINK"), None),
    "no node-not-ready alert": ("alerts-minimum-telemetry", _drop_alerts("kube_node_status_condition"), None),
    "no stuck-job alert": ("alerts-minimum-telemetry", _drop_alerts("kueue_pending_workloads|queue_wait"), None),
    "no fabric alert": ("alerts-minimum-telemetry", _drop_alerts("node_amazonefa_"), ("prod-aws", "prod-aws-slurm")),
    "no storage alert": ("alerts-minimum-telemetry", _drop_alerts("aws_fsx_|aws_s3_|stackdriver_"), None),
    "no slow-checkpoint alert": ("alerts-minimum-telemetry", _drop_alerts("gpu_cluster_checkpoint_duration"), None),
    "only critical alerts are routed": ("alerts-minimum-telemetry", _editing(lambda r: r.type == AMC,
                                                                            _route_to_nobody), None),
    "Slurm without accounting": ("slurm-accounting-in-production",
                                 _without(lambda r: r.type.endswith(":Accounting")), ("prod-aws-slurm",)),
}
CASES = [(stack, name) for name, (_, _, only) in GUARDS.items() for stack in (only or PRODUCTION)]


def findings(report: PolicyReport, policy: str) -> list[Any]:
    return [v for v in report.violations if v.policy == policy]


@pytest.mark.parametrize(("stack", "mutation"), CASES, ids=[f"{s}: {m}" for s, m in CASES])
def test_each_guard_removed_or_weakened_fails_production(stack: str, mutation: str) -> None:
    policy, mutate, _ = GUARDS[mutation]
    report = run_policies(mutate(graph_of(stack)))
    hits = findings(report, policy)
    assert hits, [(v.policy, v.message) for v in report.violations]
    assert all(v.enforcement == "mandatory" for v in hits)
    assert not report.passed


@pytest.mark.parametrize("stack", ["dev-aws", "dev-gcp-slurm"])
def test_outside_production_the_same_change_is_advised(stack: str) -> None:
    for mutation in ("delete every ValidatingAdmissionPolicy", "delete every team NetworkPolicy",
                     "monitoring loses its default-deny egress", "no XID alert"):
        policy, mutate, _ = GUARDS[mutation]
        report = run_policies(mutate(graph_of(stack)))
        assert not findings(report, policy), mutation
        advised = findings(report, f"{policy}-outside-production")
        assert advised and all(v.enforcement == "advisory" for v in advised), mutation


def test_every_shipped_stack_keeps_its_guards() -> None:
    """The unchanged stacks pass: the guards recognise what the program builds (not only its names)."""
    guards = {g for g, _, _ in GUARDS.values()}
    for stack in SHIPPED_STACKS:
        report = run_policies(graph_of(stack))
        hit = [(v.policy, v.message) for v in report.violations
               if v.policy.removesuffix("-outside-production") in guards]
        assert not hit, (stack, hit)


def test_a_renamed_guard_still_counts_and_a_hollow_one_does_not() -> None:
    """By what it enforces, not by name: renaming the registry policy (and its binding) keeps the stack green;
    keeping the name with a weakened body fails it."""
    graph = graph_of("prod-aws")

    def rename(inputs: dict[str, Any]) -> None:
        if inputs["kind"] == "ValidatingAdmissionPolicy":
            inputs["metadata"]["name"] = "images-from-our-registries"
        else:
            inputs["metadata"]["name"] = inputs["spec"]["policyName"] = "images-from-our-registries"
    renamed = _editing(lambda r: r.type in (VAP, BINDING) and r.inputs["metadata"]["name"]
                       == "gpu-cluster-allowed-registries", rename)(graph)
    def registries(report: PolicyReport) -> list[Any]:
        return [v for v in findings(report, "kubernetes-team-admission-policies") if "allowed registries" in v.message]
    assert not registries(run_policies(renamed))
    hollow = GUARDS["registry policy's expressions made true"][1](graph)
    assert registries(run_policies(hollow))
