"""``blueprint admit`` on an sbatch script: would Slurm take the job, and could it ever start.

Steps, in the order slurmctld meets them: ``script`` (the ``#SBATCH`` options sbatch reads), ``slurm`` (the stack
runs Slurm), ``partition`` (it exists, or a default one does), ``account`` (it is in slurmdbd with users, and the
partition allows it: AllowAccounts), ``time`` (MaxTime; DefaultTime when the job asks none), ``nodes`` (MaxNodes,
the partition's nodes at their groups' max size, CPUs per node), ``gpus`` (per node against the node type, per job
against the account's GrpTRES and, at its time limit, its monthly GrpTRESMins), ``holds`` (the GPUs, CPUs and
memory it holds on each node, with the partition's DefCpuPerGPU and DefMemPerGPU where it asks none; refused when no
node has that memory, named when it holds a whole node for part of its GPUs), ``runtime`` (what only Slurm knows
once the job is queued: its priority from fair share, whether nodes are free, what is left of the account's limits;
notes, never a refusal).

What Slurm does with a job over a partition limit depends on EnforcePartLimits: NO (Slurm's default) accepts it and
leaves it pending until the limit changes; ANY or ALL (the program's slurm.conf) refuse it at submission
(slurm.conf(5)). An unknown partition, or an account slurmdbd does not know, is refused at submission either way
(AccountingStorageEnforce=associations); a job over its account's GrpTRES, or whose GPU-minutes at its time limit
exceed the account's GrpTRESMins, waits for ever (AccountingStorageEnforce=limits,safe). Each refusal names the
stack key that changes the limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from blueprint.admit.cluster import ClusterView
from blueprint.admit.nodes import GPU, NodeGroup, unknown_capacity
from blueprint.admit.quantity import QuantityError, parse_quantity, show
from blueprint.admit.results import Step, WorkloadResult
from blueprint.admit.sbatch import INFINITE, SbatchJob
from blueprint.admit.scheduling import Placement
from blueprint.admit.slurm import (
    SLURM_NAMESPACE,
    Account,
    Partition,
    SlurmCluster,
    SlurmNodeSet,
    show_minutes,
    slurm_cluster,
)
from blueprint.admit.slurm_images import fabric_note, judge_images
from components.kubernetes.reserved import MIB

SBATCH_STEPS = ("script", "slurm", "partition", "account", "time", "nodes", "gpus", "holds", "containers", "runtime")
DEFAULT_QOS = "normal"  # the QOS slurmdbd creates; the stack's accounts file adds none
TENANT_LABEL = "gpu-cluster/tenant"

Problem = tuple[str, str, str, str]  # (step, object, rule, message)


@dataclass(frozen=True)
class SlurmNodes:
    """The node group one NodeSet runs on, as a job sees it."""

    nodeset: SlurmNodeSet
    name: str
    instance_type: str
    gpus: int  # GPUs per node (the catalog's, not time-sliced units)
    vcpus: int | None
    max_nodes: int  # nodes the group reaches (nodes.py)
    size_key: str  # the stack key of the group's maximum size
    memory_mib: int | None  # what a node offers (nodes.py: its memory less the kubelet's and hugepages), MiB
    notes: tuple[str, ...] = ()
    unfit: tuple[str, ...] = ()  # why the slurmd pod does not fit a node of the group (then Slurm has no node)


@dataclass
class Judgement:
    """What one partition (and account) makes of the job."""

    problems: list[Problem] = field(default_factory=list)
    notes: dict[str, list[str]] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)
    account: str | None = None
    placement: Placement | None = None
    gpus: int = 0
    holds: dict[str, object] = field(default_factory=dict)  # per node: GPUs, CPUs, memory (MiB), whole node or not

    def note(self, step: str, text: str) -> None:
        """A note on a step (once)."""
        notes = self.notes.setdefault(step, [])
        if text not in notes:
            notes.append(text)


def slurm_nodes(view: ClusterView, slurm: SlurmCluster, groups: list[NodeGroup]) -> dict[str, SlurmNodes]:
    """Each NodeSet's node group (the group whose labels its nodeSelector picks), by NodeSet name."""
    out = {}
    for ns in slurm.nodesets:
        group = next((g for g in groups if ns.node_selector
                      and all(g.labels.get(k) == v for k, v in ns.node_selector.items())), None)
        if group is None:
            continue
        gpus = int(group.allocatable.get(GPU, 0) / group.sharing.replicas) or (ns.gres_gpus or 0)
        notes, unfit = _slurmd_fits(ns, group)
        memory = group.allocatable.get("memory")
        out[ns.name] = SlurmNodes(ns, group.name, group.instance_type, gpus, group.vcpus, group.max_nodes,
                                  f"{group.spec_key}.maxSize", int(memory / MIB) if memory else None,
                                  (*group.notes, *notes), unfit)
    return out


