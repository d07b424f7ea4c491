"""TensorBoard logging that a run never dies for.

SB3 writes TensorBoard events through a background thread that reopens the event
file at every flush: a ``logs/RUN/`` folder removed mid-run (``git clean``, a user
tidying up) or a full disk makes that thread die with a traceback, and the next
write in the trainer raises its error. Logs are a by-product of training, so here
a lost folder is made again, a writer that failed is replaced by a new one (a new
event file in the same folder: TensorBoard reads them as one run), and a write
that still fails is dropped with one line in the console and ``train.log``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from stable_baselines3.common.logger import KVWriter, Logger, TensorBoardOutputFormat

WRITER_THREAD = "_AsyncWriterThread"
"""The class of TensorBoard's writer thread, whose failures this module reports itself."""


class ResilientTensorBoard(KVWriter):
    """SB3's TensorBoard output that survives its folder being removed or the disk filling.

    :param folder: the run's ``logs/RUN/``.
    :param warn: says a dropped write (once per kind of failure).
    """

    def __init__(self, folder: Path, warn: Callable[[str], None]) -> None:
        self.folder = folder
        self.warn = warn
        self._warned: set[str] = set()
        self._inner: TensorBoardOutputFormat | None = None
        self._open()

    def _open(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._inner = TensorBoardOutputFormat(str(self.folder))

    def _drop_inner(self) -> None:
        inner, self._inner = self._inner, None
        if inner is not None:
            with suppress(Exception):  # the failed writer's own error: already reported
                inner.close()

    def write(
        self, key_values: dict[str, Any], key_excluded: dict[str, tuple[str, ...]], step: int = 0
    ) -> None:
        """Write one dump of values (SB3's logger calls this)."""
        self._attempt(lambda inner: inner.write(key_values, key_excluded, step))

    def add_text(self, tag: str, text: str, step: int) -> None:
        """A text entry (a health finding), which SB3's logger has no call for."""
        self._attempt(lambda inner: inner.writer.add_text(tag, text, step))

    def _attempt(self, action: Callable[[TensorBoardOutputFormat], None]) -> None:
        """Do ``action`` and flush; on a failure, once more with a fresh writer, then drop it."""
        for attempt in (1, 2):
            try:
                if self._inner is None or not self.folder.is_dir():
                    self._drop_inner()
                    self._open()
                assert self._inner is not None
                action(self._inner)
                self._inner.writer.flush()
                return
            except Exception as exc:  # an OSError, or one the writer thread stored
                self._drop_inner()
                if attempt == 2:
                    reason = getattr(exc, "strerror", None) or type(exc).__name__
                    if reason not in self._warned:
                        self._warned.add(reason)
                        self.warn(
                            f"TensorBoard: cannot write to {self.folder} ({reason}); "
                            "training goes on, this entry is dropped"
                        )

    def close(self) -> None:
        """Close the writer, whatever state it is in."""
        self._drop_inner()


def resilient_logger(folder: Path, warn: Callable[[str], None]) -> Logger:
    """An SB3 logger that writes only TensorBoard events, through :class:`ResilientTensorBoard`."""
    quiet_writer_threads()
    return Logger(folder=str(folder), output_formats=[ResilientTensorBoard(folder, warn)])


def quiet_writer_threads() -> None:
    """Keep a TensorBoard writer thread's failure from printing a traceback: the trainer
    meets the same error at its next write and reports it in one line."""
    previous = threading.excepthook
    if getattr(previous, "lander_quiet", False):
        return

    def hook(args: threading.ExceptHookArgs) -> None:
        if type(args.thread).__name__ == WRITER_THREAD and isinstance(args.exc_value, Exception):
            return
        previous(args)

    hook.lander_quiet = True  # type: ignore[attr-defined]
    threading.excepthook = hook
