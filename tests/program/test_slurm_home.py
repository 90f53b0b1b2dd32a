"""Slurm users' shared /home (issue 38): the login pods and every slurmd mount the same directory of the shared
filesystem at /home, from the one volume that also gives /shared (two volumes of one filesystem in a pod never mount);
the platform's Job makes the directory before Slurm's pods start; enroot keeps each user's images on node-local
scratch, not in the shared home."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import offline_run

SLINKY = "kubernetes:slinky.slurm.net/v1beta1:"
STACKS = ["prod-aws-slurm", "dev-gcp-slurm"]


def resources(name: str) -> list[Any]:
    return list(offline_run(name).graph.resources)


def pods(name: str) -> list[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    """(ref, the pod spec, the Slurm container's mounts) of the LoginSet and each NodeSet."""
    out = []
    for r in resources(name):
        if r.type == SLINKY + "LoginSet":
            out.append((r.name, r.inputs["spec"]["template"]["spec"], r.inputs["spec"]["login"]["volumeMounts"]))
        elif r.type == SLINKY + "NodeSet":
            out.append((r.name, r.inputs["spec"]["template"]["spec"], r.inputs["spec"]["slurmd"]["volumeMounts"]))
    return out


@pytest.mark.parametrize("name", STACKS)
def test_login_and_slurmd_share_one_home(name: str) -> None:
    graph = resources(name)
    claims = {r.inputs["metadata"]["name"]: r.inputs for r in graph
              if r.type == "kubernetes:core/v1:PersistentVolumeClaim"
              and r.inputs["metadata"].get("namespace") == "slurm"}
    volumes = {r.inputs["metadata"]["name"]: r.inputs for r in graph if r.type == "kubernetes:core/v1:PersistentVolume"}
    found = pods(name)
    assert len(found) >= 2
    homes = set()
    for ref, spec, mounts in found:
        (home,) = [m for m in mounts if m["mountPath"] == "/home"]
        (shared,) = [m for m in mounts if m["mountPath"] == "/shared"]
        assert home["name"] == shared["name"], f"{ref}: /home and /shared come from one volume"
        (volume,) = [v for v in spec["volumes"] if v["name"] == home["name"]]
        claim = claims[volume["persistentVolumeClaim"]["claimName"]]
        pv = volumes[claim["spec"]["volumeName"]]
        homes.add((pv["spec"]["csi"]["volumeHandle"], home["subPath"]))
        # no second volume of the same filesystem in the pod (it would never mount)
        handles = [volumes[claims[v["persistentVolumeClaim"]["claimName"]]["spec"]["volumeName"]]["spec"]["csi"]
                   ["volumeHandle"] for v in spec["volumes"] if "persistentVolumeClaim" in v]
        assert len(handles) == len(set(handles)), ref
    assert len(homes) == 1 and next(iter(homes))[1] == ".home", homes


@pytest.mark.parametrize("name", STACKS)
def test_the_homes_directory_is_made_before_slurm_starts(name: str) -> None:
    graph = resources(name)
    (job,) = [r for r in graph if r.type == "kubernetes:batch/v1:Job" and r.name.endswith("team-dirs")]
    script = job.inputs["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert "mkdir -p /fs/.home && chown 0:0 /fs/.home && chmod 0755 /fs/.home" in script.splitlines()
    for r in graph:
        if r.type in (SLINKY + "LoginSet", SLINKY + "NodeSet"):
            assert job.urn in r.dependencies, r.name


@pytest.mark.parametrize("name", STACKS)
def test_enroot_keeps_each_users_images_on_scratch(name: str) -> None:
    graph = resources(name)
    (conf,) = [r.inputs for r in graph if r.type == "kubernetes:core/v1:ConfigMap"
               and r.inputs["metadata"]["name"] == "slurm-enroot"]
    settings = dict(line.split(" ", 1) for line in conf["data"]["90-gpu-cluster.conf"].splitlines()
                    if line and not line.startswith("#"))
    for key in ("ENROOT_RUNTIME_PATH", "ENROOT_CACHE_PATH", "ENROOT_DATA_PATH"):
        assert settings[key].startswith("/scratch/") and settings[key].endswith("-$(id -u)"), key
    assert settings["ENROOT_TEMP_PATH"] == "/scratch"
    nodesets = [(ref, spec, mounts) for ref, spec, mounts in pods(name)
                if any(m["mountPath"] == "/etc/enroot/enroot.conf.d" for m in mounts)]
    assert len(nodesets) == len([r for r in graph if r.type == SLINKY + "NodeSet"]) >= 1
    for ref, spec, _ in nodesets:
        (init,) = spec["initContainers"]
        assert init["command"] == ["chmod", "1777", "/scratch"], ref
