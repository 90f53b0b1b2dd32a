"""Slurm on the cluster: SchedMD's Slinky slurm-operator objects (``slinky.slurm.net/v1beta1``), built directly.

Sources (slurm-operator v1.2.1, commit 87313dac, read 2026-12-01; CRDs in blueprint/schemas/crds/slinky): the CRD
types (api/v1beta1), the operator's builders (internal/builder: what it adds to each pod and to slurm.conf), its
webhook (what it refuses), and docs/installation.md, docs/usage/*. The ``slurm`` Helm chart is not used: it only
turns values into these six kinds, creates the auth keys with ``lookup`` (which Pulumi's Helm support cannot keep
stable), and has no images without its defaults. What the operator does not do, this module does:

- the auth keys (slurm.key, jwt.key), which the operator reads and never creates;
- ``GresTypes=gpu`` and ``AccountingStorageTRES=gres/gpu`` (Slurm manages no GRES by default, slurm.conf(5));
- partitions over several NodeSets, with limits, and accounts, fair share and GPU limits (no CRD holds them): a Job
  loads them into slurmdbd with ``sacctmgr load`` (sacctmgr(1), "Flat file dump and load");
- the DCGM job mapping (prolog/epilog writing the job id per GPU, as Slinky's vendor files and Nebius's Soperator
  do), so GPU metrics carry the Slurm job id (dcgm-exporter ``hpc_job``);
- the GPU node gate: slurmd tolerates only the taints its nodes carry for it, never the readiness taints, so it starts
  on a node only once the node's check passed (objects/node_check.py), and a Slurm health check
  (``HealthCheckProgram``) drains a node whose GPUs, fabric or DCGM health go bad, as the health taint does for pods.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.catalog.charts import slurm_images
from components.kubernetes.objects.acceptance import PodFabric
from components.kubernetes.objects.common import (
    GPU_TOLERATION,
    QUEUED_TOLERATION,
    TEAM_CPU_TOLERATION,
    Manifest,
    meta,
)
from components.kubernetes.objects.node_check import HEALTH_INTERVAL_S, NodeCheck, node_checks
from components.kubernetes.objects.slurm_fabric import fabric_config_map, fabric_pod_parts
from components.kubernetes.objects.slurm_health import HEALTH_CHECK_DIR, HEALTH_CHECK_PROGRAM, health_check_script
from components.kubernetes.objects.slurm_pyxis import (
    PYXIS_LIB_DIRS,
    importer_config_map,
    importer_volume,
    plugstack_conf,
)
from components.kubernetes.objects.storage import SHARED_FS_CLAIM, static_volume
from components.kubernetes.objects.tenancy import namespace
from components.kubernetes.quotas import GpuPool
from components.kubernetes.reserved import MIB, allocatable_cpu, allocatable_memory
from components.spec import (
    GPU_TAINT_KEY,
    HEALTH_TAINT_KEY,
    READINESS_TAINT_KEY,
    TEAM_CPU_TAINT_KEY,
    ClusterSpec,
    TeamSpec,
)
from components.spec.decisions import (
    cloud_node_groups,
    dedicated_cpu_groups,
    instance_catalog,
    slurm_partition_teams,
)
from components.spec.slurm import SlurmPartitionSpec, SlurmSpec

API = "slinky.slurm.net/v1beta1"
SLURM_NAMESPACE = "slurm"
SLINKY_NAMESPACE = "slinky"  # the operator's own (slurm-operator docs/installation.md: --namespace=slinky)
CONTROLLER = "slurm"
ACCOUNTING = "slurm"
RESTAPI = "slurm"
LOGINSET = "login"
SLURM_KEY_SECRET = "slurm-auth-slurm"
JWT_KEY_SECRET = "slurm-auth-jwt"
DB_SECRET = "slurm-db"
SHARED_MOUNT = "/shared"
SCRATCH_MOUNT = "/scratch"
# Slurm users' homes: a directory of the shared filesystem, mounted at /home in the login and slurmd pods, so a job
# submitted from ~ writes where the user reads. A dot name: no team (a DNS label) can have it, where teams' directories
# sit at the filesystem's root (GKE Managed Lustre). It is outside the directory FSx links to the checkpoint bucket,
# so homes are not exported. Each Slurm user's home is made by the login pods (home_hook) with the UID and GID the
# directory gives them, which slurmd resolves the same way (sssd on login, nss_slurm from the job's credential).
HOME_MOUNT = "/home"
HOME_DIR = ".home"
# Where the driver mounts a subdirectory (FSx), the slurm namespace claims the whole filesystem under this name and
# mounts the team root and the homes from it with subPath: one volume, because two volumes of one filesystem (two
# PersistentVolumes with the same volumeHandle) in one pod never mount (kubernetes/kubernetes#132921; the CSI drivers'
# maintainers: "avoid using duplicated VolumeHandle in two PVs"). Elsewhere the shared-fs claim is already the whole
# filesystem.
SLURM_FS_CLAIM = "slurm-fs"
# enroot's per-user paths (container layers, unpacked roots, runtime state, temporary files) on the node's scratch
# instead of under $HOME (enroot's defaults, ${XDG_CACHE_HOME}/enroot and ${XDG_DATA_HOME}/enroot, would put every
# image on the shared filesystem): a drop-in enroot reads after /etc/enroot/enroot.conf (NVIDIA/enroot v4.1.2
# enroot.in config::init, "${file}.d/*.conf"; values are expanded, and the three paths made with umask 077).
ENROOT_CONF_DIR = "/etc/enroot/enroot.conf.d"
ENROOT_CONFIG_MAP = "slurm-enroot"
ENROOT_CONF = "\n".join([
    "# Generated by components/kubernetes/objects/slurm.py: enroot's paths per user on node-local scratch.",
    f"ENROOT_RUNTIME_PATH {SCRATCH_MOUNT}/enroot-runtime-$(id -u)",
    f"ENROOT_CACHE_PATH {SCRATCH_MOUNT}/enroot-cache-$(id -u)",
    f"ENROOT_DATA_PATH {SCRATCH_MOUNT}/enroot-data-$(id -u)",
    f"ENROOT_TEMP_PATH {SCRATCH_MOUNT}",
]) + "\n"
# dcgm-exporter's HPC job mapping directory as the GPU Operator (25.10.1+) mounts it on the host
# (dcgmExporter.hpcJobMapping.directory default; Slinky helm/slurm/_vendor/nvidia/dcgm).
JOB_MAPPING_DIR = "/var/lib/dcgm-exporter/job-mapping"
SCHEDULER_LABEL = "gpu-cluster/scheduler"
# slurmctld serves its metrics on its port (MetricsType=metrics/openmetrics, Slurm 25.11+ doc/html/metrics.shtml);
# the jobs-users-accts endpoint is left out: one series per user and account, unbounded.
METRICS_PATHS = ("/metrics/jobs", "/metrics/nodes", "/metrics/partitions", "/metrics/scheduler")
# What the DaemonSet controller adds to a daemon pod so that a node that is briefly not ready or unreachable does not
# evict it (Kubernetes "DaemonSet", Taints and tolerations). Slinky's NodeSet controller builds its pods itself, adding
# only its own worker toleration (slurm-operator v1.2.1 internal/builder/workerbuilder/worker_app.go): without these,
# slurmd and its jobs would be evicted 300 s after its node stopped answering (DefaultTolerationSeconds).
NODE_LOSS_TOLERATIONS = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
                         {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}]
# The taints slurmd must never tolerate: the node's check has not passed, or its health is bad (objects/node_check.py).
GATE_TAINTS = (READINESS_TAINT_KEY, HEALTH_TAINT_KEY)


@dataclass(frozen=True)
class SlurmImages:
    """The pinned images of one Slurm release (components/catalog/charts.yaml ``slurm``)."""

    slurmctld: str
    slurmd: str
    slurmdbd: str
    slurmrestd: str
    login: str
    sidecar: str  # the operator's logfile/initconf sidecars: a shell


@dataclass(frozen=True)
class SlurmDatabase:
    """Where slurmdbd's MySQL is (the cloud's managed database): host (a pulumi Input in the program), port, name,
    user; the password is in the ``slurm-db`` Secret the platform writes."""

    host: Any
    port: int = 3306
    database: str = "slurm_acct_db"
    username: str = "slurm"


@dataclass(frozen=True)
class SlurmNodePool:
    """A node group Slurm runs on, as a NodeSet needs it: a GPU group, or a CPU group (``pool.gpus_per_node`` 0) of a
    CPU-only partition."""

    pool: GpuPool
    node_selector: Mapping[str, str]  # the label that picks the group's nodes
    gpu_type: str | None  # Slurm's GRES type name of the GPU (gres.conf AutoDetect's), None: count only
    fabric: Mapping[str, int] = field(default_factory=dict)  # extended resources of the fabric (vpc.amazonaws.com/efa)
    taints: Sequence[Manifest] = ()  # the group's own taints from the stack (key, value, effect)
    # A GKE GPUDirect pool's pod shape (the GPU networks, TCPXO's receive-datapath sidecar, host paths, NCCL's
    # environment), as the acceptance pods reach the fabric (components/gcp/cloud.py gpudirect_pod_fabric)
    pod_fabric: PodFabric | None = None


@dataclass(frozen=True)
class SlurmCluster:
    """Everything the Slurm objects are built from (no cloud types)."""

    name: str  # the Slurm ClusterName (the stack's cluster name)
    spec: SlurmSpec
    teams: Sequence[TeamSpec]
    pools: Sequence[SlurmNodePool]
    images: SlurmImages
    labels: Mapping[str, str]  # billing labels: every Slurm pod carries them
    storage_class: str
    system_selector: Mapping[str, str]  # where slurmctld, slurmdbd, slurmrestd and login run (the system nodes)
    database: SlurmDatabase | None
    login_service: Mapping[str, Any]  # the LoginSet Service's metadata annotations and spec (an internal LB)
    shared_filesystem: bool  # a shared-fs claim exists in the slurm namespace
    # The claim of the whole shared filesystem in the slurm namespace (slurm_shared_fs) and the team root in it
    # (mounted at /shared; the homes at /home are HOME_DIR)
    fs_claim: str = SHARED_FS_CLAIM
    team_root: str = ""
    job_mapping: bool = True  # the DCGM exporter reads JOB_MAPPING_DIR (GPU Operator clusters)
    kueue_pools: Sequence[GpuPool] = ()  # the stack's other GPU pools: a team's budget is split between the two
    allowed_registries: Sequence[str] = ()  # pyxis imports only from these (platform.allowedRegistries)
    node_arch: str | None = None  # the one architecture of slurmd's and the login pods' nodes (None: mixed)

    @property
    def pod_labels(self) -> dict[str, str]:
        return {**self.labels, SCHEDULER_LABEL: "slurm"}


def slurm_operator_values() -> Manifest:
    """The slurm-operator chart's values: CRDs from their own release, the operator and its webhook watching only the
    slurm namespace (its pods/binding webhook would otherwise see every pod binding of the cluster), and the webhook's
    certificate from the chart itself (cert-manager is not installed here; certManager.enabled=false makes the chart
    generate its CA, slurm-operator docs/installation.md "Without cert-manager")."""
    return {
        "crds": {"enabled": False},
        "operator": {"namespaces": SLURM_NAMESPACE},
        "webhook": {"namespaces": SLURM_NAMESPACE},
        "certManager": {"enabled": False},
    }


def slurm_fs_claim(fs: Any) -> str:
    """The name of the slurm namespace's claim of the whole filesystem (:data:`SLURM_FS_CLAIM` where the driver mounts
    subdirectories, else ``shared-fs``, as before homes were added: the same volume, not replaced)."""
    return SLURM_FS_CLAIM if fs.scoped else SHARED_FS_CLAIM


def slurm_shared_fs(fs: Any, labels: Mapping[str, str]) -> tuple[Manifest, Manifest]:
    """The whole shared filesystem, claimed in the slurm namespace (:func:`slurm_fs_claim`), which Slurm's pods mount
    twice: the team root at /shared (every team's directory, root:<team gid>, mode 2770, made by the platform's Job,
    so a Slurm job reaches its team's directory by the user's group, as a team pod does by its supplementalGroups; on
    AWS the directory is linked to the checkpoint bucket, so checkpoints written there reach <bucket>/<team>/ as a
    pod's do) and the homes at /home (:data:`HOME_DIR`)."""
    base = "fs.slurm" if fs.scoped else "shared-fs.slurm"
    return static_volume(base, fs, None, SLURM_NAMESPACE, slurm_fs_claim(fs), labels)


def slurm_cluster(spec: ClusterSpec, pools: Sequence[GpuPool], *, node_label: str, fabric_resource: str | None,
                  storage_class: str, login_service: Mapping[str, Any], database_host: Any | None, shared: bool,
                  job_mapping: bool, fs: Any | None = None,
                  pod_fabrics: Mapping[str, PodFabric] | None = None) -> SlurmCluster | None:
    """The Slurm objects' inputs from the stack and its GPU pools (all of them: Slurm's own and Kueue's, whose split
    the budgets need), as a cloud describes its nodes: the label that names a node's group, the fabric's extended
    resource (None: none), the StorageClass of slurmctld's state, the login Service, and whether the DCGM exporter
    reads the job mapping; ``pod_fabrics`` the pod shape of each GKE GPUDirect pool. None without scheduler.slurm."""
    slurm = spec.scheduler.slurm
    if slurm is None:
        return None
    by_name = {p.name: p for p in pools}
    groups = {g.name: g for g in (spec.aws_spec() if spec.cloud == "aws" else spec.gcp_spec()).node_groups}
    node_pools = [SlurmNodePool(pool=by_name[n], node_selector={node_label: n}, gpu_type=None,
                                fabric={fabric_resource: by_name[n].fabric_per_node}
                                if fabric_resource and by_name[n].fabric_per_node else {},
                                taints=[{"key": t.key, "value": t.value, "effect": t.effect}
                                        for t in (groups[n].taints if n in groups else [])],
                                pod_fabric=(pod_fabrics or {}).get(n))
                  for n in slurm.node_groups if n in by_name]
    return SlurmCluster(
        name=spec.name, spec=slurm, teams=list(spec.teams), pools=node_pools, images=SlurmImages(**slurm_images()),
        kueue_pools=[p for p in pools if p.name not in slurm.node_groups], labels=spec.billing_labels,
        storage_class=storage_class, system_selector={},
        database=SlurmDatabase(host=database_host) if database_host is not None else None,
        login_service=login_service, shared_filesystem=shared, job_mapping=job_mapping,
        fs_claim=slurm_fs_claim(fs) if fs is not None else SHARED_FS_CLAIM,
        team_root=fs.team_root.strip("/") if fs is not None else "",
        allowed_registries=list(spec.platform.allowed_registries), node_arch=slurm_node_arch(spec))


def slurm_node_arch(spec: ClusterSpec) -> str | None:
    """The architecture of every node that reads plugstack.conf: Slurm's groups (slurmd) and the system groups (the
    login pods), or None when they differ. GCP's catalog lists only x86_64 machine types (it has no arch field)."""
    catalog = instance_catalog(spec)
    slurm = spec.scheduler.slurm
    owned = set(slurm.node_groups) if slurm is not None else set()
    dedicated = dedicated_cpu_groups(spec)
    archs = set()
    for group in cloud_node_groups(spec):
        facts = catalog.get(group.instance_type)
        if facts is None:
            continue
        if group.name in owned or (not facts.gpu_count and group.name not in dedicated):
            archs.add(str(getattr(facts, "arch", "x86_64")))
    return archs.pop() if len(archs) == 1 else None


def slurm_namespace(labels: Mapping[str, str]) -> Manifest:
    """The slurm namespace: privileged (slurmd runs privileged with BPF, NET_ADMIN, SYS_ADMIN: the operator's
    worker builder), not a tenant namespace (Kueue manages pods and StatefulSets in tenant namespaces, and would
    gate slurmd and slurmctld)."""
    ns = namespace(SLURM_NAMESPACE, {**labels, SCHEDULER_LABEL: "slurm"}, "privileged")
    ns["metadata"]["labels"]["gpu-cluster/pod-security-reason"] = "slurmd"
    return ns


def _ref(name: str, key: str) -> dict[str, str]:
    return {"name": name, "key": key}


def _keys() -> dict[str, Any]:
    return {"slurmKeyRef": _ref(SLURM_KEY_SECRET, "slurm.key"), "jwtKeyRef": _ref(JWT_KEY_SECRET, "jwt.key")}


def _pod(c: SlurmCluster, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {"metadata": {"labels": c.pod_labels}, "spec": dict(spec)}


def _system_pod(c: SlurmCluster) -> dict[str, Any]:
    return _pod(c, {"nodeSelector": dict(c.system_selector)})


def partition_line(c: SlurmCluster, part: SlurmPartitionSpec) -> str:
    """A ``PartitionName=`` line of slurm.conf with its limits (slurm.conf(5), "Partition configuration")."""
    pools = {p.pool.name: p.pool for p in c.pools}
    nodes = sum(pools[g].max_nodes for g in part.node_groups if g in pools)
    teams = slurm_partition_teams(c.teams, part)
    fields = [
        f"PartitionName={part.name}",
        f"Nodes={','.join(part.node_groups)}",  # NodeSet names (each NodeSet is a Slurm NodeSet of that name)
        f"Default={'YES' if part.default else 'NO'}",
        f"MaxTime={_duration(part.max_time_hours * 60)}",
        f"DefaultTime={_duration(part.default_time_minutes)}",
        f"MaxNodes={part.max_nodes_per_job or max(nodes, 1)}",
        # root: the administrators' account (slurmdbd's root association, no team's limits), for the acceptance run
        # over every node of the partition, which no team's GPU limit allows.
        f"AllowAccounts={','.join([*teams, 'root'])}",
        *job_defaults(c, part),
        *billing_weights(c, part),
        "State=UP",
    ]
    return " ".join(fields)


def partition_pools(c: SlurmCluster, part: SlurmPartitionSpec) -> list[GpuPool]:
    """The pools of the partition's node groups."""
    return [p.pool for p in c.pools if p.pool.name in part.node_groups]


def gpu_shares(c: SlurmCluster, part: SlurmPartitionSpec) -> tuple[int | None, int | None]:
    """(MiB of memory, CPUs) one GPU's share of a node is, on the partition's smallest share among its groups: what a
    node offers pods (components/kubernetes/reserved.py: its memory less the kubelet's reservation and slurmd's
    hugepages; its vCPUs less the kubelet's) over its GPUs. None where a group's shape is not in the catalog."""
    pools = [p for p in partition_pools(c, part) if p.gpus_per_node]
    mems, cpus = [], []
    for pool in pools:
        if pool.memory_gib_per_node:
            offered = allocatable_memory(pool.memory_gib_per_node, c.spec.hugepages_2mi_gib)
            mems.append(int(offered / MIB) // pool.gpus_per_node)
        if pool.vcpu_per_node:
            share = int(allocatable_cpu(pool.vcpu_per_node)) // pool.gpus_per_node
            # With CR_Core_Memory Slurm allocates whole cores and counts their threads as CPUs (slurm.conf(5)
            # SelectTypeParameters CR_Core: "Cores are consumable"): on a node of two threads per core (an even vCPU
            # count: every GPU instance type in the catalogs) an odd share is rounded up to the next core, so the
            # share is kept even and all GPUs' defaults still fit
            cpus.append(share - share % 2 if pool.vcpu_per_node % 2 == 0 else share)
    return (min(mems) if mems and len(mems) == len(pools) else None,
            min(cpus) if cpus and len(cpus) == len(pools) else None)


def cpu_memory_share(c: SlurmCluster, part: SlurmPartitionSpec) -> int | None:
    """MiB of memory per CPU on a CPU-only partition's smallest share among its groups: what a node offers pods
    (components/kubernetes/reserved.py) over every CPU Slurm counts on it (slurmd has no CPU limit and sees all the
    node's vCPUs), so a job holding a whole node by default stays within what the kubelet offers; None where a shape
    is not in the catalog."""
    pools = partition_pools(c, part)
    # a CPU group reserves no hugepages (decisions.slurm_hugepages)
    shares = [int(allocatable_memory(p.memory_gib_per_node, 0) / MIB) // p.vcpu_per_node
              for p in pools if p.memory_gib_per_node and p.vcpu_per_node]
    return min(shares) if shares and len(shares) == len(pools) else None


def billing_weights(c: SlurmCluster, part: SlurmPartitionSpec) -> list[str]:
    """What a job's usage counts for fair share (slurm.conf(5) TRESBillingWeights; without it, allocated CPUs): on a
    GPU partition its GPUs, so accounts share GPUs as their quotas do; on a CPU-only partition its CPUs at their price
    relative to the dearest GPU-hour of Slurm's groups (a CPU-hour of prep work costs the account's priority what it
    costs in money), and nothing where a price is unknown (the CPU default would make one CPU weigh as one GPU)."""
    if not cpu_only(c, part):
        return ["TRESBillingWeights=GRES/gpu=1.0"]
    gpu_hours = [p.pool.gpu_unit_hour_usd for p in c.pools if p.pool.gpus_per_node and p.pool.gpu_unit_hour_usd]
    cpu_hours = [p.node_hour_usd / p.vcpu_per_node for p in partition_pools(c, part)
                 if p.node_hour_usd and p.vcpu_per_node]
    if not gpu_hours or len(cpu_hours) != len(part.node_groups):
        return ["TRESBillingWeights=CPU=0"]
    return [f"TRESBillingWeights=CPU={max(cpu_hours) / max(gpu_hours):.4f}"]


def cpu_only(c: SlurmCluster, part: SlurmPartitionSpec) -> bool:
    """Whether every node group of the partition is a CPU group (the rules refuse a partition that mixes them)."""
    pools = partition_pools(c, part)
    return bool(pools) and not any(p.gpus_per_node for p in pools)


def job_defaults(c: SlurmCluster, part: SlurmPartitionSpec) -> list[str]:
    """The partition's defaults for a job that does not say (slurm.conf(5), partition options). On a CPU-only
    partition, ``DefMemPerCPU`` ("Default real memory size available per usable allocated CPU in megabytes"): one CPU's
    share of the smallest node's memory (:func:`cpu_memory_share`), so a job without ``--mem`` holds memory in
    proportion to its CPUs, not the whole node. Elsewhere, per GPU:

    - ``DefMemPerGPU``: "Default real memory size available per allocated GPU in megabytes"; memory is a consumable
      (``SelectTypeParameters=CR_Core_Memory``) whose default is the whole node (DefMemPerNode UNLIMITED), so without
      it a 1-GPU job without ``--mem`` holds all of a node's memory and its other GPUs sit idle;
    - ``DefCpuPerGPU``: "Default count of CPUs allocated per allocated GPU. This value is used only if the job didn't
      specify --cpus-per-task and --cpus-per-gpu".

    Each is one GPU's share of the smallest node of the partition (:func:`gpu_shares`), so a job asking every GPU of a
    node with the defaults fits on it. DefMemPerCPU and DefMemPerGPU are mutually exclusive (slurm.conf(5)), hence
    one or the other per partition."""
    if cpu_only(c, part):
        share = cpu_memory_share(c, part)
        return [f"DefMemPerCPU={share}"] if share else []
    mem, cpu = gpu_shares(c, part)
    return [*([f"DefMemPerGPU={mem}"] if mem else []), *([f"DefCpuPerGPU={cpu}"] if cpu else [])]


def _duration(minutes: int) -> str:
    """Slurm's days-hours:minutes:seconds."""
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    return f"{days}-{hours:02d}:{mins:02d}:00"


def controller_extra_conf(c: SlurmCluster) -> str:
    """What slurm.conf needs beyond the operator's own lines: GPUs as GRES tracked by accounting, limits and fair
    share enforced, cgroup task containment, PMIx for MPI, and the partitions."""
    lines = [
        "GresTypes=gpu",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        # as the slurm chart's extraConfMap suggests (slurm-operator v1.2.1 helm/slurm/values.yaml): cgroup process
        # tracking and task containment (cgroup.conf is the operator's: cgroup/v2, IgnoreSystemd), and a node that
        # was down returns to service when its slurmd registers again (a replaced node joins by itself)
        "ProctrackType=proctrack/cgroup",
        "TaskPlugin=task/affinity,task/cgroup",
        "ReturnToService=2",
        # slurm.conf(5) PrologFlags=Contain: "At job allocation time, use the ProcTrack plugin to create a job container
        # on all allocated compute nodes" (implies Alloc): every process of the job, an ssh session adopted into it
        # too, is in the job's cgroup; as cluster-toolkit's Slurm blueprints set it (long-prolog-slurm.conf.tpl)
        "PrologFlags=Contain",
        # slurm.conf(5) EnforcePartLimits=ALL: "jobs which exceed a partition's size and/or time limits will be rejected
        # at submission time" for every partition requested (AWS ParallelCluster's slurm.conf sets ALL): a job that
        # cannot ever run is refused by sbatch, not left pending for ever
        "EnforcePartLimits=ALL",
        # Slurm FAQ "Why are jobs not getting the appropriate memory limit?" (faq.html#memlock): not propagating the
        # submitting shell's MEMLOCK limit, so a multi-node EFA/RDMA job gets slurmd's (the container's), not the
        # login pod's; PropagateResourceLimitsExcept in slurm.conf(5)
        "PropagateResourceLimitsExcept=MEMLOCK",
        # slurm.conf(5) LaunchParameters=enable_nss_slurm / nss_slurm(8): slurmstepd answers the job's passwd and group
        # lookups from the job's credential (the slurmd images list "slurm" first in nsswitch.conf: SlinkyProject/
        # containers schedmd/slurm/*/Dockerfile), so a job resolves its user on nodes that run no sssd
        "LaunchParameters=enable_nss_slurm",
        # the GPU health check (health_check_script), at the Kubernetes health loop's interval, on nodes in any state:
        # a drained node keeps its running jobs and takes no new one (slurm.conf(5) HealthCheckProgram,
        # HealthCheckInterval, HealthCheckNodeState; the program also runs when slurmd starts, before it registers)
        f"HealthCheckProgram={HEALTH_CHECK_PROGRAM}",
        f"HealthCheckInterval={HEALTH_INTERVAL_S}",
        "HealthCheckNodeState=ANY",
        "MpiDefault=pmix",
        "PriorityType=priority/multifactor",
        "PriorityWeightFairshare=10000",
        "PriorityWeightAge=1000",
        "PriorityWeightJobSize=0",
    ]
    # A budget as GrpTRESMins is a hard monthly limit only if usage is not decayed and is reset each month
    # (slurm.conf(5) PriorityUsageResetPeriod: "used if you want to enforce hard limits of time usage per
    # association"; with PriorityDecayHalfLife=0 it is the only reset); fair share then reads the month's usage.
    lines += (["PriorityDecayHalfLife=0", "PriorityUsageResetPeriod=MONTHLY"] if enforces_budgets(c)
              else ["PriorityDecayHalfLife=7-0"])
    if c.database is not None:
        lines += ["AccountingStorageTRES=gres/gpu",
                  "AccountingStorageEnforce=associations,limits,qos,safe",
                  "JobAcctGatherType=jobacct_gather/cgroup"]
    lines += [partition_line(c, p) for p in c.spec.partitions]
    return "\n".join(lines) + "\n"


def prolog_script() -> str:
    """Prolog: the job id in one file per allocated GPU, which dcgm-exporter turns into the hpc_job label."""
    return f"""#!/usr/bin/env bash
# Map the job's GPUs to its id for dcgm-exporter's HPC job mapping (one file per GPU index, the job id inside).
set -euo pipefail
dir={JOB_MAPPING_DIR}
[ -n "${{SLURM_JOB_GPUS:-}}" ] || exit 0
mkdir -p "$dir"
for gpu in ${{SLURM_JOB_GPUS//,/ }}; do
  printf '%s\\n' "$SLURM_JOB_ID" > "$dir/$gpu"
done
"""


def epilog_script() -> str:
    """Epilog: remove the job's GPU files (a GPU with no file is idle, not another job's)."""
    return f"""#!/usr/bin/env bash
set -euo pipefail
dir={JOB_MAPPING_DIR}
[ -n "${{SLURM_JOB_GPUS:-}}" ] || exit 0
for gpu in ${{SLURM_JOB_GPUS//,/ }}; do
  if [ "$(cat "$dir/$gpu" 2>/dev/null)" = "$SLURM_JOB_ID" ]; then rm -f "$dir/$gpu"; fi
done
"""


def group_check(p: SlurmNodePool) -> NodeCheck:
    """What a node of the group must show, as the Kubernetes node check judges it (GPU count, the model word, the
    fabric's kind and devices); the NVLink figure is not the health check's."""
    (check,) = node_checks([p.pool], {}, 1.0, {})
    return check


def health_check_config_map(c: SlurmCluster, p: SlurmNodePool) -> Manifest:
    """The group's health check as a ConfigMap its NodeSet mounts at :data:`HEALTH_CHECK_DIR`."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(f"slurm-health-{p.pool.name}", SLURM_NAMESPACE,
                                                                       c.labels),
            "data": {"gpu-health.sh": health_check_script(group_check(p))}}


def cgroup_conf() -> str:
    """cgroup.conf (cgroup.conf(5)): the operator writes its own only when no ConfigMap holds one (slurm-operator v1.2.1
    internal/builder/controllerbuilder), with ``CgroupPlugin=cgroup/v2`` and ``IgnoreSystemd=yes`` (slurmd runs in a
    container, without systemd), so this one repeats them; and confines each job to what it was allocated:

    - ``ConstrainCores``: "constrain allowed cores to the subset of allocated resources" (cpuset);
    - ``ConstrainDevices``: "constrain the job's allowed devices based on GRES allocated resources": a job on a shared
      node sees only its own GPUs (slurmd has the BPF capability cgroup v2's device control needs);
    - ``ConstrainRAMSpace``: "constrain the job's RAM usage by setting the memory soft limit to the allocated memory
      and the hard limit to the allocated memory * AllowedRAMSpace" (with ``SelectTypeParameters=CR_Core_Memory``).
    """
    return "\n".join(["CgroupPlugin=cgroup/v2", "IgnoreSystemd=yes", "ConstrainCores=yes", "ConstrainDevices=yes",
                      "ConstrainRAMSpace=yes"]) + "\n"


def config_maps(c: SlurmCluster) -> list[Manifest]:
    """The prolog and epilog scripts (DCGM job mapping) and the extra config files (pyxis's SPANK plugin,
    cgroup.conf)."""
    out: list[Manifest] = [{
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("slurm-config-files", SLURM_NAMESPACE, c.labels),
        # pyxis (in the -pyxis images) registers through plugstack.conf; a glob, so slurmctld starts without it
        # (slurm-operator docs/usage/pyxis.md).
        "data": {"plugstack.conf": plugstack_conf(c.node_arch if importer(c) else None), "cgroup.conf": cgroup_conf()},
    }]
    if importer(c):
        assert c.node_arch is not None  # importer(c): one architecture
        out.append(importer_config_map(c.allowed_registries, c.node_arch, SLURM_NAMESPACE, c.labels))
    if c.job_mapping:
        out += [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("slurm-prolog", SLURM_NAMESPACE, c.labels),
             "data": {"prolog-90-dcgm-job-mapping.sh": prolog_script()}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("slurm-epilog", SLURM_NAMESPACE, c.labels),
             "data": {"epilog-90-dcgm-job-mapping.sh": epilog_script()}},
        ]
    out.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(ENROOT_CONFIG_MAP, SLURM_NAMESPACE, c.labels),
                "data": {"90-gpu-cluster.conf": ENROOT_CONF}})
    out += [health_check_config_map(c, p) for p in c.pools]
    # on GKE GPUDirect pools, each container gets the fabric through an enroot hook (objects/slurm_fabric.py)
    out += [fabric_config_map(p.pool.name, p.pod_fabric, SLURM_NAMESPACE, c.labels)
            for p in c.pools if p.pod_fabric is not None]
    return out


def importer(c: SlurmCluster) -> bool:
    """Whether pyxis imports through the registry importer (objects/slurm_pyxis.py): the plugin's path is known."""
    return bool(c.allowed_registries) and c.node_arch in PYXIS_LIB_DIRS


def accounting(c: SlurmCluster) -> Manifest | None:
    """slurmdbd on the managed database (storageConfig; the password from the slurm-db Secret)."""
    if c.database is None:
        return None
    db = c.database
    return {
        "apiVersion": API, "kind": "Accounting", "metadata": meta(ACCOUNTING, SLURM_NAMESPACE, c.labels),
        "spec": {
            **_keys(),
            "slurmdbd": {"image": c.images.slurmdbd,
                         "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}},
            "storageConfig": {"host": db.host, "port": db.port, "database": db.database, "username": db.username,
                              "passwordKeyRef": _ref(DB_SECRET, "password")},
            "template": _system_pod(c),
        },
    }


def controller(c: SlurmCluster) -> Manifest:
    """slurmctld: its state on an encrypted volume, the keys, accounting, metrics for Prometheus, the extra
    slurm.conf, prolog/epilog, on the system nodes."""
    spec: dict[str, Any] = {
        "clusterName": c.name,
        **_keys(),
        "slurmctld": {"image": c.images.slurmctld,
                      "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "4Gi"}}},
        "reconfigure": {"image": c.images.slurmctld},
        "logfile": {"image": c.images.sidecar},
        "persistence": {"enabled": True, "storageClassName": c.storage_class, "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "16Gi"}}},
        "extraConf": controller_extra_conf(c),
        "configFileRefs": [{"name": "slurm-config-files"}],
        "metrics": {"enabled": True, "serviceMonitor": {
            "enabled": True, "interval": "30s", "scrapeTimeout": "25s",
            "endpoints": [{"path": p} for p in METRICS_PATHS]}},
        "template": _system_pod(c),
    }
    if c.database is not None:
        spec["accountingRef"] = {"name": ACCOUNTING}
    if c.job_mapping:
        spec["prologScriptRefs"] = [{"name": "slurm-prolog"}]
        spec["epilogScriptRefs"] = [{"name": "slurm-epilog"}]
    return {"apiVersion": API, "kind": "Controller", "metadata": meta(CONTROLLER, SLURM_NAMESPACE, c.labels),
            "spec": spec}


def restapi(c: SlurmCluster) -> Manifest:
    """slurmrestd: the operator drains and removes nodes through it (its Slurm client is the RestApi's)."""
    return {
        "apiVersion": API, "kind": "RestApi", "metadata": meta(RESTAPI, SLURM_NAMESPACE, c.labels),
        "spec": {"controllerRef": {"name": CONTROLLER}, "replicas": 1,
                 "slurmrestd": {"image": c.images.slurmrestd,
                                "resources": {"requests": {"cpu": "250m", "memory": "512Mi"},
                                              "limits": {"memory": "1Gi"}}},
                 "template": _system_pod(c)},
    }


def _volumes(c: SlurmCluster) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    volumes: list[dict[str, Any]] = [{"name": "scratch", "emptyDir": {}}]
    mounts: list[dict[str, Any]] = [{"name": "scratch", "mountPath": SCRATCH_MOUNT}]
    if c.shared_filesystem:
        volumes.append({"name": "shared", "persistentVolumeClaim": {"claimName": c.fs_claim}})
        mounts.append({"name": "shared", "mountPath": SHARED_MOUNT, **({"subPath": c.team_root} if c.team_root
                                                                       else {})})
        mounts.append({"name": "shared", "mountPath": HOME_MOUNT, "subPath": HOME_DIR})
    if importer(c):  # pyxis's line and its registry importer, in slurmd and login pods (objects/slurm_pyxis.py)
        volume, mount = importer_volume()
        volumes.append(volume)
        mounts.append(mount)
    return volumes, mounts


def slurmd_tolerations(p: SlurmNodePool) -> list[Manifest]:
    """What slurmd tolerates on its group's nodes: the GPU taint, GKE's queued-provisioning taint on a flex-start pool,
    the group's own taints (the stack's ``taints``: a spot group's, if the stack gives it one; neither EKS managed node
    groups nor this program's GKE pools taint spot nodes themselves: components/bootstrap.py node_taints,
    components/gcp/gke.py), and a node briefly lost, as a DaemonSet's pod does. Never the readiness taints: slurmd
    holds every GPU of the node, so it must start only on a node whose check passed."""
    own = [{"key": t["key"], "operator": "Equal", "value": t["value"], "effect": t["effect"]} for t in p.taints
           if t["key"] not in (GPU_TAINT_KEY, TEAM_CPU_TAINT_KEY, *GATE_TAINTS)]
    # A CPU group of Slurm's carries the team-CPU taint instead of the GPU one (decisions.dedicated_cpu_groups)
    kind = GPU_TOLERATION if p.pool.gpus_per_node else TEAM_CPU_TOLERATION
    return [kind, *([QUEUED_TOLERATION] if p.pool.queued else []), *own, *NODE_LOSS_TOLERATIONS]


def nodeset(c: SlurmCluster, p: SlurmNodePool) -> Manifest:
    """One slurmd per node of the group (DaemonSet mode), holding the node's every GPU and fabric device, its GPUs
    as GRES (``Gres=gpu:<type>:<n>``), the group's name as its Slurm feature; scratch is the pod's emptyDir, which
    kubelet keeps on the node's RAID0 NVMe where the group has one."""
    gpus = p.pool.gpus_per_node * p.pool.gpu_units_per_gpu
    limits: dict[str, Any] = {**({"nvidia.com/gpu": gpus} if gpus else {}), **dict(p.fabric)}
    # A memory request makes slurmd's pod Burstable, not BestEffort (QoS counts only cpu and memory), so under memory
    # pressure the kubelet evicts it after BestEffort pods (Kubernetes "Node-pressure Eviction"); and Kubernetes
    # refuses hugepages without a cpu or memory request. No limit: Slurm's cgroups confine each job.
    requests: dict[str, Any] = {**limits, "memory": "1Gi"}
    if c.spec.hugepages_2mi_gib and gpus:  # Slurm's GPU groups reserve them (decisions.slurm_hugepages)
        limits["hugepages-2Mi"] = requests["hugepages-2Mi"] = f"{c.spec.hugepages_2mi_gib}Gi"
    gres = f"gpu:{p.gpu_type}:{p.pool.gpus_per_node}" if p.gpu_type else f"gpu:{p.pool.gpus_per_node}"
    volumes, mounts = _volumes(c)
    if c.job_mapping and gpus:
        volumes.append({"name": "job-mapping", "hostPath": {"path": JOB_MAPPING_DIR, "type": "DirectoryOrCreate"}})
        mounts.append({"name": "job-mapping", "mountPath": JOB_MAPPING_DIR})
    # 0555: slurmd runs the program as root (slurm.conf(5) HealthCheckProgram); nothing writes it
    volumes.append({"name": "health-check", "configMap": {"name": f"slurm-health-{p.pool.name}",
                                                          "defaultMode": 0o555}})
    mounts.append({"name": "health-check", "mountPath": HEALTH_CHECK_DIR, "readOnly": True})
    volumes.append({"name": "enroot-conf", "configMap": {"name": ENROOT_CONFIG_MAP}})
    mounts.append({"name": "enroot-conf", "mountPath": ENROOT_CONF_DIR, "readOnly": True})
    fabric = fabric_pod_parts(p.pool.name, p.pod_fabric)
    volumes += fabric["volumes"]
    mounts += fabric["mounts"]
    slurmd: dict[str, Any] = {"image": c.images.slurmd, "resources": {"requests": requests, "limits": limits},
                              "volumeMounts": mounts, **({"env": fabric["env"]} if fabric["env"] else {})}
    template = _pod(c, {
        "nodeSelector": dict(p.node_selector),
        # The group's nodes are Slurm's alone: slurmd tolerates their taints, except the readiness gate's.
        "tolerations": slurmd_tolerations(p),
        # Every user's enroot paths are made in /scratch (ENROOT_CONF): sticky, like /tmp, so no user can
        # remove or rename another's (an emptyDir is made 0777). On TCPXO the receive-datapath daemon follows, a
        # native sidecar that runs beside slurmd (the operator appends init containers by name).
        "initContainers": [{"name": "scratch-mode", "image": c.images.sidecar,
                            "command": ["chmod", "1777", SCRATCH_MOUNT],
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
                                          "limits": {"memory": "32Mi"}},
                            "volumeMounts": [{"name": "scratch", "mountPath": SCRATCH_MOUNT}]},
                           *fabric["sidecars"]],
        "volumes": volumes,
    })
    if fabric["annotations"]:
        template["metadata"]["annotations"] = fabric["annotations"]
    return {
        "apiVersion": API, "kind": "NodeSet", "metadata": meta(p.pool.name, SLURM_NAMESPACE, c.labels),
        "spec": {
            "controllerRef": {"name": CONTROLLER},
            "scalingMode": "DaemonSet",
            "pruneSlurmNodeRecords": "NodeNotFound",  # a node the group scaled away leaves Slurm too
            # a CPU node declares no GRES: Slurm allocates its jobs no GPU
            "extraConf": f"Gres={gres} Features={p.pool.instance_type}" if gpus
            else f"Features={p.pool.instance_type}",
            "slurmd": slurmd,
            "logfile": {"image": c.images.sidecar},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": template,
        },
    }


# sshd_config(5): keys from the directory through sssd (sss_ssh_authorizedkeys(1): "obtain OpenSSH authorized keys"
# from the user's sshPublicKey attribute; sssd.conf lists "ssh" in services), run as an unprivileged user; appended to
# the operator's sshd_config after its "Include /etc/ssh/sshd_config.d/*.conf" and "UsePAM yes" (slurm-operator v1.2.1
# internal/builder/loginbuilder/login_config.go), where sshd takes the first value it reads of each keyword.
SSS_AUTHORIZED_KEYS = "/usr/bin/sss_ssh_authorizedkeys"


def home_hook(users: Sequence[str]) -> Manifest:
    """The login container's postStart hook: each Slurm user's home (``scheduler.slurm.users``), made with the UID, GID
    and home directory the directory gives them (``getent passwd`` through the pod's sssd, waited for up to a minute)
    by ``mkhomedir_helper <user> 0077`` (linux-pam's helper, libpam-modules-bin: copies /etc/skel, mode 0700), once per
    pod start and never over an existing home. The login image's ``authselect select sssd with-mkhomedir`` is not
    relied on: authselect's with-mkhomedir needs oddjobd (authselect profiles/sssd/REQUIREMENTS), which the Ubuntu
    image does not run. It always exits 0 (a failing postStart hook kills the container); what it did is in the
    container's log."""
    names = " ".join(shlex.quote(u) for u in sorted(set(users)))
    first = shlex.quote(sorted(set(users))[0]) if users else "root"
    script = f"""homes() {{
  for i in $(seq 1 30); do timeout 5 getent passwd {first} >/dev/null && break; sleep 2; done
  for user in {names}; do
    if timeout 5 getent passwd "$user" >/dev/null; then
      /usr/sbin/mkhomedir_helper "$user" 0077 || echo "slurm-home: mkhomedir_helper failed for $user"
    else
      echo "slurm-home: $user is not in the directory (sssd): no home made"
    fi
  done
}}
homes >/proc/1/fd/1 2>&1 || homes >/dev/null 2>&1
exit 0
"""
    return {"postStart": {"exec": {"command": ["bash", "-c", script]}}}


def sshd_extra_config(password_login: bool) -> str:
    """What the login pods' sshd adds: SSH keys from the directory and, unless the stack allows passwords, no
    password or keyboard-interactive login (the generated config leaves OpenSSH's default, passwords on)."""
    lines = [f"AuthorizedKeysCommand {SSS_AUTHORIZED_KEYS}", "AuthorizedKeysCommandUser nobody",
             # only the directory's keys for users: a key file in a home on the shared filesystem is not a way in
             # (sshd_config(5) AuthorizedKeysFile "none"); root keeps the administrators' keys the operator mounts
             # at /root/.ssh/authorized_keys (rootSshAuthorizedKeys)
             "AuthorizedKeysFile none"]
    if not password_login:
        lines += ["PasswordAuthentication no", "KbdInteractiveAuthentication no"]
    # a Match block last: every keyword after it belongs to it (sshd_config(5) Match)
    lines += ["Match User root", "  AuthorizedKeysFile .ssh/authorized_keys"]
    return "\n".join(lines) + "\n"


def loginset(c: SlurmCluster) -> Manifest:
    """Login pods behind an internal load balancer, unprivileged, users and their SSH keys from your directory
    (sssd), the shared filesystem and the homes."""
    login = c.spec.login
    volumes, mounts = _volumes(c)
    spec: dict[str, Any] = {
        "controllerRef": {"name": CONTROLLER},
        "replicas": login.replicas,
        "sssdConfRef": _ref(login.sssd_conf_secret, "sssd.conf"),
        **({"rootSshAuthorizedKeys": "\n".join(login.root_authorized_keys) + "\n"} if login.root_authorized_keys
           else {}),
        **({"extraSshdConfig": sshd_extra_config(login.password_login)}),
        # Unprivileged: only running enroot on the login pod needs privileges (slurm-operator docs/usage/pyxis.md: "To
        # make enroot activity in the login container permissible, it requires securityContext.privileged=true");
        # srun/sbatch there only pass pyxis's options, and containers start in slurmd on the compute nodes. sshd's
        # privilege separation chroots: SYS_CHROOT, as the slurm chart's loginset example adds (helm/slurm/values.yaml)
        "login": {"image": c.images.login,
                  "securityContext": {"privileged": False, "capabilities": {"add": ["SYS_CHROOT"]}},
                  **({"lifecycle": home_hook([u for users in c.spec.users.values() for u in users])}
                     if c.shared_filesystem and c.spec.users else {}),
                  "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "4Gi"}},
                  "volumeMounts": mounts},
        "initconf": {"image": c.images.sidecar},
        "template": _pod(c, {"nodeSelector": dict(c.system_selector), "volumes": volumes}),
        "service": {"metadata": {"annotations": dict(c.login_service.get("annotations", {}))},
                    "spec": {"type": "LoadBalancer", **dict(c.login_service.get("spec", {})),
                             "loadBalancerSourceRanges": list(login.source_cidrs)}},
    }
    return {"apiVersion": API, "kind": "LoginSet", "metadata": meta(LOGINSET, SLURM_NAMESPACE, c.labels),
            "spec": spec}


def _capacity_usd(team: TeamSpec, pools: Mapping[str, GpuPool]) -> float:
    """What the team's quotas on ``pools`` cost an hour at full use (GPU units times their hour price; a pool without
    a price counts its GPUs at the dearest priced one, or 1)."""
    prices = [p.gpu_unit_hour_usd for p in pools.values() if p.gpu_unit_hour_usd]
    fallback = max(prices) if prices else 1.0
    return sum(q.gpus * (pools[q.node_group].gpu_unit_hour_usd or fallback) for q in team.quotas
               if q.node_group in pools)


def slurm_budget_share(team: TeamSpec, kueue_pools: Sequence[GpuPool], slurm_pools: Sequence[GpuPool]) -> float:
    """The part of a team's monthly budget that its Slurm account gets (its GrpTRESMins); the rest is its Kueue
    spend alert's. Split as its quotas' hourly cost on each scheduler's groups, so a budget is not counted twice."""
    slurm = _capacity_usd(team, {p.name: p for p in slurm_pools})
    kueue = _capacity_usd(team, {p.name: p for p in kueue_pools})
    return slurm / (slurm + kueue) if slurm + kueue else 0.0


def budget_gpu_minutes(c: SlurmCluster, team: TeamSpec) -> int | None:
    """The team's monthly budget as GPU-minutes on its Slurm node groups (GrpTRESMins gres/gpu), at the dearest
    GPU-hour among them (the preview's prices), so the limit never lets it spend more; None without a budget, a
    Slurm quota or a price."""
    if team.budget is None:
        return None
    pools = {p.pool.name: p.pool for p in c.pools}
    prices = [pools[q.node_group].gpu_unit_hour_usd for q in team.quotas if q.node_group in pools and q.gpus > 0]
    if not prices or any(p is None for p in prices):
        return None
    dearest = max(p for p in prices if p is not None)
    share = slurm_budget_share(team, c.kueue_pools, [p.pool for p in c.pools])
    return int(float(team.budget.monthly_usd) * share / dearest * 60)


def enforces_budgets(c: SlurmCluster) -> bool:
    """Whether any account carries a GPU-minutes budget (then usage resets monthly instead of decaying)."""
    return c.database is not None and any(budget_gpu_minutes(c, t) for t in c.teams)


def accounts_file(c: SlurmCluster) -> str:
    """sacctmgr's flat file: one account per team with a Slurm quota, its fair share and GPU limit (GrpTRES) equal
    to that quota, and its users; Kueue's quota of the same team is on other node groups, so its GPUs are counted
    once across both schedulers."""
    slurm_groups = {p.pool.name for p in c.pools}
    # a team a partition lists (a CPU-only partition's, which no GPU quota reaches) needs its account to submit there
    listed = {t for part in c.spec.partitions for t in (part.teams or [])}
    lines = [f"Cluster - '{c.name}':Fairshare=1", "Parent - 'root'",
             # root administers and runs the acceptance test under the root account (every partition allows it)
             "User - 'root':DefaultAccount='root':AdminLevel='Administrator':Fairshare=1"]
    for team in sorted(c.teams, key=lambda t: t.name):
        gpus = sum(q.gpus for q in team.quotas if q.node_group in slurm_groups)
        users = c.spec.users.get(team.name, [])
        if not gpus and not users and team.name not in listed:
            continue
        limit = f":GrpTRES=gres/gpu={gpus}"
        minutes = budget_gpu_minutes(c, team)
        budget = f":GrpTRESMins=gres/gpu={minutes}" if minutes else ""
        lines.append(f"Account - '{team.name}':Description='team {team.name}':Organization='{team.cost_center}'"
                     f":Fairshare={max(gpus, 1)}{limit}{budget}")
    for team in sorted(c.teams, key=lambda t: t.name):
        users = c.spec.users.get(team.name, [])
        if not users:
            continue
        lines.append(f"Parent - '{team.name}'")
        lines += [f"User - '{u}':DefaultAccount='{team.name}':Fairshare=1" for u in users]
    return "\n".join(lines) + "\n"


def _users_by_parent(content: str) -> list[tuple[str, str]]:
    """(account, its ``User -`` line) of a sacctmgr flat file."""
    parent, out = "root", []
    for line in content.splitlines():
        if line.startswith("Parent - "):
            parent = line.split("'")[1]
        elif line.startswith("User - "):
            out.append((parent, line))
    return out


def accounts_job(c: SlurmCluster) -> list[Manifest]:
    """A Job that loads the accounts into slurmdbd (``sacctmgr -i load``), named after the file's digest so a change
    runs a new Job. It talks to slurmdbd directly, as root (an administrator in slurmdbd), signing with slurm.key."""
    if c.database is None:
        return []
    content = accounts_file(c)
    digest = hashlib.sha256(content.encode()).hexdigest()[:8]
    conf = "\n".join([
        f"ClusterName={c.name}",
        f"SlurmctldHost={CONTROLLER}-controller-0({CONTROLLER}-controller)",
        "AuthType=auth/slurm", "CredType=cred/slurm",
        "AccountingStorageType=accounting_storage/slurmdbd",
        f"AccountingStorageHost={ACCOUNTING}-accounting", "AccountingStoragePort=6819",
    ]) + "\n"
    accounts = sorted({line.split("'")[1] for line in content.splitlines() if line.startswith("Account - ")})
    pairs = sorted(parent + "|" + line.split("'")[1] for parent, line in _users_by_parent(content))
    cm: Manifest = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": meta(f"slurm-accounts-{digest}", SLURM_NAMESPACE, c.labels),
                    "data": {"accounts.cfg": content, "slurm.conf": conf, "accounts.txt": "\n".join(accounts) + "\n",
                             "associations.txt": "\n".join(pairs) + "\n"}}
    # slurm.conf and slurm.key where Slurm looks for them (/etc/slurm; auth/slurm reads the key beside slurm.conf);
    # slurmdbd's own error shown while it is not up yet; then the load (adds and modifies) and the removals it does not
    # do: associations and accounts the stack no longer lists (root's kept).
    script = f"""set -euo pipefail
install -m 0644 /config/slurm.conf /etc/slurm/slurm.conf
install -m 0600 -o root /keys/slurm.key /etc/slurm/slurm.key
for i in $(seq 1 90); do
  if out=$(sacctmgr -n show cluster 2>&1); then break; fi
  echo "waiting for slurmdbd ($i/90): $out"; sleep 10
done
sacctmgr -n show cluster
sacctmgr -i load file={shlex.quote('/config/accounts.cfg')}
sacctmgr -n -P show assoc format=account,user | while IFS='|' read -r account user; do
  [ -n "$user" ] && [ "$user" != root ] || continue
  grep -qxF "$account|$user" /config/associations.txt || sacctmgr -i delete user name="$user" account="$account"
done
sacctmgr -n -P show account format=account | while read -r account; do
  [ "$account" != root ] || continue
  grep -qxF "$account" /config/accounts.txt || sacctmgr -i delete account name="$account"
done
sacctmgr -n -p show assoc format=account,user,fairshare,grptres,grptresmins
"""
    job: Manifest = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": meta(f"slurm-accounts-{digest}", SLURM_NAMESPACE, c.labels),
        "spec": {
            "backoffLimit": 6, "activeDeadlineSeconds": 3600,
            "template": {"metadata": {"labels": c.pod_labels}, "spec": {
                "restartPolicy": "OnFailure",
                "nodeSelector": dict(c.system_selector),
                "containers": [{
                    "name": "sacctmgr", "image": c.images.slurmctld, "command": ["bash", "-c", script],
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                    "volumeMounts": [{"name": "config", "mountPath": "/config"},
                                     {"name": "keys", "mountPath": "/keys", "readOnly": True},
                                     {"name": "etc-slurm", "mountPath": "/etc/slurm"}],
                }],
                "volumes": [{"name": "config", "configMap": {"name": f"slurm-accounts-{digest}"}},
                            {"name": "keys", "secret": {"secretName": SLURM_KEY_SECRET}},
                            {"name": "etc-slurm", "emptyDir": {}}],
            }},
        },
    }
    return [cm, job]


def slurm_objects(c: SlurmCluster) -> list[Manifest]:
    """Every Slurm object in creation order (the operator builds the Controller's config from its ConfigMaps and
    Accounting, so they come first); the Secrets are the platform's (their values are generated)."""
    acct = accounting(c)
    return [
        *config_maps(c),
        *([acct] if acct is not None else []),
        controller(c),
        restapi(c),
        *[nodeset(c, p) for p in c.pools],
        loginset(c),
        *accounts_job(c),
    ]
