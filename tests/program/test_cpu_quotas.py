"""Teams' CPU-only quotas (issue 36, ``teams[].cpuQuotas``): the spec's rules with the messages a user sees, the Kueue
flavor and queue entries they become on both clouds (CPU flavor first, no GPU quota, lends nothing), the namespace's
ResourceQuota room, and the system group kept for the platform."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.kubernetes.objects import cluster_queue, covered_resources, cpu_resource_flavor, pods_ready_timeout
from components.kubernetes.quotas import (
    CpuPool,
    GpuPool,
    Resources,
    cpu_quota_room,
    sidecar_headroom,
    team_cpu_flavor_quotas,
    team_flavor_quotas,
)
from components.spec import SpecError, TeamSpec, parse_spec
from tests.conftest import SHIPPED_STACKS, offline_run, raw_stack_config, run_spec

AWS = "stacks/Pulumi.prod-aws.yaml"
GCP = "stacks/Pulumi.prod-gcp.yaml"
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"
P5 = GpuPool("h100", "p5.48xlarge", 8, 16, 32, 192, 2048, placed=True)
CPU_POOL = CpuPool("cpu", "m6i.8xlarge", 4, 32, 128, grows_after_admission=True)
# What the team CPU flavor carries: the taint of its node group and the toleration Kueue adds to the pods it admits.
TEAM_CPU = {"nodeTaints": [{"key": "gpu-cluster/team-cpu", "value": "true", "effect": "NoSchedule"}],
            "tolerations": [{"key": "gpu-cluster/team-cpu", "operator": "Exists", "effect": "NoSchedule"}]}


def spec(stack: str) -> dict[str, Any]:
    return copy.deepcopy(raw_stack_config(stack)["gpu-cluster:spec"])


def errors(value: dict[str, Any], stack_file: str = AWS, region: str = "us-east-1") -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(value, stack_file, provider_region=region)
    return str(info.value).splitlines()


def team(**cpu: Any) -> TeamSpec:
    return TeamSpec.model_validate({"name": "research", "costCenter": "cc-1", "quotas": [
        {"nodeGroup": "h100", "gpus": 8}], "cpuQuotas": [{"nodeGroup": "cpu", "cpu": 32, "memoryGiB": 112, **cpu}]})


# --- the spec's rules ------------------------------------------------------------------------------------------------


def test_the_shipped_prod_stacks_give_each_team_cpu_quota() -> None:
    aws = parse_spec(spec("prod-aws"), AWS, provider_region="us-east-1")
    assert [(t.name, [(q.node_group, q.cpu, q.memory_gib) for q in t.cpu_quotas]) for t in aws.teams] == [
        ("research", [("cpu", 16, 56)]), ("pretraining", [("cpu", 24, 88)]), ("applied", [("cpu", 8, 28)])]
    gcp = parse_spec(spec("prod-gcp"), GCP, provider_region="us-central1")
    assert [q.cpu for t in gcp.teams for q in t.cpu_quotas] == [8, 12, 4]


def test_cpu_and_memory_have_no_default() -> None:
    raw = spec("prod-aws")
    raw["teams"][0]["cpuQuotas"] = [{"nodeGroup": "cpu", "cpu": 8}]
    assert errors(raw) == [f"{AWS}: gpu-cluster:spec.teams[research].cpuQuotas[0].memoryGiB: required key is missing "
                           "[rule: schema-required-key]"]


def test_a_cpu_quota_must_be_on_a_node_group_without_gpus() -> None:
    raw = spec("prod-aws")
    raw["teams"][0]["cpuQuotas"] = [{"nodeGroup": "h100", "cpu": 8, "memoryGiB": 32},
                                    {"nodeGroup": "nope", "cpu": 8, "memoryGiB": 32}]
    assert errors(raw) == [
        f"{AWS}: gpu-cluster:spec.teams[research].cpuQuotas[0].nodeGroup: 'h100' is not a node group without GPUs "
        "of this stack; known: system, cpu [rule: cpu-quota-node-group]",
        f"{AWS}: gpu-cluster:spec.teams[research].cpuQuotas[1].nodeGroup: 'nope' is not a node group without GPUs "
        "of this stack; known: system, cpu [rule: cpu-quota-node-group]",
    ]


def test_the_cpu_quotas_on_a_group_fit_its_nodes_at_max_size() -> None:
    raw = spec("prod-aws")
    raw["teams"][0]["cpuQuotas"][0].update(cpu=80, memoryGiB=300)  # 80 + 24 + 8 > 2 x 32; 300 + 88 + 28 > 2 x 128
    assert errors(raw) == [
        f"{AWS}: gpu-cluster:spec.teams: CPU quotas' cpu on node group 'cpu' add up to 112 cores (research 80, "
        "pretraining 24, applied 8) but the group provides at most 64 cores at maxSize 2 (32 cores a node) "
        "[rule: cpu-quota-fits-node-group]",
        f"{AWS}: gpu-cluster:spec.teams: CPU quotas' memoryGiB on node group 'cpu' add up to 416 GiB (research 300, "
        "pretraining 88, applied 28) but the group provides at most 256 GiB at maxSize 2 (128 GiB a node) "
        "[rule: cpu-quota-fits-node-group]",
    ]


def test_the_system_group_stays_the_platforms() -> None:
    raw = spec("prod-aws")
    raw["aws"]["nodeGroups"] = [g for g in raw["aws"]["nodeGroups"] if g["name"] != "cpu"]
    for t in raw["teams"]:
        t["cpuQuotas"] = [{"nodeGroup": "system", "cpu": 2, "memoryGiB": 4}]
    assert errors(raw) == [
        f"{AWS}: gpu-cluster:spec.aws.nodeGroups: every node group without GPUs carries team CPU quota (system; "
        "teams[].cpuQuotas): keep one without it for system pods (Kueue, Prometheus, the autoscaler), so team work "
        "cannot starve the platform [rule: system-node-group]"]


def test_a_dedicated_cpu_group_takes_only_its_teams_quota() -> None:
    raw = spec("prod-aws")
    next(g for g in raw["aws"]["nodeGroups"] if g["name"] == "cpu")["team"] = "research"
    assert errors(raw) == [
        f"{AWS}: gpu-cluster:spec.teams[pretraining].cpuQuotas[0].nodeGroup: node group 'cpu' is dedicated to "
        "'research' (billed to it), so only that team may have a CPU quota on it [rule: dedicated-group-team]",
        f"{AWS}: gpu-cluster:spec.teams[applied].cpuQuotas[0].nodeGroup: node group 'cpu' is dedicated to "
        "'research' (billed to it), so only that team may have a CPU quota on it [rule: dedicated-group-team]",
    ]
    for t in raw["teams"]:
        t["cpuQuotas"] = []
    del raw["inference"]["gateway"]  # its endpoint pickers would need a CPU quota (rule inference-picker-quota)
    assert errors(raw) == [
        f"{AWS}: gpu-cluster:spec.aws.nodeGroups[cpu].team: node group 'cpu' is dedicated to 'research', which has no "
        "CPU quota on it: give the team one there (teams[].cpuQuotas) [rule: dedicated-group-team]"]


def test_gke_pools_follow_the_same_rules() -> None:
    raw = spec("prod-gcp")
    raw["teams"][2]["cpuQuotas"] = [{"nodeGroup": "h100", "cpu": 8, "memoryGiB": 28}]
    assert errors(raw, GCP, "us-central1") == [
        f"{GCP}: gpu-cluster:spec.teams[applied].cpuQuotas[0].nodeGroup: 'h100' is not a node group without GPUs "
        "of this stack; known: system, cpu [rule: cpu-quota-node-group]"]


# --- the Kueue objects and the namespace's quota ---------------------------------------------------------------------


def test_the_cpu_flavor_comes_first_with_no_gpu_quota_and_lends_nothing() -> None:
    t = team()
    covered = covered_resources([P5], "vpc.amazonaws.com/efa")
    cq = cluster_queue(t, team_flavor_quotas(t, {"h100": P5}), "c", covered,
                       team_cpu_flavor_quotas(t, {"cpu": CPU_POOL}))
    (group,) = cq["spec"]["resourceGroups"]
    assert [f["name"] for f in group["flavors"]] == ["cpu", "h100"]
    assert group["flavors"][0]["resources"] == [
        {"name": "nvidia.com/gpu", "nominalQuota": "0", "lendingLimit": "0"},
        {"name": "cpu", "nominalQuota": "32", "lendingLimit": "0"},
        {"name": "memory", "nominalQuota": "112Gi", "lendingLimit": "0Gi"},
        {"name": "vpc.amazonaws.com/efa", "nominalQuota": "0", "lendingLimit": "0"},
    ]
    alone = cluster_queue(t, team_flavor_quotas(t, {"h100": P5}), None, covered,
                          team_cpu_flavor_quotas(t, {"cpu": CPU_POOL}))  # no cohort: no lendingLimit (CEL rule)
    assert all("lendingLimit" not in r for r in alone["spec"]["resourceGroups"][0]["flavors"][0]["resources"])
    # The group's team CPU taint and its toleration (Kueue adds it to the pods it admits); no GPU toleration.
    assert cpu_resource_flavor(CPU_POOL)["spec"] == {"nodeLabels": {"gpu-cluster/node-group": "cpu"}, **TEAM_CPU}


def test_the_namespace_quota_and_sidecar_room_count_the_cpu_flavor() -> None:
    t = team()
    assert cpu_quota_room(t, {"cpu": CPU_POOL}) == Resources(0, 32, 112, 0)
    assert cpu_quota_room(t, {}) == Resources(0, 0, 0, 0)
    # one sidecar per node the queue reaches: 16 h100 nodes and 4 cpu nodes
    assert sidecar_headroom(t, {"h100": P5}, (250, 256), {"cpu": CPU_POOL}) == Resources(0, 5, 5, 0)


def test_a_growing_cpu_pool_gives_pods_the_scale_up_timeout() -> None:
    assert pods_ready_timeout([P5]) == "10m"
    assert pods_ready_timeout([P5], [CPU_POOL]) == "25m"


@pytest.mark.parametrize("stack", ["prod-aws", "prod-gcp"])
def test_both_clouds_build_the_cpu_flavor_and_quota(stack: str) -> None:
    graph = offline_run(stack).graph
    flavors = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in graph.of_type(KUEUE + "ResourceFlavor")}
    # The h100 flavor has a topology, so the cpu flavor has one too (the hosts): the team queues stay TAS-only.
    assert flavors["cpu-47400688"] == {"nodeLabels": {"gpu-cluster/node-group": "cpu"}, "topologyName": "hosts",
                                       **TEAM_CPU}
    topologies = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in graph.of_type(KUEUE + "Topology")}
    assert topologies["hosts"] == {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}
    cqs = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in graph.of_type(KUEUE + "ClusterQueue")}
    research = cqs["research"]["resourceGroups"][0]["flavors"]
    assert [f["name"] for f in research] == ["cpu-47400688", "h100"]
    cpu = {r["name"]: r["nominalQuota"] for r in research[0]["resources"]}
    assert (cpu["nvidia.com/gpu"], cpu["cpu"], cpu["memory"]) == \
        (("0", "16", "56Gi") if stack == "prod-aws" else ("0", "8", "28Gi"))
    quotas = {r.inputs["metadata"]["namespace"]: r.inputs["spec"]["hard"]
              for r in graph.of_type("kubernetes:core/v1:ResourceQuota")}
    # prod-aws: 96 GPUs' share of p5 (24 cores each) + the 16-core CPU quota; prod-gcp: 96 x 26 (a3-megagpu-8g) + 8 +
    # the GCS FUSE sidecar's room on the 18 nodes its queue reaches (16 h100 + 2 cpu)
    assert quotas["research"]["requests.cpu"] == ("2320" if stack == "prod-aws" else "2509")


def test_the_cluster_autoscaler_runs_on_the_system_group_not_the_teams_cpu_group() -> None:
    graph = offline_run("prod-aws").graph
    (ca,) = [r for r in graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "cluster-autoscaler"]
    (term,) = ca.inputs["values"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert term == {"matchExpressions": [{"key": "gpu-cluster/node-group", "operator": "In", "values": ["system"]}]}


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_every_team_queue_is_tas_only_or_has_no_tas_flavor(stack: str) -> None:
    """Kueue applies topology-aware scheduling to a pod set that asks for none only in a TAS-only ClusterQueue; in a
    queue that mixes flavors with and without a topology it refuses such a pod set every TAS flavor ("supports only
    TopologyAwareScheduling"), and GPU jobs without a topology annotation would never be admitted."""
    graph = offline_run(stack).graph
    tas = {r.inputs["metadata"]["name"]: "topologyName" in r.inputs["spec"]
           for r in graph.of_type(KUEUE + "ResourceFlavor")}
    for cq in graph.of_type(KUEUE + "ClusterQueue"):
        names = [f["name"] for g in cq.inputs["spec"].get("resourceGroups", []) for f in g["flavors"]]
        assert len({tas[n] for n in names}) <= 1, (cq.inputs["metadata"]["name"], {n: tas[n] for n in names})


def test_a_stack_whose_teams_mix_placed_and_open_gpu_groups_gets_both_cpu_flavors() -> None:
    """research queues only the placed h100 group (TAS-only: the cpu flavor with hosts); applied queues an open l4
    group too (no topology there: the cpu flavor without one, named apart)."""
    raw = spec("prod-aws")
    raw["aws"]["nodeGroups"].append({"name": "l4", "instanceType": "g6.xlarge", "minSize": 0, "desiredSize": 0,
                                     "maxSize": 2})
    applied = next(t for t in raw["teams"] if t["name"] == "applied")
    applied["quotas"] = [{"nodeGroup": "l4", "gpus": 2}]
    raw.pop("inference")  # the served model (on l40s, applied's quota there gone) is not what this tests
    graph = run_spec(raw, "prod-aws").graph
    flavors = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in graph.of_type(KUEUE + "ResourceFlavor")}
    assert flavors["cpu-47400688"]["topologyName"] == "hosts" and "topologyName" not in flavors["cpu-no-topology"]
    assert flavors["cpu-no-topology"]["nodeLabels"] == {"gpu-cluster/node-group": "cpu"}
    cqs = {r.inputs["metadata"]["name"]: [f["name"] for f in r.inputs["spec"]["resourceGroups"][0]["flavors"]]
           for r in graph.of_type(KUEUE + "ClusterQueue")}
    assert cqs["research"] == ["cpu-47400688", "h100"] and cqs["applied"] == ["cpu-no-topology", "l4"]


