"""What ``blueprint admit`` knows of the cluster's Slurm, read from the graph as slurmctld and slurmdbd would read it.

The program writes Slurm's configuration into Kubernetes objects (:mod:`components.kubernetes.objects.slurm`): the
Slinky ``Controller``'s ``extraConf`` holds slurm.conf's partitions (``PartitionName=`` lines with MaxTime,
DefaultTime, MaxNodes, AllowAccounts) and the scheduling settings (EnforcePartLimits, AccountingStorageEnforce, the
priority weights); each ``NodeSet`` is a Slurm NodeSet of one node group (its nodeSelector), with its GPUs as GRES
(``Gres=gpu[:type]:N``); the accounts ConfigMap (``accounts.cfg``) is the flat file ``sacctmgr load`` gives slurmdbd:
one account per team, its Fairshare, GPU limit (GrpTRES gres/gpu) and monthly GPU-minutes (GrpTRESMins gres/gpu),
and its users. Nothing here is a second model of Slurm: a graph without these objects is a cluster without Slurm.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from blueprint.admit.cluster import ClusterView, K8sObject, as_mapping, as_str_map
from blueprint.admit.sbatch import INFINITE, SbatchError, parse_time

SLINKY_API = "slinky.slurm.net/"
SLURM_NAMESPACE = "slurm"
ACCOUNTS_KEY = "accounts.cfg"


@dataclass(frozen=True)
class Partition:
    """One ``PartitionName=`` line."""

    name: str
    nodesets: tuple[str, ...]
    default: bool
    max_time: float  # minutes; INFINITE when unset or UNLIMITED
    default_time: float | None  # minutes; None: MaxTime applies
    max_nodes: int | None  # None: UNLIMITED
    allow_accounts: tuple[str, ...] | None  # None: ALL
    state: str
    line: str
    options: dict[str, str] = field(default_factory=dict)  # every Key=Value of the line (DefMemPerGPU, ...)


@dataclass(frozen=True)
class Account:
    """One account of the accounts file, with its users."""

    name: str
    fairshare: int
    gpu_limit: int | None  # GrpTRES gres/gpu
    gpu_minutes: int | None  # GrpTRESMins gres/gpu (the monthly budget)
    users: tuple[str, ...]


@dataclass(frozen=True)
class SlurmNodeSet:
    """A Slinky NodeSet: one slurmd per node of the node group its nodeSelector picks."""

    name: str
    ref: str
    node_selector: dict[str, str]
    gres_gpus: int | None
    gres_type: str | None
    features: tuple[str, ...]
    requests: dict[str, Any]  # the slurmd container's resource requests (limits where no request is given)


@dataclass
class SlurmCluster:
    """The Slurm the graph describes."""

    controller: K8sObject
    conf: dict[str, str]  # slurm.conf settings of extraConf (not the partitions)
    partitions: list[Partition]
    nodesets: list[SlurmNodeSet]
    accounts: dict[str, Account] | None  # None: no accounts file (no accounting)
    accounts_ref: str | None
    notes: list[str] = field(default_factory=list)

    @property
    def default_partition(self) -> Partition | None:
        """The partition a job without --partition goes to (the last Default=YES, as slurmctld reads them)."""
        defaults = [p for p in self.partitions if p.default]
        return defaults[-1] if defaults else None

    def setting(self, part: Partition, key: str) -> str | None:
        """A setting a partition may override (DefMemPerGPU, DefCpuPerGPU, ...): the partition's, else slurm.conf's."""
        return part.options.get(key, self.conf.get(key))

    def partition(self, name: str) -> Partition | None:
        """The partition of that name."""
        return next((p for p in self.partitions if p.name == name), None)

    @cached_property
    def enforce_part_limits(self) -> str:
        """EnforcePartLimits as slurmctld reads it: NO (the default), ANY (YES) or ALL."""
        value = self.conf.get("EnforcePartLimits", "NO").upper()
        return "ANY" if value in ("YES", "UP", "TRUE", "1", "ANY") else ("ALL" if value == "ALL" else "NO")

    @cached_property
    def enforce(self) -> set[str]:
        """AccountingStorageEnforce's flags, with what each implies (slurm.conf(5))."""
        flags = {f.strip().lower() for f in self.conf.get("AccountingStorageEnforce", "").split(",") if f.strip()}
        if "all" in flags:
            flags |= {"associations", "limits", "qos", "safe", "wckeys"}
        if "safe" in flags:
            flags |= {"limits"}
        if flags & {"limits", "qos", "wckeys"}:
            flags.add("associations")
        return flags

    @property
    def total_fairshare(self) -> int:
        """The shares of every account (siblings under root)."""
        return sum(a.fairshare for a in (self.accounts or {}).values())


