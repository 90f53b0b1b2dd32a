"""The storage acceptance check in the program (issue 34): a held indexed Job per stack that writes and reads back
a checkpoint of the model's size on the shared filesystem from the nodes the goodput model counts, mounting the
filesystem where team pods do, and uploading its record to acceptance/storage/<run>/<pod>/; and its shell, run with
a stand-in fio, writing the documented record."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.kubernetes.objects.acceptance import AcceptanceRecorder
from components.kubernetes.objects.storage_check import (
    FIO_BLOCK_BYTES,
    storage_check_script,
    storage_upload_script,
)
from components.sizing import goodput_model
from tests.conftest import offline_run, raw_stack_config, run_spec
from tests.conftest import stack as stack_file
from tests.k8s_checks import validate_builtin

JOB = "kubernetes:batch/v1:Job"


def _storage_job(graph: Any) -> dict[str, Any]:
    (job,) = [j.inputs for j in graph.of_type(JOB) if j.inputs["metadata"]["name"] == "storage-checkpoint"]
    return job


@pytest.mark.parametrize("stack, sub_path, driver", [("prod-aws", "checkpoints/gpu-acceptance", "fsx.csi.aws.com"),
                                                     ("prod-gcp", "gpu-acceptance", "lustre.csi.storage.gke.io")])
def test_the_check_writes_the_models_checkpoint_from_its_nodes_and_waits_to_be_run(
        stack: str, sub_path: str, driver: str) -> None:
    run = offline_run(stack)
    model = goodput_model(stack_file(stack).spec)
    assert model.nodes == 16 and model.checkpoint_bytes == 70e9 * 14  # 70B parameters x 14 B
    job = _storage_job(run.graph)
    validate_builtin(job, "1.35")
    spec = job["spec"]
    # Held: suspended, on the acceptance queue (held by stopPolicy: Hold), never awaited by Pulumi.
    assert spec["suspend"] is True and job["metadata"]["namespace"] == "gpu-acceptance"
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    assert job["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    # One pod per node the model counts, each on its own node, holding its GPUs.
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == 16
    assert spec["backoffLimitPerIndex"] == 0
    pod = spec["template"]["spec"]
    (anti,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    (fio,) = pod["initContainers"]
    assert fio["resources"]["limits"]["nvidia.com/gpu"] == 8
    script = fio["command"][2]
    # 8 fio jobs (one per GPU) per pod, whole 4 MiB blocks, together at least the checkpoint and less than a block
    # per job more.
    per_job = int(script.split("--size=")[1].split()[0])
    assert "--numjobs=8" in script and per_job % FIO_BLOCK_BYTES == 0
    assert 980e9 <= 16 * 8 * per_job < 980e9 + 16 * 8 * FIO_BLOCK_BYTES
    assert "N=16;" in script and '"980000000000"' in script
    assert "--rw=write" in script and "--end_fsync=1" in script and '--directory="$DIR/$NEXT" --rw=read' in script
    # The filesystem where a team's pod mounts it (the stack's mountPath), through a claim of the same volume.
    (mount,) = [m for m in fio["volumeMounts"] if m["name"] == "checkpoints"]
    assert mount["mountPath"] == "/checkpoints" and mount["subPath"] == sub_path
    (volume,) = [v for v in pod["volumes"] if v["name"] == "checkpoints"]
    claim = volume["persistentVolumeClaim"]["claimName"]
    (pvc,) = [r.inputs for r in run.graph.of_type("kubernetes:core/v1:PersistentVolumeClaim")
              if r.inputs["metadata"]["name"] == claim]
    assert pvc["metadata"]["namespace"] == "gpu-acceptance"
    (pv,) = [r.inputs for r in run.graph.of_type("kubernetes:core/v1:PersistentVolume")
             if r.inputs["metadata"]["name"] == pvc["spec"]["volumeName"]]
    team_pvs = [r.inputs for r in run.graph.of_type("kubernetes:core/v1:PersistentVolume")
                if r.inputs["metadata"]["name"].startswith("shared-fs-research")]
    assert pv["spec"]["csi"]["driver"] == driver == team_pvs[0]["spec"]["csi"]["driver"]
    assert pv["spec"]["csi"]["volumeHandle"] == team_pvs[0]["spec"]["csi"]["volumeHandle"]
    assert pv["spec"].get("mountOptions") == team_pvs[0]["spec"].get("mountOptions")
    assert pv["spec"]["claimRef"] == {"namespace": "gpu-acceptance", "name": claim}
    # The record goes where the NCCL records go, by the same identity.
    assert pod["serviceAccountName"] == "nccl-recorder"
    (uploader,) = pod["containers"]
    assert '/acceptance/storage/$RUN/$POD_NAME/"' in uploader["command"][2]


def test_the_check_is_on_the_held_queue_and_its_group() -> None:
    graph = offline_run("prod-aws").graph
    job = _storage_job(graph)
    (cq,) = [q.inputs for q in graph.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")
             if q.inputs["metadata"]["name"] == "gpu-acceptance"]
    assert cq["spec"]["stopPolicy"] == "Hold"
    flavors = [f["name"] for f in cq["spec"]["resourceGroups"][0]["flavors"]]
    assert job["metadata"]["labels"]["gpu-cluster/node-group"] in flavors


def test_no_check_without_its_image_or_for_a_bucket_path() -> None:
    spec = raw_stack_config("prod-aws")["gpu-cluster:spec"]
    del spec["acceptance"]["storageImage"]
    assert not [j for j in run_spec(spec).graph.of_type(JOB) if j.inputs["metadata"]["name"] == "storage-checkpoint"]
    spec = raw_stack_config("prod-aws")["gpu-cluster:spec"]
    spec["workload"]["goodput"].update({"checkpointPath": "bucket", "bucketWriteMbps": 5000.0})
    assert not [j for j in run_spec(spec).graph.of_type(JOB) if j.inputs["metadata"]["name"] == "storage-checkpoint"]


FAKE_FIO = """#!/bin/sh
# A stand-in for fio: writes or reads the files fio would (ckpt.<job>.0 in --directory), and a JSON output.
for a in "$@"; do case "$a" in
  --directory=*) D="${a#--directory=}";; --rw=*) RW="${a#--rw=}";; --size=*) S="${a#--size=}";;
  --numjobs=*) J="${a#--numjobs=}";; --output=*) O="${a#--output=}";; --version) echo fio-3.36; exit 0;; esac; done
