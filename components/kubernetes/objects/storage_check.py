"""The storage acceptance check (issue 34): a held Job that writes a checkpoint of the workload's size to the shared
filesystem from as many nodes as the goodput model counts, reads it back from other nodes, and records the times
beside the NCCL records in the bucket.

The goodput model assumes the filesystem's rated throughput; this measures it. One indexed Job, one pod per node of
the largest tested GPU group (required anti-affinity by host), created suspended behind the held acceptance queue
like the NCCL jobs. Each pod, in its ``fio`` init container:

1. waits until every pod has started (a barrier of marker files on the filesystem), so the writes are concurrent as
   a checkpoint's are;
2. writes its share of the checkpoint, one file per GPU (``numjobs`` = the node's GPUs: every rank writes its own
   shard), buffered and flushed at the end (``end_fsync``), and times it;
3. waits until every pod has written, then reads back the *next* pod's share (a restart lands on other nodes, and a
   node's own page cache would answer its own files) and times that; deletes what it read;
4. writes ``storage.json`` (below) and fio's JSON output, which the uploader container copies to
   ``<bucket>/acceptance/storage/<run>/<pod>/`` as the per-node NCCL run does (as the recorder, or as
   ``storage-check`` when the bucket leg runs).

Where the team's checkpoints reach the bucket (:func:`bucket_leg`), each pod then runs the same in its ``bucket``
init container with the cloud's CLI (the recorder's image) as the ``storage-check`` service account, whose identity
may write, read and delete objects under ``acceptance/storage/`` only (components/aws, components/gcp): barriers of
marker objects under ``<run>/barrier/``, its share streamed from ``/dev/zero`` as one object per GPU under
``<run>/shares/<index>/``, the next pod's share read back to ``/dev/null`` and deleted; ``storage-bucket.json``
records it with ``"target": "bucket"``. Zeros measure throughput fairly: neither S3 nor GCS compresses objects.

Record (``storage.json``, one per pod; ``blueprint sizing --measured`` reads them, docs/sizing.md)::

    {"target": "filesystem", "bytes": <this pod wrote and read, int>, "checkpoint_bytes": <the model's, int>,
     "writers": <pods>, "index": <pod's index>, "write_seconds": <float|null>, "read_seconds": <float|null>,
     "write_mbps": <float|null>, "read_mbps": <float|null>, "latency_ms": null, "tool": "fio-3.x",
     "node": "...", "pod": "...", "write_status": <int>, "read_status": <int>, "started": "...", "finished": "..."}

MB is 10^6 bytes (the spec's MB/s). ``latency_ms`` is left null by the shell: fio's completion-latency percentiles
are in ``fio-write.json`` and ``fio-read.json`` beside it and are read offline. A status is fio's exit status, 124
a timeout (coreutils ``timeout``), 125 not run (a barrier timed out, or the read pod's neighbour failed its write).
``storage-bucket.json`` has the same fields; its ``tool`` is the CLI's version, its status the CLI's exit status
(the first non-zero of the pod's streams), and ``latency_ms`` is null (the CLIs report no per-request latency).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.kubernetes.objects.acceptance import (
    ACCEPTANCE_NAMESPACE,
    RECORDER_SERVICE_ACCOUNT,
    RECORDS_DIR,
    RECORDS_PREFIX,
    RUN_ANNOTATION,
    AcceptanceRecorder,
    one_pod_per_node,
    records_copy,
)
from components.kubernetes.objects.common import GPU_TOLERATION, Manifest, meta
from components.kubernetes.objects.storage import SharedFilesystem, static_volume
from components.kubernetes.quotas import CPU, GPU, MEMORY, GpuPool
from components.sizing import SizingError, goodput_model
from components.spec import ClusterSpec

STORAGE_CHECK_JOB = "storage-checkpoint"
STORAGE_RECORDS_PREFIX = f"{RECORDS_PREFIX}/storage"  # acceptance/storage/<run>/<pod>/ in the checkpoint bucket
STORAGE_RECORD = "storage.json"
BUCKET_RECORD = "storage-bucket.json"
# The bucket leg's identity (components/aws/data_access.py, components/gcp/security.py): write, read and delete
# under acceptance/storage/ only; the whole pod runs as it when the leg runs (it also uploads the records there).
STORAGE_CHECK_SERVICE_ACCOUNT = "storage-check"
# The check's claim of the filesystem in the acceptance namespace, and its volume: a dot, which no team name (a DNS
# label) has, keeps the volume apart from every team's shared-fs-<team> (as the admin volume's "shared-fs.admin").
STORAGE_CHECK_VOLUME = "shared-fs.storage-check"
STORAGE_CHECK_CLAIM = "shared-fs-storage-check"
# fio's block size: large sequential writes, as each rank streams its shard of a checkpoint; a multiple of it is
# what each fio job writes (fio rounds a job's size down to whole blocks: fio docs, "size" and "bs").
FIO_BLOCK_BYTES = 4 * 2**20
FIO_BLOCK = "4M"
# How long one phase (write or read) may run: 980 GB (70B x 14 B) at 136 MB/s takes two hours, far past any restore
# target, so a phase that runs longer is recorded as a timeout rather than holding the nodes.
PHASE_TIMEOUT_S = 7200
# How long a pod waits for the others at a barrier: the pods of an admitted Job start within minutes of each other
# (image pull; a node the autoscaler still adds after admission); past this the run is recorded as not concurrent.
BARRIER_TIMEOUT_S = 1800
# The Job's deadline: per leg both barriers and both phases at their limits, and ten minutes to upload; past it
# Kubernetes fails the Job and Kueue releases the quota.
def job_deadline_s(legs: int) -> int:
    """The Job's deadline with ``legs`` legs (filesystem, bucket) run one after the other."""
    return legs * (2 * BARRIER_TIMEOUT_S + 2 * PHASE_TIMEOUT_S) + 600