def _slurmd_fits(ns: SlurmNodeSet, group: NodeGroup) -> tuple[list[str], tuple[str, ...]]:
    """Whether the NodeSet's slurmd pod (one per node, DaemonSet mode) fits what a node of its group offers:
    (notes, why not). A slurmd that never runs is a node Slurm never has."""
    notes: list[str] = []
    unfit: list[str] = []
    for resource, raw in sorted(ns.requests.items()):
        try:
            asked = parse_quantity(raw)
        except QuantityError:
            continue
        if unknown_capacity(resource) and resource not in group.allocatable:
            notes.append(f"slurmd asks {show(resource, asked)} {resource} per node: check allocatable on a "
                         f"{group.instance_type} node")
            continue
        offered = group.allocatable.get(resource)
        if offered is None and resource in ("cpu", "memory"):
            continue  # capacity unknown (not in the catalog): the group's notes say so
        if asked > (offered or 0):
            why = "; ".join(n for n in group.notes if resource in n)
            unfit.append(f"{ns.ref}'s slurmd pod requests {show(resource, asked)} {resource} on each node, and a "
                         f"{group.instance_type} node of {group.name} offers {show(resource, offered or Fraction(0))}"
                         + (f" ({why})" if why else ""))
    return notes, tuple(unfit)


def _fate(slurm: SlurmCluster, reason: str) -> str:
    """What Slurm does with a job over a partition limit (module docstring)."""
    if slurm.enforce_part_limits != "NO":
        return f"sbatch refuses it at submission (EnforcePartLimits={slurm.enforce_part_limits})"
    return (f"Slurm accepts it and leaves it pending until the limit changes ({reason}; EnforcePartLimits=NO: "
            "partition limits are enforced when scheduling, slurm.conf(5))")


def _nodes_text(lo: int, hi: int) -> str:
    return f"{lo} node{'s' if lo != 1 else ''}" if lo == hi else f"{lo}-{hi} nodes"


def _gpus_per_node(job: SbatchJob, nodes: int) -> int:
    """GPUs the job asks on each node."""
    if job.gpus_per_node is not None:
        return job.gpus_per_node.count
    if job.gpus_per_task is not None:
        tasks = job.ntasks_per_node or (math.ceil(job.ntasks / nodes) if job.ntasks else 1)
        return job.gpus_per_task.count * tasks
    if job.gpus is not None:
        return math.ceil(job.gpus.count / max(nodes, 1))
    return 0


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def _setting(slurm: SlurmCluster, part: Partition, key: str) -> int | None:
    value = slurm.setting(part, key)
    return int(value) if value is not None and value.isdigit() and int(value) > 0 else None


def _cpus(slurm: SlurmCluster, part: Partition, job: SbatchJob, tasks: int, per_node: int) -> tuple[int, str]:
    """CPUs the job holds on each node, and why (slurm.conf(5) DefCpuPerGPU: "used only if the job didn't specify
    --cpus-per-task and --cpus-per-gpu"; sbatch(1) --cpus-per-gpu)."""
    if job.cpus_per_gpu is not None and per_node:
        return max(tasks, per_node * job.cpus_per_gpu), f"{_n(per_node, 'GPU')} x --cpus-per-gpu={job.cpus_per_gpu}"
    if job.cpus_per_task is not None:
        return tasks * job.cpus_per_task, f"{_n(tasks, 'task')} x {_n(job.cpus_per_task, 'CPU')} each"
    default = _setting(slurm, part, "DefCpuPerGPU")
    if default and per_node and per_node * default > tasks:
        return per_node * default, f"{_n(per_node, 'GPU')} x DefCpuPerGPU={default} of partition {part.name}"
    return tasks, f"{_n(tasks, 'task')} x 1 CPU each"


