"""Slurm on GKE GPUDirect pools (issue 38): on an A3 Mega (TCPXO) pool the slurmd pod gets the pool's GPU networks, the
catalog's receive-datapath daemon as a native sidecar (the acceptance pods' shape), the aperture devices and the
NVIDIA libraries; every task gets NCCL's environment from a TaskProlog; A3 Ultra (RDMA) loads too, A3 High (TCPX) is
refused. The example stack is cluster-toolkit's A3 Mega Slurm layout."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.policy.runner import run_policies
from components.gcp.cloud import gpudirect_pod_fabric
from components.kubernetes.objects.acceptance import PodFabric
from components.kubernetes.objects.slurm_fabric import TASK_PROLOG, task_prolog_script
from components.spec import SpecError, parse_spec
from tests.conftest import ROOT, offline_run
from tests.k8s_checks import validate_crd_object

A3MEGA = "examples/stacks/Pulumi.a3mega-slurm-gcp.yaml"
SLINKY = "kubernetes:slinky.slurm.net/v1beta1:"


def raw() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load((ROOT / A3MEGA).read_text())["config"]["gpu-cluster:spec"])


def manifest(r: Any) -> dict[str, Any]:
    api, kind = r.type.removeprefix("kubernetes:").rsplit(":", 1)
    return {"apiVersion": api, "kind": kind, **r.inputs}


def nodeset(graph: Any, name: str) -> dict[str, Any]:
    (ns,) = [n for n in graph.of_type(SLINKY + "NodeSet") if n.inputs["metadata"]["name"] == name]
    return dict(ns.inputs["spec"])


def test_the_a3_mega_slurm_example_loads_passes_the_pack_and_fits_the_crds() -> None:
    graph = offline_run(A3MEGA).graph
    report = run_policies(graph)
    assert report.passed and not report.violations, [(v.policy, v.message) for v in report.violations]
    for r in graph.resources:
        if r.type.startswith(SLINKY):
            validate_crd_object(manifest(r))
    # cluster-toolkit's layout: a default GPU partition on the reservation and a CPU debug partition
    (controller,) = graph.of_type(SLINKY + "Controller")
    conf = controller.inputs["spec"]["extraConf"].splitlines()
    parts = {line.split()[0]: line for line in conf if line.startswith("PartitionName=")}
    assert "Default=YES" in parts["PartitionName=a3mega"] and "DefMemPerGPU=" in parts["PartitionName=a3mega"]
    assert "DefMemPerCPU=" in parts["PartitionName=debug"]
    assert f"TaskProlog={TASK_PROLOG}" in conf


def test_slurmd_on_a_tcpxo_pool_joins_its_gpu_networks_with_the_pinned_daemon() -> None:
    graph = offline_run(A3MEGA).graph
    spec = nodeset(graph, "a3mega")
    annotations = spec["template"]["metadata"]["annotations"]
    networks = sorted(r.inputs["metadata"]["name"] for r in graph.resources
                      if r.type.endswith(":Network") and r.type.startswith("kubernetes:networking.gke.io"))
    assert networks, "the stack creates the pool's GPU Network objects"
    interfaces = json.loads(annotations["networking.gke.io/interfaces"])
    assert [i["network"] for i in interfaces] == ["default", *networks]  # eth0, then eth1..eth8 on vpc1..vpc8
    # the daemon is exactly the acceptance pods' (the catalog's pinned release), a native sidecar beside slurmd
    expected = gpudirect_pod_fabric("TCPXO", 8, networks)
    assert expected is not None
    (daemon,) = [c for c in spec["template"]["spec"]["initContainers"] if c["name"] == "tcpxo-daemon"]
    assert daemon == expected.sidecars[0] and daemon["restartPolicy"] == "Always"
    assert "devices.gke.io/container.tcpxo-daemon" in annotations
    mounts = {m["mountPath"] for m in spec["slurmd"]["volumeMounts"]}
    assert {"/usr/local/nvidia/lib64", "/dev/aperture_devices", "/etc/gpu-cluster/task"} <= mounts
    assert {"name": "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", "value": "/dev/aperture_devices"} in spec["slurmd"]["env"]
    # the CPU partition's NodeSet joins no GPU network, but mounts the (empty) TaskProlog slurm.conf names
    debug = nodeset(graph, "debug")
    assert "annotations" not in debug["template"]["metadata"]
    assert any(m["mountPath"] == "/etc/gpu-cluster/task" for m in debug["slurmd"]["volumeMounts"])


def test_a_stack_without_gpudirect_pools_has_no_task_prolog() -> None:
    (controller,) = offline_run("dev-gcp-slurm").graph.of_type(SLINKY + "Controller")
    assert "TaskProlog=" not in controller.inputs["spec"]["extraConf"]


def test_the_task_prolog_exports_what_the_plugin_profile_sets(tmp_path: Path) -> None:
    profile = tmp_path / "nccl-env-profile.sh"
    profile.write_text("export NCCL_NET=FasTrak\nexport NCCL_SOCKET_IFNAME=eth0\nexport OTHER=x\necho noise\n")
    ld_path = "export LD_LIBRARY_PATH=/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fabric = PodFabric(env=(("NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", "/dev/aperture_devices"),),
                       rank_setup=(ld_path,
                                   f"source {profile}"))
    script = tmp_path / "task-prolog.sh"
    script.write_text(task_prolog_script("a3mega", fabric))
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": "/opt/job/lib",
                              "NCCL_SOCKET_IFNAME": "eth9"}).stdout.splitlines()
    assert "export NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY=/dev/aperture_devices" in out
    # the profile's values, except what the job set itself (its NCCL_SOCKET_IFNAME stays)
    assert "export NCCL_NET=FasTrak" in out and "export NCCL_SOCKET_IFNAME=eth9" in out
    assert "export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/opt/job/lib" in out  # the task's own entries kept
    assert all(line.startswith("export NCCL_") or line.startswith("export LD_LIBRARY_PATH=") for line in out), out
    # a missing profile is said in the job's output (a TaskProlog "print" line), and the task still starts
    profile.unlink()
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=True).stdout
    assert f"print WARNING: {profile} not found" in out
    # a group without a fabric prints nothing and succeeds
    assert subprocess.run(["bash", "-c", task_prolog_script("debug", None)], capture_output=True, text=True,
                          check=True).stdout == ""


def with_pool(machine: str, **extra: Any) -> dict[str, Any]:
    spec = raw()
    spec["gcp"]["nodePools"][1].update(machineType=machine, **extra)
    return spec


def test_an_a3_ultra_rdma_pool_loads_and_a3_high_tcpx_is_refused() -> None:
    ultra = parse_spec(with_pool("a3-ultragpu-8g", diskType="hyperdisk-balanced"), A3MEGA)
    assert ultra.scheduler.slurm is not None
    with pytest.raises(SpecError) as info:
        parse_spec(with_pool("a3-highgpu-8g"), A3MEGA)
    assert ("gpu-cluster:spec.scheduler.slurm.nodeGroups[0]: 'a3mega' is a GPUDirect-TCPX pool" in str(info.value)
            and "[rule: slurm-gpudirect]" in str(info.value))
