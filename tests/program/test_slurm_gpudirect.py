"""Slurm on GKE GPUDirect pools (issue 38): on an A3 Mega (TCPXO) pool the slurmd pod gets the pool's GPU networks, the
catalog's receive-datapath daemon as a native sidecar (the acceptance pods' shape), the aperture devices and the
NVIDIA libraries; every pyxis container gets them and NCCL's environment from an enroot hook (not a TaskProlog, which
runs inside the container: issue 38 review); A3 Ultra (RDMA) loads too, A3 High (TCPX) is
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
from components.kubernetes.enroot import ENROOT_HOOKS_DIR, FABRIC_HOOK
from components.kubernetes.objects.acceptance import PodFabric
from components.kubernetes.objects.slurm_fabric import fabric_hook_script
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
    # no TaskProlog: slurmstepd would run it inside the pyxis container, where it is not (every task would fail)
    assert not [line for line in conf if line.startswith("TaskProlog=")]
    hooks = {r.inputs["metadata"]["name"]: r.inputs["data"] for r in graph.of_type("kubernetes:core/v1:ConfigMap")
             if r.inputs["metadata"]["name"].startswith("slurm-fabric-")}
    assert list(hooks) == ["slurm-fabric-a3mega"]  # the GPUDirect group only, not the CPU debug group
    assert "nccl-env-profile.sh" in hooks["slurm-fabric-a3mega"][FABRIC_HOOK]


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
    hook = f"{ENROOT_HOOKS_DIR}/{FABRIC_HOOK}"
    assert {"/usr/local/nvidia/lib64", "/dev/aperture_devices", hook} <= mounts
    assert {"name": "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", "value": "/dev/aperture_devices"} in spec["slurmd"]["env"]
    # one file among the image's own hooks (enroot's NVIDIA hook stays), executable (enroot runs only those)
    (mount,) = [m for m in spec["slurmd"]["volumeMounts"] if m["mountPath"] == hook]
    assert mount["subPath"] == FABRIC_HOOK and mount.get("readOnly")
    (volume,) = [v for v in spec["template"]["spec"]["volumes"] if v["name"] == mount["name"]]
    assert volume["configMap"] == {"name": "slurm-fabric-a3mega", "defaultMode": 0o555}
    # the CPU partition's NodeSet joins no GPU network and has no fabric hook
    debug = nodeset(graph, "debug")
    assert "annotations" not in debug["template"]["metadata"]
    assert not any(m["mountPath"] == hook for m in debug["slurmd"]["volumeMounts"])


def test_a_stack_without_gpudirect_pools_has_no_fabric_hook() -> None:
    graph = offline_run("dev-gcp-slurm").graph
    (controller,) = graph.of_type(SLINKY + "Controller")
    assert "TaskProlog=" not in controller.inputs["spec"]["extraConf"]
    assert not [r for r in graph.of_type("kubernetes:core/v1:ConfigMap")
                if r.inputs["metadata"]["name"].startswith("slurm-fabric-")]


def test_the_enroot_hook_gives_the_container_the_fabric_and_keeps_the_jobs_own(tmp_path: Path) -> None:
    profile = tmp_path / "nccl-env-profile.sh"
    profile.write_text("export NCCL_NET=FasTrak\nexport NCCL_SOCKET_IFNAME=eth0\nexport OTHER=x\necho noise\n")
    libs, devices = tmp_path / "lib64", tmp_path / "aperture"
    libs.mkdir()
    ld_path = f"export LD_LIBRARY_PATH={libs}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"
    fabric = PodFabric(env=(("NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", str(devices)),),
                       rank_setup=(ld_path, f"source {profile}"),
                       mounts=({"name": "nvidia", "mountPath": str(libs), "readOnly": True},
                               {"name": "aperture-devices", "mountPath": str(devices)}))
    script = tmp_path / FABRIC_HOOK
    script.write_text(fabric_hook_script("a3mega", fabric))
    environ, mounts = tmp_path / "environment", tmp_path / "fstab"

    def run(job_env: dict[str, str]) -> tuple[dict[str, str], list[str], str]:
        # what enroot hands a hook: the container's environment so far (the image's), an empty mount file
        environ.write_text("PATH=/usr/bin\nLD_LIBRARY_PATH=/usr/local/cuda/lib64\nNCCL_IMAGE=1\n")
        mounts.write_text("")
        done = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=True,
                              env={"PATH": "/usr/bin:/bin", "ENROOT_ENVIRON": str(environ),
                                   "ENROOT_MOUNTS": str(mounts), **job_env})
        lines = environ.read_text().splitlines()
        return dict(line.split("=", 1) for line in lines), mounts.read_text().splitlines(), done.stderr

    env, fstab, err = run({"NCCL_SOCKET_IFNAME": "eth9"})
    assert env["NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"] == str(devices) and env["NCCL_NET"] == "FasTrak"
    assert "NCCL_SOCKET_IFNAME" not in env  # the job's own value (eth9) stays: pyxis gives the task the job's
    assert "OTHER" not in env and env["NCCL_IMAGE"] == "1"
    assert env["LD_LIBRARY_PATH"] == f"{libs}:/usr/local/cuda/lib64"  # the plugin first, the image's kept, no ""
    # the libraries read-only at the same path; the devices only where the node has them (none here)
    assert fstab == [f"{libs} {libs} none x-create=auto,rbind,ro"]
    devices.mkdir()
    assert run({})[1] == [f"{libs} {libs} none x-create=auto,rbind,ro",
                          f"{devices} {devices} none x-create=auto,rbind"]
    # a missing profile is said on the job's standard error, and the container still starts (exit 0)
    profile.unlink()
    env, _, err = run({})
    assert f"WARNING: {profile} not found" in err and "NCCL_NET" not in env


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