# The fio container's memory: buffered writes fill the page cache, which is charged to the container's cgroup, so
# the limit bounds the dirty data the kernel holds before writing back (Linux cgroup v2 memory controller docs:
# "page cache pages" are charged to the cgroup); a training pod's limit is larger, so this is no flatter than theirs.
FIO_MEMORY = "64Gi"
FIO_CPU = 8
# The bucket leg's container: one CLI process per GPU, each holding its part buffers (the AWS CLI's defaults: 10
# concurrent requests of 8 MiB parts, "AWS CLI S3 Configuration": max_concurrent_requests, multipart_chunksize) and
# the Python runtime; well under a GPU node's memory.
BUCKET_MEMORY = "16Gi"
BUCKET_CPU = 8
# How often a pod lists the barrier markers in the bucket while it waits (one LIST per pod per poll).
BUCKET_POLL_S = 5


@dataclass(frozen=True)
class StorageCheck:
    """What the check measures, from the goodput model (components/sizing): the fio image (a stack input, by
    digest; None: no filesystem leg), the checkpoint's bytes (parameters x bytes per parameter), the nodes that
    write it (the model's GPU nodes), the path team pods mount the filesystem at (the stack's mountPath; None
    without a filesystem leg), the model's checkpointPath, and whether the bucket leg runs (:func:`bucket_leg`)."""

    image: str | None
    checkpoint_bytes: int
    writers: int
    mount_path: str | None
    path: str
    bucket: bool = False

    @property
    def filesystem(self) -> bool:
        """Whether the filesystem leg runs (fio on the shared filesystem)."""
        return self.image is not None and self.mount_path is not None

    def shape(self, pool: GpuPool) -> tuple[int, int, int]:
        """(pods, fio jobs per pod, bytes per fio job): at most one pod per node of ``pool``, one fio job per GPU,
        each job's size a whole number of blocks, so the pods together write at least the checkpoint."""
        pods = max(1, min(self.writers, pool.max_nodes))
        jobs = max(1, pool.gpus_per_node)
        per_job = math.ceil(self.checkpoint_bytes / (pods * jobs) / FIO_BLOCK_BYTES) * FIO_BLOCK_BYTES
        return pods, jobs, per_job


