"""What the command-line tool reads: at most a documented number of bytes, whatever the file is.

A size check on ``stat`` does not bound a read: a device (``/dev/zero``, ``/dev/urandom``), a FIFO or a link to one
reports a size of 0 and then never ends. Every input file is read through :func:`read_limited`, which reads one byte
more than its limit and refuses the file when that byte is there.
"""

from __future__ import annotations

import errno
import os
import stat
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


class UnreadableInputError(ValueError):
    """A file that cannot be read as text: too large, missing, not readable, or not UTF-8; the message names it."""


def read_input_text(path: Path, limit: int, shown: str | None = None) -> str:
    """:func:`read_text_limited`, every failure an :class:`UnreadableInputError` whose message starts with the file's
    name (``shown``, or the path) and says why, as every command reports it."""
    name = shown or str(path)
    try:
        return read_text_limited(path, limit)
    except InputTooLargeError as err:
        raise UnreadableInputError(f"{name}: {err}") from None
    except OSError as err:
        raise UnreadableInputError(f"{name}: cannot be read: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise UnreadableInputError(f"{name}: not UTF-8 text") from None


class NotAFileError(ValueError):
    """Something other than a regular file where a file of a downloaded tree is expected: a link, a directory, a
    FIFO (which would block a read for ever), a device or a socket. The message says what it is."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a link"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _refusal(mode: int) -> NotAFileError:
    return NotAFileError(f"is {_kind(mode)}: a downloaded tree holds regular files and directories only (links are "
                         "not followed, special files not opened)")


def kind_in_tree(path: Path) -> str | None:
    """What is at ``path``, its links not followed: ``"file"``, ``"dir"``, or None when nothing is;
    :class:`NotAFileError` for a link or a special file. For trees read as downloaded (an acceptance run), where a
    link could point out of the tree and a FIFO would block."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    raise _refusal(mode)


def read_regular_limited(path: Path, limit: int) -> bytes:
    """:func:`read_limited` for a regular file only: a link is not followed and a FIFO or device is refused
    (:class:`NotAFileError`) without blocking on it (opened non-blocking, checked with ``fstat``)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        if err.errno == errno.ELOOP:  # O_NOFOLLOW met a link
            raise _refusal(stat.S_IFLNK) from None
        raise
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _refusal(mode)
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise InputTooLargeError(f"more than {limit:,} bytes (the most this tool reads from such a file)")
    return data
