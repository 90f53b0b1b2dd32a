"""Where the command-line tool writes: paths checked before any work, files replaced atomically.

A report or graph is written to a temporary file beside its target and renamed over it, so a full disk
or an interrupted run never leaves a half-written file where a complete one is expected.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


class OutputError(Exception):
    """An output path that cannot be written; the message names it and why."""


def check_output_file(path: Path) -> None:
    """Refuse a file target that cannot be written: a directory, a missing or read-only directory."""
    if path.is_dir():
        raise OutputError(f"{path}: is a directory; give a file name")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError(f"{path}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: the directory {parent} is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputError(f"{path}: the file is not writable")


def check_output_dir(path: Path) -> None:
    """Refuse a directory target that cannot be written or is a file."""
    if path.exists() and not path.is_dir():
        raise OutputError(f"{path}: exists and is not a directory")
    base = path if path.is_dir() else path.parent
    if not base.is_dir():
        raise OutputError(f"{path}: the directory {base} does not exist")
    if not os.access(base, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: the directory {base} is not writable")


def write_atomic(path: Path, text: str | Iterable[str]) -> None:
    """Write ``text`` (or its pieces, written as they come) to ``path`` through a temporary file in the same
    directory, then rename it."""
    directory = path.parent if str(path.parent) else Path(".")
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            if isinstance(text, str):
                fh.write(text)
            else:
                for piece in text:
                    fh.write(piece)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temp, path)
    except OSError as err:
        Path(temp).unlink(missing_ok=True)
        raise OutputError(f"{path}: cannot be written: {err.strerror or err}") from None
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