def bucket_leg(spec: ClusterSpec, path: str) -> bool:
    """Whether the team's checkpoints reach the bucket, so the check measures it too: on the ``bucket`` path, and on
    AWS when the stack's filesystem is linked to the bucket (``linkCheckpointBucket``: FSx exports every checkpoint
    to it, and a filesystem rebuilt after a loss is restored from it). ``tiered`` alone does not: the model's tiered
    path drains to the filesystem (components/sizing/plan.py, path_times). GCP's Managed Lustre is not linked."""
    if path == "bucket":
        return True
    if spec.gcp is not None:
        return False
    fs = spec.aws_spec().storage.filesystem
    return fs is not None and fs.existing is None and fs.link_checkpoint_bucket


def storage_check(spec: ClusterSpec) -> StorageCheck | None:
    """The check a stack asks for, with the acceptance gate and a goodput model: on the ``filesystem`` or ``tiered``
    path (whose drain writes the filesystem and whose restore reads it), the filesystem leg when the stack gives a
    fio image (``acceptance.storageImage``) and has a shared filesystem, with the bucket leg where the filesystem
    is linked to the bucket; on the ``bucket`` path, the bucket leg alone (the CLI image is the recorder's). None
    otherwise (docs/sizing.md)."""
    acceptance = spec.acceptance
    if not acceptance.enabled or spec.workload.goodput is None:
        return None
    try:
        model = goodput_model(spec)
    except SizingError:
        return None
    size = math.ceil(model.checkpoint_bytes)
    if model.path == "bucket":
        return StorageCheck(image=None, checkpoint_bytes=size, writers=model.nodes, mount_path=None,
                            path=model.path, bucket=True)
    fs = spec.gcp.storage.filesystem if spec.gcp is not None else spec.aws_spec().storage.filesystem
    if fs is None or acceptance.storage_image is None:
        return None
    return StorageCheck(image=acceptance.storage_image, checkpoint_bytes=size, writers=model.nodes,
                        mount_path=fs.mount_path, path=model.path, bucket=bucket_leg(spec, model.path))


def storage_check_pool(pools: Sequence[GpuPool]) -> GpuPool | None:
    """The group the check runs on: the largest of the acceptance queue's groups (the most nodes, then the first)."""
    return max(pools, key=lambda p: p.max_nodes, default=None)


def storage_check_volume(fs: SharedFilesystem, labels: Mapping[str, str]) -> tuple[Manifest, Manifest]:
    """The whole filesystem as the teams' volumes mount it (same driver, handle, mount options), claimed in the
    acceptance namespace; the Job mounts its own directory beside the teams' (``subPath``), which kubelet creates
    (pkg/kubelet/kubelet_pods.go, makeMounts: a missing subPath is created before the container starts). The
    names end in the filesystem's generation, like the admin claim's (objects/storage.py)."""
    return static_volume(STORAGE_CHECK_VOLUME, fs, None, ACCEPTANCE_NAMESPACE, fs.volume_name(STORAGE_CHECK_CLAIM),
                         labels)


def _fio(directory: str, rw: str, jobs: int, per_job: int, output: str) -> str:
    """One fio run over ``jobs`` files of ``per_job`` bytes in ``directory`` (fio names them ckpt.<job>.0, so a
    read with the same name, jobs and size finds what a write made), bounded by the phase timeout."""
    return " ".join([
        f"timeout {PHASE_TIMEOUT_S} fio --name=ckpt", f'--directory="{directory}"', f"--rw={rw}",
        f"--bs={FIO_BLOCK}", f"--size={per_job}", f"--numjobs={jobs}", "--ioengine=psync",
        # written as an application writes (no preallocation), flushed before the job ends: the time includes the
        # fsync a checkpoint writer does (torch.distributed.checkpoint FileSystemWriter, sync_files=True)
        *(["--fallocate=none", "--end_fsync=1"] if rw == "write" else []),
        "--group_reporting", "--output-format=json", f"--output={output}",
    ])