def _memory(slurm: SlurmCluster, part: Partition, job: SbatchJob, per_node: int,
            cpus: int) -> tuple[int | None, str]:
    """MiB of memory the job holds on each node (None: all of the node's), and why. Memory is a consumable
    (SelectTypeParameters=CR_Core_Memory); a job that names none gets the partition's (else slurm.conf's)
    DefMemPerGPU, DefMemPerCPU or DefMemPerNode, and with none of them all of the node's memory (slurm.conf(5)
    DefMemPerNode: "The default value is 0 (unlimited)"); --mem=0 asks all of it. --exclusive does not: the job "is
    only allocated as much memory as it requested" (sbatch(1) --exclusive)."""
    if job.mem_mib is not None:
        return (None, "--mem=0") if job.mem_mib == 0 else (job.mem_mib, f"--mem={job.options.get('mem')}")
    if job.mem_per_gpu_mib is not None and per_node:
        return per_node * job.mem_per_gpu_mib, f"{_n(per_node, 'GPU')} x --mem-per-gpu={job.options.get('mem-per-gpu')}"
    if job.mem_per_cpu_mib is not None:
        return cpus * job.mem_per_cpu_mib, f"{_n(cpus, 'CPU')} x --mem-per-cpu={job.options.get('mem-per-cpu')}"
    for key, count, unit in (("DefMemPerGPU", per_node, "GPU"), ("DefMemPerCPU", cpus, "CPU"),
                             ("DefMemPerNode", 1, "")):
        default = _setting(slurm, part, key)
        if default and count:
            per = f"{_n(count, unit)} x " if unit else ""
            return count * default, f"{per}{key}={default} of partition {part.name}"
    if not per_node:
        return None, "no --mem, and no GPU for the partition's per-GPU memory default"
    return None, "no --mem and no DefMemPerGPU in slurm.conf"


def _gib(mib: int) -> str:
    return f"{mib / 1024:,.1f} GiB"


def _holds(slurm: SlurmCluster, part: Partition, job: SbatchJob, members: list[SlurmNodes], per_node: int,
           cpus: int, out: Judgement) -> None:
    """What the job holds on each node of the group it lands on (GPUs, CPUs, memory), refused when no node has the
    memory, and named when it holds a whole node's memory or CPUs for fewer GPUs than the node has: while it runs,
    the node's other GPUs can go to no other job."""
    asked, why = _memory(slurm, part, job, per_node, cpus)
    sized = [m for m in members if m.memory_mib]
    if not sized:
        out.details["holds"] = (f"per node: {per_node} GPUs, {cpus} CPUs, "
                                f"{'all the node' if asked is None else _gib(asked)} memory ({why})")
        out.note("holds", "the node type's memory is not in the catalog: admit cannot compare the job's memory "
                 "with a node's")
        return
    node = max(sized, key=lambda m: m.memory_mib or 0) if asked is not None else sized[0]
    offered = node.memory_mib or 0
    if asked is not None and asked > offered:
        out.problems.append(("holds", node.nodeset.ref, "node-memory",
                             f"{_gib(asked)} of memory per node ({why}); a {node.instance_type} node ({node.name}) "
                             f"offers {_gib(offered)}: sbatch refuses it (\"Memory specification can not be "
                             "satisfied\"); ask for less with "
                             f"{'--mem-per-gpu' if per_node else '--mem or --mem-per-cpu'}, or put a larger node type "
                             f"in the partition (scheduler.slurm.partitions[{part.name}].nodeGroups)"))
        return
    held = offered if asked is None else asked
    whole_memory = held >= offered
    whole_cpus = node.vcpus is not None and cpus >= node.vcpus
    out.holds = {"gpus_per_node": per_node, "cpus_per_node": cpus, "memory_mib_per_node": held,
                 "memory_from": why, "node_type": node.instance_type, "node_gpus": node.gpus,
                 "node_cpus": node.vcpus, "node_memory_mib": offered, "whole_node": whole_memory or whole_cpus}
    out.details["holds"] = (f"per {node.instance_type} node: {per_node} of {node.gpus} GPUs, {cpus} of "
                            f"{node.vcpus or '?'} CPUs, {_gib(held)} of {_gib(offered)} memory ({why})")
    if job.exclusive and asked is not None:
        out.note("holds", f"--exclusive: the job holds whole {node.instance_type} nodes (every CPU and GPU), but only "
                 f"{_gib(held)} of memory each ({why}); ask --mem=0 for all of it (sbatch(1) --exclusive)")
    elif per_node < node.gpus and (whole_memory or whole_cpus):
        what = " and ".join(w for w, on in (("memory", whole_memory), ("CPUs", whole_cpus)) if on)
        idle = node.gpus - per_node
        out.note("holds", f"the job holds all of a {node.instance_type} node's {what} for {per_node} of its "
                 f"{node.gpus} GPUs ({why}): while it runs, the node's other {idle} GPU{'s' if idle != 1 else ''} "
                 "can go to no other job; ask --mem-per-gpu (and --cpus-per-gpu) for what each GPU needs"
                 + (", or set DefMemPerGPU in slurm.conf" if why.startswith("no --mem") else ""))


