"""Every GPU node proves itself before it takes a job (issue 34): the shipped stacks' GPU nodes register with the
readiness taint (or get it from the controller where the autoscaler could not scale with it), the pinned Node Readiness
Controller's rules validate against its CRD, each group's check DaemonSet runs the checks and reports the conditions
the rules read, and its reporters may write only their own node's two conditions."""

from __future__ import annotations

from typing import Any

import celpy
import pytest
import yaml

from components.kubernetes.objects import node_check as nc
from components.spec import HEALTH_TAINT_KEY, READINESS_TAINT_KEY
from tests.conftest import offline_run
from tests.k8s_checks import CRD_ROOT, crd_schemas, validate_builtin, validate_crd_object

RULE = "kubernetes:readiness.node.x-k8s.io/v1alpha1:NodeReadinessRule"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
STACKS = ("prod-aws", "dev-aws", "prod-aws-slurm", "prod-gcp", "dev-gcp", "dev-gcp-slurm")


def _gpu_groups(graph: Any) -> dict[str, dict[str, Any]]:
    """GPU node group (EKS) or pool (GKE) name -> its inputs."""
    out = {}
    for r in graph.of_type("aws:eks/nodeGroup:NodeGroup"):
        labels = r.inputs.get("labels") or {}
        if "k8s.amazonaws.com/accelerator" in labels:
            out[labels["gpu-cluster/node-group"]] = r.inputs
    for r in graph.of_type("gcp:container/nodePool:NodePool"):
        config = r.inputs["nodeConfig"]
        if config.get("guestAccelerators"):
            out[config["labels"]["gpu-cluster/node-group"]] = r.inputs
    return out


def _crd_cel(rule: dict[str, Any]) -> list[str]:
    """The NodeReadinessRule CRD's CEL rules on spec.taint (key prefix and shape) run on the object: broken ones."""
    (crd,) = [d for d in yaml.safe_load_all((CRD_ROOT / "node-readiness-controller" /
                                            "readiness.node.x-k8s.io_nodereadinessrules.yaml").read_text()) if d]
    taint_schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["taint"]
    env = celpy.Environment()
    # Kubernetes' CEL string library (split), which cel-python lacks
    functions = {"split": lambda text, sep: celpy.celtypes.ListType(
        [celpy.celtypes.StringType(x) for x in str(text).split(str(sep))])}
    broken = []
    for check in taint_schema["x-kubernetes-validations"]:
        if "oldSelf" in check["rule"]:
            continue
        program = env.program(env.compile(check["rule"]), functions=functions)
        if not program.evaluate({"self": celpy.json_to_cel(rule["spec"]["taint"])}):
            broken.append(check["message"])
    return broken


@pytest.mark.parametrize("stack", STACKS)
def test_every_gpu_group_has_its_gate_its_health_rule_and_its_check(stack: str) -> None:
    graph = offline_run(stack).graph
    groups = _gpu_groups(graph)
    assert groups
    rules = {r.inputs["metadata"]["name"]: r.inputs for r in graph.of_type(RULE)}
    checks = {r.inputs["metadata"]["name"]: r for r in graph.of_type(DAEMONSET)
              if r.inputs["metadata"].get("namespace") == nc.NODE_CHECK_NAMESPACE}
    assert ("readiness.node.x-k8s.io/v1alpha1", "NodeReadinessRule") in crd_schemas()
    for group in groups:
        boot, health = rules[f"gpu-node-check-{group}"], rules[f"gpu-health-{group}"]
        for rule in (boot, health):
            validate_crd_object(rule)
            assert _crd_cel(rule) == []
            assert rule["spec"]["nodeSelector"] == {"matchLabels": {"gpu-cluster/node-group": group}}
        assert boot["spec"]["enforcementMode"] == "bootstrap-only"
        assert boot["spec"]["conditions"] == [{"type": nc.BOOT_CONDITION, "requiredStatus": "True"}]
        assert boot["spec"]["taint"]["key"] == READINESS_TAINT_KEY
        assert health["spec"]["enforcementMode"] == "continuous"
        assert health["spec"]["conditions"] == [{"type": nc.HEALTH_CONDITION, "requiredStatus": "True"}]
        assert health["spec"]["taint"] == {"key": HEALTH_TAINT_KEY, "value": "unhealthy", "effect": "NoSchedule"}
        daemonset = checks[f"gpu-node-check-{group}"]
        spec = daemonset.inputs["spec"]["template"]["spec"]
        validate_builtin(daemonset.inputs, "1.35")
        # an upgrade of the check does not re-check (and so hold) every node at once
        assert daemonset.inputs["spec"]["updateStrategy"] == {"type": "OnDelete"}
        assert spec["nodeSelector"] == {"gpu-cluster/node-group": group}
        tolerated = {t["key"] for t in spec["tolerations"]}
        assert {READINESS_TAINT_KEY, HEALTH_TAINT_KEY, "nvidia.com/gpu"} <= tolerated
        reporters = {c["name"]: {e["name"]: e.get("value") for e in c["env"]} for c in spec["containers"]
                     if c["image"].startswith("registry.k8s.io/node-readiness-controller/node-readiness-reporter:")}
        assert reporters["report-check"]["CONDITION_TYPE"] == nc.BOOT_CONDITION
        assert reporters["report-health"]["CONDITION_TYPE"] == nc.HEALTH_CONDITION
        assert reporters["report-check"]["CHECK_ENDPOINT"].endswith("/passed")
        inits = {c["name"]: c for c in spec["initContainers"]}
        assert "dcgmi diag -r 2" in inits["dcgm"]["command"][2]
        assert inits["dcgm"]["image"] == "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04"
        assert "node.json" in inits["verdict"]["command"][2]
        # no GPU is taken from the scheduler: once released the node's GPUs are the jobs'
        assert not any("nvidia.com/gpu" in (c.get("resources", {}).get("requests") or {})
                       for c in [*spec["initContainers"], *spec["containers"]])
        # the rules come after the DaemonSet that can release their nodes, and after the controller (its CRD)
        (rule_resource,) = [r for r in graph.of_type(RULE) if r.inputs["metadata"]["name"] == f"gpu-node-check-{group}"]
        assert daemonset.urn in rule_resource.dependencies
        assert any(d.endswith("::node-readiness-controller") for d in rule_resource.dependencies)


