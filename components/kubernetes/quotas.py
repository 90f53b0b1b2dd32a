"""Quota arithmetic for Kueue and ResourceQuotas, free of Pulumi so it is tested directly.

A team's quota is written in GPUs per node group. Each GPU brings its share of the node: vCPUs, memory
and fabric devices (on AWS, EFA interfaces: p5.48xlarge has 24 vCPU, 256 GiB and 4 EFA per GPU), so a job
that asks for a whole node's worth of GPUs also fits its CPU, memory and fabric requests in the same quota.
The fabric's resource name comes from the cloud (``CloudFabric``); nothing here names a cloud.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from components.spec import QuotaSpec, TeamSpec

GPU = "nvidia.com/gpu"
CPU = "cpu"
MEMORY = "memory"


@dataclass(frozen=True)
class GpuPool:
    """What one GPU node group provides, as the Kubernetes layer needs it (no cloud types)."""

    name: str
    instance_type: str
    gpus_per_node: int
    max_nodes: int
    fabric_per_node: int  # devices of the cloud's fabric per node (EFA interfaces on AWS)
    vcpu_per_node: int | None
    memory_gib_per_node: int | None
    placed: bool  # nodes share a placement group or a reservation: topology-aware scheduling applies
    # Not placed, but its flavor takes the one-level topology of hosts (a served model's group: each replica is one
    # pod, nothing to place beyond a node), so its team's ClusterQueue stays TAS-only beside placed training groups.
    host_topology: bool = False
    gpu_units_per_gpu: int = 1  # time-slicing replicas
    queued: bool = False  # nodes come through a ProvisioningRequest (GKE flex-start / queued provisioning)
    # A node autoscaler adds nodes after Kueue admitted a workload that needs them (an autoscaled group or pool
    # without a ProvisioningRequest): the admitted pods wait for a node to launch and join.
    grows_after_admission: bool = False
    # The price of one node-hour as the cost preview reads it (None: no figure read) and where it comes from
    # (catalog key, status, date): the in-cluster spend alert charges each GPU its share of it.
    node_hour_usd: float | None = None
    price_basis: str = ""
    # What each node's check expects (objects/node_check.py): the GPU model as the catalog names it, and the fabric
    # devices that must be present and up (efa, rdma: InfiniBand-class devices; gpu-nic: host interfaces; none).
    gpu_model: str | None = None
    fabric_kind: str = "none"
    fabric_devices: int = 0

    @property
    def gpu_unit_hour_usd(self) -> float | None:
        """What one ``nvidia.com/gpu`` unit costs an hour: the node's price over its GPU units (None: unpriced)."""
        if self.node_hour_usd is None or not self.gpus_per_node:
            return None
        return self.node_hour_usd / (self.gpus_per_node * self.gpu_units_per_gpu)

    @property
    def capacity_units(self) -> int:
        """nvidia.com/gpu units at max size."""
        return self.max_nodes * self.gpus_per_node * self.gpu_units_per_gpu


@dataclass(frozen=True)
class CpuPool:
    """A node group without GPUs that teams have CPU quota on (``teams[].cpuQuotas``): one Kueue flavor, listed before
    the GPU flavors so pods that ask for no GPU land there."""

    name: str
    instance_type: str
    max_nodes: int
    vcpu_per_node: int | None
    memory_gib_per_node: int | None
    grows_after_admission: bool = False  # a node autoscaler adds its nodes after Kueue admitted their pods


@dataclass(frozen=True)
class Resources:
    """One amount of each covered resource: GPU units, CPU cores, memory GiB, fabric devices."""

    gpu: int
    cpu: int
    memory_gib: int
    fabric: int

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.gpu + other.gpu, self.cpu + other.cpu, self.memory_gib + other.memory_gib,
                         self.fabric + other.fabric)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.gpu - other.gpu, self.cpu - other.cpu, self.memory_gib - other.memory_gib,
                         self.fabric - other.fabric)

    def capped(self, cap: Resources) -> Resources:
        """Element-wise minimum."""
        return Resources(min(self.gpu, cap.gpu), min(self.cpu, cap.cpu), min(self.memory_gib, cap.memory_gib),
                         min(self.fabric, cap.fabric))

    def as_kueue(self, fabric_resource: str | None) -> dict[str, str]:
        """Kubernetes quantities by resource name (the fabric's under its cloud's resource name)."""
        out = {GPU: str(self.gpu), CPU: str(self.cpu), MEMORY: f"{self.memory_gib}Gi"}
        if fabric_resource is not None:
            out[fabric_resource] = str(self.fabric)
        return out


ZERO = Resources(0, 0, 0, 0)


def resources_for(gpu_units: int, pool: GpuPool, quota: QuotaSpec | None = None) -> Resources:
    """The node share that goes with ``gpu_units`` of a pool; explicit cpu/memory in ``quota`` win.

    Rounds down, so quotas never promise more than the nodes have. Explicit figures apply to the
    nominal amount only; borrowing and lending limits scale them by the same GPU fraction.
    """
    physical = gpu_units / pool.gpu_units_per_gpu
    per_node = physical / pool.gpus_per_node if pool.gpus_per_node else 0.0
    nominal = quota.gpus if quota else 0
    fraction = gpu_units / nominal if nominal else 0.0
    if quota is not None and quota.cpu is not None:
        cpu = math.floor(quota.cpu * fraction)
    else:
        cpu = math.floor((pool.vcpu_per_node or 0) * per_node)
    if quota is not None and quota.memory_gib is not None:
        memory = math.floor(quota.memory_gib * fraction)
    else:
        memory = math.floor((pool.memory_gib_per_node or 0) * per_node)
    fabric = math.floor(pool.fabric_per_node * per_node)
    return Resources(gpu_units, cpu, memory, fabric)


