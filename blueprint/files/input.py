"""What the command-line tool reads: at most a documented number of bytes, whatever the file is.

A size check on ``stat`` does not bound a read: a device (``/dev/zero``, ``/dev/urandom``), a FIFO or a link to one
reports a size of 0 and then never ends. Every input file is read through :func:`read_limited`, which reads one byte
more than its limit and refuses the file when that byte is there.
"""

from __future__ import annotations

from pathlib import Path


class InputTooLargeError(ValueError):
    """A file larger than its limit; the message says the limit (callers prefix the path)."""


def read_limited(path: Path, limit: int) -> bytes:
    """The file's bytes, or :class:`InputTooLargeError` past ``limit`` bytes (read no further); ``OSError`` as ``open``
    raises it (a directory, a missing file, no permission)."""
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise InputTooLargeError(f"more than {limit:,} bytes (the most this tool reads from such a file)")
    return data


def read_text_limited(path: Path, limit: int) -> str:
    """:func:`read_limited` decoded as UTF-8 (``UnicodeDecodeError`` for other bytes)."""
    return read_limited(path, limit).decode("utf-8")
