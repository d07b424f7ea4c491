"""Reading a file that came from elsewhere (a clone, a download, a path a user typed):
regular files only, bounded before a byte is read.

A bot, a run record, an evaluation log, a demo file or a settings file can be a link to
``/dev/zero`` (endless: ``read()`` grows until memory runs out), a FIFO (``open()`` waits
for a writer forever) or a folder. Every reader of such files goes through
:func:`read_bounded`, so each of these is one ``OSError`` whose ``strerror`` says what the
path is, and each caller's own one-line message (``cannot read bot ...: a FIFO, not a
regular file``) names it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotRegularFile(OSError):
    """The path is a folder, a FIFO, a device or a socket (after following links)."""


class FileTooLarge(OSError):
    """The file holds more bytes than its kind may."""


def read_bounded(path: Path, max_bytes: int) -> bytes:
    """The bytes of the regular file at ``path`` (links followed), at most ``max_bytes``.

    Opened without blocking, so a FIFO is refused instead of waited on; the size is checked
    on the open file and again while reading (a file that grows is cut off, not followed).

    :raises NotRegularFile: a folder, FIFO, device or socket.
    :raises FileTooLarge: more than ``max_bytes``.
    :raises OSError: missing or unreadable, as the system says.
    """
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(
                errno.EINVAL, f"{_kind(info.st_mode)}, not a regular file", str(path)
            )
        if info.st_size > max_bytes:
            raise FileTooLarge(
                errno.EFBIG, _too_large(f"{info.st_size:,} bytes", max_bytes), str(path)
            )
        os.set_blocking(descriptor, True)
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(descriptor, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise FileTooLarge(errno.EFBIG, _too_large("more bytes", max_bytes), str(path))
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def not_a_file(path: Path) -> str | None:
    """What ``path`` is when it exists but is no regular file (``"a FIFO"``), else None
    (a regular file, or nothing there): for a command's one line before it reads."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else _kind(mode)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a file")


def read_bounded_text(path: Path, max_bytes: int) -> str:
    """:func:`read_bounded` as UTF-8 text.

    :raises UnicodeDecodeError: not UTF-8 (besides :func:`read_bounded`'s errors).
    """
    return read_bounded(path, max_bytes).decode()


def _too_large(size: str, max_bytes: int) -> str:
    return f"{size}, over the {max_bytes:,} it may hold"