def storage_check_script(mount_path: str, pods: int, jobs: int, per_job: int, checkpoint_bytes: int) -> str:
    """The fio container's shell (module docstring): barrier, write, barrier, read the next pod's share, record.
    A failed phase is recorded, never a failed pod, so every pod's record reaches the bucket."""
    mount = mount_path.rstrip("/") or "/"
    total = jobs * per_job
    now = "date -u +%Y-%m-%dT%H:%M:%SZ"
    return "\n".join([
        "set -u",
        f'RUN="${{RUN:-job-$JOB_UID}}"; I="$JOB_COMPLETION_INDEX"; N={pods}; OUT={RECORDS_DIR}',
        f'DIR="{mount}/$RUN"; NEXT=$(( (I + 1) % N ))',
        f'mkdir -p "$OUT" "$DIR/$I"; START=$({now}); TOOL=$(fio --version 2>/dev/null | head -n1)',
        # A barrier: this pod's marker (its status), then wait until all N pods left theirs.
        "barrier() {",
        '  echo "$2" > "$DIR/$1.$I"; LIMIT=$(( $(date +%s) + ' + str(BARRIER_TIMEOUT_S) + " ))",
        '  while [ "$(ls "$DIR" | grep -c "^$1\\.")" -lt "$N" ]; do',
        '    [ "$(date +%s)" -ge "$LIMIT" ] && return 1; sleep 2',
        "  done",
        "}",
        # seconds and MB/s of a phase, or nulls when it did not succeed
        "figures() {",
        '  if [ "$1" -eq 0 ]; then awk -v a="$2" -v b="$3" -v n="' + str(total) + '" '
        "'BEGIN { s = b - a; if (s <= 0) s = 0.001; printf \"%.3f %.1f\", s, n / s / 1e6 }'; "
        'else echo "null null"; fi',
        "}",
        "WS=125; RS=125; W0=0; W1=0; R0=0; R1=0",
        "if barrier ready 0; then",
        f"  W0=$(date +%s.%N); {_fio('$DIR/$I', 'write', jobs, per_job, '$OUT/fio-write.json')}; WS=$?;"
        " W1=$(date +%s.%N)",
        "fi",
        'if barrier written "$WS" && [ "$(cat "$DIR/written.$NEXT" 2>/dev/null)" = 0 ]; then',
        f"  R0=$(date +%s.%N); {_fio('$DIR/$NEXT', 'read', jobs, per_job, '$OUT/fio-read.json')}; RS=$?;"
        " R1=$(date +%s.%N)",
        '  rm -rf "$DIR/$NEXT"',  # the next pod's share: this pod is its only reader
        "fi",
        'set -- $(figures "$WS" "$W0" "$W1") $(figures "$RS" "$R0" "$R1")',
        'printf \'{"target": "filesystem", "bytes": %s, "checkpoint_bytes": %s, "writers": %s, "index": %s, '
        '"write_seconds": %s, "read_seconds": %s, "write_mbps": %s, "read_mbps": %s, "latency_ms": null, '
        '"tool": "%s", "node": "%s", "pod": "%s", "write_status": %s, "read_status": %s, "started": "%s", '
        '"finished": "%s"}\\n\' '
        f'"{total}" "{checkpoint_bytes}" "$N" "$I" "$1" "$3" "$2" "$4" "$TOOL" "$NODE_NAME" "$POD_NAME" '
        f'"$WS" "$RS" "$START" "$({now})" > "$OUT/{STORAGE_RECORD}"',
        f'cat "$OUT/{STORAGE_RECORD}"',
    ])


