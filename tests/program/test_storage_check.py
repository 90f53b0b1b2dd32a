"""The storage acceptance check in the program (issue 34): a held indexed Job per stack that writes and reads back
a checkpoint of the model's size on the shared filesystem from the nodes the goodput model counts, mounting the
filesystem where team pods do, and uploading its record to acceptance/storage/<run>/<pod>/; where the team's
checkpoints reach the bucket, the same against the bucket through an identity limited to acceptance/storage/; and
its shells, run with a stand-in fio and stand-in aws and gcloud CLIs, writing the documented records."""

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
    storage_bucket_script,
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
    fio = pod["initContainers"][0]
    assert fio["name"] == "fio" and fio["resources"]["limits"]["nvidia.com/gpu"] == 8
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
    # The record goes where the NCCL records go.
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


def _storage_jobs(spec: dict[str, Any], stack: str = "test") -> tuple[Any, list[Any]]:
    graph = run_spec(spec, stack).graph
    return graph, [j for j in graph.of_type(JOB) if j.inputs["metadata"]["name"] == "storage-checkpoint"]


def test_no_check_without_its_image_and_the_bucket_alone_on_a_bucket_path() -> None:
    spec = raw_stack_config("prod-aws")["gpu-cluster:spec"]
    del spec["acceptance"]["storageImage"]
    assert not _storage_jobs(spec)[1]
    # The bucket path: no filesystem leg (no fio image needed, no claim), the bucket leg alone.
    spec = raw_stack_config("prod-aws")["gpu-cluster:spec"]
    del spec["acceptance"]["storageImage"]
    spec["workload"]["goodput"].update({"checkpointPath": "bucket", "bucketWriteMbps": 5000.0})
    (job,) = _storage_jobs(spec)[1]
    pod = job.inputs["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["bucket"]
    assert [v["name"] for v in pod["volumes"]] == ["records"]
    assert job.inputs["spec"]["activeDeadlineSeconds"] == 2 * 1800 + 2 * 7200 + 600


def test_the_aws_bucket_leg_runs_as_its_own_role_on_acceptance_storage_only() -> None:
    """prod-aws's filesystem is linked to the bucket, so the check also streams the checkpoint to the bucket: as
    storage-check, whose role may put, get and delete objects under acceptance/storage/ (and list that prefix), use
    the data key through S3, and nothing else; the Job waits for its Pod Identity association."""
    graph = offline_run("prod-aws").graph
    (job,) = [j for j in graph.of_type(JOB) if j.inputs["metadata"]["name"] == "storage-checkpoint"]
    pod = job.inputs["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "storage-check"
    fio, bucket = pod["initContainers"]
    assert (fio["name"], bucket["name"]) == ("fio", "bucket")
    assert bucket["image"].startswith("public.ecr.aws/aws-cli/aws-cli:") and "@sha256:" in bucket["image"]
    assert bucket["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert "--expected-size" in bucket["command"][2] and "N=16;" in bucket["command"][2]
    assert job.inputs["spec"]["activeDeadlineSeconds"] == 2 * (2 * 1800 + 2 * 7200) + 600
    (account,) = [r.inputs for r in graph.of_type("kubernetes:core/v1:ServiceAccount")
                  if r.inputs["metadata"]["name"] == "storage-check"]
    assert account["metadata"]["namespace"] == "gpu-acceptance"
    (role,) = [r for r in graph.of_type("aws:iam/role:Role") if r.inputs["name"] == "prod-train-storage-check"]
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]["Condition"]["StringEquals"]
    assert trust["aws:RequestTag/kubernetes-namespace"] == "gpu-acceptance"
    assert trust["aws:RequestTag/kubernetes-service-account"] == "storage-check"
    (policy,) = [r for r in graph.of_type("aws:iam/rolePolicy:RolePolicy") if r.name.endswith("storage-check-policy")]
    statements = {s["Sid"]: s for s in json.loads(policy.inputs["policy"])["Statement"]}
    assert set(statements) == {"ListStorageCheckPrefix", "ReadWriteStorageCheckObjects", "UseDataKeyThroughS3"}
    listing, objects, key = statements.values()
    bucket_arn = listing["Resource"]
    assert listing["Action"] == ["s3:ListBucket"] and bucket_arn.startswith("arn:aws:s3:::")
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["acceptance/storage/", "acceptance/storage/*"]}}
    assert sorted(objects["Action"]) == ["s3:AbortMultipartUpload", "s3:DeleteObject", "s3:GetObject",
                                         "s3:PutObject"]
    assert objects["Resource"] == f"{bucket_arn}/acceptance/storage/*"
    assert sorted(key["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey"] and key["Resource"].startswith(
        "arn:aws:kms:")
    assert key["Condition"] == {"StringEquals": {"kms:ViaService": "s3.us-east-1.amazonaws.com"}}
    (association,) = [r for r in graph.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
                      if r.inputs["serviceAccount"] == "storage-check"]
    assert association.inputs["namespace"] == "gpu-acceptance"
    assert association.urn in job.dependencies
    # The data key's policy leaves its use to IAM policies (EnableIamPolicies), so the role's grant reaches it.
    (key_policy,) = [r for r in graph.of_type("aws:kms/keyPolicy:KeyPolicy") if r.name == "storage-data-key-policy"]
    (enable,) = [s for s in json.loads(key_policy.inputs["policy"])["Statement"] if s["Sid"] == "EnableIamPolicies"]
    assert enable["Action"] == ["kms:*"] and enable["Principal"]["AWS"].endswith(":root")


def test_no_bucket_leg_or_identity_where_checkpoints_do_not_reach_the_bucket() -> None:
    spec = raw_stack_config("prod-aws")["gpu-cluster:spec"]
    spec["aws"]["storage"]["filesystem"]["linkCheckpointBucket"] = False
    graph, (job,) = _storage_jobs(spec)
    pod = job.inputs["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "nccl-recorder" and [c["name"] for c in pod["initContainers"]] == ["fio"]
    assert not [r for r in graph.of_type("aws:iam/role:Role") if "storage-check" in r.inputs["name"]]
    # prod-gcp: Managed Lustre is not linked to the bucket and the path is the filesystem.
    graph = offline_run("prod-gcp").graph
    assert not [r for r in graph.of_type("gcp:storage/managedFolder:ManagedFolder")
                if r.inputs["name"] == "acceptance/storage/"]


def test_the_gcp_bucket_leg_writes_through_a_nested_managed_folder() -> None:
    """On the bucket path, GKE's storage-check principal is Storage Object User on acceptance/storage/, a managed
    folder nested in the recorders' acceptance/ folder, and nothing else; no key grant (the bucket's CMEK is used
    by Cloud Storage's service agent); the Job waits for the grant."""
    spec = raw_stack_config("prod-gcp")["gpu-cluster:spec"]
    spec["workload"]["goodput"].update({"checkpointPath": "bucket", "bucketWriteMbps": 5000.0})
    graph, (job,) = _storage_jobs(spec, "prod-gcp")
    pod = job.inputs["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "storage-check"
    (bucket,) = pod["initContainers"]
    assert bucket["image"].startswith("gcr.io/google.com/cloudsdktool/google-cloud-cli:")
    assert "gcloud storage cp - " in bucket["command"][2]
    folders = {r.inputs["name"]: r for r in graph.of_type("gcp:storage/managedFolder:ManagedFolder")}
    nested = folders["acceptance/storage/"]
    assert folders["acceptance/"].urn in nested.dependencies
    grants = [r for r in graph.of_type("gcp:storage/managedFolderIamMember:ManagedFolderIamMember")
              if str(r.inputs["member"]).endswith("/ns/gpu-acceptance/sa/storage-check")]
    (grant,) = grants
    assert grant.inputs["role"] == "roles/storage.objectUser"
    assert grant.inputs["managedFolder"] == "acceptance/storage/"
    assert grant.urn in job.dependencies
    members = [str(r.inputs.get("member", "")) for t in ("gcp:storage/bucketIAMMember:BucketIAMMember",
                                                           "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember",
                                                           "gcp:projects/iAMMember:IAMMember")
               for r in graph.of_type(t)]
    assert not [m for m in members if m.endswith("/sa/storage-check")]


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


# Stand-ins for the two CLIs: <scheme>://<bucket>/<key> is $FAKE_ROOT/<bucket>/<key>; every call is logged; a put
# whose destination contains $FAKE_FAIL_PUT fails (after reading its stream, as a failed upload does).
FAKE_CLI = """#!/bin/sh
echo "$*" >> "$FAKE_ROOT/calls"
case "$1" in --version) echo "aws-cli/2.22.0 Python/3.12.6 Linux/6.1 exe/x86_64"; exit 0;;
  version) echo "Google Cloud SDK 502.0.0"; echo "bq 2.1.9"; exit 0;; esac
shift; op=$1; shift
path() { u="${1#*://}"; echo "$FAKE_ROOT/${u%/}"; }
case "$op" in
  cp) if [ "$1" = - ]; then
        case "$2" in *"${FAKE_FAIL_PUT:-@none@}"*) cat > /dev/null; exit 1;; esac
        f=$(path "$2"); mkdir -p "$(dirname "$f")" "$FAKE_ROOT/.tmp"; t="$FAKE_ROOT/.tmp/$$"
        cat > "$t" && mv "$t" "$f"
      else cat "$(path "$1")"; fi;;
  rm) rm "$(path "$1")";;
  ls) d=$(path "$1"); [ -d "$d" ] || exit 1
      for f in "$d"/*; do [ -f "$f" ] || continue
        if [ "$SCHEME" = s3 ]; then echo "2026-01-01 00:00:00 $(wc -c < "$f") ${f##*/}"; else echo "${1%/}/${f##*/}"; fi
      done;;
esac
"""


def _fake_cli(tmp_path: Path, scheme: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cli = bin_dir / ("aws" if scheme == "s3" else "gcloud")
    cli.write_text(FAKE_CLI)
    cli.chmod(0o755)
    (tmp_path / "store").mkdir()
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_ROOT": str(tmp_path / "store"),
            "SCHEME": scheme, "RUN": "run-1", "RECORDS_BUCKET": "ckpt"}


def _run_bucket_pods(tmp_path: Path, scheme: str, pods: int, env: dict[str, str]) -> list[dict[str, Any]]:
    script = storage_bucket_script(scheme, pods, 3, 4096, pods * 3 * 4096).replace(
        "OUT=/records", f"OUT={tmp_path}/records$I")
    procs = [subprocess.Popen(["sh", "-c", script], env={**env, "JOB_COMPLETION_INDEX": str(i),
                                                          "NODE_NAME": f"node-{i}", "POD_NAME": f"pod-{i}"},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(pods)]
    for p in procs:
        _out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    return [json.loads((tmp_path / f"records{i}" / "storage-bucket.json").read_text()) for i in range(pods)]


@pytest.mark.skipif(shutil.which("sh") is None or shutil.which("timeout") is None, reason="needs sh and coreutils")
@pytest.mark.parametrize("scheme, tool", [("s3", "aws-cli/2.22.0"), ("gs", "Google Cloud SDK 502.0.0")])
def test_the_bucket_shell_streams_reads_back_deletes_and_records(tmp_path: Path, scheme: str, tool: str) -> None:
    """Two pods run the real bucket leg at once with a stand-in CLI: each streams one object per GPU under
    acceptance/storage/<run>/shares/<index>/, reads the next pod's back, deletes them, and writes
    storage-bucket.json with the documented fields; only the barrier markers stay."""
    env = _fake_cli(tmp_path, scheme)
    records = _run_bucket_pods(tmp_path, scheme, 2, env)
    for index, record in enumerate(records):
        assert record["target"] == "bucket" and record["bytes"] == 3 * 4096 and record["writers"] == 2
        assert record["index"] == index and record["checkpoint_bytes"] == 2 * 3 * 4096
        assert record["write_status"] == 0 and record["read_status"] == 0
        assert record["write_seconds"] > 0 and record["read_seconds"] > 0 and record["read_mbps"] >= 0
        assert record["latency_ms"] is None and record["tool"] == tool and record["node"] == f"node-{index}"
        assert record["finished"].endswith("Z")
    run = tmp_path / "store" / "ckpt" / "acceptance" / "storage" / "run-1"
    assert sorted(p.name for p in (run / "barrier").iterdir()) == ["ready.0", "ready.1", "written.0", "written.1"]
    assert not [p for p in (run / "shares").rglob("*") if p.is_file()]
    calls = (tmp_path / "store" / "calls").read_text().splitlines()
    puts = [c for c in calls if "/shares/" in c and (" cp - " in c)]
    assert len(puts) == 6
    if scheme == "s3":
        assert all("--expected-size 4096" in c for c in puts)


@pytest.mark.skipif(shutil.which("sh") is None or shutil.which("timeout") is None, reason="needs sh and coreutils")
def test_a_failed_upload_is_recorded_and_its_reader_does_not_read(tmp_path: Path) -> None:
    env = {**_fake_cli(tmp_path, "s3"), "FAKE_FAIL_PUT": "/shares/1/"}
    first, second = _run_bucket_pods(tmp_path, "s3", 2, env)
    assert second["write_status"] == 1 and second["write_seconds"] is None
    assert first["write_status"] == 0 and first["read_status"] == 125 and first["read_seconds"] is None
    assert second["read_status"] == 0  # pod 0's share was written: pod 1 reads it
