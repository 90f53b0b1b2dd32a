"""What ``blueprint admit`` says of each workload: the steps of its walk through the cluster (pass, fail, skipped,
with notes), the reasons it does not run (the object, the rule, the fix), and the report over every workload. The
Kueue walk (:mod:`blueprint.admit.engine`) and the Slurm walk (:mod:`blueprint.admit.slurmjob`) both fill these."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from blueprint.admit.scheduling import Placement

STEPS = ("schema", "namespace", "pod-security", "admission-policy", "limits", "kueue", "scheduling", "volumes",
         "identity", "network")


@dataclass(frozen=True)
class Reason:
    """Why a workload does not run: the object that blocks it, the rule, and how to fix it."""

    object: str
    rule: str
    message: str

    def to_dict(self) -> dict[str, str]:
        """The JSON form."""
        return {"object": self.object, "rule": self.rule, "message": self.message}


@dataclass
class Step:
    """One step of the walk."""

    name: str
    detail: str = ""
    reasons: list[Reason] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None

    @property
    def status(self) -> str:
        """``ok``, ``FAIL`` or ``skip``."""
        return "FAIL" if self.reasons else ("skip" if self.skipped is not None else "ok")

    def fail(self, obj: str, rule: str, message: str) -> None:
        """Record a problem (once)."""
        reason = Reason(obj, rule, message)
        if reason not in self.reasons:
            self.reasons.append(reason)


@dataclass
class WorkloadResult:
    """The verdict on one workload."""

    object: str
    source: str
    namespace: str
    order: tuple[str, ...] = STEPS  # the steps in the order the cluster meets them for this kind
    steps: dict[str, Step] = field(default_factory=lambda: {name: Step(name) for name in STEPS})
    cluster_queue: str | None = None
    flavor: str | None = None
    placements: list[Placement] = field(default_factory=list)
    slurm: dict[str, Any] | None = None  # an sbatch script's partition, account, nodes and GPUs

    @property
    def reasons(self) -> list[Reason]:
        """Every problem, in the order the cluster meets the steps."""
        return [r for name in self.order for r in self.steps[name].reasons]

    @property
    def admitted(self) -> bool:
        """Admitted and schedulable: no step found a problem."""
        return not self.reasons

    def skip_rest(self, after: str, why: str) -> None:
        """Mark the steps after ``after`` as not judged, for the given cause."""
        for name in self.order[self.order.index(after) + 1:]:
            step = self.steps[name]
            if not step.reasons and step.skipped is None:
                step.skipped = why

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (README: ``blueprint admit --format json``); an sbatch script's adds ``scheduler: slurm``
        and its partition, account, nodes and GPUs, and what it holds on each node (``holds``: GPUs, CPUs, memory in
        MiB and where that figure comes from, the node's own, and whether it holds the whole node)."""
        out = {"object": self.object, "source": self.source, "admitted": self.admitted,
               "namespace": self.namespace, "cluster_queue": self.cluster_queue, "flavor": self.flavor,
               "placements": [p.to_dict() for p in self.placements],
               "reasons": [r.to_dict() for r in self.reasons],
               "steps": {name: self.steps[name].status for name in self.order},
               "notes": [n for name in self.order for n in self.steps[name].notes]}
        if self.slurm is not None:
            out.update({"scheduler": "slurm", **self.slurm})
        return out


@dataclass
class AdmitReport:
    """The verdicts on every workload submitted, against one graph."""

    stack: str
    workloads: list[WorkloadResult]

    @property
    def admitted(self) -> bool:
        """Every workload admitted and schedulable."""
        return all(w.admitted for w in self.workloads)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {"stack": self.stack, "admitted": self.admitted, "workloads": [w.to_dict() for w in self.workloads]}