@pytest.mark.parametrize("stack", ("prod-aws", "dev-aws", "prod-aws-slurm"))
def test_eks_gpu_nodes_register_with_the_taint_and_the_autoscaler_knows_it(stack: str) -> None:
    graph = offline_run(stack).graph
    for group, inputs in _gpu_groups(graph).items():
        assert {"key": READINESS_TAINT_KEY, "value": "pending", "effect": "NO_SCHEDULE"} in inputs["taints"], group
    for r in graph.of_type("aws:eks/nodeGroup:NodeGroup"):
        if "k8s.amazonaws.com/accelerator" not in (r.inputs.get("labels") or {}):
            assert not any(t["key"] == READINESS_TAINT_KEY for t in r.inputs.get("taints") or [])
    releases = [r.inputs for r in graph.of_type("kubernetes:helm.sh/v3:Release")
                if r.inputs["name"] == "cluster-autoscaler"]
    for release in releases:
        assert release["values"]["extraArgs"] == {"startup-taint": READINESS_TAINT_KEY,
                                                  "status-taint": HEALTH_TAINT_KEY}


def test_gke_pools_register_with_the_taint_unless_the_autoscaler_grows_them() -> None:
    """GKE's autoscaler knows no readiness.k8s.io/ startup taint: an autoscaled pool gets it from the controller."""
    for stack in ("prod-gcp", "dev-gcp", "dev-gcp-slurm"):
        for group, pool in _gpu_groups(offline_run(stack).graph).items():
            autoscaling = pool.get("autoscaling") or {}
            grows = bool(autoscaling) and (autoscaling.get("totalMinNodeCount", autoscaling.get("minNodeCount"))
                                           != autoscaling.get("totalMaxNodeCount", autoscaling.get("maxNodeCount")))
            taints = {t["key"] for t in pool["nodeConfig"].get("taints") or []}
            assert (READINESS_TAINT_KEY in taints) is ((not grows and pool["nodeConfig"].get("spot") is not True)
                                                       or (READINESS_TAINT_KEY in taints and not grows)), (stack, group)


def test_the_controller_is_pinned_and_prefers_nodes_without_gpus() -> None:
    graph = offline_run("prod-aws").graph
    (release,) = [r.inputs for r in graph.of_type("kubernetes:helm.sh/v3:Release")
                  if r.inputs["name"] == "node-readiness-controller"]
    assert release["chart"] == "oci://registry.k8s.io/node-readiness-controller/charts/node-readiness-controller"
    assert release["version"] == "0.5.0" and release["namespace"] == "nrr-system"
    values = release["values"]
    assert {t["key"] for t in values["tolerations"]} == {"nvidia.com/gpu", READINESS_TAINT_KEY, HEALTH_TAINT_KEY}
    assert values["replicaCount"] == 2
    (prefer,) = values["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert {e["key"] for e in prefer["preference"]["matchExpressions"]} == {"k8s.amazonaws.com/accelerator",
                                                                           "cloud.google.com/gke-accelerator"}
    assert values["podDisruptionBudget"] == {"enabled": True, "minAvailable": 1}


