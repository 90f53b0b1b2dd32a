"""The NCCL acceptance gate: its held ClusterQueue, its LocalQueue and the all_reduce_perf MPIJobs."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.kubernetes.names import ACCEPTANCE_QUEUE as ACCEPTANCE_QUEUE
from components.kubernetes.objects.common import GPU_TOLERATION, PROVISIONING_CHECK, Manifest, meta
from components.kubernetes.objects.kueue import KUEUE_API, resource_entries
from components.kubernetes.quotas import CPU, GPU, MEMORY, GpuPool, Resources

ACCEPTANCE_NAMESPACE = "gpu-acceptance"
# Where nccl-tests is built in the image (the awsome-distributed-training nccl-tests Dockerfile); acceptance.testsDir
# names another.
NCCL_TESTS_DIR = "/opt/nccl-tests/build"
# all_reduce_perf from 8 B to 16 GiB, doubling, one GPU per rank (the seed's acceptance test).
NCCL_TESTS_ARGS = ["-b", "8", "-e", "16G", "-f", "2", "-g", "1"]
# Shared memory for NCCL's intra-node buffers and the hugepages EFA registers (the awsome-distributed-training
# nccl-tests MPIJob asks for hugepages-2Mi 5120Mi per worker). A memory-backed /dev/shm counts against the
# container's memory limit, so the limit leaves room for it; CPUs for 8 ranks, sshd and NCCL's proxy threads.
SHM_SIZE = "64Gi"
HUGEPAGES = "5120Mi"
WORKER_MEMORY = "256Gi"
WORKER_CPU = 32
LAUNCHER_RETRIES = 5  # the launcher may reach a worker still pulling its image: retried, not failed
# The per-node run: one pod on every node of a group, each all_reduce_perf over the node's GPUs in one process
# (-g <GPUs>, NVLink and NVSwitch only), then its record uploaded to the checkpoint bucket under
# acceptance/<group>/<run>/<node>/ (nccl.log, node.json) by a service account that may write only there.
RECORDER_SERVICE_ACCOUNT = "nccl-recorder"
RECORDS_PREFIX = "acceptance"
# The run's name: set on the suspended Job's pod template before the queue is released (README, "Before you commit
# capacity"); the Job's uid when it was not.
RUN_ANNOTATION = "gpu-cluster/acceptance-run"
RECORDS_DIR = "/records"


def acceptance_cluster_queue(pools: Sequence[GpuPool], covered: Sequence[str]) -> Manifest:
    """The acceptance queue: each tested group's whole capacity, outside the teams' cohort, held
    (``stopPolicy: Hold``). Kueue unsuspends a job it admits, so the queue admits nothing until an operator sets
    ``stopPolicy: None`` for a run (on capacity the teams are not using: their queues held too); the next
    ``pulumi up`` holds it again."""
    flavors = [{"name": p.name, "resources": resource_entries(
        Resources(p.capacity_units, p.max_nodes * (p.vcpu_per_node or 0), p.max_nodes * (p.memory_gib_per_node or 0),
                  p.max_nodes * p.fabric_per_node), None, None, covered)} for p in pools]
    spec: Manifest = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ACCEPTANCE_NAMESPACE}},
                      "queueingStrategy": "BestEffortFIFO",
                      "resourceGroups": [{"coveredResources": list(covered), "flavors": flavors}],
                      "preemption": {"reclaimWithinCohort": "Never", "withinClusterQueue": "Never"},
                      "stopPolicy": "Hold"}
    # Flex-start pools get nodes only through a ProvisioningRequest: the benchmark waits for them as a team's job does.
    queued = [p.name for p in pools if p.queued]
    if queued:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": PROVISIONING_CHECK, "onFlavors": queued}]}
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue",
            "metadata": meta(ACCEPTANCE_QUEUE, labels={"gpu-cluster/acceptance": "true"}), "spec": spec}


def acceptance_local_queue() -> Manifest:
    return {"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": meta("default", ACCEPTANCE_NAMESPACE),
            "spec": {"clusterQueue": ACCEPTANCE_QUEUE}}


@dataclass(frozen=True)
class PodFabric:
    """What a benchmark pod needs to reach the cloud's GPU fabric, beyond its GPUs: extended resources (EFA devices,
    hugepages), environment forwarded to every rank, shell each rank runs first (sourcing the network plugin's
    profile), pod annotations (GKE multi-networking, device injection), native sidecars (GKE's receive-datapath
    daemon), host volumes and their mounts, and mpirun options; ``source`` names where the shape comes from."""

    limits: Mapping[str, Any] = field(default_factory=dict)
    env: tuple[tuple[str, str], ...] = ()
    rank_setup: tuple[str, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    sidecars: tuple[Manifest, ...] = ()
    volumes: tuple[Manifest, ...] = ()
    mounts: tuple[Manifest, ...] = ()
    mpirun_args: tuple[str, ...] = ()
    single_node: bool = False  # the single-node (NVLink) job runs in the same pod shape
    source: str = ""

    @property
    def host_paths(self) -> bool:
        """The pods mount host paths (their namespace cannot enforce Pod Security baseline)."""
        return any("hostPath" in v for v in self.volumes)


def efa_fabric(resource: str, devices: int, device_rdma: bool) -> PodFabric:
    """Every EFA device of a node and libfabric's EFA provider (RDMA reads where the type supports them)."""
    env = (("FI_PROVIDER", "efa"), *((("FI_EFA_USE_DEVICE_RDMA", "1"),) if device_rdma else ()))
    return PodFabric(limits={resource: devices}, env=env, source="aws-samples/awsome-distributed-training "
                     "micro-benchmarks/nccl-tests (EFA devices, FI_PROVIDER, hugepages)")


