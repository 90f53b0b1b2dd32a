"""The Kubernetes platform as the graph holds it, read once for the preview and the report: the planes in the order
they are shown, the Helm releases, each team's Kueue queue and quota, and Slurm's partitions and accounts."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from blueprint.graph.model import GraphResource, ResourceGraph
from components.kubernetes.names import ACCEPTANCE_QUEUE

PLANE_ORDER = ("network", "compute", "storage", "control-plane", "platform", "telemetry", "cost")
# The Kubernetes platform's components keep their control-plane type tokens (a new token would change every
# URN under them); the preview shows them under their own heading.
PLATFORM_COMPONENTS = ("GpuStack", "Tenancy", "Queues", "Slurm")
PLANE_TITLES = {
    "network": "network & fabric",
    "compute": "compute",
    "storage": "storage",
    "control-plane": "control plane",
    "platform": "Kubernetes platform",
    "telemetry": "telemetry & cost",
    "cost": "cost plane (budgets, allocation tags, usage export)",
}
RELEASE = "kubernetes:helm.sh/v3:Release"
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"
SLINKY = "kubernetes:slinky.slurm.net/v1beta1:"
_ACCOUNT = re.compile(r"^Account - '([^']+)'(.*)$")


def release(graph: ResourceGraph, name: str) -> GraphResource | None:
    """The Helm release of that name, if the graph has it."""
    return next((r for r in graph.of_type(RELEASE) if r.inputs.get("name") == name), None)


def chart(rel: GraphResource | None) -> str:
    """``<release> <chart version>``, or "not installed"."""
    return f"{rel.inputs.get('name')} {rel.inputs.get('version')}" if rel else "not installed"


@dataclass(frozen=True)
class FlavorQuota:
    """A ClusterQueue's GPU quota on one flavor, as written in the object (``None``: no such limit)."""

    flavor: str
    gpus: str
    borrowing: str | None
    lending: str | None
    cpu_only: str | None = None  # a CPU flavor (no GPU quota; teams[].cpuQuotas): "N CPUs, M memory"

    def describe(self, lends: str = "lends at most") -> str:
        """``N GPUs (+B borrowable) (lends at most L)``: the quota as the preview and the report's diagram say it; a
        CPU flavor's as ``N CPUs, M memory for CPU-only work``."""
        if self.cpu_only is not None:
            return f"{self.cpu_only} for CPU-only work"
        text = f"{self.gpus} GPUs"
        if self.borrowing is not None:
            text += f" (+{self.borrowing} borrowable)"
        if self.lending is not None:
            text += f" ({lends} {self.lending})"
        return text


@dataclass(frozen=True)
class TeamQueue:
    """A team's Kueue ClusterQueue (or the acceptance queue): GPU quota per flavor, its LocalQueue and the namespace's
    GPU ceiling (the ResourceQuota behind Kueue)."""

    team: str
    urn: str
    flavors: tuple[FlavorQuota, ...]
    local_queue: bool
    gpu_ceiling: str
    acceptance: bool
    held: bool


def team_queues(graph: ResourceGraph) -> list[TeamQueue]:
    """Every ClusterQueue of the graph, read as the preview shows it."""
    local = {r.inputs["spec"]["clusterQueue"] for r in graph.of_type(KUEUE + "LocalQueue")}
    quotas = {r.inputs["metadata"]["namespace"]: r.inputs["spec"]["hard"]
              for r in graph.of_type("kubernetes:core/v1:ResourceQuota")}
    out = []
    for cq in graph.of_type(KUEUE + "ClusterQueue"):
        team = cq.inputs["metadata"]["name"]
        flavors = []
        for group in cq.inputs["spec"].get("resourceGroups", []):
            for flavor in group.get("flavors", []):
                gpu: dict[str, Any] = next((r for r in flavor["resources"] if r["name"] == "nvidia.com/gpu"), {})
                nominal = {r["name"]: str(r.get("nominalQuota")) for r in flavor["resources"]}
                cpu_only = f"{nominal['cpu']} CPUs, {nominal.get('memory', '0')} memory" \
                    if nominal.get("nvidia.com/gpu") == "0" and nominal.get("cpu", "0") != "0" else None
                flavors.append(FlavorQuota(
                    str(flavor["name"]), str(gpu.get("nominalQuota", "?")),
                    str(gpu["borrowingLimit"]) if "borrowingLimit" in gpu else None,
                    str(gpu["lendingLimit"]) if "lendingLimit" in gpu else None, cpu_only))
        out.append(TeamQueue(team=str(team), urn=cq.urn, flavors=tuple(flavors), local_queue=team in local,
                             gpu_ceiling=str(quotas.get(team, {}).get("requests.nvidia.com/gpu", "none")),
                             acceptance=team == ACCEPTANCE_QUEUE,
                             held=cq.inputs["spec"].get("stopPolicy") == "Hold"))
    return out