def _admit(policy: dict[str, Any], request: dict[str, Any], node: dict[str, Any], old: dict[str, Any]) -> list[str]:
    """The messages of the reporter policy's validations the request breaks, after its match condition."""
    env = celpy.Environment()
    activation = {"request": celpy.json_to_cel(request), "object": celpy.json_to_cel(node),
                  "oldObject": celpy.json_to_cel(old)}
    (match,) = policy["spec"]["matchConditions"]
    if not env.program(env.compile(match["expression"])).evaluate(activation):
        return []
    return [v["message"] for v in policy["spec"]["validations"]
            if not env.program(env.compile(v["expression"])).evaluate(activation)]


def test_a_reporter_may_write_only_its_own_nodes_two_conditions() -> None:
    graph = offline_run("prod-aws").graph
    (policy,) = [r.inputs for r in graph.of_type(
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
        if r.inputs["metadata"]["name"] == "gpu-node-check-own-node"]
    (binding,) = [r.inputs for r in graph.of_type(
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")
        if r.inputs["metadata"]["name"] == "gpu-node-check-own-node"]
    assert binding["spec"]["validationActions"] == ["Deny"] and "matchResources" not in binding["spec"]
    assert policy["spec"]["matchConstraints"]["resourceRules"][0]["resources"] == ["nodes/status"]
    kubelet = {"type": "Ready", "status": "True"}

    def node(name: str, *conditions: dict[str, str]) -> dict[str, Any]:
        return {"metadata": {"name": name}, "status": {"conditions": [kubelet, *conditions]}}

    reporter = {"username": nc.REPORTER_USER, "extra": {"authentication.kubernetes.io/node-name": ["node-a"]}}
    passed = {"type": nc.BOOT_CONDITION, "status": "True"}
    assert _admit(policy, {"userInfo": reporter}, node("node-a", passed), node("node-a")) == []
    assert _admit(policy, {"userInfo": reporter}, node("node-b", passed), node("node-b")) == [
        "the node check may update only the node its pod runs on"]
    forged = node("node-a", passed)
    forged["status"]["conditions"][0] = {"type": "Ready", "status": "False"}
    assert _admit(policy, {"userInfo": reporter}, forged, node("node-a")) == [
        f"the node check may change only its conditions {nc.BOOT_CONDITION} and {nc.HEALTH_CONDITION}"]
    no_node = {"username": nc.REPORTER_USER, "extra": {}}
    assert _admit(policy, {"userInfo": no_node}, node("node-a", passed), node("node-a")) != []
    kubelet_user = {"username": "system:node:node-b", "extra": {}}
    assert _admit(policy, {"userInfo": kubelet_user}, node("node-a", passed), node("node-a")) == []  # not matched


def test_the_stack_sets_the_dcgm_level_and_whether_a_bad_node_keeps_its_jobs() -> None:
    from tests.conftest import raw_stack_config, run_spec

    spec = raw_stack_config("dev-aws")["gpu-cluster:spec"]
    spec.setdefault("platform", {})["nodeChecks"] = {"dcgmLevel": 3, "unhealthyEffect": "NoExecute"}
    graph = run_spec(spec).graph
    rules = {r.inputs["metadata"]["name"]: r.inputs for r in graph.of_type(RULE)}
    (health,) = [r for n, r in rules.items() if n.startswith("gpu-health-")]
    assert health["spec"]["taint"]["effect"] == "NoExecute"
    (boot,) = [r for n, r in rules.items() if n.startswith("gpu-node-check-")]
    assert boot["spec"]["taint"]["effect"] == "NoSchedule"  # the gate never evicts: nothing runs there yet
    (daemonset,) = [r.inputs for r in graph.of_type(DAEMONSET)
                    if r.inputs["metadata"].get("namespace") == nc.NODE_CHECK_NAMESPACE]
    dcgm = daemonset["spec"]["template"]["spec"]["initContainers"][0]["command"][2]
    assert "timeout 3600 dcgmi diag -r 3 -j" in dcgm
    default = offline_run("dev-aws").graph
    (daemonset,) = [r.inputs for r in default.of_type(DAEMONSET)
                    if r.inputs["metadata"].get("namespace") == nc.NODE_CHECK_NAMESPACE]
    assert "timeout 900 dcgmi diag -r 2 -j" in daemonset["spec"]["template"]["spec"]["initContainers"][0]["command"][2]


def test_the_preview_says_how_each_group_is_held_and_released(capsys: pytest.CaptureFixture[str]) -> None:
    from blueprint.cli import main

    assert main(["preview", "dev-gcp-slurm"]) == 0
    out = capsys.readouterr().out
    assert "node readiness: node-readiness-controller 0.5.0" in out
    assert "  l4: tainted on join with readiness.k8s.io/gpu-node-check" in out  # autoscaled GKE pool
    assert "  slurm-l4: registers with readiness.k8s.io/gpu-node-check" in out
    assert "dcgmi diag -r 2; unhealthy: readiness.k8s.io/gpu-health NoSchedule" in out