@dataclass(frozen=True)
class AcceptanceRecorder:
    """Where each per-node run writes its record: the bucket (a name, or an Output), its URL scheme (s3, gs), the
    image of the cloud's CLI that uploads it, and what must exist before its pods get credentials (the cloud's
    binding of the recorder's service account)."""

    bucket: Any
    scheme: str
    image: str
    ready: tuple[Any, ...] = ()


# How long one node's all_reduce may run: the sweep to 16 GB takes minutes on 8 GPUs (tests/fixtures/nccl), so 20
# minutes is a hang, not a slow node.
NODE_RUN_TIMEOUT_S = 1200
# The whole Job's deadline: a node that never comes (cordoned, missing, not scaled) leaves its pod Pending; past this
# Kubernetes fails the Job and Kueue releases the quota instead of re-running it.
NODE_JOB_DEADLINE_S = 3600


def _node_script(tests_dir: str, gpus: int, rank_setup: Sequence[str]) -> str:
    """The benchmark container's shell: all_reduce_perf over the node's GPUs, its log and the node's facts (driver and
    CUDA from nvidia-smi, the exit status, the times) in the records directory; a failed benchmark is recorded, never
    a failed pod, so every node's record reaches the bucket."""
    binary = " ".join([f"{tests_dir.rstrip('/')}/all_reduce_perf", *NCCL_TESTS_ARGS[:-1], str(gpus)])
    return "\n".join([
        *rank_setup,
        f'mkdir -p {RECORDS_DIR}; START=$(date -u +%Y-%m-%dT%H:%M:%SZ)',
        # bounded: an NCCL hang on a bad node is recorded (exit 124, coreutils timeout) instead of holding the pod
        f"timeout {NODE_RUN_TIMEOUT_S} {binary} > {RECORDS_DIR}/nccl.log 2>&1; STATUS=$?",
        f"cat {RECORDS_DIR}/nccl.log",
        "SMI=$(command -v nvidia-smi || echo /usr/local/nvidia/bin/nvidia-smi)",
        'DRIVER=$($SMI --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1)',
        "CUDA=$($SMI 2>/dev/null | sed -n 's/.*CUDA Version: *\\([0-9.]*\\).*/\\1/p' | head -n1)",
        # what the node's GPUs are, as nvidia-smi names them (not the stack's declared type)
        "GPU_COUNT=$($SMI --query-gpu=name --format=csv,noheader 2>/dev/null | grep -c .)",
        "GPU_MODEL=$($SMI --query-gpu=name --format=csv,noheader 2>/dev/null | sort -u | paste -sd ';' | tr -d '\"')",
        'printf \'{"node": "%s", "pod": "%s", "index": "%s", "node_group": "%s", "instance_type": "%s", '
        '"gpus": %s, "gpu_count": %s, "gpu_model": "%s", "driver": "%s", "cuda": "%s", "exit_status": %s, '
        '"started": "%s", "finished": "%s"}\\n\' '
        '"$NODE_NAME" "$POD_NAME" "${JOB_COMPLETION_INDEX:-}" "$NODE_GROUP" "$INSTANCE_TYPE" '
        f'"{gpus}" "${{GPU_COUNT:-0}}" "$GPU_MODEL" "$DRIVER" "$CUDA" "$STATUS" "$START" '
        f'"$(date -u +%Y-%m-%dT%H:%M:%SZ)" > {RECORDS_DIR}/node.json',
    ])