@pytest.mark.parametrize("stack", ["prod-aws", "prod-gcp"])
def test_only_the_groups_teams_have_cpu_quota_on_carry_the_team_cpu_taint(stack: str) -> None:
    """So platform pods (Prometheus, OpenCost, the Kueue controller), which do not tolerate it, stay on the system
    group and leave the teams' CPU quota its capacity (blueprint admit shows it: tests/admit/heldout/platform-pod-*)."""
    graph = offline_run(stack).graph
    team_cpu = {"key": "gpu-cluster/team-cpu", "value": "true", "effect": "NO_SCHEDULE"}
    if stack == "prod-aws":
        taints = {r.inputs["nodeGroupName"].removeprefix("prod-train-"): r.inputs.get("taints") or []
                  for r in graph.of_type("aws:eks/nodeGroup:NodeGroup")}
    else:
        taints = {r.inputs["name"]: r.inputs["nodeConfig"].get("taints") or []
                  for r in graph.of_type("gcp:container/nodePool:NodePool")}
    assert taints["cpu"] == [team_cpu]
    assert team_cpu not in taints["system"] and team_cpu not in taints["h100"]


def test_an_autoscaled_team_cpu_group_tells_the_cluster_autoscaler_its_taint() -> None:
    """The Cluster Autoscaler builds a scale-from-zero node from the group's tags: without the taint there it would
    think platform pods fit the new node."""
    from components.catalog import load_aws_catalog
    from components.node_template import NODE_TEMPLATE, autoscaler_tags

    value = spec("prod-aws")
    (cpu,) = [g for g in value["aws"]["nodeGroups"] if g["name"] == "cpu"]
    cpu["minSize"] = 0
    parsed = parse_spec(value, AWS, provider_region="us-east-1")
    (group,) = [g for g in parsed.aws_spec().node_groups if g.name == "cpu"]
    facts = load_aws_catalog()[group.instance_type]
    assert autoscaler_tags(group, facts, 1, team_cpu=True)[f"{NODE_TEMPLATE}/taint/gpu-cluster/team-cpu"] == \
        "true:NoSchedule"
    assert f"{NODE_TEMPLATE}/taint/gpu-cluster/team-cpu" not in autoscaler_tags(group, facts, 1)


def test_a_custom_ami_team_cpu_group_carries_its_taint_in_the_user_data() -> None:
    """Why docs/limits.md says the taint rolls such a group: with amiId, EKS applies API taints only after the node
    registers, so the taint is written into the user data too, and a new launch template version replaces the nodes;
    with EKS's own AMI it is an API taint only (an in-place update)."""
    from components.bootstrap import node_bootstrap
    from components.catalog import load_aws_catalog

    parsed = parse_spec(spec("prod-aws"), AWS, provider_region="us-east-1")
    (group,) = [g for g in parsed.aws_spec().node_groups if g.name == "cpu"]
    facts = load_aws_catalog()[group.instance_type]
    custom = group.model_copy(update={"ami_id": "ami-0123456789abcdef0", "ami_kubernetes_version": "1.35"})
    assert ("gpu-cluster/team-cpu", "true", "NoSchedule") in node_bootstrap(custom, facts, team_cpu=True).taints
    assert ("gpu-cluster/team-cpu", "true", "NoSchedule") not in node_bootstrap(custom, facts).taints
    assert node_bootstrap(group, facts, team_cpu=True).taints == ()
