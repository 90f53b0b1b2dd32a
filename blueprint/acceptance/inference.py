"""Judge a served model's acceptance run (an inference-perf record, components/kubernetes/objects/inference_perf.py)
against the stack's objectives for that model: time to first token and time per output token at the objectives'
percentile, at (at least) the objectives' concurrency and request shape, with few failed requests, on the engine
release the stack serves.

inference-perf's summary report (v0.6.1, docs/reports.md; ``summary_lifecycle_metrics.json``): ``successes.count``,
``successes.latency.<metric>.{mean, median, p90, p95, p99, ...}`` for ``time_to_first_token``,
``time_per_output_token`` (per request: its decode time over its output tokens) and ``inter_token_latency`` (per gap
between two output tokens), in seconds; ``successes.prompt_len`` and ``output_len`` (tokens, the same statistics);
``successes.throughput.output_tokens_per_sec``; ``failures.count``. The 50th percentile is ``median``.

The time per output token is judged on ``inter_token_latency``, the same statistic the ServedModelTpotOverObjective
alert reads from vLLM (``vllm:inter_token_latency_seconds``, per gap): a per-request average
(``time_per_output_token``) has a lower tail, so a run judged on it could pass while the alert fires at the same load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from components.spec.inference import ServedModelSpec

# The share of failed requests a run may have: the same as the ServedModelErrors alert's 5xx share
# (components/kubernetes/objects/serving_telemetry.py ERROR_RATIO), so a run that passes does not page.
MAX_FAILED_SHARE = 0.01
# How much shorter than stated the run's mean prompt may be: inference-perf makes random prompts of the stated token
# count with the model's tokenizer, and the server's count of the decoded text can differ by a few tokens.
SHAPE_TOLERANCE = 0.9


@dataclass
class InferenceVerdict:
    """A run against a model's objectives: each measured figure beside its objective, and what failed."""

    model: str
    percentile: int
    measured: dict[str, float | None] = field(default_factory=dict)
    objectives: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "passed": self.passed, "percentile": self.percentile,
                "measured": self.measured, "objectives": self.objectives, "problems": self.problems,
                "notes": self.notes}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def percentile_key(percentile: int) -> tuple[str, ...]:
    """The report's keys of a percentile (inference-perf names the 50th ``median``)."""
    return ("median", "p50") if percentile == 50 else (f"p{percentile}",)


def _latency(report: dict[str, Any], metric: str, percentile: int) -> float | None:
    figures = ((report.get("successes") or {}).get("latency") or {}).get(metric) or {}
    for key in percentile_key(percentile):
        if (value := _number(figures.get(key))) is not None:
            return value
    return None


