"""pyxis imports only from the stack's registries (issue 38): plugstack.conf names the registry importer (pyxis
``importer=``), every slurmd mounts it, and the importer — run here with a stand-in enroot — imports an allowed image
and refuses the others, in each form of enroot's URI."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from components.kubernetes.objects.slurm_pyxis import IMPORTER, importer_script, plugstack_conf, pyxis_conf
from tests.conftest import offline_run, stack

SLINKY = "kubernetes:slinky.slurm.net/v1beta1:"
ALLOWED = ["nvcr.io/nvidia/", "111122223333.dkr.ecr.us-east-1.amazonaws.com/", "docker.io/library/"]


@pytest.mark.parametrize("stack_name", ["prod-aws-slurm", "dev-gcp-slurm"])
def test_plugstack_names_the_importer_and_every_slurmd_mounts_it(stack_name: str) -> None:
    graph = offline_run(stack_name).graph
    maps = {r.inputs["metadata"]["name"]: r.inputs["data"] for r in graph.of_type("kubernetes:core/v1:ConfigMap")
            if r.inputs["metadata"].get("namespace") == "slurm"}
    # a glob, so slurmctld (which has no pyxis) starts (slurm-operator docs/usage/pyxis.md); the line it finds in
    # slurmd's and the login pods names the importer
    assert maps["slurm-config-files"]["plugstack.conf"] == "include /etc/gpu-cluster/pyxis/*.conf\n"
    assert maps["slurm-pyxis-importer"]["pyxis.conf"] == (
        f"required /usr/lib/x86_64-linux-gnu/slurm/spank_pyxis.so importer={IMPORTER}\n")
    allowed = stack(stack_name).spec.platform.allowed_registries
    assert maps["slurm-pyxis-importer"]["registry-importer.sh"] == importer_script(allowed)
    mount = {"name": "pyxis-importer", "mountPath": "/etc/gpu-cluster/pyxis", "readOnly": True}
    for ns in graph.of_type(SLINKY + "NodeSet"):
        assert mount in ns.inputs["spec"]["slurmd"]["volumeMounts"]
    (login,) = graph.of_type(SLINKY + "LoginSet")  # srun and sbatch there know pyxis's options
    assert mount in login.inputs["spec"]["login"]["volumeMounts"]


def test_without_one_architecture_pyxis_keeps_the_image_s_own_line() -> None:
    assert plugstack_conf(None) == "include /usr/share/pyxis/*\n"
    assert plugstack_conf("arm64") == "include /etc/gpu-cluster/pyxis/*.conf\n"
    assert "aarch64-linux-gnu" in pyxis_conf("arm64")


def run(tmp_path: Path, uri: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "importer.sh"
    script.write_text(importer_script(ALLOWED))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    enroot = bin_dir / "enroot"  # records what it was asked to import and writes the file
    enroot.write_text('#!/bin/bash\necho "$@" >> "$LOG"\n[ "$1" = import ] && touch "$3"\n')
    enroot.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LOG": str(tmp_path / "log"), "PYXIS_RUNTIME_PATH": str(tmp_path),
           "SLURM_JOB_UID": str(os.getuid()), "SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0"}
    return subprocess.run(["bash", str(script), "get", uri], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("uri", [
    "docker://nvcr.io#nvidia/pytorch:24.12-py3",
    "docker://alice@111122223333.dkr.ecr.us-east-1.amazonaws.com#ml-platform/train:1",
    "docker://nvcr.io#nvidia/pytorch@sha256:0123456789abcdef",
    "docker://ubuntu:24.04",  # Docker Hub's library/, allowed here
    "docker://nvcr.io/nvidia/pytorch:24.12-py3",  # Docker's own form: enroot v4.1.2 reads nvcr.io as the registry
    "docker://nvcr.io#nvidia/pytorch:24.12-py3@sha256:0123456789abcdef",
    # enroot v4.1.2 reads "evil.example/x" as the user part (its credentials' login) and fetches from nvcr.io: the
    # importer reads it the same way, so the registry it checks is the host enroot contacts
    "docker://evil.example/x@nvcr.io#nvidia/pytorch:1",
])
def test_an_allowed_image_is_imported(tmp_path: Path, uri: str) -> None:
    done = run(tmp_path, uri)
    assert done.returncode == 0, done.stderr
    squashfs = done.stdout.strip()
    assert squashfs.endswith("/7.0.squashfs") and Path(squashfs).exists()
    assert (tmp_path / "log").read_text().startswith(f"import --output {squashfs} {uri}")


@pytest.mark.parametrize("uri", [
    "docker://ghcr.io#evil/miner:latest",
    "docker://nvcr.io#other/image:1",  # the right registry, another path than nvidia/
    "docker://someone/tool:1",  # Docker Hub, not library/
    "dockerd://local:1",  # the node's docker daemon
    "docker://nvcr.io#nvidia/../other/img:1",  # a path the registry's URL would resolve outside nvidia/
    "docker://nvcr.io#nvidia//img:1",
    "docker://someone/tool",  # Docker Hub namespace, not library/ (Docker's form without a dot)
])
def test_another_image_is_refused_naming_the_allowed_registries(tmp_path: Path, uri: str) -> None:
    done = run(tmp_path, uri)
    assert done.returncode == 1 and not done.stdout
    assert "pyxis-registries:" in done.stderr and "nvcr.io/nvidia/" in done.stderr
    assert not (tmp_path / "log").exists()  # enroot was never asked