def records_copy(recorder: AcceptanceRecorder, target: str, skip: str | None = None) -> str:
    """The cloud CLI command that copies :data:`RECORDS_DIR` to ``target`` (every uploader of the acceptance records:
    per-node runs, pairs and groups, node checks, storage checks), leaving out the file ``skip``. On GCS
    ``--no-clobber``: the recorder may create objects, not replace them (Storage Object Creator); a pod run again
    keeps the first record rather than failing on a 403."""
    if recorder.scheme == "s3":
        return f"aws s3 cp --recursive --only-show-errors {RECORDS_DIR}/ {target}" + (f" --exclude {skip}" if skip
                                                                                       else "")
    return (f"rm -f {RECORDS_DIR}/{skip}; " if skip else "") + \
        f"gcloud storage cp --recursive --no-clobber '{RECORDS_DIR}/*' {target}"


def _upload_script(recorder: AcceptanceRecorder) -> str:
    """The uploader's shell: the node's records to <scheme>://<bucket>/acceptance/<group>/<run>/<node>/, the run named
    by the pod's annotation, else by the Job's uid (one Job object is one run)."""
    target = f'"{recorder.scheme}://$RECORDS_BUCKET/{RECORDS_PREFIX}/$NODE_GROUP/$RUN/$NODE_NAME/"'
    return f'RUN="${{RUN:-job-$JOB_UID}}"; exec {records_copy(recorder, target)}'


def one_pod_per_node(selector: Mapping[str, str]) -> Manifest:
    """Pod spec placement that puts each pod of a per-node Job on a node of its own: required anti-affinity by host
    and a hard spread (the anti-affinity ignores finished pods, the spread keeps a Job's pods apart while they run)."""
    match = {"matchLabels": dict(selector)}
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": match, "topologyKey": "kubernetes.io/hostname"}]}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                           "whenUnsatisfiable": "DoNotSchedule", "labelSelector": match}]}