def _gpu_type(job: SbatchJob) -> str | None:
    for request in (job.gpus_per_node, job.gpus_per_task, job.gpus):
        if request is not None and request.type:
            return request.type
    return None


def _gpu_partitions(slurm: SlurmCluster, nodes: dict[str, SlurmNodes]) -> list[str]:
    """The partitions with GPU nodes."""
    return [q.name for q in slurm.partitions if any(nodes[n].gpus for n in q.nodesets if n in nodes)]


def _partition_checks(slurm: SlurmCluster, nodes: dict[str, SlurmNodes], job: SbatchJob, part: Partition,
                      named: bool, out: Judgement) -> tuple[int, int, float]:
    """Time, nodes and GPUs per node against the partition; (nodes, total GPUs, minutes) for the account's
    checks."""
    p = part.name
    out.details["partition"] = (f"{p}" + ("" if named else " (the default partition: no --partition)")
                                + f", NodeSets {', '.join(part.nodesets) or 'none'}")
    if part.state != "UP":
        out.problems.append(("partition", f"Partition/{p}", "partition-state",
                             f"partition {p} is {part.state}: it starts no job; set it UP (scontrol update)"))
    # time
    if job.time_minutes is None:
        minutes = part.default_time if part.default_time is not None else part.max_time
        out.note("time", f"no --time: partition {p}'s DefaultTime {show_minutes(minutes)} applies "
                 f"(scheduler.slurm.partitions[{p}].defaultTimeMinutes) and Slurm ends the job there; set --time to "
                 f"what the run needs, up to MaxTime {show_minutes(part.max_time)}")
    else:
        minutes = job.time_minutes
    out.details["time"] = f"{show_minutes(minutes)} of MaxTime {show_minutes(part.max_time)}"
    if minutes > part.max_time:
        what = ("no time limit (--time=0 or UNLIMITED)" if minutes == INFINITE
                else f"--time={job.time_text} ({show_minutes(minutes)})")
        out.problems.append(("time", f"Partition/{p}", "partition-time",
                             f"{what} is over partition {p}'s MaxTime {show_minutes(part.max_time)}: "
                             f"{_fate(slurm, 'Reason=PartitionTimeLimit')}; ask for at most "
                             f"{show_minutes(part.max_time)}, or raise scheduler.slurm.partitions[{p}].maxTimeHours"))
    # nodes
    members = [nodes[n] for n in part.nodesets if n in nodes]
    biggest = max((m.gpus for m in members), default=0)
    if job.min_nodes is not None:
        lo, hi = job.min_nodes, job.max_nodes or job.min_nodes
    else:
        if job.gpus is not None and biggest:
            lo = math.ceil(job.gpus.count / biggest)
        elif job.ntasks and job.ntasks_per_node:
            lo = math.ceil(job.ntasks / job.ntasks_per_node)
        else:
            lo = 1
        hi = lo
        out.note("nodes", f"no --nodes: Slurm allocates as many nodes as the request needs ({lo})")
    per_node = _gpus_per_node(job, hi)
    tasks = job.ntasks_per_node or (math.ceil(job.ntasks / lo) if job.ntasks else 1)
    cpus, cpus_why = _cpus(slurm, part, job, tasks, per_node)
    wanted = _gpu_type(job)
    running = [m for m in members if not m.unfit]
    for member in members:
        for text in member.unfit:
            if running:
                out.note("nodes", f"{text}: the group's nodes never join Slurm")
            else:
                out.problems.append(("nodes", member.nodeset.ref, "slurmd-fits",
                                     f"{text}: the slurmd pods stay Pending, so partition {p} never has a node and "
                                     "no job starts; the stack must give the nodes what slurmd requests"))
    fits = [m for m in running if m.gpus >= per_node and (m.vcpus is None or m.vcpus >= cpus)
            and not (wanted and m.nodeset.gres_type and m.nodeset.gres_type != wanted)]
    reach = sum(m.max_nodes for m in fits)
    sizes = ", ".join(f"{m.name} {m.max_nodes}" for m in fits) or "none"
    out.details["nodes"] = (f"{_nodes_text(lo, hi)} of {reach} that can hold it ({sizes} at max size), MaxNodes "
                            f"{part.max_nodes if part.max_nodes is not None else 'UNLIMITED'}"
                            + (", whole nodes (--exclusive)" if job.exclusive else ""))
    if part.max_nodes is not None and hi > part.max_nodes:
        out.problems.append(("nodes", f"Partition/{p}", "partition-nodes",
                             f"{_nodes_text(lo, hi)} is more than partition {p}'s MaxNodes {part.max_nodes}: "
                             f"{_fate(slurm, 'Reason=PartitionNodeLimit')}; ask for at most {part.max_nodes}, or "
                             f"raise scheduler.slurm.partitions[{p}].maxNodesPerJob (unset: the partition's nodes "
                             "at their groups' max size)"))
    if members and cpus > max((m.vcpus or 0) for m in members) > 0:
        most = max(members, key=lambda m: m.vcpus or 0)
        out.problems.append(("nodes", most.nodeset.ref, "node-cpus",
                             f"{cpus} CPUs per node ({cpus_why}); a "
                             f"{most.instance_type} ({most.name}) has {most.vcpus}: no node of partition {p} can "
                             "hold it, Slurm refuses it (\"Requested node configuration is not available\"); ask for "
                             "fewer tasks per node or CPUs per task, or put a larger node type in the partition "
                             f"(scheduler.slurm.partitions[{p}].nodeGroups)"))
    # GPUs per node
    if wanted:
        declared = sorted({m.nodeset.gres_type for m in members if m.nodeset.gres_type})
        untyped = [m.name for m in members if not m.nodeset.gres_type]
        if declared and not untyped and wanted not in declared:
            out.problems.append(("gpus", members[0].nodeset.ref, "gpu-type",
                                 f"the job asks GPUs of type {wanted}; partition {p}'s nodes have "
                                 f"{', '.join(declared)}: sbatch refuses it (\"Invalid generic resource (gres) "
                                 f"specification\"); ask for {declared[0]}, or no type"))
        elif untyped:
            out.note("gpus", f"the NodeSets of {', '.join(untyped)} declare their GPUs without a type (Gres=gpu:N): "
                     f"type {wanted} must be what gres.conf AutoDetect reports on the nodes, which admit cannot see; "
                     "without a type (--gpus-per-node=N) it always matches")
    if members and per_node > biggest:
        most = max(members, key=lambda m: m.gpus)
        out.problems.append(("gpus", most.nodeset.ref, "node-gpus",
                             f"{per_node} GPUs per node; a {most.instance_type} ({most.name}) has {most.gpus}: no "
                             f"node of partition {p} can hold it, Slurm refuses it (\"Requested node configuration "
                             f"is not available\"); "
                             + (f"ask for at most {most.gpus} per node (on more nodes), or put a node group with more "
                                f"GPUs per node in the partition (scheduler.slurm.partitions[{p}].nodeGroups)"
                                if most.gpus else
                                f"partition {p} is CPU-only: submit GPU work to a GPU partition "
                                f"({', '.join(_gpu_partitions(slurm, nodes)) or 'none'})")))
    elif running and fits and lo > reach:
        keys = ", ".join(m.size_key for m in fits)
        out.problems.append(("nodes", f"Partition/{p}", "partition-size",
                             f"{_nodes_text(lo, hi)}, and partition {p} reaches {reach} that can hold the job "
                             f"({sizes} at max size): it can never start ({_fate(slurm, 'Reason=PartitionNodeLimit')})"
                             f"; ask for at most {reach}, or raise {keys}"))
    _holds(slurm, part, job, [m for m in fits or running or members], per_node, cpus, out)
    total = job.gpus.count if job.gpus is not None else per_node * hi
    if per_node == 0 and job.gpus is None:
        out.note("gpus", "the job asks no GPU (--gpus-per-node, --gres=gpu or --gpus): Slurm allocates it none and "
                 "counts none against the account's GPU limit")
        out.details["gpus"] = "none asked"
    else:
        out.details["gpus"] = f"{per_node} per node x {_nodes_text(hi, hi)} = {total}"
    placed = "+".join(m.name for m in fits) or "+".join(part.nodesets)
    out.placement = Placement("job", placed, hi, tasks * hi)
    out.gpus = total
    return hi, total, minutes