@dataclass(frozen=True)
class FlavorQuota:
    """One team's entry for one flavor in its ClusterQueue."""

    pool: GpuPool
    nominal: Resources
    borrowing_limit: Resources | None
    lending_limit: Resources | None


def team_flavor_quotas(team: TeamSpec, pools: dict[str, GpuPool]) -> list[FlavorQuota]:
    """The team's ClusterQueue flavors, in the order of its quotas (quotas on Slurm node groups are not Kueue's)."""
    out = []
    for q in team.quotas:
        pool = pools.get(q.node_group)
        if pool is None:  # a Slurm node group: its GPUs are the team's Slurm account's, not a Kueue flavor's
            continue
        out.append(FlavorQuota(
            pool=pool,
            nominal=resources_for(q.gpus, pool, q),
            borrowing_limit=None if q.borrowing_limit_gpus is None else resources_for(q.borrowing_limit_gpus, pool, q),
            lending_limit=None if q.lending_limit_gpus is None else resources_for(q.lending_limit_gpus, pool, q),
        ))
    return out


@dataclass(frozen=True)
class CpuFlavorQuota:
    """One team's entry for one CPU flavor: its nominal CPU and memory, no GPU and no fabric."""

    pool: CpuPool
    nominal: Resources


def team_cpu_flavor_quotas(team: TeamSpec, cpu_pools: dict[str, CpuPool]) -> list[CpuFlavorQuota]:
    """The team's CPU flavors, in the order of its CPU quotas (``teams[].cpuQuotas``)."""
    return [CpuFlavorQuota(pool=cpu_pools[q.node_group], nominal=Resources(0, q.cpu, q.memory_gib, 0))
            for q in team.cpu_quotas if q.node_group in cpu_pools]


def cpu_quota_room(team: TeamSpec, cpu_pools: dict[str, CpuPool]) -> Resources:
    """What the team's CPU flavors add to its namespace's ResourceQuota: their nominal quota, since they neither lend
    nor borrow in the cohort (objects/kueue.py cluster_queue)."""
    total = ZERO
    for fq in team_cpu_flavor_quotas(team, cpu_pools):
        total = total + fq.nominal
    return total


def lendable_by_pool(teams: list[TeamSpec], pools: dict[str, GpuPool]) -> dict[str, Resources]:
    """What all teams together lend on each pool: their lending limit, or their whole nominal quota."""
    out: dict[str, Resources] = {}
    for team in teams:
        for fq in team_flavor_quotas(team, pools):
            out[fq.pool.name] = out.get(fq.pool.name, ZERO) + (fq.lending_limit or fq.nominal)
    return out


def namespace_hard_limits(team: TeamSpec, teams: list[TeamSpec], pools: dict[str, GpuPool], cohort: bool,
                          lendable: dict[str, Resources] | None = None) -> Resources:
    """The most a team's namespace can ever have admitted at once, for its ResourceQuota.

    Nominal quota plus what it can borrow: its borrowing limit, or else everything the other teams lend
    (their lending limit, or their whole nominal quota). The ResourceQuota is a backstop that must never
    refuse a workload Kueue admitted, so it is the upper bound, not the nominal share. ``lendable`` (from
    :func:`lendable_by_pool`, computed once for all teams) keeps this linear in the number of teams.
    """
    lent = lendable if lendable is not None else lendable_by_pool(teams, pools)
    total = ZERO
    for fq in team_flavor_quotas(team, pools):
        amount = fq.nominal
        if cohort:
            others = lent.get(fq.pool.name, ZERO) - (fq.lending_limit or fq.nominal)  # all but the team's own
            borrow = others if fq.borrowing_limit is None else fq.borrowing_limit.capped(others)
            amount = amount + borrow
        total = total + amount
    return total


def sidecar_headroom(team: TeamSpec, pools: dict[str, GpuPool], sidecar: tuple[int, int],
                     cpu_pools: dict[str, CpuPool] | None = None) -> Resources:
    """A ResourceQuota's room for a container injected into each of the team's pods after admission: its requests
    (millicores, MiB) times the nodes of every pool the team's queue reaches, its CPU pools' too (one such pod per
    node; more, smaller pods mounting the same volume need their own room), rounded up to whole cores and GiB."""
    nodes = sum(pools[q.node_group].max_nodes for q in team.quotas if q.node_group in pools)
    nodes += sum(fq.pool.max_nodes for fq in team_cpu_flavor_quotas(team, cpu_pools or {}))
    milli, mib = sidecar
    return Resources(gpu=0, cpu=math.ceil(nodes * milli / 1000), memory_gib=math.ceil(nodes * mib / 1024), fabric=0)
