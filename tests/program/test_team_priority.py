"""Team namespaces take no PriorityClass the stack does not offer teams (issue 36 review): the
``gpu-cluster-team-priority-*`` ValidatingAdmissionPolicies refuse ``system-node-critical`` and
``system-cluster-critical`` (and any other class) on team pods, on the pod templates of the job kinds Kueue admits for
teams and on Kueue's Workloads, so no team job reaches a queue at priority 2000000000 and up.

Each policy's expression is run (cel-python) on objects that pass their kind's schema (the CRDs of
blueprint/schemas/crds, strict; built-in kinds through kubernetes-validate), so the expression reads the fields where
the API server stores them."""

from __future__ import annotations

import copy
from typing import Any

import celpy
import pytest

from components.kubernetes.objects import TEAM_PRIORITY_POLICY, TENANT_LABEL
from tests.conftest import kubernetes_version, offline_run
from tests.k8s_checks import validate_builtin, validate_crd_object

VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
CRITICAL = ("system-node-critical", "system-cluster-critical")

POD_SPEC: dict[str, Any] = {"restartPolicy": "Never",
                            "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3"}]}
TEMPLATE: dict[str, Any] = {"spec": POD_SPEC}
# (policy suffix, an object of a kind it matches, without a priorityClassName)
OBJECTS: list[tuple[str, dict[str, Any]]] = [
    ("pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "research"},
              "spec": POD_SPEC}),
    ("templates", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "research"},
                   "spec": {"template": TEMPLATE}}),
    ("templates", {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "research"},
                   "spec": {"selector": {"matchLabels": {"app": "d"}},
                            "template": {"metadata": {"labels": {"app": "d"}},
                                         "spec": {**POD_SPEC, "restartPolicy": "Always"}}}}),
    ("jobsets", {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                 "metadata": {"name": "js", "namespace": "research"},
                 "spec": {"replicatedJobs": [{"name": "a", "template": {"spec": {"template": TEMPLATE}}},
                                             {"name": "b", "template": {"spec": {"template": TEMPLATE}}}]}}),
    ("mpijobs", {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                 "metadata": {"name": "m", "namespace": "research"},
                 "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": TEMPLATE},
                                              "Worker": {"replicas": 2, "template": TEMPLATE}}}}),
    ("cronjobs", {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c", "namespace": "research"},
                  "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": TEMPLATE}}}}),
    ("trainingruntimes", {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime",
                          "metadata": {"name": "t", "namespace": "research"},
                          "spec": {"template": {"spec": {"replicatedJobs": [
                              {"name": "node", "template": {"spec": {"template": TEMPLATE}}}]}}}}),
]


def _with_priority(obj: dict[str, Any], name: str) -> dict[str, Any]:
    """The object with ``priorityClassName: name`` in its last pod spec (a JobSet's second job, an MPIJob's workers)."""
    out = copy.deepcopy(obj)
    spec = out["spec"]
    if out["kind"] == "Pod":
        holder = spec
    elif out["kind"] == "JobSet":
        holder = spec["replicatedJobs"][-1]["template"]["spec"]["template"]["spec"]
    elif out["kind"] == "MPIJob":
        holder = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    elif out["kind"] == "CronJob":
        holder = spec["jobTemplate"]["spec"]["template"]["spec"]
    elif out["kind"] == "TrainingRuntime":
        holder = spec["template"]["spec"]["replicatedJobs"][-1]["template"]["spec"]["template"]["spec"]
    else:
        holder = spec["template"]["spec"]
    holder["priorityClassName"] = name
    return out


def _workload(group: str, kind: str, name: str) -> dict[str, Any]:
    """A Kueue v1beta2 Workload as Kueue makes one for a job, with its priority reference."""
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "job-j-1", "namespace": "research"},
            "spec": {"queueName": "default", "priority": 2000001000,
                     "priorityClassRef": {"group": group, "kind": kind, "name": name},
                     "podSets": [{"name": "main", "count": 1, "template": TEMPLATE}]}}


def _validate(obj: dict[str, Any]) -> None:
    if obj["apiVersion"] in ("v1", "batch/v1", "apps/v1"):
        validate_builtin(obj, kubernetes_version("prod-aws"))
    else:
        validate_crd_object(obj)


def _policies(stack: str) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    graph = offline_run(stack).graph
    vaps = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in graph.of_type(VAP)}
    bindings = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in graph.of_type(BINDING)}
    return vaps, bindings


