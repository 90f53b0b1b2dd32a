"""The ResourceGraph: the one data structure every reader (preview, policy, cost, renderers) takes.

A graph can be built three ways and readers do not care which:

- an offline run of the program under Pulumi's mocks (:mod:`blueprint.graph.engine`);
- the JSON of a real ``pulumi preview --json`` (:meth:`ResourceGraph.from_preview_json`);
- ``pulumi stack export`` of a deployed stack (:meth:`ResourceGraph.from_stack_export`);
- the engine event log of a real ``pulumi preview --event-log FILE`` (:mod:`blueprint.graph.eventlog`).

Its JSON form is a public contract (README, "Graph format")::

    {"stack": "prod-aws",
     "resources": [{"urn", "type", "name", "parent", "provider", "inputs", "protect",
                    "retain_on_delete", "dependencies", "ignore_changes"}]}

``inputs`` are the provider's wire format (camelCase keys). Secret values are the string
``[secret]`` and values unknown at preview time the string :data:`UNKNOWN`; treat both as unknown.

Graphs read from a real preview (``--json`` or an event log) add ``"op"`` to each resource: the step the
preview plans for it (:data:`STEP_OPS`). A graph whose source does not record a field lists it under a
top-level ``"unrecorded"`` (an event log has no ``dependencies``); both keys are absent otherwise.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from blueprint import clouds
from blueprint.graph.cloud import CloudGraph, cloud_graph

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
SECRET = "[secret]"
FORMAT_KEYS = ("urn", "type", "name", "parent", "provider", "inputs", "protect", "retain_on_delete", "dependencies",
               "ignore_changes")
# The step operations of Pulumi's engine (sdk/go/common/apitype/history.go, OpType).
STEP_OPS = ("same", "create", "update", "delete", "replace", "create-replacement", "delete-replaced", "read",
            "read-replacement", "refresh", "discard", "discard-replaced", "remove-pending-replace", "import",
            "import-replacement")
# Files a reader takes as a graph document rather than a stack name: JSON, and the newline-delimited JSON of an
# engine event log.


class GraphFormatError(ValueError):
    """A graph document that does not have the documented shape."""


MAX_DOCUMENT_BYTES = 1024 * 1024 * 1024
MAX_DEPTH = 64


def _check_value(value: Any, where: str, depth: int = 0) -> None:
    """Inputs are JSON: objects with string keys, arrays, finite numbers, strings without lone surrogates."""
    if depth > MAX_DEPTH:
        raise GraphFormatError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise GraphFormatError(f"{where}: object keys must be strings")
            _check_text(key, where)
            _check_value(item, f"{where}.{_short(key)}", depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_value(item, f"{where}[{i}]", depth + 1)
    elif isinstance(value, str):
        _check_text(value, where)
    elif isinstance(value, float) and not math.isfinite(value):
        raise GraphFormatError(f"{where}: numbers must be finite")
    elif value is not None and not isinstance(value, (bool, int, float)):
        raise GraphFormatError(f"{where}: not a JSON value")


def _check_text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise GraphFormatError(f"{where}: a string holds a lone surrogate (\\ud800-\\udfff), not text") from None


# The quantities readers multiply prices by or size quotas with are listed per resource type by each cloud's graph
# module (QUANTITIES: key path, what, maximum; the maxima in blueprint.graph.cloud). A graph read from a file (an
# edited preview, a hand-written case) must carry whole, non-negative numbers within the maximum there, or the cost
# would be priced at -$ or $3.4e21.


def _check_inputs(type_: str, inputs: dict[str, Any], where: str, urn: Any) -> None:
    """The quantities the type's cloud lists (its ``QUANTITIES``) are whole numbers from 0 to their maximum (as
    decimal strings where the provider sends int64 fields so), and no input holds a value the cloud's API refuses
    (its ``refused_values``); unknown and secret values are left to the readers."""
    cloud = clouds.of_type(type_)
    if cloud is None:
        return
    part = cloud_graph(cloud)
    _check_quantities(part, type_, inputs, where)
    for path, problem, rule in part.refused_values(type_, inputs)[:1]:
        dotted = "".join(step if step.startswith("[") else f".{step}" for step in path)
        raise GraphFormatError(f"{where}.inputs{dotted} of {urn}: {problem} [rule: {rule}]")


def _check_quantities(part: CloudGraph, type_: str, inputs: dict[str, Any], where: str) -> None:
    """The cloud's ``QUANTITIES`` of the type are whole numbers in range (see :func:`_check_inputs`)."""
    for path, (what, maximum) in part.QUANTITIES.get(type_, ()):
        value: Any = inputs
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None or value in (UNKNOWN, SECRET):
            continue
        number: float | None = None
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str) and part.NUMERIC_STRINGS and value.strip().isdigit() and len(value) <= 20:
            number = float(int(value))
        if number is None or not number.is_integer() or not 0 <= number <= maximum:
            shown = json.dumps(value)[:40]
            raise GraphFormatError(f"{where}.inputs.{'.'.join(path)}: {shown} is not {what} (a whole number from 0 "
                                   f"to {maximum:,})")