def nccl_node_job(pool: GpuPool, image: str, fabric: PodFabric | None, labels: Mapping[str, str],
                  recorder: AcceptanceRecorder, *, tests_dir: str = NCCL_TESTS_DIR) -> Manifest:
    """The per-node NVLink run: an indexed Job with one pod on every node of the pool (required anti-affinity and a
    topology spread by host), each running all_reduce_perf over the node's GPUs in one process and uploading its log
    and facts to the bucket (:data:`RECORDER_SERVICE_ACCOUNT`); created suspended, which Kueue lifts when its held
    queue admits it. Where the cloud's fabric must be set up even on one node (``fabric.single_node``: GKE GPUDirect),
    the pod has its annotations, sidecars and mounts."""
    name = f"nccl-nodes-{pool.name}"
    fab = fabric if fabric is not None and fabric.single_node else PodFabric()
    selector = {"gpu-cluster/acceptance": "nodes", "gpu-cluster/node-group": pool.name}
    env: list[Manifest] = [
        {"name": "NCCL_DEBUG", "value": "INFO"}, *({"name": k, "value": v} for k, v in fab.env),
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NODE_GROUP", "value": pool.name},
        {"name": "INSTANCE_TYPE", "value": pool.instance_type},
    ]
    limits: dict[str, Any] = {GPU: pool.gpus_per_node, MEMORY: WORKER_MEMORY, CPU: WORKER_CPU, **fab.limits}
    records = {"name": "records", "mountPath": RECORDS_DIR}
    bench: Manifest = {
        "name": "all-reduce", "image": image, "imagePullPolicy": "IfNotPresent", "env": env,
        "command": ["bash", "-c", _node_script(tests_dir, pool.gpus_per_node, fab.rank_setup)],
        "resources": {"limits": limits, "requests": dict(limits)},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}, records, *fab.mounts],
    }
    run_env = [
        {"name": "RECORDS_BUCKET", "value": recorder.bucket},
        {"name": "NODE_GROUP", "value": pool.name},
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "RUN", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{RUN_ANNOTATION}']"}}},
        {"name": "JOB_UID", "valueFrom": {"fieldRef": {
            "fieldPath": "metadata.labels['batch.kubernetes.io/controller-uid']"}}},
    ]
    uploader: Manifest = {
        "name": "record", "image": recorder.image, "imagePullPolicy": "IfNotPresent", "env": run_env,
        "command": ["sh", "-c", _upload_script(recorder)],
        "resources": {"limits": {CPU: 1, MEMORY: "512Mi"}, "requests": {CPU: "100m", MEMORY: "256Mi"}},
        "volumeMounts": [records],
    }
    spec: Manifest = {
        "serviceAccountName": RECORDER_SERVICE_ACCOUNT,
        "restartPolicy": "Never",
        "tolerations": [GPU_TOLERATION],
        **one_pod_per_node(selector),
        "initContainers": [*fab.sidecars, bench],
        "containers": [uploader],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE}},
                    {"name": "records", "emptyDir": {"sizeLimit": "1Gi"}}, *fab.volumes],
    }
    template: Manifest = {"metadata": {"labels": dict(selector),
                                       **({"annotations": dict(fab.annotations)} if fab.annotations else {})},
                          "spec": spec}
    metadata = meta(name, ACCEPTANCE_NAMESPACE, {**labels, "kueue.x-k8s.io/queue-name": "default",
                                                  "gpu-cluster/node-group": pool.name,
                                                  "gpu-cluster/acceptance": "nodes"})
    # Created suspended behind a held queue: the Kubernetes provider would otherwise wait for the Job to complete and
    # fail the apply after its timeout (pulumi-kubernetes Job await; skipAwait turns it off for this object).
    metadata["annotations"] = {"pulumi.com/skipAwait": "true"}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": metadata,
        # One attempt per index (backoffLimitPerIndex 0, Kubernetes 1.33+): a failed node's index is not rerun on a
        # node that already passed (the anti-affinity ignores finished pods); its record says why it failed.
        "spec": {"suspend": True, "completionMode": "Indexed", "completions": pool.max_nodes,
                 "parallelism": pool.max_nodes, "backoffLimitPerIndex": 0,
                 "activeDeadlineSeconds": NODE_JOB_DEADLINE_S, "template": template},
    }


# The MPI Operator (v2beta1) writes the workers' names, one per line with their slots, to this file in the launcher
# (kubeflow/mpi-operator pkg/controller/mpi_job_controller.go, hostfile in the ConfigMap mounted at /etc/mpi).
MPI_HOSTFILE = "/etc/mpi/hostfile"
PAIR_TIMEOUT_S = 1200  # the two-node sweep to 16 GB over the fabric; longer is a hang (as NODE_RUN_TIMEOUT_S)
RUN_TIMEOUT_S = 3600  # the whole group's run


