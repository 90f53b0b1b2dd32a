"""Slurm's CPU-only partitions (issue 38): a node group without GPUs in ``scheduler.slurm.nodeGroups`` runs slurmd
without GPUs, is tainted like a team CPU group so the platform stays on the system group, has no Kueue flavor, and
its partition gives memory per CPU; a GPU job there is refused by ``blueprint admit``, a CPU job admitted."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from blueprint.cli import main
from components.kubernetes.objects import slurm as s
from components.kubernetes.objects.node_check import NodeCheck
from components.kubernetes.objects.slurm_health import health_check_script
from components.spec import TEAM_CPU_TAINT_KEY
from tests.conftest import offline_run, stack

SLINKY = "kubernetes:slinky.slurm.net/v1beta1:"
CASES = [("prod-aws-slurm", "prep", "aws:eks/nodeGroup:NodeGroup"),
         ("dev-gcp-slurm", "slurm-cpu", "gcp:container/nodePool:NodePool")]


def nodeset(graph: Any, name: str) -> dict[str, Any]:
    (ns,) = [n for n in graph.of_type(SLINKY + "NodeSet") if n.inputs["metadata"]["name"] == name]
    return dict(ns.inputs["spec"])


def partitions(graph: Any) -> dict[str, dict[str, str]]:
    (controller,) = graph.of_type(SLINKY + "Controller")
    out = {}
    for line in controller.inputs["spec"]["extraConf"].splitlines():
        if line.startswith("PartitionName="):
            kv = dict(f.split("=", 1) for f in line.split())
            out[kv["PartitionName"]] = kv
    return out


@pytest.mark.parametrize(("stack_name", "group", "node_type"), CASES)
def test_slurmd_on_a_cpu_group_holds_no_gpu_and_tolerates_its_taint(stack_name: str, group: str,
                                                                     node_type: str) -> None:
    graph = offline_run(stack_name).graph
    spec = nodeset(graph, group)
    assert "nvidia.com/gpu" not in spec["slurmd"]["resources"]["limits"]
    assert "Gres=" not in spec["extraConf"] and spec["extraConf"].startswith("Features=")
    keys = {t["key"] for t in spec["template"]["spec"]["tolerations"]}
    assert TEAM_CPU_TAINT_KEY in keys and "nvidia.com/gpu" not in keys
    assert not any(v["name"] == "job-mapping" for v in spec["template"]["spec"]["volumes"])
    # the group's nodes carry the taint, so the platform's pods (which do not tolerate it) stay on the system group
    (node_group,) = [r for r in graph.of_type(node_type) if group in r.name and "lt" not in r.name.split("-")[-1:]]
    text = json.dumps(node_group.inputs)
    assert TEAM_CPU_TAINT_KEY in text
    # and Kueue has no flavor there: one scheduler per group
    flavors = [r.inputs["metadata"]["name"] for r in graph.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor")]
    assert group not in flavors


@pytest.mark.parametrize(("stack_name", "group", "node_type"), CASES)
def test_a_cpu_partition_gives_memory_per_cpu_and_no_gpu_default(stack_name: str, group: str, node_type: str) -> None:
    graph = offline_run(stack_name).graph
    (part,) = [p for p in partitions(graph).values() if p["Nodes"] == group]
    assert int(part["DefMemPerCPU"]) > 1024 and "DefMemPerGPU" not in part and "DefCpuPerGPU" not in part
    # GPU partitions keep their per-GPU defaults
    assert all("DefMemPerGPU" in p for p in partitions(graph).values() if p["Nodes"] != group)


def test_a_cpu_group_s_health_check_tests_no_gpu() -> None:
    cpu = NodeCheck(pool="prep", instance_type="m7i.8xlarge", gpus=0, gpu_model="", fabric_kind="none",
                    fabric_devices=0, expected_busbw=None, pass_fraction=1.0)
    gpu = NodeCheck(pool="h100", instance_type="p5.48xlarge", gpus=8, gpu_model="H100", fabric_kind="efa",
                    fabric_devices=32, expected_busbw=None, pass_fraction=1.0)
    assert "nvidia-smi" not in health_check_script(cpu) and "dcgmi" not in health_check_script(cpu)
    assert "scontrol update" in health_check_script(cpu)  # it still drains on a fabric failure
    assert "nvidia-smi" in health_check_script(gpu) and "dcgmi" in health_check_script(gpu)


def test_a_team_a_cpu_partition_lists_gets_an_account_without_gpu_quota_or_users() -> None:
    graph = offline_run("dev-gcp-slurm").graph
    (cm,) = [r for r in graph.of_type("kubernetes:core/v1:ConfigMap") if "accounts.cfg" in r.inputs.get("data", {})]
    accounts = cm.inputs["data"]["accounts.cfg"]
    assert "Account - 'applied'" in accounts and "Account - 'research'" in accounts
    # a listed team with neither GPU quota on Slurm's groups nor users still gets its account (applied's users
    # dropped; dev-gcp-slurm's Slurm quotas are left out with the pools)
    spec = stack("dev-gcp-slurm").spec
    slurm = spec.scheduler.slurm
    assert slurm is not None
    users = {k: v for k, v in slurm.users.items() if k != "applied"}
    cluster = s.SlurmCluster(name="x", spec=slurm.model_copy(update={"users": users}), teams=spec.teams, pools=[],
                             images=s.SlurmImages(*(["i"] * 6)), labels={}, storage_class="c", system_selector={},
                             database=None, login_service={}, shared_filesystem=False)
    assert "Account - 'applied'" in s.accounts_file(cluster)


def test_admit_refuses_a_gpu_job_on_the_cpu_partition(graph_files: Callable[[str], Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    job = tmp_path / "gpu-on-prep.sbatch"
    job.write_text("#!/bin/bash\n#SBATCH -A research\n#SBATCH -p prep\n#SBATCH --gpus-per-node=1\nsrun true\n")
    code = main(["admit", str(graph_files("prod-aws-slurm")), str(job), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code != 0
    assert "node-gpus" in [r["rule"] for w in report["workloads"] for r in w["reasons"]]


@pytest.mark.parametrize(("stack_name", "group", "node_type"), CASES)
def test_a_cpu_group_has_no_gpu_gate_and_reserves_no_hugepages(stack_name: str, group: str, node_type: str) -> None:
    # The GPU node check never runs on a CPU node (its DaemonSet tolerates only the GPU taint, and it tests GPUs): a
    # readiness rule there would keep the gate's taint on for ever, and slurmd, which never tolerates it, off the node.
    graph = offline_run(stack_name).graph
    rules = [r for r in graph.resources if r.type.endswith(":NodeReadinessRule")]
    assert rules and not any(group in json.dumps(r.inputs["spec"]["nodeSelector"]) for r in rules)
    assert not any(group in r.name for r in graph.resources if r.type.endswith(":DaemonSet"))
    assert "hugepages-2Mi" not in nodeset(graph, group)["slurmd"]["resources"]["limits"]


def test_fair_share_counts_gpus_on_gpu_partitions_and_priced_cpus_on_cpu_ones() -> None:
    parts = partitions(offline_run("prod-aws-slurm").graph)
    assert parts["train"]["TRESBillingWeights"] == "GRES/gpu=1.0"
    # prep: an m7i.8xlarge vCPU-hour ($1.6128 / 32) over a p5 Capacity Block GPU-hour ($41.528 / 8)
    assert parts["prep"]["TRESBillingWeights"] == f"CPU={1.6128 / 32 / (41.528 / 8):.4f}"
