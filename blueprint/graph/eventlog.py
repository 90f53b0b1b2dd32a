"""Read the engine event log of a real ``pulumi preview --event-log FILE`` into two ResourceGraphs.

The file is what the CLI's event logger writes (pulumi/pulumi ``pkg/backend/display/display.go``,
``startEventLogger``): one ``apitype.EngineEvent`` per line, JSON, each with ``sequence`` (0, 1, 2, ... in the
order the engine emitted them) and ``timestamp``, and one payload: ``preludeEvent``, ``resourcePreEvent``,
``resOutputsEvent``, ``diagnosticEvent``, ``policyEvent``, ``summaryEvent``, ``cancelEvent``, ... (shapes in
``sdk/go/common/apitype/events.go``, read at pulumi/pulumi 1b5949891b3cefcb9974752b24a5ecef0acc86c8).

What a graph takes from the events:

- A resource's step is its ``resourcePreEvent.metadata`` (a ``StepEventMetadata``): ``op``, ``urn``, and the
  ``old`` and ``new`` state (``StepEventStateMetadata``: type, urn, parent, provider, protect, retainOnDelete,
  inputs). ``resOutputsEvent`` repeats the step with the provider's outputs, which no reader uses: it is checked
  for shape and otherwise not read.
- The graph **after** the update (:attr:`EventLogPreview.new`, what ``ResourceGraph.load`` returns) holds the
  ``new`` state of every resource whose step keeps one (same, create, update, replace, read, import);
  deleted and discarded resources are absent. The graph **before** (:attr:`EventLogPreview.old`) holds the
  ``old`` state of every resource that had one (everything but creates and imports). Both record each
  resource's step as ``op``.
- Not in the events at all, so not in the graphs: ``dependencies`` (listed in ``ResourceGraph.unrecorded``;
  the policies that follow them are then reported not applicable), ``ignoreChanges`` (``ignore_changes`` is
  None, as for ``pulumi preview --json``), property dependencies, custom timeouts, aliases, ``deletedWith``.
- Values unknown during the preview are the engine's :data:`~blueprint.graph.model.UNKNOWN` string, as in
  ``pulumi preview --json``. Secrets come as the engine's secret object with the ciphertext blinded
  (``{"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "[secret]"}``) and
  become :data:`~blueprint.graph.model.SECRET`, as they are in every other graph.

Which event wins when a resource has several (the dedupe rule):

- ``refresh`` steps (``pulumi preview --refresh``) read the cloud before the update and are not part of it:
  they are skipped (the update's own step of the resource follows them).
- A replacement is two or three steps of one URN (``create-replacement``, ``replace``, ``delete-replaced``, in
  either order): the resource's op is ``replace``; its new state is the ``new`` of ``replace`` (the same as
  ``create-replacement``'s) and its old state the ``old`` of the first of them, before the engine marks it
  for deletion.
- ``delete-replaced`` of a copy left pending deletion by an earlier, interrupted replacement comes beside the
  live copy's own step (``same``, ``update``): that step names the op, and the old graph keeps the live copy
  (a graph holds one resource per URN).
- Any other mix of steps for one URN (``create`` and ``update``, say) contradicts the engine and is an error.
- A renamed resource (an alias) has its old URN in ``old.urn``: the old graph keeps that URN and
  :attr:`EventLogPreview.renamed` maps it to the new one.

A log is read only if the preview finished: it must end with a ``summaryEvent`` (a log cut off, as when the
CLI is killed, has none, and a cut last line is reported as such), and a preview that failed is refused unless
its only failures are mandatory policy violations (the engine generates every step before it fails for
those). A log of ``pulumi up --event-log`` reads the same way (``is_preview`` False).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blueprint.files.input import InputTooLargeError, read_text_limited
from blueprint.graph.model import (
    MAX_DOCUMENT_BYTES,
    STEP_OPS,
    GraphFormatError,
    GraphResource,
    JsonTooDeepError,
    ResourceGraph,
    from_state,
    stack_from_urns,
    strict_json,
)

# The payload keys of apitype.EngineEvent; a key not listed (a newer CLI's event) is skipped.
EVENT_KINDS = ("cancelEvent", "stdoutEvent", "diagnosticEvent", "preludeEvent", "summaryEvent", "resourcePreEvent",
               "resOutputsEvent", "resOpFailedEvent", "policyEvent", "policyRemediationEvent", "policyLoadEvent",
               "policyAnalyzeSummaryEvent", "policyRemediateSummaryEvent", "policyAnalyzeStackSummaryEvent",
               "startDebuggingEvent", "progressEvent", "errorEvent")
STEP_EVENTS = ("resourcePreEvent", "resOutputsEvent", "resOpFailedEvent")

KEEPS_NEW = ("same", "create", "update", "replace", "create-replacement", "read", "read-replacement", "import",
             "import-replacement")
HAS_OLD = ("same", "update", "replace", "create-replacement", "delete", "delete-replaced", "discard",
           "discard-replaced", "remove-pending-replace", "read-replacement", "import-replacement")
REPLACEMENT = ("replace", "create-replacement", "delete-replaced", "read-replacement", "import-replacement",
               "discard-replaced")
# A pending-delete leftover's clean-up: beside a live copy's own step it is not the resource's op.
LEFTOVER = ("delete-replaced", "discard-replaced", "remove-pending-replace")


@dataclass(frozen=True)
class PolicyFinding:
    """A ``policyEvent``: a violation the policy pack reported to the engine during the preview."""

    policy: str
    pack: str
    enforcement: str
    urn: str
    message: str


@dataclass(frozen=True)
class EventLogPreview:
    """Both sides of the update an event log describes, and what else the log says about it."""

    old: ResourceGraph
    new: ResourceGraph
    ops: dict[str, str]  # URN (the new one for a renamed resource) -> its step: same, create, update, replace, ...
    renamed: dict[str, str] = field(default_factory=dict)  # old URN -> new URN
    is_preview: bool = True
    config: dict[str, str] = field(default_factory=dict)  # preludeEvent.config (secrets blinded by the CLI)
    policy_findings: tuple[PolicyFinding, ...] = ()

    @property
    def replaced(self) -> list[str]:
        """URNs the update deletes and creates again."""
        return sorted(urn for urn, op in self.ops.items() if op == "replace")


@dataclass
class _Steps:
    """The step events of one URN, in log order."""

    steps: list[tuple[str, dict[str, Any] | None, dict[str, Any] | None, str]] = field(default_factory=list)


def is_event_log(text: str) -> bool:
    """Whether a document is an engine event log: its first line is an event object (``sequence`` and a
    payload). Graph JSON, ``pulumi preview --json`` and stack exports never start so."""
    lead = text[:4096]  # look at the start only: a graph document may be a gigabyte on one line
    start = len(lead) - len(lead.lstrip())
    if text.startswith('{"sequence":', start):
        return True  # as the CLI writes every event, even a first line cut short
    if text[start:start + 1] != "{":
        return False
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    if text.find('"sequence"', start, end) < 0:
        return False
    try:
        first = json.loads(text[start:end])
    except ValueError:
        return False
    return isinstance(first, dict) and "sequence" in first and not {"resources", "steps", "deployment"} & first.keys()


def load_event_log(path: Path) -> EventLogPreview:
    """Read an event log file; every problem is a :class:`GraphFormatError` that starts with the file's name."""
    try:
        text = read_text_limited(path, MAX_DOCUMENT_BYTES)
    except InputTooLargeError:
        raise GraphFormatError(f"{path}: more than {MAX_DOCUMENT_BYTES:,} bytes; an event log is at most "
                               f"{MAX_DOCUMENT_BYTES:,} bytes") from None
    except OSError as err:
        raise GraphFormatError(f"{path}: cannot be read: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise GraphFormatError(f"{path}: not UTF-8 text") from None
    try:
        return read_event_log(text)
    except GraphFormatError as err:
        raise GraphFormatError(f"{path}: {err}") from None


def read_event_log(text: str) -> EventLogPreview:
    """Both graphs of an event log's text (see the module's documentation for the rules)."""
    by_urn: dict[str, _Steps] = {}
    summary: dict[str, Any] | None = None
    config: dict[str, str] = {}
    errors: list[str] = []
    findings: list[PolicyFinding] = []
    canceled = False
    last_sequence = -1
    lines = text.split("\n")
    count = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        event = _parse(line, where, cut=number == len(lines) and not text.endswith("\n"))
        count += 1
        sequence = _integer(event, "sequence", where)
        _integer(event, "timestamp", where)
        if sequence <= last_sequence:
            raise GraphFormatError(f"{where}: sequence {sequence} after {last_sequence}; the engine numbers its events "
                                   "0, 1, 2, ... in order (two logs in one file?)")
        last_sequence = sequence
        if summary is not None and "cancelEvent" not in event:
            raise GraphFormatError(f"{where}: an event after the summaryEvent; a log ends with the summary (and a "
                                   "cancelEvent)")
        kinds = [k for k in EVENT_KINDS if k in event]
        if len(kinds) > 1:
            raise GraphFormatError(f"{where}: one event holds {', '.join(kinds)}; an engine event has one payload")
        if not kinds:
            if len(event.keys() - {"sequence", "timestamp"}) == 0:
                raise GraphFormatError(f"{where}: an event with no payload (only sequence and timestamp)")
            continue  # an event kind newer than this reader: nothing in it is a resource
        kind = kinds[0]
        payload = event[kind]
        if not isinstance(payload, dict):
            raise GraphFormatError(f"{where}.{kind}: must be an object, got {type(payload).__name__}")
        where = f"{where} ({kind})"
        if kind == "resourcePreEvent":
            op, urn, old, new = _step(payload, where)
            by_urn.setdefault(urn, _Steps()).steps.append((op, old, new, where))
        elif kind in STEP_EVENTS:
            _step(payload, where)
        elif kind == "preludeEvent":
            raw = _object(payload, "config", where, nullable=True) or {}
            config = {str(k): str(v) for k, v in raw.items()}
        elif kind == "summaryEvent":
            summary = payload
        elif kind == "cancelEvent":
            canceled = canceled or summary is None
        elif kind == "diagnosticEvent" and payload.get("severity") == "error":
            errors.append(f"{where}: {str(payload.get('message', '')).strip()[:300]}")
        elif kind == "errorEvent":
            errors.append(f"{where}: {str(payload.get('error', '')).strip()[:300]}")
        elif kind == "policyEvent":
            findings.append(PolicyFinding(str(payload.get("policyName", "")), str(payload.get("policyPackName", "")),
                                          str(payload.get("enforcementLevel", "")),
                                          str(payload.get("resourceUrn", "")), str(payload.get("message", ""))))
    if count == 0:
        raise GraphFormatError("an empty event log: the preview wrote no event")
    _check_finished(summary, canceled, errors, findings, last_sequence)
    assert summary is not None
    return _graphs(by_urn, summary, config, findings)


def _parse(line: str, where: str, cut: bool) -> dict[str, Any]:
    try:
        event = strict_json(line)
    except JsonTooDeepError as err:
        raise GraphFormatError(f"{where}: {err}") from None
    except ValueError as err:
        if cut:
            raise GraphFormatError(f"{where} is cut off (the file does not end with a newline): the CLI stopped "
                                   "while writing the log, so the preview did not finish") from None
        raise GraphFormatError(f"{where}: not JSON: {str(err)[:200]}") from None
    if not isinstance(event, dict):
        raise GraphFormatError(f"{where}: an event is a JSON object, got {type(event).__name__}")
    return event


def _integer(raw: dict[str, Any], key: str, where: str) -> int:
    value = raw.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        shown = "missing" if key not in raw else json.dumps(value)[:40]
        raise GraphFormatError(f"{where}.{key}: must be a whole number from 0, got {shown}")
    return value


def _object(raw: dict[str, Any], key: str, where: str, nullable: bool = False) -> dict[str, Any] | None:
    if key not in raw or (raw[key] is None and nullable):
        if nullable:
            return None
        raise GraphFormatError(f"{where}.{key}: required")
    value = raw[key]
    if not isinstance(value, dict):
        raise GraphFormatError(f"{where}.{key}: must be an object, got {type(value).__name__}")
    return value


def _step(payload: dict[str, Any], where: str) -> tuple[str, str, dict[str, Any] | None, dict[str, Any] | None]:
    """The op, URN and old and new states of a step event, checked against the StepEventMetadata shape."""
    meta = _object(payload, "metadata", where)
    assert meta is not None
    where = f"{where}.metadata"
    op = meta.get("op")
    if not isinstance(op, str) or op not in STEP_OPS:
        shown = "missing" if "op" not in meta else json.dumps(op)[:60]
        raise GraphFormatError(f"{where}.op: {shown} is not a step of the engine ({', '.join(STEP_OPS)})")
    urn = meta.get("urn")
    if not isinstance(urn, str) or not urn.startswith("urn:pulumi:"):
        raise GraphFormatError(f"{where}.urn: must be a resource URN (urn:pulumi:...), got "
                               f"{'missing' if 'urn' not in meta else json.dumps(urn)[:80]}")
    where = f"{where} ({op} {urn})"
    old = _object(meta, "old", where, nullable=True)
    new = _object(meta, "new", where, nullable=True)
    if op in KEEPS_NEW and new is None:
        raise GraphFormatError(f"{where}: a {op} step has a new state; metadata.new is missing")
    if op in HAS_OLD and old is None:
        raise GraphFormatError(f"{where}: a {op} step has an old state; metadata.old is missing")
    if new is not None and new.get("urn") != urn:
        raise GraphFormatError(f"{where}.new.urn: {json.dumps(new.get('urn'))[:80]} is not the step's URN")
    for key in ("keys", "diffs"):
        value = meta.get(key)
        if value is not None and (not isinstance(value, list) or not all(isinstance(k, str) for k in value)):
            raise GraphFormatError(f"{where}.{key}: must be a list of property names")
    detailed = meta.get("detailedDiff")
    if detailed is not None and not isinstance(detailed, dict):
        raise GraphFormatError(f"{where}.detailedDiff: must be an object or null")
    return op, urn, old, new


def _check_finished(summary: dict[str, Any] | None, canceled: bool, errors: list[str],
                    findings: list[PolicyFinding], last_sequence: int) -> None:
    """Refuse a log whose preview did not finish or failed (a graph from it would lack resources)."""
    if canceled:
        raise GraphFormatError("the log has a cancelEvent before any summaryEvent: the preview was cancelled, so "
                               "its graph would lack resources")
    if summary is None:
        raise GraphFormatError(f"no summaryEvent: the log stops at sequence {last_sequence} before the preview "
                               "finished (was the CLI killed?), so its graph would lack resources")
    if errors:
        raise GraphFormatError(f"the preview failed ({len(errors)} error(s)); first: {errors[0]}")
    result = summary.get("result", "")
    mandatory = any(f.enforcement == "mandatory" for f in findings)
    if result == "canceled" or (result == "failed" and not mandatory):
        raise GraphFormatError(f"the preview {'was cancelled' if result == 'canceled' else 'failed'} "
                               "(summaryEvent.result), so its graph would lack resources")


def _resource(state: dict[str, Any], where: str, op: str) -> GraphResource:
    """A step's state as a graph resource (its secrets redacted by :func:`from_state`)."""
    return from_state(state, where, op=op)


def _op_of(ops: list[str], urn: str, where: str) -> str:
    """The one op of a URN's steps (the dedupe rule of the module's documentation)."""
    steps = [op for op in ops if op != "refresh"]
    if any(op in REPLACEMENT and op not in LEFTOVER for op in steps):
        kinds = {op for op in steps if op not in REPLACEMENT}
        if kinds:
            raise GraphFormatError(f"{where}: {urn} is both replaced and {', '.join(sorted(kinds))}; the engine "
                                   "gives a resource one of them")
        return "replace"
    own = sorted({op for op in steps if op not in LEFTOVER})
    if len(own) > 1:
        raise GraphFormatError(f"{where}: {urn} has the steps {', '.join(own)}; the engine gives a resource one")
    if own:
        return own[0]
    return "delete"  # only a pending-delete leftover's clean-up: the URN has no live copy


def _graphs(by_urn: dict[str, _Steps], summary: dict[str, Any], config: dict[str, str],
            findings: list[PolicyFinding]) -> EventLogPreview:
    new: list[GraphResource] = []
    old: dict[str, GraphResource] = {}
    ops: dict[str, str] = {}
    renamed: dict[str, str] = {}
    for urn, record in by_urn.items():
        if all(s[0] == "refresh" for s in record.steps):
            continue  # read under a URN the update renames: the step of its new URN has the old state too
        where = record.steps[-1][3]
        op = _op_of([s[0] for s in record.steps], urn, where)
        ops[urn] = op
        steps = [s for s in record.steps if s[0] != "refresh"]
        if op in KEEPS_NEW:
            # replace before create-replacement (the same new state); otherwise the URN's one own step
            keep = next((s for s in steps if s[0] == op), None) or next(s for s in steps if s[2] is not None)
            assert keep[2] is not None
            new.append(_resource(keep[2], f"{keep[3]}.metadata.new", op))
        olds = [s for s in steps if s[1] is not None]
        if not olds:
            continue
        # the first state not pending deletion: before a replacement marks it, or the live copy beside a leftover
        chosen = next((s for s in olds if not (s[1] or {}).get("delete")), olds[0])
        assert chosen[1] is not None
        before = _resource(chosen[1], f"{chosen[3]}.metadata.old", op)
        if before.urn != urn:
            renamed[before.urn] = urn
        old.setdefault(before.urn, before)
    unrecorded = ("dependencies",)
    olds_list = list(old.values())
    return EventLogPreview(
        old=ResourceGraph(stack_from_urns(olds_list) or stack_from_urns(new), olds_list, unrecorded),
        new=ResourceGraph(stack_from_urns(new) or stack_from_urns(olds_list), new, unrecorded),
        ops=ops, renamed=renamed, is_preview=summary.get("isPreview") is not False, config=config,
        policy_findings=tuple(findings))