def pairings(count: int) -> list[list[tuple[int, int]]]:
    """The two rounds of node pairs (indexes): round 1 neighbours (0,1), (2,3)...; round 2 shifted by one (1,2),
    (3,4)..., (last,0), so each node meets two partners and a node in two failing pairs is the suspect. An odd count
    pairs the last node of round 1 with node 0. One node: no pairs."""
    if count < 2:
        return []
    first = [(i, i + 1) for i in range(0, count - 1, 2)] + ([(count - 1, 0)] if count % 2 else [])
    second = [(i, (i + 1) % count) for i in range(1, count, 2)]
    return [first, [p for p in second if p[0] != p[1]]]


def launcher_script(mpirun: Sequence[str], rank: Sequence[str], gpus: int, nodes: int) -> str:
    """The launcher's shell (bash): each worker's node (its NODE_NAME, written at start), the pair runs of both
    rounds (the pairs of a round at once: they share no node), then the run over every node; each log with what it
    spanned under /records (pairs/<round>-<a>--<b>/ with pair.json, multinode/ with nodes.json), the layout
    ``blueprint nccl nodes`` reads; ``done`` tells the uploader to copy them."""
    base = " ".join(shlex.quote(a) for a in mpirun)
    cmd = " ".join(shlex.quote(a) for a in rank)
    return "\n".join([
        "set -u", f"R={RECORDS_DIR}; mkdir -p $R/pairs $R/multinode; trap 'touch $R/done' EXIT",
        f"mapfile -t HOSTS < <(awk 'NF {{print $1}}' ${{MPI_HOSTFILE:-{MPI_HOSTFILE}}})",
        "N=${#HOSTS[@]}; declare -A NODE",
        # (without --tag-output, which would prefix the name)
        'for h in "${HOSTS[@]}"; do NODE[$h]=$(mpirun --allow-run-as-root -np 1 -H "$h:1" cat /tmp/node-name '
        '2>/dev/null || echo "$h"); done',
        # a worker's name as it goes into a path and JSON: DNS-1123 characters only
        'for h in "${HOSTS[@]}"; do NODE[$h]=$(printf %s "${NODE[$h]}" | tr -cd "a-z0-9.-"); '
        '[ -n "${NODE[$h]}" ] || NODE[$h]=$h; done',
        "stamp() { date -u +%Y-%m-%dT%H:%M:%SZ; }",
        "pair() {  # round, index a, index b",
        '  local a=${HOSTS[$2]} b=${HOSTS[$3]}; local d="$R/pairs/$1-${NODE[$a]}--${NODE[$b]}"; mkdir -p "$d"',
        '  local t0; t0=$(stamp)',
        f'  timeout {PAIR_TIMEOUT_S} {base} -np {2 * gpus} -N {gpus} -H "$a:{gpus},$b:{gpus}" {cmd} > "$d/nccl.log" '
        "2>&1; local rc=$?",
        '  printf \'{"round": %s, "nodes": ["%s", "%s"], "node_group": "%s", "exit_status": %s, "started": "%s", '
        '"finished": "%s"}\\n\' "$1" "${NODE[$a]}" "${NODE[$b]}" "$NODE_GROUP" "$rc" "$t0" "$(stamp)" > "$d/pair.json"',
        "}",
        # the rounds of :func:`pairings`, each round's pairs at once (they share no node)
        *(" ".join(f"pair {r} {a} {b} &" for a, b in rnd) + " wait" for r, rnd in enumerate(pairings(nodes), start=1)),
        "T0=$(stamp)",
        f"timeout {RUN_TIMEOUT_S} {base} -np $((N * {gpus})) -N {gpus} {cmd} > $R/multinode/nccl.log 2>&1; RC=$?",
        "cat $R/multinode/nccl.log",
        "WORKERS=$(for h in \"${HOSTS[@]}\"; do printf '\"%s\": \"%s\"\\n' \"$h\" \"${NODE[$h]}\"; done | paste -sd ,)",
        "NODES=$(for h in \"${HOSTS[@]}\"; do printf '\"%s\"\\n' \"${NODE[$h]}\"; done | paste -sd ,)",
        "printf '{\"nodes\": [%s], \"workers\": {%s}, \"node_group\": \"%s\", \"instance_type\": \"%s\", "
        "\"exit_status\": %s, \"started\": \"%s\", \"finished\": \"%s\"}\\n' \"$NODES\" \"$WORKERS\" "
        "\"$NODE_GROUP\" \"$INSTANCE_TYPE\" \"$RC\" \"$T0\" \"$(stamp)\" > $R/multinode/nodes.json",
        # The run's verdict is its record (blueprint nccl nodes judges it): a failed benchmark is not a failed pod,
        # whose retry would run every pair again and leave its records behind.
        "exit 0",
    ])


