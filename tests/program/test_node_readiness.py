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


def _rule_key(rule: dict[str, Any]) -> str:
    """A rule's name without the digest of its spec (``gpu-health-h100-1a2b3c4d`` -> ``gpu-health-h100``)."""
    name, _, digest = str(rule["metadata"]["name"]).rpartition("-")
    assert len(digest) == 8 and nc.rule_name(name.split("-" + rule["metadata"]["labels"]["gpu-cluster/node-check"])[0],
                                             rule["metadata"]["labels"]["gpu-cluster/node-check"],
                                             rule["spec"]) == rule["metadata"]["name"]
    return name


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
    rules = {_rule_key(r.inputs): r.inputs for r in graph.of_type(RULE)}
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
        # the verdict server and the reporters start first (native sidecars), so a checking node reports False
        names = [c["name"] for c in spec["initContainers"]]
        assert names[:3] == ["status", "report-check", "report-health"] and names[3] == "dcgm"
        assert all(c.get("restartPolicy") == "Always" for c in spec["initContainers"][:3])
        reporters = {c["name"]: {e["name"]: e.get("value") for e in c["env"]} for c in spec["initContainers"]
                     if c["image"].startswith("registry.k8s.io/node-readiness-controller/node-readiness-reporter:")}
        assert reporters["report-check"]["CONDITION_TYPE"] == nc.BOOT_CONDITION
        assert reporters["report-health"]["CONDITION_TYPE"] == nc.HEALTH_CONDITION
        assert reporters["report-check"]["CHECK_ENDPOINT"].endswith("/passed")
        # no host network (Workload Identity would not apply to the uploader): the host's /sys read-only instead
        assert "hostNetwork" not in spec
        assert {"name": "host-sys", "hostPath": {"path": "/sys", "type": "Directory"}} in spec["volumes"]
        inits = {c["name"]: c for c in spec["initContainers"]}
        assert "dcgmi diag -r 2" in inits["dcgm"]["command"][2]
        assert inits["dcgm"]["image"] == "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04"
        assert "node.json" in inits["verdict"]["command"][2]
        # no GPU is taken from the scheduler: once released the node's GPUs are the jobs'
        assert not any("nvidia.com/gpu" in (c.get("resources", {}).get("requests") or {})
                       for c in [*spec["initContainers"], *spec["containers"]])
        # the rules come after the DaemonSet that can release their nodes, and after the controller (its CRD)
        (rule_resource,) = [r for r in graph.of_type(RULE) if _rule_key(r.inputs) == f"gpu-node-check-{group}"]
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
    assert "podDisruptionBudget" not in values  # the chart at 0.5.0 has none: the program makes it
    (pdb,) = [r.inputs for r in graph.of_type("kubernetes:policy/v1:PodDisruptionBudget")
              if r.inputs["metadata"]["namespace"] == "nrr-system"]
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": nc.CONTROLLER_SELECTOR}}
    assert values["replicaCount"] == 2
    (prefer,) = values["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert {e["key"] for e in prefer["preference"]["matchExpressions"]} == {"k8s.amazonaws.com/accelerator",
                                                                           "cloud.google.com/gke-accelerator"}


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
    rules = {_rule_key(r.inputs): r.inputs for r in graph.of_type(RULE)}
    (health,) = [r for n, r in rules.items() if n.startswith("gpu-health-")]
    assert health["spec"]["taint"]["effect"] == "NoExecute"
    (boot,) = [r for n, r in rules.items() if n.startswith("gpu-node-check-")]
    assert boot["spec"]["taint"]["effect"] == "NoSchedule"  # the gate never evicts: nothing runs there yet
    (daemonset,) = [r.inputs for r in graph.of_type(DAEMONSET)
                    if r.inputs["metadata"].get("namespace") == nc.NODE_CHECK_NAMESPACE]
    pod = daemonset["spec"]["template"]["spec"]
    dcgm = next(c for c in pod["initContainers"] if c["name"] == "dcgm")["command"][2]
    assert "timeout 3600 dcgmi diag -r 3 -j" in dcgm
    # NoExecute would evict whatever does not tolerate it: the check and the node agents tolerate it, whatever the
    # effect, or an unhealthy node could never be reported healthy again
    assert {"key": HEALTH_TAINT_KEY, "operator": "Exists"} in pod["tolerations"]
    gpu_operator = [r.inputs for r in graph.of_type("kubernetes:helm.sh/v3:Release")
                    if r.inputs["name"] == "gpu-operator"]
    for release in gpu_operator:
        assert {"key": HEALTH_TAINT_KEY, "operator": "Exists"} in release["values"]["daemonsets"]["tolerations"]
    # a new effect is a new rule (the CRD makes the taint immutable), created before the old one goes
    assert health["metadata"]["name"] != next(
        r.inputs["metadata"]["name"] for r in offline_run("dev-aws").graph.of_type(RULE)
        if r.inputs["metadata"]["name"].startswith("gpu-health-"))
    default = offline_run("dev-aws").graph
    (daemonset,) = [r.inputs for r in default.of_type(DAEMONSET)
                    if r.inputs["metadata"].get("namespace") == nc.NODE_CHECK_NAMESPACE]
    assert "timeout 900 dcgmi diag -r 2 -j" in next(
        c for c in daemonset["spec"]["template"]["spec"]["initContainers"] if c["name"] == "dcgm")["command"][2]


