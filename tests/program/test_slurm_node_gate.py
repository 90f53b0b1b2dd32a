"""slurmd does not bypass the GPU node gate: its pods tolerate their nodes' taints but never the readiness taints (so
slurmd, which holds every GPU of the node, starts only once the node's check passed), and slurm.conf runs the GPU
health check each NodeSet mounts (HealthCheckProgram), built from the same expectations as the node check."""

from __future__ import annotations

from typing import Any

import pytest

from blueprint.admit.scheduling import tolerates
from components.kubernetes.objects import slurm as s
from components.kubernetes.objects.common import READINESS_TOLERATIONS
from components.kubernetes.objects.node_check import HEALTH_INTERVAL_S
from components.kubernetes.quotas import GpuPool
from components.spec import GPU_TAINT_KEY, HEALTH_TAINT_KEY, READINESS_TAINT_KEY, TEAM_CPU_TAINT_KEY
from tests.conftest import offline_run

SLINKY = "kubernetes:slinky.slurm.net/v1beta1:"
STACKS = ["prod-aws-slurm", "dev-gcp-slurm"]
GATE = [{"key": READINESS_TAINT_KEY, "value": "pending", "effect": "NoSchedule"},
        {"key": HEALTH_TAINT_KEY, "value": "unhealthy", "effect": "NoSchedule"}]


def _pool(**kw: Any) -> GpuPool:
    base: dict[str, Any] = dict(name="h100", instance_type="p5.48xlarge", gpus_per_node=8, max_nodes=16,
                                fabric_per_node=32, vcpu_per_node=192, memory_gib_per_node=2048, placed=True,
                                gpu_model="NVIDIA H100 80GB HBM3", fabric_kind="efa", fabric_devices=32)
    return GpuPool(**{**base, **kw})


def test_a_toleration_without_a_key_counts_as_tolerating_the_gate() -> None:
    """The judge the tests below use: the old ``{"operator": "Exists"}`` tolerated every taint, the gate's included."""
    assert all(tolerates([{"operator": "Exists"}], t) for t in GATE)
    assert all(tolerates(READINESS_TOLERATIONS, t) for t in GATE)


@pytest.mark.parametrize("stack_name", STACKS)
def test_slurmd_tolerates_its_nodes_but_not_the_readiness_gate(stack_name: str) -> None:
    nodesets = offline_run(stack_name).graph.of_type(SLINKY + "NodeSet")
    assert nodesets
    for ns in nodesets:
        tolerations = ns.inputs["spec"]["template"]["spec"]["tolerations"]
        gpu = "nvidia.com/gpu" in ns.inputs["spec"]["slurmd"]["resources"]["limits"]
        # a GPU group's nodes carry the GPU taint; Slurm's CPU group the team-CPU taint (decisions.dedicated_cpu_groups)
        assert tolerates(tolerations, {"key": GPU_TAINT_KEY, "value": "true", "effect": "NoSchedule"}) == gpu
        assert tolerates(tolerations, {"key": TEAM_CPU_TAINT_KEY, "value": "true", "effect": "NoSchedule"}) != gpu
        for taint in GATE:
            assert not tolerates(tolerations, taint), (ns.name, taint)
        assert all(t.get("key") for t in tolerations), tolerations  # no blanket toleration


def test_slurmd_tolerates_the_groups_own_taints_and_flex_start_but_never_the_gate() -> None:
    own = {"key": "dedicated", "value": "slurm", "effect": "NoSchedule"}
    pool = s.SlurmNodePool(pool=_pool(queued=True), node_selector={}, gpu_type=None,
                           taints=[own, *GATE])  # a stack that names the gate's taints itself gets no toleration
    tolerations = s.slurmd_tolerations(pool)
    assert tolerates(tolerations, own)
    assert tolerates(tolerations, {"key": "cloud.google.com/gke-queued", "value": "true", "effect": "NoSchedule"})
    assert not any(tolerates(tolerations, t) for t in GATE)
    assert not tolerates(tolerations, {"key": "dedicated", "value": "other", "effect": "NoSchedule"})
    # a node briefly lost keeps its slurmd (and jobs), as a DaemonSet's pod is kept
    assert tolerates(tolerations, {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"})


@pytest.mark.parametrize("stack_name", STACKS)
def test_slurm_conf_runs_the_health_check_every_nodeset_mounts(stack_name: str) -> None:
    graph = offline_run(stack_name).graph
    (controller,) = graph.of_type(SLINKY + "Controller")
    conf = controller.inputs["spec"]["extraConf"].splitlines()
    assert f"HealthCheckProgram={s.HEALTH_CHECK_PROGRAM}" in conf
    assert f"HealthCheckInterval={HEALTH_INTERVAL_S}" in conf and "HealthCheckNodeState=ANY" in conf
    maps = {r.inputs["metadata"]["name"]: r.inputs["data"] for r in graph.of_type("kubernetes:core/v1:ConfigMap")
            if r.inputs["metadata"].get("namespace") == s.SLURM_NAMESPACE}
    for ns in graph.of_type(SLINKY + "NodeSet"):
        spec = ns.inputs["spec"]
        group = ns.inputs["metadata"]["name"]
        (volume,) = [v for v in spec["template"]["spec"]["volumes"] if v["name"] == "health-check"]
        assert volume["configMap"] == {"name": f"slurm-health-{group}", "defaultMode": 0o555}
        assert {"name": "health-check", "mountPath": s.HEALTH_CHECK_DIR, "readOnly": True} in \
            spec["slurmd"]["volumeMounts"]
        script = maps[f"slurm-health-{group}"]["gpu-health.sh"]
        assert script.startswith("#!/usr/bin/env bash\n") and "state=drain" in script


def test_the_health_check_expects_what_the_node_check_expects() -> None:
    script = s.health_check_script(s.group_check(s.SlurmNodePool(pool=_pool(), node_selector={}, gpu_type=None)))
    assert '[ "$COUNT" = "8" ]' in script and '*"H100"*) ;;' in script
    assert "$SYS/class/infiniband/*" in script and '[ "$FABRIC_UP" -ge 32 ]' in script
    assert "@" not in script.replace("root@", "")  # every placeholder filled


@pytest.mark.parametrize("stack_name", STACKS)
def test_every_slurm_group_has_a_node_check_to_release_it(stack_name: str) -> None:
    graph = offline_run(stack_name).graph
    daemonsets = {r.inputs["metadata"]["name"] for r in graph.of_type("kubernetes:apps/v1:DaemonSet")}
    for ns in graph.of_type(SLINKY + "NodeSet"):
        gpu = "nvidia.com/gpu" in ns.inputs["spec"]["slurmd"]["resources"]["limits"]
        # a GPU group's gate is released by its check; a CPU partition's group has neither (nothing registers tainted)
        assert (f"gpu-node-check-{ns.inputs['metadata']['name']}" in daemonsets) == gpu