def _account_checks(slurm: SlurmCluster, part: Partition, account: str, teams: list[str], total: int,
                    minutes: float) -> tuple[list[Problem], list[str], str, Account | None]:
    """The account's checks: in slurmdbd with users, allowed on the partition, GPU limit, budget; (problems,
    notes, detail, the account)."""
    problems: list[Problem] = []
    notes: list[str] = []
    p = part.name
    acct = None
    if slurm.accounts is None:
        notes.append("the stack keeps no Slurm accounting (scheduler.slurm.accounting): no account, GPU limit or "
                     "budget to check")
    else:
        acct = slurm.accounts.get(account)
        if acct is None:
            fix = (f"team {account} has no Slurm account: give it users (scheduler.slurm.users.{account}) or a quota "
                   f"on a node group Slurm runs (teams[{account}].quotas)" if account in teams else
                   f"use your team's account ({', '.join(sorted(slurm.accounts)) or 'none in this stack'})")
            problems.append(("account", f"Account/{account}", "account-exists",
                             f"account {account} is not in slurmdbd ({slurm.accounts_ref}): sbatch refuses the job "
                             "at submission (\"Invalid account or account/partition combination specified\", "
                             f"AccountingStorageEnforce=associations); {fix}"))
            return problems, notes, account, None
        if not acct.users:
            problems.append(("account", f"Account/{account}", "account-users",
                             f"account {account} has no users, so every submission as it is refused (\"Invalid "
                             "account or account/partition combination specified\", "
                             f"AccountingStorageEnforce=associations); list its members in "
                             f"scheduler.slurm.users.{account}"))
        else:
            notes.append(f"submit as one of account {account}'s users ({', '.join(acct.users)}: "
                         f"scheduler.slurm.users.{account}); anyone else is refused at submission")
    if part.allow_accounts is not None and account not in part.allow_accounts:
        elsewhere = [q.name for q in slurm.partitions
                     if q.allow_accounts is None or account in q.allow_accounts]
        problems.append(("account", f"Partition/{p}", "partition-accounts",
                         f"partition {p} allows accounts {', '.join(part.allow_accounts)} (AllowAccounts), not "
                         f"{account}: {_fate(slurm, 'the partition refuses its account')}; add {account} to "
                         f"scheduler.slurm.partitions[{p}].teams (unset: the teams with a quota on its node groups, "
                         f"teams[].quotas)" + (f", or submit to {', '.join(elsewhere)}" if elsewhere else "")))
    detail = account
    if acct is not None:
        parts = [f"Fairshare={acct.fairshare}"]
        if acct.gpu_limit is not None:
            parts.append(f"GrpTRES gres/gpu={acct.gpu_limit}")
        if acct.gpu_minutes is not None:
            parts.append(f"GrpTRESMins gres/gpu={acct.gpu_minutes:,}")
        detail = f"{account} ({', '.join(parts)})"
        if acct.gpu_limit is not None and total > acct.gpu_limit:
            problems.append(("gpus", f"Account/{account}", "account-gpu-limit",
                             f"the job asks {total} GPUs; account {account} may hold {acct.gpu_limit} at once "
                             f"(GrpTRES gres/gpu={acct.gpu_limit}, the team's quota on Slurm's node groups): Slurm "
                             "accepts it and leaves it pending for ever (Reason=AssocGrpGRES, "
                             f"AccountingStorageEnforce=limits); ask for at most {acct.gpu_limit}, or raise "
                             f"teams[{account}].quotas"))
        elif (acct.gpu_minutes is not None and "safe" in slurm.enforce and minutes != INFINITE
              and total * minutes > acct.gpu_minutes):
            problems.append(("gpus", f"Account/{account}", "account-budget",
                             f"at its time limit the job uses {total} GPUs x {int(minutes):,} min = "
                             f"{int(total * minutes):,} GPU-minutes, more than account {account}'s whole monthly "
                             f"budget (GrpTRESMins gres/gpu={acct.gpu_minutes:,}): with AccountingStorageEnforce=safe "
                             "Slurm never starts it (Reason=AssocGrpGRESMinutes); shorten --time or ask for fewer "
                             f"GPUs, or raise teams[{account}].budget.monthlyUsd"))
    return problems, notes, detail, acct