def nccl_mpijob(pool: GpuPool, image: str, nodes: int, fabric: PodFabric | None, labels: Mapping[str, str], *,
                tests_dir: str = NCCL_TESTS_DIR, hugepages: bool = True,
                topology_level: str | None = None, recorder: AcceptanceRecorder | None = None) -> Manifest:
    """An MPIJob running all_reduce_perf on ``nodes`` nodes of the pool, one rank per GPU, with every GPU of each
    node and the pool's fabric (``fabric``: devices, sidecars, networks); created suspended (``runPolicy.suspend``),
    which Kueue lifts when its held queue admits it (README, "Before you commit capacity"). ``topology_level`` asks
    Kueue to place the workers within one domain of that level where it can (topology-aware scheduling)."""
    variant = "allreduce" if nodes > 1 else "nvlink"
    name = f"nccl-{variant}-{pool.name}"
    fab = fabric if fabric is not None and (nodes > 1 or fabric.single_node) else PodFabric()
    env = [{"name": "NCCL_DEBUG", "value": "INFO"}, *({"name": k, "value": v} for k, v in fab.env)]
    limits: dict[str, Any] = {GPU: pool.gpus_per_node, **({"hugepages-2Mi": HUGEPAGES} if hugepages else {}),
                              MEMORY: WORKER_MEMORY, CPU: WORKER_CPU, **fab.limits}
    ranks = nodes * pool.gpus_per_node
    binary = [f"{tests_dir.rstrip('/')}/all_reduce_perf", *NCCL_TESTS_ARGS]
    # Each rank is started by sshd on its worker, without the container's environment: what the fabric's plugin
    # needs is set there (its profile sourced on the worker's own node), the rest forwarded by mpirun -x.
    rank = ["bash", "-c", "; ".join([*fab.rank_setup, 'exec "$0" "$@"']), *binary] if fab.rank_setup else binary
    base = ["mpirun", "--allow-run-as-root", "--tag-output", "--bind-to", "none", *fab.mpirun_args,
            *[a for e in env for a in ("-x", e["name"])], "-x", "LD_LIBRARY_PATH"]
    del ranks
    # MPI Operator v2beta1 workers run an SSH server the launcher's mpirun connects to ("The workers run an SSH server
    # instead of sleep", kubeflow/mpi-operator proposals/scalable-robust-operator.md; examples/v2beta1/pi runs
    # /usr/sbin/sshd -De). As root the keys are mounted at /root/.ssh (sshAuthMountPath's default) and sshd listens on
    # 22: the image needs openssh-server, /var/run/sshd, StrictModes no in sshd_config and, in ssh_config,
    # StrictHostKeyChecking no with UserKnownHostsFile /dev/null (the operator's base image and the
    # awsome-distributed-training nccl-tests Dockerfile set these).
    # Each worker first leaves its node's name where the launcher reads it (the pair and group records name nodes).
    worker: dict[str, Any] = {"tolerations": [GPU_TOLERATION], "containers": [{
        "name": "worker", "image": image, "imagePullPolicy": "IfNotPresent",
        "env": [*env, {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "command": ["bash", "-c", 'echo "$NODE_NAME" > /tmp/node-name; exec /usr/sbin/sshd -De'],
        "resources": {"limits": limits, "requests": dict(limits)},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}, *fab.mounts],
    }], "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE}}, *fab.volumes]}
    if fab.sidecars:
        worker["initContainers"] = list(fab.sidecars)
    worker_meta: dict[str, Any] = {}
    if fab.annotations:
        worker_meta["annotations"] = dict(fab.annotations)
    if topology_level is not None and nodes > 1:
        # Kueue topology-aware scheduling: all workers within one domain of this level where capacity allows
        # (kueue.x-k8s.io/podset-preferred-topology, Kueue "Topology Aware Scheduling").
        worker_meta.setdefault("annotations", {})["kueue.x-k8s.io/podset-preferred-topology"] = topology_level
    records = {"name": "records", "mountPath": RECORDS_DIR}
    launcher: dict[str, Any] = {"tolerations": [GPU_TOLERATION], "containers": [{
        "name": "launcher", "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["bash", "-c", launcher_script(base, rank, pool.gpus_per_node, nodes)],
        "env": [*env, {"name": "NODE_GROUP", "value": pool.name},
                {"name": "INSTANCE_TYPE", "value": pool.instance_type}],
        "resources": {"limits": {CPU: 1, MEMORY: "2Gi"}, "requests": {CPU: 1, MEMORY: "2Gi"}},
        "volumeMounts": [records],
    }], "volumes": [{"name": "records", "emptyDir": {"sizeLimit": "1Gi"}}]}
    if recorder is not None:
        # The pair and group records go to <bucket>/acceptance/<group>/<run>/ (pairs/, multinode/) beside the per-node
        # records of the same run name, through the recorder's identity, once the launcher says they are done.
        launcher["serviceAccountName"] = RECORDER_SERVICE_ACCOUNT
        target = f'"{recorder.scheme}://$RECORDS_BUCKET/{RECORDS_PREFIX}/$NODE_GROUP/$RUN/"'
        copy = records_copy(recorder, target, skip="done")
        launcher["containers"].append({
            "name": "record", "image": recorder.image, "imagePullPolicy": "IfNotPresent",
            "env": [{"name": "RECORDS_BUCKET", "value": recorder.bucket}, {"name": "NODE_GROUP", "value": pool.name},
                    {"name": "RUN", "valueFrom": {"fieldRef": {
                        "fieldPath": f"metadata.annotations['{RUN_ANNOTATION}']"}}},
                    {"name": "JOB_UID", "valueFrom": {"fieldRef": {
                        "fieldPath": "metadata.labels['batch.kubernetes.io/controller-uid']"}}}],
            "command": ["sh", "-c", f'RUN="${{RUN:-job-$JOB_UID}}"; until [ -f {RECORDS_DIR}/done ]; do sleep 10; '
                        f"done; exec {copy}"],
            "resources": {"limits": {CPU: 1, MEMORY: "512Mi"}, "requests": {CPU: "100m", MEMORY: "256Mi"}},
            "volumeMounts": [records]})
    worker_template: dict[str, Any] = {"spec": worker}
    if worker_meta:
        worker_template = {"metadata": worker_meta, "spec": worker}
    return {
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": meta(name, ACCEPTANCE_NAMESPACE, {**labels, "kueue.x-k8s.io/queue-name": "default",
                                                       "gpu-cluster/node-group": pool.name,
                                                       "gpu-cluster/acceptance": variant}),
        "spec": {
            "slotsPerWorker": pool.gpus_per_node,
            "runPolicy": {"suspend": True, "cleanPodPolicy": "Running", "backoffLimit": LAUNCHER_RETRIES},
            "mpiImplementation": "OpenMPI",
            # The launcher starts once every worker is Ready (sshd up; on GKE the GPUDirect sidecar started), so
            # its first ssh does not fail against a worker still pulling images (MPIJob v2beta1
            # launcherCreationPolicy, MPI Operator v0.8.0 CRD; default AtStartup).
            "launcherCreationPolicy": "WaitForWorkersReady",
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": launcher}},
                "Worker": {"replicas": nodes, "restartPolicy": "Never", "template": worker_template},
            },
        },
    }