def _bucket_cli(scheme: str, per_job: int) -> dict[str, str]:
    """The CLI's commands, with ``{url}`` to fill in: a streamed upload (stdin), a streamed download (stdout), a
    delete, the names under a prefix, and its version. AWS CLI reference, ``aws s3 cp``: ``-`` streams from stdin or
    to stdout, and ``--expected-size`` (bytes) is needed for a stream over 50 GB so the parts stay under S3's 10,000
    (harmless below); ``aws s3 ls`` prints ``date time size name``. gcloud reference, ``gcloud storage cp``: ``-``
    as source or destination streams (Cloud Storage "Streaming uploads and downloads"; no size is given, the
    upload is resumable); ``gcloud storage ls`` prints full URLs."""
    if scheme == "s3":
        return {"put": f'aws s3 cp - "{{url}}" --expected-size {per_job} --only-show-errors',
                "small": 'aws s3 cp - "{url}" --only-show-errors',
                "get": 'aws s3 cp "{url}" -',
                "rm": 'aws s3 rm "{url}" --only-show-errors',
                "names": "aws s3 ls \"{url}/\" 2>/dev/null | sed 's/.* //'",
                "version": "aws --version 2>&1 | cut -d' ' -f1"}
    return {"put": 'gcloud storage cp - "{url}" --quiet',
            "small": 'gcloud storage cp - "{url}" --quiet',
            "get": 'gcloud storage cp "{url}" - --quiet',
            "rm": 'gcloud storage rm "{url}" --quiet',
            "names": "gcloud storage ls \"{url}/\" 2>/dev/null | sed 's|.*/||'",
            "version": "gcloud version 2>/dev/null | head -n1"}


def storage_bucket_script(scheme: str, pods: int, jobs: int, per_job: int, checkpoint_bytes: int) -> str:
    """The bucket leg's shell (module docstring): barrier, each GPU's object streamed up at once, barrier, the next
    pod's objects read back at once and deleted, record. Times are whole nanoseconds (GNU ``date +%s%N``) and the
    figures integer shell arithmetic, as the CLI images need not have awk. A failed phase is recorded, never a
    failed pod."""
    cli = _bucket_cli(scheme, per_job)
    total = jobs * per_job
    now = "date -u +%Y-%m-%dT%H:%M:%SZ"

    def stream(direction: str) -> str:
        url = "$B/shares/$2/ckpt.$j"
        if direction == "put":
            return f"( head -c {per_job} /dev/zero | timeout {PHASE_TIMEOUT_S} {cli['put'].format(url=url)} ) &"
        return f"( timeout {PHASE_TIMEOUT_S} {cli['get'].format(url=url)} > /dev/null ) &"

    return "\n".join([
        "set -u",
        f'RUN="${{RUN:-job-$JOB_UID}}"; I="$JOB_COMPLETION_INDEX"; N={pods}; OUT={RECORDS_DIR}',
        'NEXT=$(( (I + 1) % N ))',
        f'B="{scheme}://$RECORDS_BUCKET/{STORAGE_RECORDS_PREFIX}/$RUN"',
        f"mkdir -p \"$OUT\"; START=$({now}); TOOL=$({cli['version']})",
        # A barrier: this pod's marker object (its status), then wait until all N pods left theirs.
        "barrier() {",
        f"  echo \"$2\" | {cli['small'].format(url='$B/barrier/$1.$I')} || return 1",
        f"  LIMIT=$(( $(date +%s) + {BARRIER_TIMEOUT_S} ))",
        f"  while [ \"$({cli['names'].format(url='$B/barrier')} | grep -c \"^$1\\.\")\" -lt \"$N\" ]; do",
        f'    [ "$(date +%s)" -ge "$LIMIT" ] && return 1; sleep {BUCKET_POLL_S}',
        "  done",
        "}",
        # One stream per GPU at once (as each rank writes or reads its shard); the first non-zero status.
        "phase() {",
        '  PIDS=""; j=0',
        f'  while [ "$j" -lt {jobs} ]; do',
        f'    if [ "$1" = put ]; then {stream("put")} else {stream("get")} fi',
        '    PIDS="$PIDS $!"; j=$((j + 1))',
        "  done",
        '  S=0; for p in $PIDS; do wait "$p"; R=$?; [ "$S" -eq 0 ] && S=$R; done; return "$S"',
        "}",
        # seconds (3 decimals) and MB/s (1 decimal) of a phase from its nanoseconds, or nulls when it failed
        "figures() {",
        '  if [ "$1" -eq 0 ]; then',
        '    NS=$(( $3 - $2 )); [ "$NS" -lt 1000000 ] && NS=1000000; MS=$(( NS / 1000000 ))',
        f"    T=$(( {total} * 10000 / NS ))",
        "    printf '%d.%03d %d.%d' $((MS / 1000)) $((MS % 1000)) $((T / 10)) $((T % 10))",
        '  else echo "null null"; fi',
        "}",
        "WS=125; RS=125; W0=0; W1=0; R0=0; R1=0",
        "if barrier ready 0; then",
        '  W0=$(date +%s%N); phase put "$I"; WS=$?; W1=$(date +%s%N)',
        "fi",
        "if barrier written \"$WS\" && "
        f"[ \"$({cli['get'].format(url='$B/barrier/written.$NEXT')} 2>/dev/null)\" = 0 ]; then",
        '  R0=$(date +%s%N); phase get "$NEXT"; RS=$?; R1=$(date +%s%N)',
        # the next pod's share: this pod is its only reader
        f'  j=0; while [ "$j" -lt {jobs} ]; do {cli["rm"].format(url="$B/shares/$NEXT/ckpt.$j")}; j=$((j + 1)); done',
        "fi",
        'set -- $(figures "$WS" "$W0" "$W1") $(figures "$RS" "$R0" "$R1")',
        'printf \'{"target": "bucket", "bytes": %s, "checkpoint_bytes": %s, "writers": %s, "index": %s, '
        '"write_seconds": %s, "read_seconds": %s, "write_mbps": %s, "read_mbps": %s, "latency_ms": null, '
        '"tool": "%s", "node": "%s", "pod": "%s", "write_status": %s, "read_status": %s, "started": "%s", '
        '"finished": "%s"}\\n\' '
        f'"{total}" "{checkpoint_bytes}" "$N" "$I" "$1" "$3" "$2" "$4" "$TOOL" "$NODE_NAME" "$POD_NAME" '
        f'"$WS" "$RS" "$START" "$({now})" > "$OUT/{BUCKET_RECORD}"',
        f'cat "$OUT/{BUCKET_RECORD}"',
    ])