def _runtime(slurm: SlurmCluster, nodes: dict[str, SlurmNodes], part: Partition, acct: Account | None,
             hi: int, total: int, minutes: float, out: Judgement) -> None:
    """What Slurm decides once the job is queued (notes)."""
    conf = slurm.conf
    out.details["runtime"] = "decided by Slurm once the job is queued"
    weights = ", ".join(f"{k}={conf[k]}" for k in ("PriorityWeightFairshare", "PriorityWeightAge") if k in conf)
    if acct is not None and slurm.total_fairshare:
        share = acct.fairshare / slurm.total_fairshare
        reset = (" (usage resets monthly: PriorityUsageResetPeriod=MONTHLY)"
                 if conf.get("PriorityUsageResetPeriod", "").upper() == "MONTHLY" else "")
        out.note("runtime", f"priority: fair share orders the queue ({conf.get('PriorityType', 'priority/basic')}"
                 f"{', ' + weights if weights else ''}): account {acct.name} holds {acct.fairshare} of "
                 f"{slurm.total_fairshare} shares ({share:.0%}); an account that used less than its share goes "
                 f"first{reset}")
    members = [nodes[n] for n in part.nodesets if n in nodes]
    out.note("runtime", f"free nodes: it starts when {_nodes_text(hi, hi)} of "
             f"{'+'.join(m.name for m in members) or 'the partition'} are free (squeue: Reason=Resources or "
             "Priority until then)")
    for member in members:
        for text in member.notes:
            if not any(text in why for why in member.unfit):  # already said in the nodes step
                out.note("runtime", f"{member.name}: {text}")
    if acct is not None and acct.gpu_limit is not None and total:
        out.note("runtime", f"GPU limit: it starts only while account {acct.name}'s running jobs leave {total} of its "
                 f"{acct.gpu_limit} GPUs (GrpTRES; else Reason=AssocGrpGRES)")
    if acct is not None and acct.gpu_minutes is not None and total and minutes != INFINITE:
        out.note("runtime", f"budget: at its time limit it uses {int(total * minutes):,} GPU-minutes; it starts only "
                 f"if they fit what account {acct.name} has left of its {acct.gpu_minutes:,} this month "
                 "(GrpTRESMins gres/gpu" + (", AccountingStorageEnforce=safe" if "safe" in slurm.enforce else "")
                 + f"; else Reason=AssocGrpGRESMinutes; sshare -l -A {acct.name} shows the usage)")


