"""One trainer per checkout: an advisory lock held by the training process.

The kernel releases it when the process dies, however it dies, so a crashed
trainer never blocks the next run. The file also names the run holding it, so
a refused start can say which run is training.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import IO

from cli.console import how

LOCK_NAME = ".lander-trainer.lock"


class TrainerBusy(Exception):
    """Another trainer holds this checkout."""


def lock_path(root: Path) -> Path:
    """Where the lock file lives (git-ignored)."""
    return root / LOCK_NAME


def _holder_run(handle: IO[str]) -> str | None:
    """The run named in an open lock file (what the holder wrote), if readable."""
    handle.seek(0)
    try:
        run = json.loads(handle.read() or "{}").get("run")
    except json.JSONDecodeError:
        return None
    return str(run) if run else None


def holder(root: Path) -> str | None:
    """The run whose trainer holds the lock now, or None when no trainer runs."""
    path = lock_path(root)
    if not path.exists():
        return None
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder_run(handle) or "unknown"
        fcntl.flock(handle, fcntl.LOCK_UN)
        return None


class TrainerLock:
    """Holds the checkout's trainer lock for the life of a training session.

    :param root: the checkout.
    :param run: the run this trainer trains.
    """

    def __init__(self, root: Path, run: str) -> None:
        self.path = lock_path(root)
        self.run = run
        self._handle: IO[str] | None = None

    def __enter__(self) -> TrainerLock:
        handle = self.path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = _holder_run(handle) or "another run"
            handle.close()
            raise TrainerBusy(
                f"run {other!r} is training in this checkout; stop it first ({how(f'stop {other}')})"
            ) from None
        self._handle = handle
        self.name_run(self.run)
        return self

    def name_run(self, run: str) -> None:
        """Say which run the holder trains (known only once it holds the lock: ``next``)."""
        assert self._handle is not None
        self.run = run
        self._handle.seek(0)
        self._handle.truncate()
        self._handle.write(json.dumps({"run": run, "pid": os.getpid()}))
        self._handle.flush()

    def __exit__(self, *_: object) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None