def storage_upload_script(recorder: AcceptanceRecorder) -> str:
    """The uploader's shell: the pod's records to <scheme>://<bucket>/acceptance/storage/<run>/<pod>/, the run named
    as the NCCL runs' (the pod's annotation, else the Job's uid), with the same CLI and create-only rules."""
    target = f'"{recorder.scheme}://$RECORDS_BUCKET/{STORAGE_RECORDS_PREFIX}/$RUN/$POD_NAME/"'
    copy = records_copy(recorder, target)
    return f'RUN="${{RUN:-job-$JOB_UID}}"; exec {copy}'


def storage_check_job(check: StorageCheck, pool: GpuPool, fs: SharedFilesystem | None,
                      recorder: AcceptanceRecorder, labels: Mapping[str, str]) -> Manifest:
    """The indexed Job of the check (module docstring) on ``pool``: one pod per node, each holding the node's GPUs
    (as a training pod does; they also place it on the group's nodes through its Kueue flavor); the filesystem leg
    mounting the filesystem where team pods do (``fs``, given when the check has that leg), then the bucket leg,
    then the upload; suspended behind the held acceptance queue."""
    pods, jobs, per_job = check.shape(pool)
    selector = {"gpu-cluster/acceptance": "storage", "gpu-cluster/node-group": pool.name}
    field = [
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "RUN", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{RUN_ANNOTATION}']"}}},
        {"name": "JOB_UID", "valueFrom": {"fieldRef": {
            "fieldPath": "metadata.labels['batch.kubernetes.io/controller-uid']"}}},
    ]
    bucket_env = [{"name": "RECORDS_BUCKET", "value": recorder.bucket}, *field]
    records = {"name": "records", "mountPath": RECORDS_DIR}
    steps: list[Manifest] = []
    volumes: list[Manifest] = [{"name": "records", "emptyDir": {"sizeLimit": "1Gi"}}]
    legs = 0
    if check.filesystem:
        assert fs is not None and check.mount_path is not None, "the filesystem leg needs the shared filesystem"
        limits: dict[str, Any] = {GPU: pool.gpus_per_node, MEMORY: FIO_MEMORY, CPU: FIO_CPU}
        steps.append({
            "name": "fio", "image": check.image, "imagePullPolicy": "IfNotPresent", "env": list(field),
            "command": ["sh", "-c", storage_check_script(check.mount_path, pods, jobs, per_job,
                                                         check.checkpoint_bytes)],
            "resources": {"limits": limits, "requests": dict(limits)},
            "volumeMounts": [records, {"name": "checkpoints", "mountPath": check.mount_path,
                                       "subPath": fs.team_dir(ACCEPTANCE_NAMESPACE)}],
        })
        volumes.append({"name": "checkpoints",
                        "persistentVolumeClaim": {"claimName": fs.volume_name(STORAGE_CHECK_CLAIM)}})
        legs += 1
    if check.bucket:
        limits = {GPU: pool.gpus_per_node, MEMORY: BUCKET_MEMORY, CPU: BUCKET_CPU}
        steps.append({
            "name": "bucket", "image": recorder.image, "imagePullPolicy": "IfNotPresent", "env": list(bucket_env),
            "command": ["sh", "-c", storage_bucket_script(recorder.scheme, pods, jobs, per_job,
                                                          check.checkpoint_bytes)],
            "resources": {"limits": limits, "requests": dict(limits)},
            "volumeMounts": [records],
        })
        legs += 1
    uploader: Manifest = {
        "name": "record", "image": recorder.image, "imagePullPolicy": "IfNotPresent", "env": list(bucket_env),
        "command": ["sh", "-c", storage_upload_script(recorder)],
        "resources": {"limits": {CPU: 1, MEMORY: "512Mi"}, "requests": {CPU: "100m", MEMORY: "256Mi"}},
        "volumeMounts": [records],
    }
    spec: Manifest = {
        # The bucket leg's identity may also write the records (acceptance/storage/); without the leg, the recorder's.
        "serviceAccountName": STORAGE_CHECK_SERVICE_ACCOUNT if check.bucket else RECORDER_SERVICE_ACCOUNT,
        "restartPolicy": "Never",
        "tolerations": [GPU_TOLERATION],
        **one_pod_per_node(selector),
        "initContainers": steps,
        "containers": [uploader],
        "volumes": volumes,
    }
    metadata = meta(STORAGE_CHECK_JOB, ACCEPTANCE_NAMESPACE, {**labels, "kueue.x-k8s.io/queue-name": "default",
                                                              "gpu-cluster/node-group": pool.name,
                                                              "gpu-cluster/acceptance": "storage"})
    # Suspended behind a held queue: Pulumi must not wait for it to complete (pulumi-kubernetes Job await).
    metadata["annotations"] = {"pulumi.com/skipAwait": "true",
                               "gpu-cluster/checkpoint-bytes": str(check.checkpoint_bytes),
                               "gpu-cluster/model-writers": str(check.writers)}
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
        # One attempt per index: a rerun pod would wait at a barrier the others already passed.
        "spec": {"suspend": True, "completionMode": "Indexed", "completions": pods, "parallelism": pods,
                 "backoffLimitPerIndex": 0, "activeDeadlineSeconds": job_deadline_s(legs),
                 "template": {"metadata": {"labels": dict(selector)}, "spec": spec}},
    }


__all__ = [
    "BUCKET_RECORD",
    "STORAGE_CHECK_CLAIM",
    "STORAGE_CHECK_JOB",
    "STORAGE_CHECK_SERVICE_ACCOUNT",
    "STORAGE_RECORD",
    "STORAGE_RECORDS_PREFIX",
    "StorageCheck",
    "bucket_leg",
    "storage_bucket_script",
    "storage_check",
    "storage_check_job",
    "storage_check_pool",
    "storage_check_script",
    "storage_check_volume",
    "storage_upload_script",
]
