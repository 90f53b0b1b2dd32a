"""The NCCL acceptance gate: its held ClusterQueue, its LocalQueue and the all_reduce_perf MPIJobs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from components.kubernetes.objects.common import GPU_TOLERATION, Manifest, meta
from components.kubernetes.objects.kueue import KUEUE_API, resource_entries
from components.kubernetes.quotas import CPU, GPU, MEMORY, GpuPool, Resources

ACCEPTANCE_NAMESPACE = "gpu-acceptance"
ACCEPTANCE_QUEUE = "gpu-acceptance"
NCCL_TESTS_BINARY = "/opt/nccl-tests/build/all_reduce_perf"
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


def acceptance_cluster_queue(pools: Sequence[GpuPool], covered: Sequence[str]) -> Manifest:
    """The acceptance queue: each tested group's whole capacity, outside the teams' cohort, held
    (``stopPolicy: Hold``). Kueue unsuspends a job it admits, so the queue admits nothing until an operator sets
    ``stopPolicy: None`` for a run (on capacity the teams are not using: their queues held too); the next
    ``pulumi up`` holds it again."""
    flavors = [{"name": p.name, "resources": resource_entries(
        Resources(p.capacity_units, p.max_nodes * (p.vcpu_per_node or 0), p.max_nodes * (p.memory_gib_per_node or 0),
                  p.max_nodes * p.fabric_per_node), None, None, covered)} for p in pools]
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue",
            "metadata": meta(ACCEPTANCE_QUEUE, labels={"gpu-cluster/acceptance": "true"}),
            "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ACCEPTANCE_NAMESPACE}},
                     "queueingStrategy": "BestEffortFIFO",
                     "resourceGroups": [{"coveredResources": list(covered), "flavors": flavors}],
                     "preemption": {"reclaimWithinCohort": "Never", "withinClusterQueue": "Never"},
                     "stopPolicy": "Hold"}}


def acceptance_local_queue() -> Manifest:
    return {"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": meta("default", ACCEPTANCE_NAMESPACE),
            "spec": {"clusterQueue": ACCEPTANCE_QUEUE}}


def nccl_mpijob(pool: GpuPool, image: str, nodes: int, fabric_resource: str | None, device_rdma: bool,
                labels: Mapping[str, str]) -> Manifest:
    """An MPIJob running all_reduce_perf on ``nodes`` nodes of the pool, one rank per GPU, with every GPU and fabric
    device of each node; created suspended (``runPolicy.suspend``), which Kueue lifts when its held queue admits
    it (README, "Before you commit capacity")."""
    variant = "allreduce" if nodes > 1 else "nvlink"
    name = f"nccl-{variant}-{pool.name}"
    env = [{"name": "NCCL_DEBUG", "value": "INFO"}]
    limits: dict[str, Any] = {GPU: pool.gpus_per_node, "hugepages-2Mi": HUGEPAGES, MEMORY: WORKER_MEMORY,
                              CPU: WORKER_CPU}
    if fabric_resource and pool.fabric_per_node and nodes > 1:
        env += [{"name": "FI_PROVIDER", "value": "efa"}]
        if device_rdma:
            env += [{"name": "FI_EFA_USE_DEVICE_RDMA", "value": "1"}]
        limits[fabric_resource] = pool.fabric_per_node
    ranks = nodes * pool.gpus_per_node
    mpirun = ["mpirun", "--allow-run-as-root", "--tag-output", "-np", str(ranks), "-N", str(pool.gpus_per_node),
              "--bind-to", "none", *[a for e in env for a in ("-x", e["name"])], "-x", "LD_LIBRARY_PATH",
              NCCL_TESTS_BINARY, *NCCL_TESTS_ARGS]
    # MPI Operator v2beta1 workers run an SSH server the launcher's mpirun connects to ("The workers run an SSH server
    # instead of sleep", kubeflow/mpi-operator proposals/scalable-robust-operator.md; examples/v2beta1/pi runs
    # /usr/sbin/sshd -De). As root the keys are mounted at /root/.ssh (sshAuthMountPath's default) and sshd listens on
    # 22: the image needs openssh-server, /var/run/sshd, StrictModes no in sshd_config and, in ssh_config,
    # StrictHostKeyChecking no with UserKnownHostsFile /dev/null (the operator's base image and the
    # awsome-distributed-training nccl-tests Dockerfile set these).
    worker = {"tolerations": [GPU_TOLERATION], "containers": [{
        "name": "worker", "image": image, "imagePullPolicy": "IfNotPresent", "env": env,
        "command": ["/usr/sbin/sshd"], "args": ["-De"],
        "resources": {"limits": limits, "requests": dict(limits)},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }], "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE}}]}
    launcher = {"tolerations": [GPU_TOLERATION], "containers": [{
        "name": "launcher", "image": image, "imagePullPolicy": "IfNotPresent", "command": mpirun[:1],
        "args": mpirun[1:], "env": env,
        "resources": {"limits": {CPU: 1, MEMORY: "2Gi"}, "requests": {CPU: 1, MEMORY: "2Gi"}},
    }]}
    return {
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": meta(name, ACCEPTANCE_NAMESPACE, {**labels, "kueue.x-k8s.io/queue-name": "default",
                                                       "gpu-cluster/node-group": pool.name,
                                                       "gpu-cluster/acceptance": variant}),
        "spec": {
            "slotsPerWorker": pool.gpus_per_node,
            "runPolicy": {"suspend": True, "cleanPodPolicy": "Running", "backoffLimit": LAUNCHER_RETRIES},
            "mpiImplementation": "OpenMPI",
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": launcher}},
                "Worker": {"replicas": nodes, "restartPolicy": "Never", "template": {"spec": worker}},
            },
        },
    }