def _short(key: str) -> str:
    return key if len(key) <= 40 else key[:37] + "..."


def _field(raw: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str, *, required: bool = False,
           nullable: bool = False, default: Any = None) -> Any:
    """One field of a resource object, of exactly the given JSON type (``"false"`` is not a boolean)."""
    if key not in raw or (raw[key] is None and nullable):
        if required:
            raise GraphFormatError(f"{where}.{key}: required")
        return default
    value = raw[key]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise GraphFormatError(f"{where}.{key}: must be {_kind_name(kind)}, got a boolean")
    if not isinstance(value, kind):
        raise GraphFormatError(f"{where}.{key}: must be {_kind_name(kind)}, got {type(value).__name__}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", bool: "a boolean", dict: "an object", list: "an array"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _string_list(raw: dict[str, Any], key: str, where: str, nullable: bool = False) -> list[str] | None:
    value = _field(raw, key, list, where, nullable=nullable, default=None if nullable else [])
    if value is None:
        return None
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise GraphFormatError(f"{where}.{key}[{i}]: must be a string")
        _check_text(item, f"{where}.{key}[{i}]")
    return list(value)


@dataclass(frozen=True)
class GraphResource:
    """One resource: custom (a cloud object), component, provider or the stack itself."""

    urn: str
    type: str
    name: str
    parent: str | None = None
    provider: str | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    protect: bool = False
    retain_on_delete: bool = False
    dependencies: list[str] = field(default_factory=list)
    # Inputs the engine never updates (the ignoreChanges option): name-like inputs of stateful
    # resources, so a rename cannot replace (delete) data. None when not recorded: a real preview or a
    # stack export carries it only where the state has an ``ignoreChanges`` field.
    ignore_changes: list[str] | None = field(default_factory=list)
    # The step a real preview plans for the resource (one of STEP_OPS: "create", "update", "replace", ...); None in
    # graphs that are not a preview (offline runs, stack exports).
    op: str | None = None

    @property
    def options_recorded(self) -> bool:
        """Whether resource options such as ignoreChanges were recorded (offline graphs: always)."""
        return self.ignore_changes is not None

    @property
    def is_provider(self) -> bool:
        """True for provider resources (``pulumi:providers:<pkg>``)."""
        return self.type.startswith("pulumi:providers:")

    @property
    def is_component(self) -> bool:
        """True for this project's component resources (``gpu-cluster:<plane>:<Name>``)."""
        return self.type.startswith("gpu-cluster:")

    @property
    def provider_urn(self) -> str | None:
        """The provider reference without its ``::<id>`` suffix."""
        if not self.provider:
            return None
        urn, _, _ = self.provider.rpartition("::")
        return urn or self.provider


@dataclass
class ResourceGraph:
    """All resources of one stack, in registration order."""

    stack: str
    resources: list[GraphResource]
    # Fields the source does not carry for any resource, e.g. ("dependencies",) for an engine event log: an empty
    # list there means "not known", not "none", and readers that need the field say so instead of guessing.
    unrecorded: tuple[str, ...] = ()

    @property
    def dependencies_recorded(self) -> bool:
        """Whether ``dependencies`` come from the source (every form but an engine event log)."""
        return "dependencies" not in self.unrecorded

    def __post_init__(self) -> None:
        self._by_urn = {r.urn: r for r in self.resources}
        self._indexed_count = -1
        self._by_type: dict[str, list[GraphResource]] = {}
        self._by_parent: dict[str, list[GraphResource]] = {}

    def _index(self) -> None:
        """Resources by type and by parent, ordered by URN and built once (readers ask per node group, per
        team: a scan of the whole graph each time is quadratic). Rebuilt if the list grew."""
        if self._indexed_count == len(self.resources):
            return
        self._by_type, self._by_parent = {}, {}
        for r in sorted(self.resources, key=lambda res: res.urn):
            self._by_type.setdefault(r.type, []).append(r)
            if r.parent:
                self._by_parent.setdefault(r.parent, []).append(r)
        self._by_urn = {r.urn: r for r in self.resources}
        self._indexed_count = len(self.resources)

    # --- queries ---------------------------------------------------------------------------------

    def get(self, urn: str) -> GraphResource | None:
        """The resource with this URN, if any."""
        self._index()
        return self._by_urn.get(urn)

    def of_type(self, type_: str) -> list[GraphResource]:
        """Every resource of one type token, ordered by URN (registration order varies between runs)."""
        self._index()
        return list(self._by_type.get(type_, []))

    def children(self, urn: str) -> list[GraphResource]:
        """Direct children of a resource, ordered by URN."""
        self._index()
        return list(self._by_parent.get(urn, []))

    def ancestors(self, res: GraphResource) -> Iterator[GraphResource]:
        """Parent, grandparent, ... up to the stack."""
        seen: set[str] = set()
        cur = res
        while cur.parent and cur.parent not in seen:
            seen.add(cur.parent)
            parent = self._by_urn.get(cur.parent)
            if parent is None:
                return
            yield parent
            cur = parent

    def component_of(self, res: GraphResource) -> GraphResource | None:
        """The nearest enclosing ``gpu-cluster:`` component."""
        return next((a for a in self.ancestors(res) if a.is_component), None)

    def plane_of(self, res: GraphResource) -> str:
        """The plane a resource belongs to, read from its component's type token."""
        comp = res if res.is_component else self.component_of(res)
        if comp is None:
            return "providers" if res.is_provider else "stack"
        return comp.type.split(":")[1]

    def effective_inputs(self, res: GraphResource) -> dict[str, Any]:
        """Inputs plus the provider's ``defaultTags`` merged into ``tags`` (resource tags win).

        Provider default tags are provider inputs, not resource inputs, so any reader that asks
        "does this resource carry tag X" must merge them as AWS does at apply time.
        """
        inputs = dict(res.inputs)
        prov = self.get(res.provider_urn) if res.provider_urn else None
        defaults = prov.inputs.get("defaultTags") if prov else None
        if isinstance(defaults, str):  # providers send nested objects as JSON strings
            try:
                defaults = json.loads(defaults)
            except ValueError:
                defaults = None
        if isinstance(defaults, dict) and isinstance(defaults.get("tags"), dict):
            tags = inputs.get("tags")
            merged = dict(defaults["tags"])
            if isinstance(tags, dict):
                merged.update(tags)
            inputs["tags"] = merged
        return inputs

    # --- serialisation ---------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON form, resources ordered by URN so that diffs are stable."""
        ordered = sorted(self.resources, key=lambda r: r.urn)
        # The rows share the records' values (no deep copy, as dataclasses.asdict would make): the JSON writer
        # only reads them.
        doc: dict[str, Any] = {
            "stack": self.stack,
            "resources": [{"urn": r.urn, "type": r.type, "name": r.name, "parent": r.parent,
                           "provider": r.provider, "inputs": r.inputs, "protect": r.protect,
                           "retain_on_delete": r.retain_on_delete, "dependencies": sorted(r.dependencies),
                           "ignore_changes": None if r.ignore_changes is None else sorted(r.ignore_changes),
                           **({} if r.op is None else {"op": r.op})}
                          for r in ordered],
        }
        if self.unrecorded:
            doc["unrecorded"] = sorted(self.unrecorded)
        return doc

    def iter_json(self) -> Iterator[str]:
        """:meth:`to_json` in pieces, for writing a large graph without holding the whole text."""
        yield from json.JSONEncoder(indent=2, sort_keys=True).iterencode(self.to_dict())
        yield "\n"

    def to_json(self) -> str:
        """Stable, diff-friendly JSON (sorted keys inside inputs, two-space indent)."""
        return "".join(self.iter_json())

    @classmethod
    def from_dict(cls, doc: Any) -> ResourceGraph:
        """Read the documented JSON form back."""
        if not isinstance(doc, dict) or not isinstance(doc.get("resources"), list):
            raise GraphFormatError("a graph is an object with 'stack' and a 'resources' list")
        stack = _field(doc, "stack", str, "graph", default="")
        unrecorded = _string_list(doc, "unrecorded", "graph") or []
        out: list[tuple[str, GraphResource]] = []
        for i, raw in enumerate(doc["resources"]):
            where = f"resources[{i}]"
            if not isinstance(raw, dict) or not {"urn", "type", "name"} <= raw.keys():
                raise GraphFormatError(f"{where} needs at least urn, type and name")
            inputs = _field(raw, "inputs", dict, where, default={})
            _check_value(inputs, f"{where}.inputs")
            _check_inputs(str(raw["type"]), inputs, where, raw["urn"])
            out.append((where, GraphResource(
                urn=_text(raw, "urn", where),
                type=_text(raw, "type", where),
                name=_text(raw, "name", where),
                parent=_field(raw, "parent", str, where, nullable=True),
                provider=_field(raw, "provider", str, where, nullable=True),
                inputs=inputs,
                protect=_field(raw, "protect", bool, where, default=False),
                retain_on_delete=_field(raw, "retain_on_delete", bool, where, default=False),
                dependencies=_string_list(raw, "dependencies", where) or [],
                ignore_changes=_string_list(raw, "ignore_changes", where, nullable=True)
                if "ignore_changes" in raw else [],
                op=_op(raw, where),
            )))
        return cls(stack, _unique_urns(out), tuple(unrecorded))

    @classmethod
    def from_preview_json(cls, doc: Any) -> ResourceGraph:
        """Build a graph from ``pulumi preview --json`` (resources being deleted are left out)."""
        if not isinstance(doc, dict) or not isinstance(doc.get("steps"), list):
            raise GraphFormatError("a preview document is an object with a 'steps' list")
        out: list[tuple[str, GraphResource]] = []
        for i, step in enumerate(doc["steps"]):
            where = f"steps[{i}]"
            if not isinstance(step, dict):
                raise GraphFormatError(f"{where}: a step is an object")
            op = _op(step, where, required=True)
            if op in GOING_AWAY:
                continue  # only oldState: the resource (or a replaced copy of it) is going away
            state = _field(step, "newState", dict, where, required=True)
            out.append((where, from_state(state, f"{where}.newState", op=op)))
        resources = _unique_urns(out)
        return cls(stack_from_urns(resources), resources)

    @classmethod
    def from_stack_export(cls, doc: Any) -> ResourceGraph:
        """Build a graph from ``pulumi stack export`` (checkpoint version 3)."""
        deployment = doc.get("deployment") if isinstance(doc, dict) else None
        if not isinstance(deployment, dict) or not isinstance(deployment.get("resources"), list):
            raise GraphFormatError("a stack export is an object with deployment.resources")
        live: list[tuple[str, GraphResource]] = []
        pending: list[tuple[str, GraphResource]] = []
        for i, state in enumerate(deployment["resources"]):
            where = f"deployment.resources[{i}]"
            if not isinstance(state, dict):
                raise GraphFormatError(f"{where}: a resource is an object")
            (pending if state.get("delete") is True else live).append((where, from_state(state, where)))
        # A copy pending deletion (``"delete": true``, left by a replacement) shares its URN with the live copy, which
        # the graph keeps; without a live copy it is still there until the engine deletes it.
        urns = {r.urn for _, r in live}
        resources = _unique_urns(live + [(w, r) for w, r in pending if r.urn not in urns])
        return cls(stack_from_urns(resources), resources)

    @classmethod
    def from_document(cls, doc: Any) -> ResourceGraph:
        """Any of the three forms, already decoded, recognised by shape."""
        if isinstance(doc, dict) and "steps" in doc:
            return cls.from_preview_json(doc)
        if isinstance(doc, dict) and "deployment" in doc:
            return cls.from_stack_export(doc)
        return cls.from_dict(doc)


# Steps of a preview whose resource (or a replaced copy of it) is going away: they carry only oldState.
GOING_AWAY = ("delete", "delete-replaced", "discard", "discard-replaced", "remove-pending-replace")
# The steps one replacement lists under one URN (``--show-replacement-steps`` adds create-replacement to replace).
REPLACING = ("replace", "create-replacement")


def _unique_urns(located: list[tuple[str, GraphResource]]) -> list[GraphResource]:
    """The resources, each URN once: the engine refuses a second resource of a URN ("Duplicate resource URN"), so a
    document holding one was edited or joined from two stacks, and whichever copy a reader kept would hide the other.
    A replacement's several steps of one URN are one resource (op ``replace``)."""
    first: dict[str, tuple[int, str]] = {}
    out: list[GraphResource] = []
    for where, res in located:
        if res.urn not in first:
            first[res.urn] = (len(out), where)
            out.append(res)
            continue
        index, seen_at = first[res.urn]
        if res.op in REPLACING and out[index].op in REPLACING:
            if res.op == "replace":
                out[index] = res
            continue
        raise GraphFormatError(f"{where}.urn: {res.urn} is also the URN of {seen_at}; a stack holds one resource per "
                               "URN (the engine refuses a duplicate), so one of the two would be silently hidden "
                               "[rule: graph-urn-unique]")
    return out


def _text(raw: dict[str, Any], key: str, where: str) -> str:
    value = _field(raw, key, str, where, required=True)
    if not value:
        raise GraphFormatError(f"{where}.{key}: must not be empty")
    _check_text(value, f"{where}.{key}")
    return str(value)


MAX_INTEGER_DIGITS = 40


class StrictJsonError(ValueError):
    """JSON that parses in Python but is not data this tool accepts: a key given twice, NaN or Infinity, an
    integer of more digits than any quantity has."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise StrictJsonError(f"the key {json.dumps(key)[:60]} is given twice (the first value would be silently "
                                  "replaced)")
        out[key] = value
    return out


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise StrictJsonError(f"an integer of {len(text.lstrip('-')):,} digits ({text[:20]}...); at most "
                              f"{MAX_INTEGER_DIGITS} digits")
    return int(text)


def _strict_constant(name: str) -> Any:
    raise StrictJsonError(f"{name} is not a JSON number")


class JsonTooDeepError(StrictJsonError):
    """JSON nested deeper than the parser's recursion allows (``[[[[...`` 100,000 times): refused, not a
    RecursionError that would end the tool as an internal error."""


def strict_json(text: str) -> Any:
    """``json.loads`` for documents people hand to the tool (graphs, pack configs, records): duplicate keys,
    NaN/Infinity and integers of more than :data:`MAX_INTEGER_DIGITS` digits are :class:`StrictJsonError`, a
    document nested too deeply to parse :class:`JsonTooDeepError`."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_strict_constant,
                          parse_int=_bounded_int)
    except RecursionError:
        raise JsonTooDeepError("nested too deeply") from None