def _passes(expression: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> bool:
    env = celpy.Environment()
    program = env.program(env.compile(expression))
    return bool(program.evaluate({"object": celpy.json_to_cel(obj), "oldObject": celpy.json_to_cel(old),
                                  "request": celpy.json_to_cel({"operation": "CREATE" if old is None else "UPDATE"})}))


@pytest.mark.parametrize("stack_name", ["prod-aws", "prod-gcp"])
def test_team_namespaces_refuse_priority_classes_on_pods_job_templates_and_workloads(stack_name: str) -> None:
    vaps, bindings = _policies(stack_name)
    names = {f"{TEAM_PRIORITY_POLICY}-{s}"
             for s in ("pods", "templates", "cronjobs", "jobsets", "mpijobs", "trainingruntimes", "workloads")}
    assert names <= set(vaps) and names <= set(bindings)
    for name in names:
        assert bindings[name] == {"policyName": name, "validationActions": ["Deny"],
                                  "matchResources": {"namespaceSelector": {"matchLabels": {TENANT_LABEL: "true"}}}}
        assert vaps[name]["failurePolicy"] == "Fail"
    rules = {name.removeprefix(TEAM_PRIORITY_POLICY + "-"): [
        (r["apiGroups"], r["apiVersions"], r["resources"]) for r in vaps[name]["matchConstraints"]["resourceRules"]]
        for name in names}
    assert rules == {"pods": [([""], ["v1"], ["pods"])],
                     "templates": [(["batch"], ["v1"], ["jobs"]), (["apps"], ["v1"], ["deployments", "statefulsets"])],
                     "jobsets": [(["jobset.x-k8s.io"], ["v1alpha2"], ["jobsets"])],
                     "cronjobs": [(["batch"], ["v1"], ["cronjobs"])],
                     "mpijobs": [(["kubeflow.org"], ["v2beta1"], ["mpijobs"])],
                     "trainingruntimes": [(["trainer.kubeflow.org"], ["v1alpha1"], ["trainingruntimes"])],
                     "workloads": [(["kueue.x-k8s.io"], ["v1beta2"], ["workloads"])]}
    for suffix, obj in OBJECTS:
        (validation,) = vaps[f"{TEAM_PRIORITY_POLICY}-{suffix}"]["validations"]
        assert "kueue.x-k8s.io/priority-class" in validation["message"]
        _validate(obj)
        assert _passes(validation["expression"], obj), (suffix, obj["kind"])
        for name in (*CRITICAL, "high-priority"):
            refused = _with_priority(obj, name)
            _validate(refused)
            assert not _passes(validation["expression"], refused), (suffix, obj["kind"], name)
    (workloads,) = vaps[f"{TEAM_PRIORITY_POLICY}-workloads"]["validations"]
    queued = _workload("kueue.x-k8s.io", "WorkloadPriorityClass", "production")
    _validate(queued)
    assert _passes(workloads["expression"], queued)
    for name in CRITICAL:
        critical = _workload("scheduling.k8s.io", "PriorityClass", name)
        _validate(critical)
        assert not _passes(workloads["expression"], critical)
        # An update that leaves a Workload's reference as it was passes: one made before the policy can finish.
        assert _passes(workloads["expression"], critical, old=critical)


def _expression(suffix: str) -> str:
    vaps, _ = _policies("prod-aws")
    (validation,) = vaps[f"{TEAM_PRIORITY_POLICY}-{suffix}"]["validations"]
    return str(validation["expression"])


def test_an_mpijob_run_policy_priority_class_is_refused() -> None:
    """Kueue's MPIJob integration takes .spec.runPolicy.schedulingPolicy.priorityClass before the templates' classes
    (kueue pkg/controller/jobs/mpijob, MPIJob.PriorityClass())."""
    expression = _expression("mpijobs")
    mpijob = copy.deepcopy(dict(OBJECTS)["mpijobs"])
    mpijob["spec"]["runPolicy"] = {"schedulingPolicy": {"minAvailable": 3}}
    _validate(mpijob)
    assert _passes(expression, mpijob)
    for name in CRITICAL:
        mpijob["spec"]["runPolicy"]["schedulingPolicy"]["priorityClass"] = name
        _validate(mpijob)
        assert not _passes(expression, mpijob), name


@pytest.mark.parametrize("suffix", ["templates", "cronjobs", "jobsets", "mpijobs", "trainingruntimes"])
def test_an_update_that_keeps_the_class_passes_and_one_that_adds_a_class_does_not(suffix: str) -> None:
    """An object made before the policy still takes Kueue's unsuspend and its controller's finalizer removal (UPDATEs
    that leave the class as it was), as the Workload policy allows; an UPDATE that sets a class is refused."""
    expression = _expression(suffix)
    obj = next(o for s, o in OBJECTS if s == suffix)
    critical = _with_priority(obj, "system-node-critical")
    assert _passes(expression, critical, old=critical)
    assert not _passes(expression, critical, old=obj)
    assert not _passes(expression, critical, old=_with_priority(obj, "system-cluster-critical"))
    assert _passes(expression, obj, old=critical)  # dropping the class
