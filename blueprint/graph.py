"""The ResourceGraph: the one data structure every reader (preview, policy, cost, renderers) takes.

A graph can be built three ways and readers do not care which:

- an offline run of the program under Pulumi's mocks (:mod:`blueprint.engine`);
- the JSON of a real ``pulumi preview --json`` (:meth:`ResourceGraph.from_preview_json`);
- ``pulumi stack export`` of a deployed stack (:meth:`ResourceGraph.from_stack_export`).

Its JSON form is a public contract (README, "Graph format")::

    {"stack": "prod-aws",
     "resources": [{"urn", "type", "name", "parent", "provider", "inputs", "protect",
                    "retain_on_delete", "dependencies", "ignore_changes"}]}

``inputs`` are the provider's wire format (camelCase keys). Secret values are the string
``[secret]`` and values unknown at preview time the string :data:`UNKNOWN`; treat both as unknown.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
SECRET = "[secret]"
FORMAT_KEYS = ("urn", "type", "name", "parent", "provider", "inputs", "protect", "retain_on_delete", "dependencies",
               "ignore_changes")


class GraphFormatError(ValueError):
    """A graph document that does not have the documented shape."""


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

    def __post_init__(self) -> None:
        self._by_urn = {r.urn: r for r in self.resources}

    # --- queries ---------------------------------------------------------------------------------

    def get(self, urn: str) -> GraphResource | None:
        """The resource with this URN, if any."""
        return self._by_urn.get(urn)

    def of_type(self, type_: str) -> list[GraphResource]:
        """Every resource of one type token."""
        return [r for r in self.resources if r.type == type_]

    def children(self, urn: str) -> list[GraphResource]:
        """Direct children of a resource."""
        return [r for r in self.resources if r.parent == urn]

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
        return {
            "stack": self.stack,
            "resources": [{**asdict(r), "dependencies": sorted(r.dependencies),
                           "ignore_changes": None if r.ignore_changes is None else sorted(r.ignore_changes)}
                          for r in ordered],
        }

    def to_json(self) -> str:
        """Stable, diff-friendly JSON (sorted keys inside inputs, two-space indent)."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, doc: Any) -> ResourceGraph:
        """Read the documented JSON form back."""
        if not isinstance(doc, dict) or not isinstance(doc.get("resources"), list):
            raise GraphFormatError("a graph is an object with 'stack' and a 'resources' list")
        out: list[GraphResource] = []
        for i, raw in enumerate(doc["resources"]):
            if not isinstance(raw, dict) or not {"urn", "type", "name"} <= raw.keys():
                raise GraphFormatError(f"resources[{i}] needs at least urn, type and name")
            out.append(GraphResource(**{k: raw[k] for k in FORMAT_KEYS if k in raw}))
        return cls(str(doc.get("stack", "")), out)

    @classmethod
    def from_preview_json(cls, doc: Any) -> ResourceGraph:
        """Build a graph from ``pulumi preview --json`` (resources being deleted are left out)."""
        if not isinstance(doc, dict) or not isinstance(doc.get("steps"), list):
            raise GraphFormatError("a preview document is an object with a 'steps' list")
        out = []
        for step in doc["steps"]:
            state = step.get("newState") if isinstance(step, dict) else None
            if not isinstance(state, dict) or step.get("op") == "delete":
                continue
            out.append(_from_state(state))
        return cls(_stack_from(out), out)

    @classmethod
    def from_stack_export(cls, doc: Any) -> ResourceGraph:
        """Build a graph from ``pulumi stack export`` (checkpoint version 3)."""
        deployment = doc.get("deployment") if isinstance(doc, dict) else None
        if not isinstance(deployment, dict) or not isinstance(deployment.get("resources"), list):
            raise GraphFormatError("a stack export is an object with deployment.resources")
        out = [_from_state(s) for s in deployment["resources"] if isinstance(s, dict)]
        return cls(_stack_from(out), out)

    @classmethod
    def load(cls, path: Path) -> ResourceGraph:
        """Read any of the three forms from a file, recognising it by shape."""
        doc = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(doc, dict) and "steps" in doc:
            return cls.from_preview_json(doc)
        if isinstance(doc, dict) and "deployment" in doc:
            return cls.from_stack_export(doc)
        return cls.from_dict(doc)


def _from_state(state: dict[str, Any]) -> GraphResource:
    urn = str(state.get("urn", ""))
    return GraphResource(
        urn=urn,
        type=str(state.get("type", "")),
        name=urn.rsplit("::", 1)[-1],
        parent=state.get("parent") or None,
        provider=state.get("provider") or None,
        inputs=dict(state.get("inputs") or {}),
        protect=bool(state.get("protect", False)),
        retain_on_delete=bool(state.get("retainOnDelete", False)),
        dependencies=list(state.get("dependencies") or []),
        ignore_changes=list(state["ignoreChanges"]) if isinstance(state.get("ignoreChanges"), list) else None,
    )


def _stack_from(resources: list[GraphResource]) -> str:
    for r in resources:
        parts = r.urn.split("::")
        if len(parts) >= 2 and parts[0].startswith("urn:pulumi:"):
            return parts[0].removeprefix("urn:pulumi:")
    return ""
