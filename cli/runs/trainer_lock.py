"""One trainer per checkout: a lock held by the training process itself.

The lock is a Unix socket in Linux's abstract namespace, named after the checkout's
path: it exists exactly while its holder's process does. No file stands for it, so
nothing that happens to the checkout's files (``git clean -fdX``, a removed lock file)
lets a second trainer in beside a live one, and the kernel releases it when the
process dies, however it dies, so a crashed trainer never blocks the next run.
A second socket, named after the run, says which run holds it; both are listed in
``/proc/net/unix``, which is where :func:`holder` reads them. The lock file of the
previous version is still honoured while a trainer of that version holds it.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import socket
from pathlib import Path

from cli.common.console import how
from game_bridge.errors import LanderError

PROC_UNIX = Path("/proc/net/unix")
LEGACY_LOCK_NAME = ".lander-trainer.lock"
"""The lock file of lander before the socket: a trainer of that version, still running
after an upgrade, holds it with ``flock``, and is honoured."""


class TrainerBusy(LanderError):
    """Another trainer holds this checkout."""


def lock_address(root: Path) -> str:
    """The abstract socket name of the checkout's lock (without the leading NUL)."""
    digest = hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:16]
    return f"lander-trainer-{digest}"


def _bind(name: str) -> socket.socket | None:
    """A datagram socket bound to the abstract ``name``, or None when another process holds it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.bind("\0" + name)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            return None
        raise
    return sock


def _holder_run(root: Path) -> str | None:
    """The run the lock's holder named, read from the abstract sockets this machine lists."""
    marker = f"@{lock_address(root)}-run-"
    try:
        listing = PROC_UNIX.read_text(errors="replace")
    except OSError:
        return None
    for line in listing.splitlines():
        field = line.rsplit(" ", 1)[-1]
        if field.startswith(marker):
            return field[len(marker) :] or None
    return None


def _legacy_holder(root: Path) -> str | None:
    """The run of a trainer of the previous version holding its lock file, if one does."""
    path = root / LEGACY_LOCK_NAME
    try:
        handle = path.open("r")
    except OSError:
        return None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                run = json.loads(handle.read() or "{}").get("run")
            except (ValueError, AttributeError):
                run = None
            return str(run) if run else "unknown"
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


def holder(root: Path) -> str | None:
    """The run whose trainer holds the lock now ("unknown" when it named none yet), or
    None when no trainer runs in this checkout."""
    probe = _bind(lock_address(root))
    if probe is not None:
        probe.close()
        return _legacy_holder(root)
    return _holder_run(root) or "unknown"


class TrainerLock:
    """Holds the checkout's trainer lock for the life of a training session.

    :param root: the checkout.
    :param run: the run this trainer trains.
    """

    def __init__(self, root: Path, run: str) -> None:
        self.root = root
        self.run = run
        self._lock: socket.socket | None = None
        self._name: socket.socket | None = None

    def __enter__(self) -> TrainerLock:
        lock = _bind(lock_address(self.root))
        legacy = _legacy_holder(self.root) if lock is not None else None
        if lock is None or legacy is not None:
            if lock is not None:
                lock.close()
            other = legacy or _holder_run(self.root) or "another run"
            raise TrainerBusy(
                f"run {other!r} is training in this checkout; stop it first ({how(f'stop {other}')})"
            )
        self._lock = lock
        self.name_run(self.run)
        return self

    def name_run(self, run: str) -> None:
        """Say which run the holder trains (known only once it holds the lock: ``next``)."""
        assert self._lock is not None
        if self._name is not None:
            self._name.close()
        self.run = run
        # Run names are validated (letters, digits, -_.), so they fit a socket name whole.
        self._name = _bind(f"{lock_address(self.root)}-run-{run}")

    def __exit__(self, *_: object) -> None:
        for sock in (self._name, self._lock):
            if sock is not None:
                sock.close()
        self._lock = self._name = None