def _judge(view: ClusterView, slurm: SlurmCluster, nodes: dict[str, SlurmNodes], job: SbatchJob,
           part: Partition, named: bool) -> Judgement:
    out = Judgement()
    hi, total, minutes = _partition_checks(slurm, nodes, job, part, named, out)
    if "requeue" in job.options:
        out.note("runtime", "--requeue: Slurm queues it again after a node failure"
                 + ("" if "PreemptType" in slurm.conf else "; nothing preempts it (slurm.conf sets no PreemptType)"))
    if job.qos is not None and job.qos != DEFAULT_QOS and "qos" in slurm.enforce:
        out.problems.append(("account", f"QOS/{job.qos}", "qos-exists",
                             f"--qos={job.qos}: the stack defines no QOS but Slurm's own {DEFAULT_QOS}: sbatch "
                             "refuses it at submission (\"Invalid qos specification\"); drop --qos"))
    teams = sorted(n.name for n in view.of_kind("Namespace") if n.labels.get(TENANT_LABEL) == "true")
    if job.account is not None:
        candidates = [job.account]
    elif slurm.accounts is not None:
        # root is the administrators' account: a job names it (-A root), nobody falls into it
        candidates = sorted(a.name for a in slurm.accounts.values() if a.users and a.name != "root"
                            and (part.allow_accounts is None or a.name in part.allow_accounts))
        out.note("account", "no --account: Slurm charges the submitting user's default account (their team's, "
                 "scheduler.slurm.users); admit checks every account the partition allows: "
                 f"{', '.join(candidates) or 'none'}; name yours with --account")
        if not candidates:
            out.problems.append(("account", f"Partition/{part.name}", "account-users",
                                 f"no account with users may use partition {part.name}: nobody can submit to it; "
                                 "list the teams' members in scheduler.slurm.users"))
    else:
        candidates = []
        out.note("account", "no --account, and no accounting: no account is checked")
    judged = [(a, *_account_checks(slurm, part, a, teams, total, minutes)) for a in candidates]
    passing = [j for j in judged if not j[1]]
    chosen: tuple[str, list[Problem], list[str], str, Account | None] | None
    if job.account is None and passing:
        for account, problems, _, _, _ in judged:
            if problems:
                out.note("account", f"as account {account} it would not run: {problems[0][3]}")
        chosen = passing[0]
    else:
        for _, problems, _, _, _ in judged:
            out.problems += problems
        chosen = judged[0] if judged else None
    if chosen is not None:
        account, _, notes, detail, acct = chosen
        out.account = account
        out.details["account"] = detail if job.account is not None else f"{detail}, or the submitter's default"
        for text in notes:
            out.note("account", text)
        _runtime(slurm, nodes, part, acct, hi, total, minutes, out)
    else:
        _runtime(slurm, nodes, part, None, hi, total, minutes, out)
    return out