def check_record(record: dict[str, Any], model: ServedModelSpec, stack: str | None = None,
                 spec_has_gateway: bool = False) -> InferenceVerdict:
    """The record's run against ``model``'s objectives (see the module's docstring); ``stack``: the stack judged,
    which the record must name; ``spec_has_gateway``: the stack serves through a gateway (a run through the Service
    then missed part of the clients' path)."""
    o = model.objectives
    p = o.percentile
    report = record["report"]
    verdict = InferenceVerdict(model=model.name, percentile=p,
                               objectives={"ttft_seconds": o.ttft_ms / 1000, "tpot_seconds": o.tpot_ms / 1000,
                                           "concurrency": o.concurrency})
    for name, metric, limit in (("ttft_seconds", "time_to_first_token", o.ttft_ms / 1000),
                                ("tpot_seconds", "inter_token_latency", o.tpot_ms / 1000)):
        value = _latency(report, metric, p)
        verdict.measured[name] = value
        what = "time to first token" if name == "ttft_seconds" else "time per output token (inter-token latency)"
        if value is None:
            verdict.problems.append(f"the report has no p{p} {what} (inference-perf's report.request_lifecycle."
                                    f"percentiles must include {p}, and the run must stream)")
        elif value > limit:
            verdict.problems.append(f"p{p} {what} {value * 1000:,.1f} ms is over the objective of "
                                    f"{limit * 1000:,.1f} ms")
    load = record.get("load") or {}
    concurrency = _number(load.get("concurrency"))
    verdict.measured["concurrency"] = concurrency
    if concurrency is None or concurrency < o.concurrency:
        verdict.problems.append(f"the run held {concurrency or 0:g} requests in flight, fewer than the objectives' "
                                f"{o.concurrency}: it does not test them")
    succeeded = report.get("successes") or {}
    for key, measured, stated in (("promptTokens", "prompt_len", o.prompt_tokens),
                                  ("outputTokens", "output_len", o.output_tokens)):
        ran = _number(load.get(key))
        if ran is None or ran < stated:
            verdict.problems.append(f"the run's requests had {ran or 0:g} {key}, fewer than the objectives' "
                                    f"{stated}")
        # What the report measured, not only what the record says was asked for.
        mean = _number((succeeded.get(measured) or {}).get("mean"))
        verdict.measured[f"{measured}_mean"] = mean
        if mean is not None and mean < SHAPE_TOLERANCE * stated:
            verdict.problems.append(f"the report's requests had {mean:,.0f} {measured.replace('_', ' ')} tokens on "
                                    f"average, fewer than the objectives' {stated} ({key})")
    successes = _number(succeeded.get("count")) or 0.0
    failures = _number((report.get("failures") or {}).get("count")) or 0.0
    total = successes + failures
    verdict.measured["requests"] = total
    verdict.measured["failed_share"] = failures / total if total else None
    asked = _number(load.get("requests"))
    if asked is not None and total < asked:
        verdict.problems.append(f"the report counts {total:g} of the {asked:g} requests the run was to send: it was "
                                "cut short")
    if not total:
        verdict.problems.append("the run completed no request")
    elif failures / total > MAX_FAILED_SHARE:
        labels = ", ".join(f"{label} ({(v or {}).get('count', '?')})" for label, v in
                           ((report.get("failures") or {}).get("by_label") or {}).items())
        verdict.problems.append(f"{failures:g} of {total:g} requests failed ({failures / total:.1%}, over "
                                f"{MAX_FAILED_SHARE:.0%})" + (f": {labels}" if labels else ""))
    if stack is not None and record.get("stack") != stack:
        verdict.problems.append(f"the record is of stack {record.get('stack') or 'unknown'}, not {stack}")
    engine = (record.get("engine") or {}).get("version")
    if engine != model.engine.version:
        verdict.problems.append(f"the run measured engine {engine or 'unknown'}, the stack serves "
                                f"{model.engine.version}: run it again on the release in service")
    elif (image := (record.get("engine") or {}).get("image")) != model.engine.image:
        verdict.problems.append(f"the run measured the image {image or 'unknown'}, the stack serves "
                                f"{model.engine.image}: run it again on the image in service")
    tokens = _number(((report.get("successes") or {}).get("throughput") or {}).get("output_tokens_per_sec"))
    verdict.measured["output_tokens_per_second"] = tokens
    replicas = _number(record.get("replicas"))
    if tokens is not None and replicas:
        per = tokens / replicas
        verdict.measured["output_tokens_per_second_per_replica"] = per
        if verdict.passed:
            verdict.notes.append(f"{per:,.0f} output tokens/s per replica within the objectives: set "
                                 f"inference.models[].throughput to it, with this record as its source, and "
                                 "`blueprint sizing` gives replicas for the peak and the cost per million tokens")
    if record.get("path") == "service":
        verdict.notes.append("measured through the model's Service, not a gateway: the figures leave out the "
                             "gateway's proxy and the endpoint picker's routing"
                             + (" that this stack's clients go through: run it again from `blueprint inference "
                                "benchmark`" if spec_has_gateway else ""))
    return verdict


def render_table(verdict: InferenceVerdict, record: dict[str, Any]) -> str:
    """The verdict as text: PASS or FAIL, the figures beside the objectives, the problems and notes."""
    m, o, p = verdict.measured, verdict.objectives, verdict.percentile

    def ms(value: float | None) -> str:
        return "unknown" if value is None else f"{value * 1000:,.1f} ms"

    lines = [f"{'PASS' if verdict.passed else 'FAIL'}: {verdict.model} on {record.get('nodeGroup', '?')} "
             f"({record.get('instanceType', '?')}, {record.get('gpu', '?')}), engine "
             f"{(record.get('engine') or {}).get('version', '?')}, {record.get('startedAt', '?')}",
             f"  p{p} time to first token   {ms(m.get('ttft_seconds'))} (objective {ms(o['ttft_seconds'])})",
             f"  p{p} time per output token {ms(m.get('tpot_seconds'))} (objective {ms(o['tpot_seconds'])})",
             f"  requests in flight        {m.get('concurrency') or 0:g} (objective {o['concurrency']:g})"]
    share = m.get("failed_share")
    lines.append(f"  requests                  {m.get('requests') or 0:g}, "
                 f"{'no share' if share is None else f'{share:.1%}'} failed")
    if (tokens := m.get("output_tokens_per_second")) is not None:
        lines.append(f"  output tokens/s           {tokens:,.1f}")
    lines += [f"  - {problem}" for problem in verdict.problems]
    lines += [f"  note: {note}" for note in verdict.notes]
    return "\n".join(lines) + "\n"


def render_markdown(verdict: InferenceVerdict) -> str:
    """The verdict as a Markdown table (a PR comment)."""
    m, o, p = verdict.measured, verdict.objectives, verdict.percentile

    def ms(value: float | None) -> str:
        return "unknown" if value is None else f"{value * 1000:,.1f} ms"

    rows = [f"**{'PASS' if verdict.passed else 'FAIL'}**: `{verdict.model}`", "",
            "| figure | measured | objective |", "| --- | --- | --- |",
            f"| p{p} time to first token | {ms(m.get('ttft_seconds'))} | {ms(o['ttft_seconds'])} |",
            f"| p{p} time per output token | {ms(m.get('tpot_seconds'))} | {ms(o['tpot_seconds'])} |",
            f"| requests in flight | {m.get('concurrency') or 0:g} | {o['concurrency']:g} |"]
    rows += [f"- {problem}" for problem in verdict.problems]
    return "\n".join(rows) + "\n"