def _op(raw: dict[str, Any], where: str, required: bool = False) -> str | None:
    op = _field(raw, "op", str, where, required=required)
    if op is not None and op not in STEP_OPS:
        raise GraphFormatError(f"{where}.op: {json.dumps(op)[:60]} is not a step of the engine ({', '.join(STEP_OPS)})")
    return str(op) if op is not None else None


SIG_KEY = "4dabf18193072939515e22adb298388d"  # pulumi sdk/go/common/resource/sig/sig.go Key
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"  # sig.Secret


def redact_secrets(value: Any) -> Any:
    """Values as a graph holds them: the engine's secret objects (``{<sig.Key>: <sig.Secret>, "ciphertext": ...}``
    in a stack export, ``"value"`` or a blinded ciphertext in previews and events) become :data:`SECRET`, so a
    secret is read as a secret, never decrypted, printed or handed to a policy as its wire form."""
    if isinstance(value, dict):
        if value.get(SIG_KEY) == SECRET_SIG:
            return SECRET
        return {k: redact_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_secrets(v) for v in value]
    return value


def from_state(state: dict[str, Any], where: str, op: str | None = None) -> GraphResource:
    """A resource from a Pulumi state object (``ResourceV3``, or an event's ``StepEventStateMetadata``, which
    has no ``dependencies`` nor ``ignoreChanges``), checked field by field, its secrets redacted; ``op`` is the step
    it takes."""
    urn = _text(state, "urn", where)
    inputs = redact_secrets(_field(state, "inputs", dict, where, nullable=True, default={}))
    _check_value(inputs, f"{where}.inputs")
    _check_inputs(str(state.get("type")), inputs, where, urn)
    return GraphResource(
        urn=urn,
        type=_text(state, "type", where),
        name=urn.rsplit("::", 1)[-1],
        parent=_field(state, "parent", str, where, nullable=True) or None,
        provider=_field(state, "provider", str, where, nullable=True) or None,
        inputs=dict(inputs),
        protect=_field(state, "protect", bool, where, nullable=True, default=False),
        retain_on_delete=_field(state, "retainOnDelete", bool, where, nullable=True, default=False),
        dependencies=_string_list(state, "dependencies", where, nullable=True) or [],
        ignore_changes=_string_list(state, "ignoreChanges", where, nullable=True),
        op=op,
    )


def stack_from_urns(resources: list[GraphResource]) -> str:
    """The stack name in the resources' URNs (``urn:pulumi:<stack>::...``), or empty."""
    for r in resources:
        parts = r.urn.split("::")
        if len(parts) >= 2 and parts[0].startswith("urn:pulumi:"):
            return parts[0].removeprefix("urn:pulumi:")
    return ""
