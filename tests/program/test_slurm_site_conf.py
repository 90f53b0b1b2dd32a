"""slurm.conf and cgroup.conf as a Slurm site ships them (issue 38): a job is confined to its GPUs, cores and memory;
a job that names no memory or CPUs gets one GPU's share of a node; multi-node jobs get slurmd's locked-memory limit
and resolve their user; impossible jobs are refused at submission; every process of a job is in its cgroup. Each
setting is read from the objects the operator reads (the Controller's extraConf, the ConfigMaps it references)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from components.catalog.gcp_machines import load_gcp_catalog
from components.catalog.instances import load_aws_catalog
from components.kubernetes.reserved import GIB, reserved_memory
from tests.conftest import offline_run, stack

SLINKY = "kubernetes:slinky.slurm.net/v1beta1:"
STACKS = ["prod-aws-slurm", "dev-gcp-slurm"]


def controller(name: str) -> dict[str, Any]:
    (ctl,) = offline_run(name).graph.of_type(SLINKY + "Controller")
    return dict(ctl.inputs["spec"])


def conf(name: str) -> dict[str, str]:
    out = {}
    for line in controller(name)["extraConf"].splitlines():
        key, _, value = line.partition("=")
        if " " not in line:
            out[key] = value
    return out


def partitions(name: str) -> dict[str, dict[str, str]]:
    out = {}
    for line in controller(name)["extraConf"].splitlines():
        if line.startswith("PartitionName="):
            kv = dict(t.split("=", 1) for t in line.split())
            out[kv["PartitionName"]] = kv
    return out


@pytest.mark.parametrize("name", STACKS)
def test_slurm_conf_carries_the_site_settings(name: str) -> None:
    settings = conf(name)
    assert settings["EnforcePartLimits"] == "ALL"
    assert settings["PropagateResourceLimitsExcept"] == "MEMLOCK"
    assert settings["LaunchParameters"] == "enable_nss_slurm"
    assert settings["PrologFlags"] == "Contain"
    # Contain needs cgroup process tracking; ConstrainRAMSpace needs memory as a consumable
    assert settings["ProctrackType"] == "proctrack/cgroup"
    assert settings["TaskPlugin"] == "task/affinity,task/cgroup"
    assert settings["SelectTypeParameters"].endswith("_Memory")


@pytest.mark.parametrize("name", STACKS)
def test_cgroup_conf_confines_devices_cores_and_memory(name: str) -> None:
    refs = [r["name"] for r in controller(name)["configFileRefs"]]
    maps = [r.inputs for r in offline_run(name).graph.of_type("kubernetes:core/v1:ConfigMap")
            if r.inputs["metadata"]["name"] in refs and "cgroup.conf" in r.inputs.get("data", {})]
    assert len(maps) == 1, "one cgroup.conf among the Controller's configFileRefs"
    lines = maps[0]["data"]["cgroup.conf"].splitlines()
    # the operator's own two lines must be repeated: it writes them only when no cgroup.conf is given
    for line in ("CgroupPlugin=cgroup/v2", "IgnoreSystemd=yes", "ConstrainCores=yes", "ConstrainDevices=yes",
                 "ConstrainRAMSpace=yes"):
        assert line in lines, line


@pytest.mark.parametrize("name", STACKS)
def test_a_gpus_default_share_is_its_part_of_the_node(name: str) -> None:
    # Without DefMemPerGPU a job without --mem holds all of a node's memory (DefMemPerNode is unlimited by default).
    # The defaults are one GPU's share of what a node offers: all GPUs of a node with the defaults fit on it, and a
    # 1-GPU job takes about 1/GPUs of the node.
    spec = stack(name).spec
    slurm = spec.scheduler.slurm
    assert slurm is not None
    groups = {g.name: g for g in (spec.aws_spec().node_groups if spec.cloud == "aws" else spec.gcp_spec().node_pools)}
    for part in slurm.partitions:
        kv = partitions(name)[part.name]
        for group in part.node_groups:
            g = groups[group]
            facts = (load_aws_catalog()[g.instance_type] if spec.cloud == "aws"
                     else load_gcp_catalog()[g.machine_type])
            gpus, gib, vcpus = facts.gpu_count, facts.memory_gib.value, facts.vcpu.value
            assert gib and vcpus
            offered = gib * 1024 - reserved_memory(Fraction(gib * GIB)) / 2**20 - slurm.hugepages_2mi_gib * 1024
            if not gpus:
                offered += slurm.hugepages_2mi_gib * 1024  # a CPU group reserves no hugepages
                # a CPU-only partition: memory per CPU, every CPU Slurm counts (the node's vCPUs) fitting what the
                # kubelet offers; and no per-GPU default (slurm.conf(5): DefMemPerCPU and DefMemPerGPU exclusive)
                per_cpu = int(kv["DefMemPerCPU"])
                assert vcpus * per_cpu <= offered and vcpus * per_cpu > 0.95 * offered, (part.name, per_cpu)
                assert "DefMemPerGPU" not in kv and "DefCpuPerGPU" not in kv
                continue
            mem, cpu = int(kv["DefMemPerGPU"]), int(kv["DefCpuPerGPU"])
            assert gpus * mem <= offered and gpus * mem > 0.95 * offered, (part.name, gpus, mem, offered)
            # whole cores: an even share on two-thread cores, so Slurm's rounding up to a core keeps all GPUs' fit
            assert cpu % 2 == 0 and gpus * cpu <= vcpus and gpus * (cpu + 2) > vcpus * 0.9, (part.name, cpu)
