"""Where the command-line tool writes: paths checked before any work, files never replaced by something else.

A report or graph bound for a regular file (or a path that does not exist yet) is written to a temporary file
beside it and renamed over it, so a full disk or an interrupted run never leaves a half-written file where a
complete one is expected. Everything else is written *through*, never replaced:

- a symlink is followed, and its target is what is written (the link stays a link);
- a character or block device or a FIFO is opened and written as it is (``-o /dev/null`` discards; ``/dev/full``
  fails with "No space left on device"); renaming a temporary file over it, as root, would replace the device
  node with a regular file;
- a directory, a socket, an empty path or a file path ending in ``/`` is refused before any work.

New files get the mode the user's umask gives (``0666 & ~umask``); a replaced regular file keeps its mode.

A command that writes several files into a directory (``blueprint manifests -o DIR``) writes only inside it
(:func:`write_inside`): the directory the user names may itself be a link, but nothing below it is followed. A link
where a file goes is replaced by the file (the link's target is never written); a link or a non-directory where a
directory goes is refused; a name that is not one plain path component (``..``, ``a/b``, empty, a NUL) is refused.
"""

from __future__ import annotations

import argparse
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO


class OutputError(Exception):
    """An output path that cannot be written; the message names it and why."""


def output_file_argument(text: str) -> Path:
    """argparse ``type`` of ``-o FILE``: refuses what is not a file name before :class:`Path` hides it (``Path("")``
    is ``.`` and ``Path("out.json/")`` is ``out.json``)."""
    if text == "":
        raise argparse.ArgumentTypeError("an empty path is not a file name")
    if text.endswith(("/", os.sep)):
        raise argparse.ArgumentTypeError(f"'{text}' ends with '/', so it names a directory; give a file name")
    return Path(text)


def output_dir_argument(text: str) -> Path:
    """argparse ``type`` of ``-o DIR``: an empty path is refused (``Path("")`` would be the working directory)."""
    if text == "":
        raise argparse.ArgumentTypeError("an empty path is not a directory name")
    return Path(text)


def _target(path: Path) -> Path:
    """What a write to ``path`` reaches: the end of its symlink chain (which may not exist yet), else the path."""
    if not path.is_symlink():
        return path
    return Path(os.path.realpath(path))


def _special(mode: int) -> bool:
    """Devices and FIFOs: written through, never replaced."""
    return stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode)


def check_output_file(path: Path) -> None:
    """Refuse a file target that cannot be written: a directory, a socket, a missing or read-only directory, a
    read-only file or device; called before any work."""
    if str(path) == "":
        raise OutputError("an empty path is not a file name")
    target = _target(path)
    shown = f"{path}" if target == path else f"{path} (a link to {target})"
    try:
        st = os.stat(target)
    except (FileNotFoundError, NotADirectoryError):
        st = None
    except OSError as err:
        raise OutputError(f"{shown}: cannot be written: {err.strerror or err}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{shown}: is a directory; give a file name")
    if st is not None and _special(st.st_mode):
        if not os.access(target, os.W_OK):
            raise OutputError(f"{shown}: the device or pipe is not writable")
        return
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OutputError(f"{shown}: is not a regular file, a device or a pipe (a socket?); give a file name")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError(f"{shown}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{shown}: the directory {parent} is not writable")
    if st is not None and not os.access(target, os.W_OK):
        raise OutputError(f"{shown}: the file is not writable")


def check_output_dir(path: Path) -> None:
    """Refuse a directory target that cannot be written or is a file."""
    if str(path) == "":
        raise OutputError("an empty path is not a directory name")
    if path.exists() and not path.is_dir():
        raise OutputError(f"{path}: exists and is not a directory")
    base = path if path.is_dir() else path.parent
    if not base.is_dir():
        raise OutputError(f"{path}: the directory {base} does not exist")
    if not os.access(base, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: the directory {base} is not writable")


def _new_file_mode() -> int:
    """``0666`` less the process umask, as ``open(..., "w")`` would create a file."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _write_pieces(fh: TextIO, text: str | Iterable[str]) -> None:
    if isinstance(text, str):
        fh.write(text)
    else:
        for piece in text:
            fh.write(piece)


def _write_through(target: Path, shown: Path, text: str | Iterable[str]) -> None:
    """Write to a device or FIFO as it is (no temporary file, no rename)."""
    try:
        with open(target, "w", encoding="utf-8") as fh:
            _write_pieces(fh, text)
    except OSError as err:
        raise OutputError(f"{shown}: cannot be written: {err.strerror or err}") from None


def write_atomic(path: Path, text: str | Iterable[str]) -> None:
    """Write ``text`` (or its pieces, written as they come) to ``path``: through a temporary file in the same
    directory and a rename for a regular file or a new path; straight through for a device or FIFO; to the
    target of a symlink, which stays a link."""
    target = _target(path)
    try:
        st: os.stat_result | None = os.stat(target)
    except (FileNotFoundError, NotADirectoryError):
        st = None
    except OSError as err:
        raise OutputError(f"{path}: cannot be written: {err.strerror or err}") from None
    if st is not None and _special(st.st_mode):
        _write_through(target, path, text)
        return
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OutputError(f"{path}: is not a regular file, a device or a pipe; give a file name")
    mode = stat.S_IMODE(st.st_mode) if st is not None else _new_file_mode()
    directory = target.parent if str(target.parent) else Path(".")
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as err:
        raise OutputError(f"{path}: cannot be written: {err.strerror or err}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            _write_pieces(fh, text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(temp, mode)
        os.replace(temp, target)
    except OSError as err:
        Path(temp).unlink(missing_ok=True)
        raise OutputError(f"{path}: cannot be written: {err.strerror or err}") from None
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _component(part: str) -> str:
    """One plain path component, or :class:`OutputError`: a name read from a graph must not climb out of the
    directory it is written into."""
    if part in ("", ".", "..") or "/" in part or os.sep in part or "\0" in part:
        raise OutputError(f"{part!r} is not a file name (one path component, not '.' or '..')")
    return part


def write_inside(root: Path, relative: Iterable[str], text: str | Iterable[str]) -> Path:
    """Write ``text`` to ``root/<relative...>`` without leaving ``root``: directories below it are created, never
    followed if they are links (refused), and a link where the file goes is replaced by the file. Returns the path."""
    parts = [_component(p) for p in relative]
    if not parts:
        raise OutputError(f"{root}: no file name to write")
    if not root.exists():
        try:
            root.mkdir()
        except OSError as err:
            raise OutputError(f"{root}: cannot be created: {err.strerror or err}") from None
    current = root
    for part in parts[:-1]:
        current = current / part
        if current.is_symlink():
            raise OutputError(f"{current}: is a link; files are written only inside {root} and links there are not "
                              "followed: remove it")
        if current.exists() and not current.is_dir():
            raise OutputError(f"{current}: exists and is not a directory")
        try:
            current.mkdir(exist_ok=True)
        except OSError as err:
            raise OutputError(f"{current}: cannot be created: {err.strerror or err}") from None
    path = current / parts[-1]
    if path.is_symlink():
        try:
            path.unlink()  # replaced by the file: a link planted in the directory is never written through
        except OSError as err:
            raise OutputError(f"{path}: the link there cannot be replaced: {err.strerror or err}") from None
    elif path.exists() and not path.is_file():
        raise OutputError(f"{path}: exists and is not a regular file")
    write_atomic(path, text)
    return path
