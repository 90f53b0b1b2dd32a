"""``blueprint admit`` output: one block per workload, one line per step, or the JSON document."""

from __future__ import annotations

import json

from blueprint.admit.results import AdmitReport, WorkloadResult


def _block(result: WorkloadResult) -> list[str]:
    lines = [f"{result.object}  ({result.source})"]
    for name in result.order:
        step = result.steps[name]
        if step.reasons:
            lines += [f"  FAIL {name}: {r.object}: {r.message} [{r.rule}]" for r in step.reasons]
        elif step.skipped is not None:
            lines.append(f"  skip {name} ({step.skipped})")
        else:
            lines.append(f"  ok   {name}" + (f"  {step.detail}" if step.detail else ""))
        lines += [f"       note: {n}" for n in step.notes]
    if result.admitted and result.slurm is not None:
        where = "; ".join(f"{p.pods} task{'s' if p.pods != 1 else ''} on {p.nodes} {p.node_group} "
                          f"node{'s' if p.nodes != 1 else ''}, {result.slurm['gpus']} GPUs" for p in result.placements)
        account = result.slurm["account"]
        lines.append(f"  => ADMITTED to partition {result.slurm['partition']}"
                     + (f" as account {account}" if account else "") + (f": {where}" if where else "")
                     + " (when it starts is Slurm's: runtime)")
    elif result.admitted:
        where = "; ".join(f"{p.pod_set}: {p.pods} pod{'s' if p.pods != 1 else ''} on {p.nodes} {p.node_group} "
                          f"node{'s' if p.nodes != 1 else ''}" for p in result.placements)
        queue = f" through queue {result.cluster_queue} (flavor {result.flavor})" if result.cluster_queue else ""
        lines.append(f"  => ADMITTED{queue}" + (f": {where}" if where else ""))
    else:
        first = result.reasons[0]
        blocked = next(name for name in result.order if first in result.steps[name].reasons)
        lines.append(f"  => NOT ADMITTED: first blocked at {blocked} by {first.object} [{first.rule}]")
    return lines


def render_text(report: AdmitReport) -> str:
    """One block per workload and a closing count."""
    lines: list[str] = []
    for result in report.workloads:
        lines += [*_block(result), ""]
    admitted = sum(1 for w in report.workloads if w.admitted)
    lines.append(f"{admitted} of {len(report.workloads)} workload{'s' if len(report.workloads) != 1 else ''} admitted"
                 f"{' on ' + report.stack if report.stack else ''}")
    return "\n".join(lines) + "\n"


def render_json(report: AdmitReport) -> str:
    """``{"stack", "admitted", "workloads": [...]}`` (README, ``blueprint admit``)."""
    return json.dumps(report.to_dict(), indent=2) + "\n"
