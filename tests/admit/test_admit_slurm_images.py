"""``blueprint admit`` on sbatch scripts judges each ``--container-image`` as the cluster's pyxis importer will (issue
38: "a two-node GPU sbatch job (srun with PMIx and a container image) is admitted"): an image outside
platform.allowedRegistries is refused with the importer's reason; the images are found where people write them (srun
options, continued lines, variables, ``#SBATCH``); and admit's reading of an image agrees with the importer script
the cluster runs, run here with bash."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from blueprint.admit.sbatch_images import scan
from blueprint.cli import main
from components.kubernetes.enroot import allowed_prefixes, importer_refusal
from components.kubernetes.objects.slurm_pyxis import importer_script
from tests.admit.test_admit_slurm import SLURM, admit, reason, rules, script
from tests.conftest import ROOT

ECR = "111122223333.dkr.ecr.us-east-1.amazonaws.com"
A3MEGA = "examples/stacks/Pulumi.a3mega-slurm-gcp.yaml"


def test_an_image_from_an_allowed_registry_is_admitted(graph_files: Callable[[str], Path], tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = script(tmp_path, "-A research", "-N 2", "--gpus-per-node=8",
                  body=f'IMAGE="{ECR}#ml-platform/train:1"\nsrun --mpi=pmix --container-image="$IMAGE" hostname\n')
    assert main(["admit", str(graph_files(SLURM)), str(path)]) == 0
    assert (f"  ok   containers  1 image from the registries pyxis imports from: {ECR}#ml-platform/train:1"
            in capsys.readouterr().out.splitlines())


@pytest.mark.parametrize("image", ["docker.io#library/ubuntu:24.04", "ubuntu", "ghcr.io/someone/tool:1",
                                   f"{ECR}.evil.example#x/y:1", "dockerd://local:1"])
def test_an_image_outside_the_allowed_registries_is_refused(image: str, graph_files: Callable[[str], Path],
                                                            tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = script(tmp_path, "-A research", "-N 2", "--gpus-per-node=8",
                  body=f"srun --mpi=pmix \\\n     --container-image {image} \\\n     hostname\n")
    code, report = admit(graph_files(SLURM), path, capsys=capsys)
    assert code == 1 and rules(report) == ["pyxis-registries"]
    found = reason(report, "pyxis-registries")
    assert found["object"] == "ConfigMap/slurm/slurm-pyxis-importer"
    assert f"{path}:5: --container-image={image}" in found["message"]
    assert "platform.allowedRegistries" in found["message"] and f"{ECR}/" in found["message"]


def test_an_sbatch_container_image_is_judged_too(graph_files: Callable[[str], Path], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = script(tmp_path, "-A research", "-N 1", "--gpus-per-node=8", "--container-image=ubuntu:24.04")
    code, report = admit(graph_files(SLURM), path, capsys=capsys)
    assert code == 1 and rules(report) == ["pyxis-registries"]
    assert "not checked" not in " ".join(report["workloads"][0]["notes"])  # --container-image is read


def test_images_known_only_at_run_time_and_squashfs_files_are_named(graph_files: Callable[[str], Path],
                                                                    tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = script(tmp_path, "-A research", "-N 1", "--gpus-per-node=8",
                  body='srun --container-image="$1" hostname\nsrun --container-image=/shared/research/img.sqsh true\n')
    code, report = admit(graph_files(SLURM), path, capsys=capsys)
    assert code == 0 and report["workloads"][0]["steps"]["containers"] == "ok"
    notes = " ".join(report["workloads"][0]["notes"])
    assert "--container-image=$1 is known only when the script runs (not checked)" in notes
    assert "squashfs file on the node" in notes


def test_images_are_read_where_scripts_write_them() -> None:
    text = ("#!/bin/bash\n#SBATCH -N 2\n"
            'IMAGE=${IMAGE:-"nvcr.io#nvidia/pytorch:24.12-py3"}\n'
            "# srun --container-image=commented:out\n"
            "export TAG=2\n"
            "srun --container-image=\"$IMAGE\" python -c '\nprint(1)\n' | tee log && "
            "srun --container-mounts /a:/a --container-image reg.io/x:${TAG} true\n"
            "echo --container-image=not-srun\n")
    images = scan(text, "s.sbatch", None).images
    assert [(i.where, i.value) for i in images] == [("s.sbatch:6", "nvcr.io#nvidia/pytorch:24.12-py3"),
                                                    ("s.sbatch:6", "reg.io/x:2")]


URIS = ["nvcr.io#nvidia/pytorch:24.12-py3", "nvcr.io/nvidia/pytorch:24.12-py3", "nvcr.io/nvidia-evil/x:1",
        f"{ECR}#ml-platform/train:1", f"{ECR}/ml-platform/train@sha256:abc", f"user@{ECR}#ml-platform/t:1",
        "ubuntu", "ubuntu:24.04", "library/ubuntu", "docker://nvcr.io#nvidia/x", "dockerd://x",
        "nvcr.io#nvidia/../evil/x:1", "nvcr.io#nvidia//x", "nvcr.io#Nvidia/X:1", "reg.io:5000#nvidia/x:1",
        "public.ecr.aws/x/y:1", "public.ecr.aws.evil.io/x:1", "registry.k8s.io/pause:3.10"]


def test_admit_reads_an_image_as_the_importer_script_does(tmp_path: Path) -> None:
    allowed = ["nvcr.io/nvidia/", "public.ecr.aws/", "registry.k8s.io/", f"{ECR}/"]
    importer = tmp_path / "importer.sh"
    importer.write_text(importer_script(allowed), encoding="utf-8")
    assert allowed_prefixes(importer.read_text()) == allowed
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "enroot").write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    (fake / "enroot").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "PYXIS_RUNTIME_PATH": str(tmp_path / "run")}
    for image in URIS:
        uri = image if image.startswith(("docker://", "dockerd://")) else f"docker://{image}"
        run = subprocess.run(["bash", str(importer), "get", uri], capture_output=True, text=True, env=env,
                             check=False)
        ours = importer_refusal(image, allowed)
        if ours is None:
            assert run.returncode == 0, (image, run.stderr)
        else:
            assert run.returncode == 1 and f"pyxis-registries: {ours};" in run.stderr, (image, ours, run.stderr)


def test_images_given_through_the_environment_or_a_wrapper_are_read() -> None:
    # the issue 38 review's script: each of these reaches pyxis's importer, none was seen
    text = ("#!/bin/bash\n#SBATCH -N 1\n"
            "export PYXIS_CONTAINER_IMAGE=ghcr.io/evil/x:1\n"
            "srun hostname\n"
            "timeout 600 srun --container-image=ghcr.io/a:1 true\n"
            "/usr/bin/srun --container-image=ghcr.io/b:1 true\n"
            "if true; then srun --container-image=ghcr.io/c:1 true; fi\n"
            "PYXIS_CONTAINER_IMAGE=ghcr.io/d:1 srun true\n"
            "echo srun --container-image=not-a-step:1\n")
    assert [(i.where, i.value) for i in scan(text, "s", None).images] == [
        ("s:4", "ghcr.io/evil/x:1"), ("s:5", "ghcr.io/a:1"), ("s:6", "ghcr.io/b:1"), ("s:7", "ghcr.io/c:1"),
        ("s:8", "ghcr.io/d:1")]
    # a variable that is not exported does not reach srun's environment
    assert scan("#!/bin/bash\nPYXIS_CONTAINER_IMAGE=ghcr.io/x:1\nsrun true\n", "s", None).images == []


def test_an_srun_outside_a_container_on_gpudirect_nodes_is_named(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # the fabric's NCCL environment reaches containers through the enroot hook only (issue 38 review)
    path = script(tmp_path, "-A research", "-N 2", "--gpus-per-node=8",
                  body="srun --mpi=pmix all_reduce_perf -b 8 -e 1G\n"
                       "srun --container-image=nvcr.io#nvidia/pytorch:24.12-py3 true\n")
    code, report = admit(ROOT / A3MEGA, path, capsys=capsys)
    notes = " ".join(report["workloads"][0]["notes"])
    assert code == 0 and f"{path}:5: srun without --container-image on GPUDirect nodes (a3mega)" in notes
    assert f"{path}:6" not in notes
    # not on nodes without the hook
    code, report = admit(ROOT / A3MEGA, script(tmp_path, "-A research", "-p debug", "-N 1", name="cpu.sbatch",
                                               body="srun hostname\n"), capsys=capsys)
    assert code == 0 and "GPUDirect" not in " ".join(report["workloads"][0]["notes"])