def flavor_node_groups(graph: ResourceGraph) -> dict[str, str]:
    """Each Kueue ResourceFlavor's node group (its ``gpu-cluster/node-group`` node label)."""
    return {str(f.inputs["metadata"]["name"]): str(labels["gpu-cluster/node-group"])
            for f in graph.of_type(KUEUE + "ResourceFlavor")
            if "gpu-cluster/node-group" in (labels := f.inputs.get("spec", {}).get("nodeLabels") or {})}


@dataclass(frozen=True)
class SlurmPartition:
    """A partition of the Slurm controller's configuration: its ``PartitionName=`` line and its fields."""

    name: str
    conf: str  # the line after PartitionName=
    fields: dict[str, str]

    @property
    def accounts(self) -> list[str]:
        """The accounts allowed on it (AllowAccounts), empty when it names none."""
        return [a for a in self.fields.get("AllowAccounts", "").split(",") if a]


@dataclass(frozen=True)
class SlurmAccount:
    """A Slurm account of the accounts file sacctmgr loads: a team's GPU limit, fair share and budget."""

    name: str
    gpu_limit: str
    fairshare: str | None
    budget_gpu_minutes: str  # "" when it has none


def slurm_partitions(graph: ResourceGraph) -> list[SlurmPartition]:
    """The partitions of every Slinky Controller in the graph."""
    out = []
    for ctl in graph.of_type(SLINKY + "Controller"):
        for line in str(ctl.inputs["spec"].get("extraConf", "")).splitlines():
            if line.startswith("PartitionName="):
                conf = line.removeprefix("PartitionName=")
                name, _, rest = conf.partition(" ")
                fields = dict(f.split("=", 1) for f in rest.split() if "=" in f)
                out.append(SlurmPartition(name, conf, fields))
    return out


def slurm_accounts(graph: ResourceGraph) -> list[SlurmAccount]:
    """The accounts of the ``slurm-accounts`` ConfigMaps (``Account - '<name>':<field>=<value>:...`` lines)."""
    out = []
    for cm in graph.of_type("kubernetes:core/v1:ConfigMap"):
        if not str(cm.inputs["metadata"]["name"]).startswith("slurm-accounts"):
            continue
        for line in str(cm.inputs.get("data", {}).get("accounts.cfg", "")).splitlines():
            m = _ACCOUNT.match(line)
            if not m:
                continue
            fields = dict(f.split("=", 1) for f in m.group(2).split(":") if "=" in f)
            out.append(SlurmAccount(m.group(1), fields.get("GrpTRES", "").removeprefix("gres/gpu="),
                                    fields.get("Fairshare"), fields.get("GrpTRESMins", "").removeprefix("gres/gpu=")))
    return out


def slurm_nodeset_groups(graph: ResourceGraph) -> dict[str, str]:
    """Each Slinky NodeSet's node group (its pods' ``gpu-cluster/node-group`` node selector)."""
    out = {}
    for n in graph.of_type(SLINKY + "NodeSet"):
        selector = n.inputs["spec"].get("template", {}).get("spec", {}).get("nodeSelector") or {}
        if "gpu-cluster/node-group" in selector:
            out[str(n.inputs["metadata"]["name"])] = str(selector["gpu-cluster/node-group"])
    return out


