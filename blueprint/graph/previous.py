"""The previous state of a stack as the provider's answers for the next offline run (``blueprint graph <stack>
--previous FILE``).

A real second ``pulumi up`` does not ask the provider to create anything again: every resource already has an id and
outputs in the stack's state (a bucket's generated name, a launch template's version number, a key's ARN), and the
program reads those. To show what a second run would send, the offline engine answers each resource the previous run
had (same URN and type) with that run's id and computed outputs; only resources new in this run get fresh answers.

Two kinds of previous file are accepted:

- ``pulumi stack export`` of the deployed stack: its ``id`` and ``outputs`` are the provider's real answers;
- an offline graph (``blueprint graph -o``): it keeps inputs only, and the offline provider's answers are a pure
  function of them (:mod:`blueprint.graph.cloud`), so they are computed again from the previous inputs, which is what
  the previous run was told.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blueprint import clouds
from blueprint.files.input import read_text_limited
from blueprint.graph.cloud import cloud_graph, stable_id
from blueprint.graph.engine import plain
from blueprint.graph.load import load_graph
from blueprint.graph.model import MAX_DOCUMENT_BYTES, GraphFormatError, ResourceGraph, strict_json


@dataclass(frozen=True)
class Previous:
    """A previous run: its graph (what it sent) and, per URN, the type, id and computed outputs it was answered."""

    graph: ResourceGraph
    answers: Mapping[str, tuple[str, str, dict[str, Any]]]  # urn -> (type, id, outputs not among the inputs)


def _computed(inputs: Mapping[str, Any], state: Mapping[str, Any]) -> dict[str, Any]:
    """The outputs the provider added or changed (what the program may read that it did not send)."""
    return {k: v for k, v in state.items() if k not in inputs or inputs[k] != v}


def _offline_answers(graph: ResourceGraph, region: str) -> dict[str, tuple[str, str, dict[str, Any]]]:
    out = {}
    for res in graph.resources:
        if res.is_component or res.type.startswith("pulumi:"):
            continue
        cloud = clouds.of_type(res.type)
        if cloud is None:
            rid, state = stable_id(res.type, res.name), dict(res.inputs)
        else:
            rid, state = cloud_graph(cloud).new_resource(res.type, res.name, dict(res.inputs), region)
        out[res.urn] = (res.type, rid, _computed(res.inputs, state))
    return out


def _export_answers(doc: dict[str, Any]) -> dict[str, tuple[str, str, dict[str, Any]]]:
    out = {}
    for i, state in enumerate(doc["deployment"]["resources"]):
        where = f"deployment.resources[{i}]"
        if not state.get("custom") or str(state.get("type", "")).startswith("pulumi:"):
            continue
        outputs, inputs = state.get("outputs") or {}, state.get("inputs") or {}
        if not isinstance(outputs, dict) or not isinstance(inputs, dict):
            raise GraphFormatError(f"{where}: inputs and outputs are objects")
        out[str(state["urn"])] = (str(state["type"]), str(state.get("id") or ""),
                                  _computed(plain(inputs), plain(outputs)))
    return out


def load_previous(path: Path, region: str) -> Previous:
    """Read a previous run (a stack export or an offline graph); a file of another kind, or a bad one, is a
    :class:`GraphFormatError` saying what is wrong."""
    graph = load_graph(path)
    if any(r.op is not None for r in graph.resources) or graph.unrecorded:
        raise GraphFormatError("a preview or an event log plans a change, it is not a state: give the previous run's "
                               "offline graph (blueprint graph -o) or the deployed stack (pulumi stack export)")
    # load_graph has read and checked the whole document; an export's ids and outputs are read again from it.
    doc = strict_json(read_text_limited(path, MAX_DOCUMENT_BYTES))
    answers = _export_answers(doc) if isinstance(doc, dict) and "deployment" in doc else _offline_answers(graph,
                                                                                                         region)
    return Previous(graph, answers)