def test_the_preview_says_how_each_group_is_held_and_released(capsys: pytest.CaptureFixture[str]) -> None:
    from blueprint.cli import main

    assert main(["preview", "dev-gcp-slurm"]) == 0
    out = capsys.readouterr().out
    assert "node readiness: node-readiness-controller 0.5.0" in out
    assert "  l4: tainted on join with readiness.k8s.io/gpu-node-check" in out  # autoscaled GKE pool
    assert "  slurm-l4: registers with readiness.k8s.io/gpu-node-check" in out
    assert "dcgmi diag -r 2; unhealthy: readiness.k8s.io/gpu-health NoSchedule" in out


@pytest.mark.parametrize("stack", ("prod-gcp", "dev-gcp", "dev-gcp-slurm"))
def test_gke_admits_the_critical_pods_through_a_quota_in_their_namespaces(stack: str) -> None:
    """GKE admits system-*-critical pods only in namespaces with a quota scoped to those classes."""
    graph = offline_run(stack).graph
    quotas = {r.inputs["metadata"]["namespace"]: r.inputs for r in graph.of_type("kubernetes:core/v1:ResourceQuota")
              if r.inputs["metadata"]["name"] == "critical-pods"}
    for namespace in ("nrr-system", "gpu-node-check"):
        scope = quotas[namespace]["spec"]["scopeSelector"]["matchExpressions"][0]
        assert scope == {"scopeName": "PriorityClass", "operator": "In",
                         "values": ["system-node-critical", "system-cluster-critical"]}
    assert int(quotas["gpu-node-check"]["spec"]["hard"]["pods"]) >= 2 * len(_gpu_groups(graph))
    (daemonset,) = [r for r in graph.of_type(DAEMONSET)
                    if r.inputs["metadata"].get("namespace") == nc.NODE_CHECK_NAMESPACE][:1]
    assert any(d.endswith("::node-readiness-gpu-node-check-critical-pods") for d in daemonset.dependencies)
    assert "critical-pods" not in {r.inputs["metadata"]["name"] for r in offline_run("prod-aws").graph.of_type(
        "kubernetes:core/v1:ResourceQuota")}


def test_the_check_runs_nccl_where_one_pod_can_and_leaves_it_to_the_acceptance_job_on_gpudirect_pools() -> None:
    """On GKE's TCPXO pools NCCL needs the pod's GPU networks and a receive-datapath sidecar even on one node, which a
    DaemonSet pod would keep beside the teams' own: there the check runs DCGM only; on EKS it runs the NVLink sweep."""
    def inits(stack: str) -> set[str]:  # the h100 group's check (the served model's one-GPU group has its own)
        (ds,) = [r.inputs for r in offline_run(stack).graph.of_type(DAEMONSET)
                 if r.inputs["metadata"].get("namespace") == nc.NODE_CHECK_NAMESPACE
                 and "h100" in r.inputs["metadata"]["name"]]
        return {c["name"] for c in ds["spec"]["template"]["spec"]["initContainers"]}
    assert "nvlink" in inits("prod-aws") and "dcgm" in inits("prod-aws")
    assert "nvlink" not in inits("prod-gcp") and "dcgm" in inits("prod-gcp")