j=0; while [ "$j" -lt "$J" ]; do
  if [ "$RW" = write ]; then head -c "$S" /dev/zero > "$D/ckpt.$j.0"; else cat "$D/ckpt.$j.0" > /dev/null || exit 1; fi
  j=$((j + 1)); done
printf '{"jobs": [{"%s": {"clat_ns": {"percentile": {"50.000000": 2000000, "99.000000": 9000000}}}}]}' "$RW" > "$O"
"""


@pytest.mark.skipif(shutil.which("sh") is None or shutil.which("awk") is None, reason="needs sh and awk")
def test_the_shell_writes_the_documented_record_and_cleans_up(tmp_path: Path) -> None:
    """Two pods run the real script at once (barriers included) with a stand-in fio; each writes storage.json in
    the records directory with the documented fields, and deletes the share it read."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "fio").write_text(FAKE_FIO)
    (bin_dir / "fio").chmod(0o755)
    mount = tmp_path / "checkpoints"
    mount.mkdir()
    per_job = 4096
    script = storage_check_script(str(mount), 2, 3, per_job, 2 * 3 * per_job)
    procs = []
    for index in range(2):
        records = tmp_path / f"records{index}"
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "RUN": "run-1",
               "JOB_COMPLETION_INDEX": str(index), "NODE_NAME": f"node-{index}", "POD_NAME": f"pod-{index}"}
        procs.append(subprocess.Popen(["sh", "-c", script.replace("OUT=/records", f"OUT={records}")], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    for p in procs:
        _out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    for index in range(2):
        record = json.loads((tmp_path / f"records{index}" / "storage.json").read_text())
        assert record["target"] == "filesystem" and record["bytes"] == 3 * per_job and record["writers"] == 2
        assert record["index"] == index and record["checkpoint_bytes"] == 6 * per_job
        assert record["write_status"] == 0 and record["read_status"] == 0
        assert record["write_seconds"] > 0 and record["read_seconds"] > 0 and record["write_mbps"] > 0
        assert record["latency_ms"] is None and record["tool"] == "fio-3.36" and record["node"] == f"node-{index}"
        assert record["started"].endswith("Z") and record["finished"].endswith("Z")
        assert (tmp_path / f"records{index}" / "fio-read.json").exists()
    # Every share was read and deleted by the next pod; only the barrier markers stay.
    assert sorted(p.name for p in (mount / "run-1").iterdir()) == ["ready.0", "ready.1", "written.0", "written.1"]


def test_a_failed_neighbour_is_recorded_not_read(tmp_path: Path) -> None:
    """A pod whose neighbour's write failed records read status 125 (not run) and null read figures."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "fio").write_text(FAKE_FIO)
    (bin_dir / "fio").chmod(0o755)
    run_dir = tmp_path / "checkpoints" / "run-1"
    run_dir.mkdir(parents=True)
    (run_dir / "ready.1").write_text("0\n")
    (run_dir / "written.1").write_text("1\n")  # pod 1 failed its write
    script = storage_check_script(str(tmp_path / "checkpoints"), 2, 1, 4096, 8192)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "RUN": "run-1", "JOB_COMPLETION_INDEX": "0",
           "NODE_NAME": "n", "POD_NAME": "p"}
    subprocess.run(["sh", "-c", script.replace("OUT=/records", f"OUT={tmp_path}/r")], env=env, check=True,
                   capture_output=True, timeout=60)
    record = json.loads((tmp_path / "r" / "storage.json").read_text())
    assert record["write_status"] == 0 and record["read_status"] == 125 and record["read_seconds"] is None


def test_the_uploader_writes_under_acceptance_storage() -> None:
    for scheme, cli in (("s3", "aws s3 cp --recursive"), ("gs", "gcloud storage cp --recursive --no-clobber")):
        script = storage_upload_script(AcceptanceRecorder(bucket="b", scheme=scheme, image="i"))
        assert cli in script and f'"{scheme}://$RECORDS_BUCKET/acceptance/storage/$RUN/$POD_NAME/"' in script
        assert script.startswith('RUN="${RUN:-job-$JOB_UID}"')