def admit_sbatch(view: ClusterView, groups: list[NodeGroup], job: SbatchJob) -> WorkloadResult:
    """The verdict on one sbatch script."""
    result = WorkloadResult(f"SlurmJob/{job.name}", job.source, SLURM_NAMESPACE, order=SBATCH_STEPS,
                            steps={name: Step(name) for name in SBATCH_STEPS})
    result.slurm = {"partition": None, "account": job.account, "nodes": None, "gpus": None, "holds": None}
    step = result.steps["script"]
    step.detail = " ".join(job.given) if job.given else "no options (every default)"
    step.notes += job.notes
    slurm = slurm_cluster(view)
    step = result.steps["slurm"]
    if slurm is None:
        step.fail("Controller/slurm/slurm", "slurm-installed",
                  "this stack runs no Slurm (no scheduler.slurm in the stack, so no Slinky Controller or NodeSet in "
                  "the cluster): nothing here accepts sbatch; add scheduler.slurm to the stack, or run the job as a "
                  "Kubernetes workload through Kueue (examples/workloads/)")
        result.skip_rest("slurm", "the stack runs no Slurm")
        return result
    step.detail = f"{slurm.controller.ref}, EnforcePartLimits={slurm.enforce_part_limits}"
    step = result.steps["partition"]
    if job.partitions:
        missing = [n for n in job.partitions if slurm.partition(n) is None]
        known = ", ".join(p.name for p in slurm.partitions) or "none"
        if missing:
            step.fail(f"Partition/{missing[0]}", "partition-exists",
                      f"partition {', '.join(missing)} is not in slurm.conf (partitions: {known}): sbatch refuses the "
                      "job at submission (\"invalid partition specified\"); use one of those, or add it to "
                      "scheduler.slurm.partitions")
            result.skip_rest("partition", f"no partition {missing[0]}")
            return result
        parts = [p for n in job.partitions if (p := slurm.partition(n)) is not None]
    else:
        default = slurm.default_partition
        if default is None:
            step.fail("Partition/default", "partition-default",
                      "no --partition and no default partition: sbatch refuses the job at submission (\"No "
                      "partition specified or system default partition\"); name one with --partition "
                      f"({', '.join(p.name for p in slurm.partitions) or 'none'}), or set "
                      "scheduler.slurm.partitions[].default")
            result.skip_rest("partition", "no partition")
            return result
        parts = [default]
    nodes = slurm_nodes(view, slurm, groups)
    judged = [(part, _judge(view, slurm, nodes, job, part, bool(job.partitions))) for part in parts]
    part, chosen = next(((p, j) for p, j in judged if not j.problems), judged[0])
    for other, judgement in judged:
        if other is not part and judgement.problems:
            result.steps["partition"].notes.append(f"partition {other.name} would not run it: "
                                                   f"{judgement.problems[0][3]}")
    for name, detail in chosen.details.items():
        result.steps[name].detail = detail
    for name, notes in chosen.notes.items():
        result.steps[name].notes += notes
    for name, obj, rule, message in chosen.problems:
        result.steps[name].fail(obj, rule, message)
    judge_images(view, job.images, result.steps["containers"])
    fabric_note(view, job, part, result.steps["containers"])
    if chosen.placement is not None:
        result.placements = [chosen.placement]
    result.slurm = {"partition": part.name, "account": chosen.account,
                    "nodes": chosen.placement.nodes if chosen.placement else None, "gpus": chosen.gpus,
                    "holds": chosen.holds or None}
    return result
