"""The Kubernetes platform: GPU stack, queues and quotas, tenancy, telemetry; schema-checked offline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from blueprint.cli import main
from blueprint.graph.model import GraphResource, ResourceGraph
from components.kubernetes.objects import cluster_queue, covered_resources
from components.kubernetes.quotas import GpuPool, Resources, namespace_hard_limits, resources_for, team_flavor_quotas
from components.spec import PRIVILEGED_NAMESPACES, QuotaSpec, TeamSpec
from tests.conftest import SHIPPED_STACKS, kubernetes_version, offline_run, run_spec, stack
from tests.k8s_checks import (
    cluster_queue_cel,
    is_builtin,
    validate_builtin,
    validate_crd_object,
)

RELEASE = "kubernetes:helm.sh/v3:Release"
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"
P5 = GpuPool("h100", "p5.48xlarge", gpus_per_node=8, max_nodes=16, fabric_per_node=32, vcpu_per_node=192,
             memory_gib_per_node=2048, placed=True)


def k8s_objects(graph: ResourceGraph) -> list[GraphResource]:
    return [r for r in graph.resources if r.type.startswith("kubernetes:") and not r.is_provider
            and r.type != RELEASE]


def release(graph: ResourceGraph, name: str) -> GraphResource:
    (found,) = [r for r in graph.of_type(RELEASE) if r.inputs["name"] == name]
    return found


def kueue_objects(graph: ResourceGraph, kind: str) -> list[dict[str, Any]]:
    return [r.inputs for r in graph.of_type(KUEUE + kind)]


# --- offline schema checks ----------------------------------------------------------------------


@pytest.mark.parametrize("stack_name", SHIPPED_STACKS)
def test_builtin_objects_pass_strict_schema_validation(stack_name: str) -> None:
    version = kubernetes_version(stack_name)
    checked = 0
    for res in k8s_objects(offline_run(stack_name).graph):
        if "kind" not in res.inputs:
            continue  # the MPI Operator's release manifest (yaml/v2 ConfigFile): read by the cluster, not here
        if res.inputs["kind"] == "Secret" or not is_builtin(res.inputs):
            continue  # Secret data is a secret in the graph; it is built inline and checked below
        validate_builtin(res.inputs, version)
        checked += 1
    assert checked >= 20


def test_strict_validation_catches_a_misspelled_field() -> None:
    import kubernetes_validate

    bad = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "a"},
           "spec": {"hardd": {"requests.cpu": "1"}}}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_builtin(bad, "1.35")




@pytest.mark.parametrize("stack_name", SHIPPED_STACKS)
def test_kueue_objects_pass_the_crd_schemas_and_cel_rules(stack_name: str) -> None:
    objects = [r.inputs for r in offline_run(stack_name).graph.resources if r.type.startswith(KUEUE)]
    kinds = {o["kind"] for o in objects}
    required = {"ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass", "Cohort"}
    if stack_name == "prod-aws-slurm":  # every GPU group is Slurm's: Kueue has no flavor (test_slurm checks why)
        required -= {"ResourceFlavor"}
    assert required <= kinds
    for o in objects:
        validate_crd_object(o)
        if o["kind"] == "ClusterQueue":
            assert cluster_queue_cel(o) == []


def test_crd_check_rejects_unknown_fields_and_wrong_types() -> None:
    import jsonschema

    with pytest.raises(jsonschema.ValidationError):
        validate_crd_object({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                             "metadata": {"name": "q"}, "spec": {"clusterQueu": "x"}})
    with pytest.raises(jsonschema.ValidationError):
        validate_crd_object({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                             "metadata": {"name": "q"}, "spec": {"queueingStrategy": "Random"}})


def test_cel_rules_catch_borrowing_without_cohort_and_uneven_flavors() -> None:
    team = TeamSpec.model_validate({"name": "tm", "costCenter": "c",
                                    "quotas": [{"nodeGroup": "h100", "gpus": 8, "borrowingLimitGpus": 8}]})
    covered = covered_resources([P5], "vpc.amazonaws.com/efa")
    cq = cluster_queue(team, team_flavor_quotas(team, {"h100": P5}), None, covered)
    assert cluster_queue_cel(cq) == ["borrowingLimit must be nil when cohort is empty"]
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()
    assert cluster_queue_cel(cq)[1].startswith("flavor h100 must list exactly the covered resources")


# --- GPU stack ----------------------------------------------------------------------------------


# Value paths the GPU Operator chart reads that its default values.yaml leaves commented out or empty (v26.7.0
# templates/dcgm_exporter_config.yaml reads dcgmExporter.config.{name,create,data}; devicePlugin.config.data is a
# free-form map of config names).
GPU_OPERATOR_TEMPLATE_ONLY = ("dcgmExporter.config", "devicePlugin.config.data")


def _unknown_value_paths(values: Any, defaults: Any, path: str = "") -> list[str]:
    """Paths of ``values`` that the chart's defaults do not have (a misspelt or removed key is silently ignored
    by Helm), apart from the template-only ones."""
    if not isinstance(values, dict):
        return []
    out = []
    for key, value in values.items():
        here = f"{path}.{key}" if path else key
        if any(here == p or here.startswith(p + ".") for p in GPU_OPERATOR_TEMPLATE_ONLY):
            continue
        if not isinstance(defaults, dict) or key not in defaults:
            out.append(here)
        else:
            out += _unknown_value_paths(value, defaults[key], here)
    return out


@pytest.mark.parametrize("stack_name", [s for s in SHIPPED_STACKS if s.endswith("-aws")])  # GKE runs its own stack
def test_gpu_operator_values_are_keys_the_pinned_chart_reads(stack_name: str) -> None:
    """Every value the program gives the GPU Operator exists in the chart's default values at the pinned version
    (tests/fixtures/gpu-operator, v26.7.0): cdi.default, set until now, is a no-op there."""
    import yaml

    defaults = yaml.safe_load((Path(__file__).parents[1] / "fixtures" / "gpu-operator" / "values-v26.7.0.yaml")
                              .read_text(encoding="utf-8"))
    op = release(offline_run(stack_name).graph, "gpu-operator").inputs
    assert op["version"] == "v26.7.0"
    assert _unknown_value_paths(op["values"], defaults) == []
    assert _unknown_value_paths({"cdi": {"enabled": True, "default": True}}, defaults) == ["cdi.default"]


def test_gpu_operator_on_the_eks_nvidia_ami() -> None:
    graph = offline_run("prod-aws").graph
    op = release(graph, "gpu-operator").inputs
    assert op["chart"] == "gpu-operator" and op["version"] == "v26.7.0"
    assert op["repositoryOpts"] == {"repo": "https://helm.ngc.nvidia.com/nvidia"}
    values = op["values"]
    assert values["driver"] == {"enabled": False} and values["toolkit"] == {"enabled": False}
    assert values["dcgmExporter"]["enabled"] is True
    assert values["dcgmExporter"]["serviceMonitor"]["enabled"] is True
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in values["dcgmExporter"]["config"]["data"]
    assert "devicePlugin" not in values  # whole GPUs by default
    assert values["migManager"] == {"enabled": False}


def test_time_slicing_configures_the_device_plugin() -> None:
    values = release(offline_run("dev-aws").graph, "gpu-operator").inputs["values"]
    config = values["devicePlugin"]["config"]
    assert config["default"] == "time-slicing" and config["create"] is True
    assert "replicas: 4" in config["data"]["time-slicing"]


def test_efa_device_plugin_only_where_node_groups_have_efa() -> None:
    plugin = release(offline_run("prod-aws").graph, "aws-efa-k8s-device-plugin").inputs
    assert plugin["namespace"] == "kube-system" and plugin["version"] == "v0.5.20"
    assert plugin["values"]["supportedInstanceLabels"]["values"] == ["p5.48xlarge"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in plugin["values"]["tolerations"]
    assert [r for r in offline_run("dev-aws").graph.of_type(RELEASE)
            if r.inputs["name"] == "aws-efa-k8s-device-plugin"] == []


# --- queues and quotas --------------------------------------------------------------------------


def test_kueue_release_exports_quota_metrics() -> None:
    kueue = release(offline_run("prod-aws").graph, "kueue").inputs
    assert kueue["chart"] == "oci://registry.k8s.io/kueue/charts/kueue" and kueue["version"].startswith("0.19.")
    assert "repositoryOpts" not in kueue
    assert kueue["values"]["enablePrometheus"] is True
    config = kueue["values"]["managerConfig"]["controllerManagerConfigYaml"]
    assert "enableClusterQueueResources: true" in config
    assert "manageJobsWithoutQueueName: true" in config


def test_one_cluster_queue_and_local_queue_per_team() -> None:
    graph = offline_run("prod-aws").graph
    teams = [t.name for t in stack("prod-aws").spec.teams]
    cqs = {o["metadata"]["name"]: o for o in kueue_objects(graph, "ClusterQueue")
           if o["metadata"].get("labels", {}).get("gpu-cluster/acceptance") != "true"}
    lqs = {o["metadata"]["namespace"]: o for o in kueue_objects(graph, "LocalQueue")
           if o["metadata"]["namespace"] != "gpu-acceptance"}
    assert sorted(cqs) == sorted(teams) and sorted(lqs) == sorted(teams)
    for team in teams:
        assert lqs[team]["spec"]["clusterQueue"] == team
        assert cqs[team]["spec"]["cohortName"] == "prod-train-gpus"
        assert cqs[team]["spec"]["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    research = cqs["research"]["spec"]["resourceGroups"][0]
    assert research["coveredResources"] == ["nvidia.com/gpu", "cpu", "memory", "vpc.amazonaws.com/efa"]
    # the CPU flavor first (test_cpu_quotas.py), named by its immutable fields (test_flavor_names.py)
    assert [f["name"] for f in research["flavors"]] == ["cpu-47400688", "h100"]
    assert research["flavors"][1]["resources"] == [
        {"name": "nvidia.com/gpu", "nominalQuota": "64", "borrowingLimit": "32"},
        {"name": "cpu", "nominalQuota": "1536", "borrowingLimit": "768"},
        {"name": "memory", "nominalQuota": "16384Gi", "borrowingLimit": "8192Gi"},
        {"name": "vpc.amazonaws.com/efa", "nominalQuota": "256", "borrowingLimit": "128"},
    ]


def test_flavor_targets_the_node_group_tolerates_the_taint_and_uses_the_topology() -> None:
    graph = offline_run("prod-aws").graph
    by_name = {f["metadata"]["name"]: f for f in kueue_objects(graph, "ResourceFlavor")}
    flavor, cpu = by_name["h100"], by_name["cpu-47400688"]
    # teams' CPU-only work: the cpu group's team taint and its toleration, no GPU toleration; the hosts topology, as
    # h100 has one (a TAS-only queue)
    team_cpu = {"key": "gpu-cluster/team-cpu", "effect": "NoSchedule"}
    assert cpu["spec"] == {"nodeLabels": {"gpu-cluster/node-group": "cpu"}, "topologyName": "hosts",
                           "nodeTaints": [{**team_cpu, "value": "true"}],
                           "tolerations": [{**team_cpu, "operator": "Exists"}]}
    assert flavor["spec"] == {
        "nodeLabels": {"gpu-cluster/node-group": "h100"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "topologyName": "aws-network",
    }
    topologies = {t["metadata"]["name"]: t for t in kueue_objects(graph, "Topology")}
    assert set(topologies) == {"aws-network", "hosts"}  # the network's, and the cpu flavor's one level of hosts
    for topology in topologies.values():
        assert [lvl["nodeLabel"] for lvl in topology["spec"]["levels"]][-1] == "kubernetes.io/hostname"
    dev_flavor = kueue_objects(offline_run("dev-aws").graph, "ResourceFlavor")[0]
    assert "topologyName" not in dev_flavor["spec"]  # a single-GPU group without EFA is not placed


def test_queue_objects_wait_for_the_kueue_release() -> None:
    graph = offline_run("prod-aws").graph
    kueue_urn = release(graph, "kueue").urn
    queue_objects = [r for r in graph.resources if r.type.startswith(KUEUE)]
    assert queue_objects
    for r in queue_objects:
        assert kueue_urn in r.dependencies, r.name
    namespaces = {r.inputs["metadata"]["name"]: r.urn for r in graph.of_type("kubernetes:core/v1:Namespace")}
    for lq in graph.of_type(KUEUE + "LocalQueue"):
        assert namespaces[lq.inputs["metadata"]["namespace"]] in lq.dependencies


def test_quota_arithmetic() -> None:
    assert resources_for(8, P5) == Resources(gpu=8, cpu=192, memory_gib=2048, fabric=32)
    explicit = QuotaSpec.model_validate({"nodeGroup": "h100", "gpus": 16, "cpu": 100, "memoryGiB": 1000})
    assert resources_for(16, P5, explicit) == Resources(16, 100, 1000, 64)
    assert resources_for(8, P5, explicit) == Resources(8, 50, 500, 32)  # a limit of half the nominal
    shared = GpuPool("l4", "g6.xlarge", 1, 2, 0, 4, 16, placed=False, gpu_units_per_gpu=4)
    assert resources_for(4, shared) == Resources(4, 4, 16, 0)  # four shares of one GPU = one node
    assert shared.capacity_units == 8


def test_namespace_ceiling_is_nominal_plus_what_can_be_borrowed() -> None:
    teams = stack("prod-aws").spec.teams
    pools = {"h100": P5}
    by_name = {t.name: t for t in teams}
    # research: 64 nominal + its 32 borrowing limit
    assert namespace_hard_limits(by_name["research"], teams, pools, cohort=True).gpu == 96
    # pretraining: no borrowing limit, so everything the others lend (64 + 16)
    assert namespace_hard_limits(by_name["pretraining"], teams, pools, cohort=True).gpu == 128
    # applied: 16 + 16; without a cohort nothing can be borrowed
    assert namespace_hard_limits(by_name["applied"], teams, pools, cohort=True).gpu == 32
    assert namespace_hard_limits(by_name["applied"], teams, pools, cohort=False).gpu == 16


# --- tenancy ------------------------------------------------------------------------------------


def test_team_namespaces_are_labelled_isolated_and_quota_bound() -> None:
    graph = offline_run("prod-aws").graph
    namespaces = {r.inputs["metadata"]["name"]: r.inputs["metadata"]["labels"]
                  for r in graph.of_type("kubernetes:core/v1:Namespace")}
    research = namespaces["research"]
    assert research["team"] == "research" and research["cost-center"] == "cc-4200"
    assert research["environment"] == "prod"
    assert research["pod-security.kubernetes.io/enforce"] == "baseline"
    assert research["gpu-cluster/tenant"] == "true"
    for name in ("gpu-operator", "monitoring"):
        assert namespaces[name]["pod-security.kubernetes.io/enforce"] == "privileged"
    for name, labels in namespaces.items():
        if name not in PRIVILEGED_NAMESPACES:
            assert labels["pod-security.kubernetes.io/enforce"] == "baseline", name
    quotas = {r.inputs["metadata"]["namespace"]: r.inputs["spec"]["hard"]
              for r in graph.of_type("kubernetes:core/v1:ResourceQuota")}
    # 96 GPUs' share of p5 nodes (2304 cores, 24576 GiB) plus the team's CPU quota on the cpu group (16, 56 GiB)
    assert quotas["research"] == {"requests.nvidia.com/gpu": "96", "requests.cpu": "2320",
                                  "requests.memory": "24632Gi", "requests.vpc.amazonaws.com/efa": "384"}
    assert {r.inputs["metadata"]["namespace"] for r in graph.of_type("kubernetes:core/v1:LimitRange")} == \
        {"research", "pretraining", "applied"}
    binding = next(r.inputs for r in graph.of_type("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
                   if r.inputs["metadata"]["namespace"] == "research")
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                    "name": "gpu-cluster:research"}]
    entries = [e.inputs for e in graph.of_type("aws:eks/accessEntry:AccessEntry") if e.inputs.get("kubernetesGroups")]
    assert {"principalArn": "arn:aws:iam::111122223333:role/research-engineers",
            "kubernetesGroups": ["gpu-cluster:research"]}.items() <= next(
        e for e in entries if e["principalArn"].endswith("research-engineers")).items()


def test_network_policies_default_deny_with_training_allowances() -> None:
    graph = offline_run("prod-aws").graph
    policies = {r.inputs["metadata"]["name"]: r.inputs["spec"]
                for r in graph.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
                if r.inputs["metadata"]["namespace"] == "applied"}
    assert set(policies) == {"default-deny", "allow-same-namespace", "allow-dns", "allow-metrics-scrape",
                             "allow-pod-identity-agent", "allow-https-egress", "allow-metrics-push",
                             # issue 39: the gateway's paths (tests/inference/test_gateway.py)
                             "allow-inference-gateway-egress", "allow-inference-gateway-replicas",
                             "allow-inference-gateway-pickers"}
    assert policies["default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    # Jobs push checkpoint durations to the team's own Pushgateway, and only there in the monitoring namespace.
    (push,) = policies["allow-metrics-push"]["egress"]
    assert push["ports"] == [{"protocol": "TCP", "port": 9091}]
    assert push["to"][0]["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "prometheus-pushgateway",
                                                            "app.kubernetes.io/instance": "pushgateway-applied"}}
    cni = next(a.inputs for a in graph.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "vpc-cni")
    assert cni["configurationValues"] == '{"enableNetworkPolicy": "true"}'


def test_admission_policies_restrict_registries_and_privileged_pods() -> None:
    graph = offline_run("prod-aws").graph
    vaps = {r.inputs["metadata"]["name"]: r.inputs["spec"]
            for r in graph.of_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")}
    registries = vaps["gpu-cluster-allowed-registries"]["validations"][0]["expression"]
    assert '"111122223333.dkr.ecr.us-east-1.amazonaws.com/"' in registries and '"nvcr.io/nvidia/"' in registries
    bindings = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in graph.of_type(
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")}
    assert bindings["gpu-cluster-allowed-registries"]["validationActions"] == ["Deny"]
    exempt = bindings["gpu-cluster-no-privileged-pods"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]
    assert exempt["operator"] == "NotIn" and exempt["values"] == list(PRIVILEGED_NAMESPACES)


# --- telemetry and cost -------------------------------------------------------------------------


def test_monitoring_stack_scrapes_gpus_and_queues_and_exports_billing_labels() -> None:
    graph = offline_run("prod-aws").graph
    prom = release(graph, "kube-prometheus-stack").inputs
    assert prom["version"] == "81.4.3" and prom["namespace"] == "monitoring"
    spec = prom["values"]["prometheus"]["prometheusSpec"]
    assert spec["serviceMonitorSelectorNilUsesHelmValues"] is False and spec["retention"] == "30d"
    assert spec["storageSpec"]["volumeClaimTemplate"]["spec"]["resources"]["requests"]["storage"] == "500Gi"
    allow = prom["values"]["kube-state-metrics"]["metricLabelsAllowlist"]
    assert "namespaces=[team,cost-center,environment,owner]" in allow
    assert prom["values"]["grafana"]["admin"]["existingSecret"] == "grafana-admin"
    gpu_op, kueue = release(graph, "gpu-operator"), release(graph, "kueue")
    assert release(graph, "kube-prometheus-stack").urn in gpu_op.dependencies
    assert release(graph, "kube-prometheus-stack").urn in kueue.dependencies


def test_rules_cover_the_minimum_telemetry() -> None:
    (rule,) = offline_run("prod-aws").graph.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")
    alerts = {r["alert"]: r["expr"] for g in rule.inputs["spec"]["groups"] for r in g["rules"] if "alert" in r}
    assert set(alerts) == {"GpuXidError", "GpuEccDoubleBitErrors", "GpuRowRemapFailure", "GpuTemperatureHigh",
                           "GpuPowerThrottling", "GpuAllocatedButIdle", "KueueQueueWaitHigh",
                           "KueueInadmissibleWorkloads", "KueueWorkloadsEvicted", "KueueWorkloadsPreempted",
                           "GpuNvlinkErrors", "NodeNotReady", "KueueQuotaExhausted", "TeamSpendOverBudget",
                           # issue 27: fabric, storage, logs and checkpoints
                           "EfaRetransmitsHigh", "EfaRetransmitTimeouts", "EfaImpairedConnections", "EfaDeviceErrors",
                           "FabricMetricsMissing", "StorageMetricsMissing", "FilesystemThroughputNearLimit",
                           "FilesystemCapacityLow", "CheckpointBucketErrors", "LogsNotShipped",
                           "LogShipperUnavailable", "CheckpointTooSlow",
                           # issue 39: the served model's (tests/inference/test_serving_telemetry.py)
                           "ServedModelTtftOverObjective", "ServedModelTpotOverObjective", "ServedModelRequestsQueued",
                           "ServedModelKvCacheFull", "ServedModelErrors", "ServedModelDown",
                           "ServedModelReplicasUnavailable", "ServedModelAutoscalerFailing",
                           "ServedModelPickerUnavailable"}
    assert "DCGM_FI_DEV_XID_ERRORS" in alerts["GpuXidError"]
    assert "kueue_pending_workloads" in alerts["KueueInadmissibleWorkloads"]
    dashboards = {r.inputs["metadata"]["name"]: r.inputs["data"]
                  for r in offline_run("prod-aws").graph.of_type("kubernetes:core/v1:ConfigMap")
                  if r.inputs["metadata"].get("labels", {}).get("grafana_dashboard") == "1"}
    assert set(dashboards) == {"gpu-cluster-dashboard", "gpu-cluster-jobs-dashboard"}
    assert "Queue wait p90 by team" in dashboards["gpu-cluster-dashboard"]["gpu-cluster.json"]


def test_opencost_reads_the_cluster_prometheus() -> None:
    cost = release(offline_run("prod-aws").graph, "opencost").inputs
    internal = cost["values"]["opencost"]["prometheus"]["internal"]
    assert internal["serviceName"] == "kube-prometheus-stack-prometheus" and internal["namespaceName"] == "monitoring"
    assert cost["values"]["opencost"]["exporter"]["defaultClusterId"] == "prod-train"


def test_platform_needs_no_teams_to_build(prod_spec: dict[str, Any]) -> None:
    prod_spec["teams"] = []
    prod_spec.pop("inference")  # no team to serve for
    prod_spec["platform"]["monitoring"]["alerts"]["routes"] = [{"receiver": "platform-pager"}]  # no team to route
    graph = run_spec(prod_spec).graph
    queues = [q.inputs["metadata"]["name"] for q in graph.of_type(KUEUE + "ClusterQueue")]
    assert queues == ["gpu-acceptance"] and graph.of_type(KUEUE + "ResourceFlavor")  # no team queue


def test_manifests_command_writes_objects_and_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["manifests", "prod-aws", "-o", str(tmp_path)]) == 0
    assert capsys.readouterr().err.startswith("wrote ")
    cq = (tmp_path / "clusterqueue" / "research.yaml").read_text()
    assert cq.startswith("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: research\n")
    values = (tmp_path / "helm" / "kueue.values.yaml").read_text()
    assert values.startswith("# chart: oci://registry.k8s.io/kueue/charts/kueue 0.19.2\n# namespace: kueue-system\n")
    assert "  controllerManagerConfigYaml: |\n" in values
    assert not (tmp_path / "secret").exists()  # secrets stay out of files


@pytest.mark.parametrize("stack_name", SHIPPED_STACKS)
def test_every_kubernetes_object_has_a_type_token_the_provider_knows(stack_name: str) -> None:
    """Built-in kinds go through their typed class (kubernetes:core/v1:PersistentVolume), never the generic
    CustomResource path, whose token for a core kind (kubernetes:v1:PersistentVolume) the provider refuses."""
    for res in offline_run(stack_name).graph.resources:
        if res.type.startswith("kubernetes:") and "kind" in res.inputs:
            group = res.type.split(":")[1]
            assert not group.startswith("v1"), f"{res.name}: {res.type}"