def _key_values(line: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for token in line.split():
        key, eq, value = token.partition("=")
        if eq:
            out[key] = value
    return out


def _minutes(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return parse_time(text, "slurm.conf")
    except SbatchError:
        return None


def _partition(line: str) -> Partition:
    kv = _key_values(line)
    max_nodes = kv.get("MaxNodes", "UNLIMITED")
    accounts = kv.get("AllowAccounts", "ALL")
    return Partition(
        name=kv.get("PartitionName", ""),
        nodesets=tuple(n for n in kv.get("Nodes", "").split(",") if n),
        default=kv.get("Default", "NO").upper() == "YES",
        max_time=_minutes(kv.get("MaxTime")) or INFINITE,
        default_time=_minutes(kv.get("DefaultTime")),
        max_nodes=int(max_nodes) if max_nodes.isdigit() else None,
        allow_accounts=None if accounts.upper() == "ALL" else tuple(a for a in accounts.split(",") if a),
        state=kv.get("State", "UP").upper(),
        line=line,
        options=kv,
    )


def _fields(line: str) -> list[str]:
    """A flat-file line's ``:``-separated fields, quotes kept together (sacctmgr(1), "Flat file dump and load")."""
    out, current, quote = [], [], ""
    for ch in line:
        if quote:
            if ch == quote:
                quote = ""
            else:
                current.append(ch)
        elif ch in "'\"":
            quote = ch
        elif ch == ":":
            out.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    out.append("".join(current).strip())
    return out


def _tres(value: str, name: str) -> int | None:
    for item in value.split(","):
        key, eq, amount = item.partition("=")
        if eq and key.strip() == name and amount.strip().isdigit():
            return int(amount)
    return None


def parse_accounts(text: str) -> dict[str, Account]:
    """The accounts of a sacctmgr flat file, with the users listed under each (``Parent - '<account>'``)."""
    accounts: dict[str, dict[str, str]] = {}
    users: dict[str, list[str]] = {}
    parent = "root"
    for raw in text.splitlines():
        fields = _fields(raw.strip())
        head = fields[0]
        kind, _, name = head.partition(" - ")
        kind, name = kind.strip(), name.strip()
        options = {key: value for key, _, value in (f.partition("=") for f in fields[1:] if "=" in f)}
        if kind == "Parent":
            parent = name
        elif kind == "Account":
            accounts[name] = options
        elif kind == "User":
            users.setdefault(parent, []).append(name)
    out = {}
    if users.get("root"):  # slurmdbd's root account: the administrators', no team's limits
        out["root"] = Account(name="root", fairshare=1, gpu_limit=None, gpu_minutes=None, users=tuple(users["root"]))
    for name, options in accounts.items():
        share = options.get("Fairshare", "1")
        out[name] = Account(name=name, fairshare=int(share) if share.isdigit() else 1,
                            gpu_limit=_tres(options.get("GrpTRES", ""), "gres/gpu"),
                            gpu_minutes=_tres(options.get("GrpTRESMins", ""), "gres/gpu"),
                            users=tuple(users.get(name, ())))
    return out


def _nodeset(obj: K8sObject) -> SlurmNodeSet:
    conf = _key_values(str(obj.spec.get("extraConf") or ""))
    gres = next((g for g in conf.get("Gres", "").split(",") if g.startswith("gpu")), "")
    parts = gres.split(":") if gres else []
    count = int(parts[-1]) if len(parts) >= 2 and parts[-1].isdigit() else None
    kind = parts[1] if len(parts) == 3 else None
    template = as_mapping(as_mapping(obj.spec.get("template")).get("spec"))
    features = (*(f for f in conf.get("Features", "").split(",") if f), obj.name)
    resources = as_mapping(as_mapping(obj.spec.get("slurmd")).get("resources"))
    requests = {**as_mapping(resources.get("limits")), **as_mapping(resources.get("requests"))}
    return SlurmNodeSet(name=obj.name, ref=obj.ref, node_selector=as_str_map(template.get("nodeSelector")),
                        gres_gpus=count, gres_type=kind, features=features, requests=requests)


def _slurm_objects(view: ClusterView, kind: str) -> list[K8sObject]:
    return [o for o in view.of_kind(kind) if o.api_version.startswith(SLINKY_API)]


def slurm_node_groups(view: ClusterView) -> list[str]:
    """The names of the NodeSets (each named after the node group it runs on): the node groups Slurm owns."""
    return sorted(o.name for o in _slurm_objects(view, "NodeSet"))


def slurm_gpu_node_groups(view: ClusterView) -> list[str]:
    """The node groups whose NodeSets hold GPUs (``Gres=gpu``): Slurm's GPU groups, not its CPU partitions' groups."""
    return sorted(o.name for o in _slurm_objects(view, "NodeSet") if _nodeset(o).gres_gpus)


def slurm_cluster(view: ClusterView) -> SlurmCluster | None:
    """The cluster's Slurm, or None when the graph has no Slinky Controller."""
    controllers = _slurm_objects(view, "Controller")
    if not controllers:
        return None
    controller = controllers[0]
    conf: dict[str, str] = {}
    partitions: list[Partition] = []
    for line in str(controller.spec.get("extraConf") or "").splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("PartitionName="):
            partitions.append(_partition(line))
        elif "=" in line and " " not in line:
            key, _, value = line.partition("=")
            conf[key] = value
    nodesets = [_nodeset(o) for o in _slurm_objects(view, "NodeSet")]
    for obj in _slurm_objects(view, "NodeSet"):  # the operator's own partition per NodeSet, when enabled
        own = as_mapping(obj.spec.get("partition"))
        if own.get("enabled") is True:
            partitions.append(_partition(f"PartitionName={obj.name} Nodes={obj.name} {own.get('config') or ''}"))
    accounts_map = next((o for o in view.of_kind("ConfigMap", SLURM_NAMESPACE)
                         if isinstance(as_mapping(o.manifest.get("data")).get(ACCOUNTS_KEY), str)), None)
    accounts = None
    if accounts_map is not None:
        accounts = parse_accounts(str(as_mapping(accounts_map.manifest.get("data"))[ACCOUNTS_KEY]))
    return SlurmCluster(controller=controller, conf=conf, partitions=partitions, nodesets=nodesets,
                        accounts=accounts, accounts_ref=accounts_map.ref if accounts_map is not None else None)


def show_minutes(minutes: float | None) -> str:
    """Slurm's ``[days-]hours:minutes:seconds`` (``UNLIMITED`` for no limit)."""
    if minutes is None or minutes == INFINITE:
        return "UNLIMITED"
    whole = int(minutes)
    days, rest = divmod(whole, 24 * 60)
    hours, mins = divmod(rest, 60)
    return f"{days}-{hours:02d}:{mins:02d}:00" if days else f"{hours:02d}:{mins:02d}:00"
