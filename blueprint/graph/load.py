"""A graph from a file, in any of its four forms, recognised by shape: the offline JSON, ``pulumi preview --json``,
``pulumi stack export``, or the engine event log of ``pulumi preview --event-log`` (the graph after the update:
:func:`blueprint.graph.eventlog.read_event_log` has both sides)."""

from __future__ import annotations

from pathlib import Path

from blueprint.files.input import InputTooLargeError, read_text_limited
from blueprint.graph.eventlog import is_event_log, read_event_log
from blueprint.graph.model import MAX_DOCUMENT_BYTES, GraphFormatError, JsonTooDeepError, ResourceGraph, strict_json

GRAPH_SUFFIXES = (".json", ".jsonl", ".ndjson")  # a target with one of these is a graph file, not a stack


def load_graph(path: Path) -> ResourceGraph:
    """Read a graph file; every problem with the file or its content is a :class:`GraphFormatError` saying what is
    wrong."""
    try:
        text = read_text_limited(path, MAX_DOCUMENT_BYTES)
    except InputTooLargeError:
        raise GraphFormatError(f"more than {MAX_DOCUMENT_BYTES:,} bytes; a graph document is at most "
                               f"{MAX_DOCUMENT_BYTES:,} bytes") from None
    except OSError as err:
        raise GraphFormatError(f"cannot be read: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise GraphFormatError("not UTF-8 text") from None
    if is_event_log(text):
        return read_event_log(text).new
    try:
        doc = strict_json(text)
    except JsonTooDeepError as err:
        raise GraphFormatError(str(err)) from None
    except ValueError as err:
        raise GraphFormatError(f"not JSON: {str(err)[:200]}") from None
    return ResourceGraph.from_document(doc)
