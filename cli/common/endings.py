"""How the ``lander`` process ends: each way a command can end (a signal, a missing training
stack, an operating-system error nobody expected) turned into one line and an exit code, the
last guard against a traceback. The app itself is wired in ``cli/app.py``."""

from __future__ import annotations

import atexit
import os
import signal
import sys
from typing import Any

import typer
from rich.markup import escape

from cli.common.command_classes import note_sigterm, terminating
from cli.common.console import error_console
from game_bridge.errors import LanderError
from game_bridge.instance import interrupt_waits

TRAINING_STACK = frozenset(
    ("torch", "stable_baselines3", "onnx", "onnxruntime", "onnxscript", "optuna")
)
"""What the light install leaves out (pyproject's ``train`` extra)."""


class Terminated(BaseException):
    """SIGTERM outside training (which handles it as a graceful stop): unwinds like an
    error, so what is being set up (games being launched) is closed on the way out."""


def _terminated(signum: int, _frame: object) -> None:
    if terminating():
        # Noted already and the command is ending on it: raised again it would cut the
        # unwinding short, or be a traceback in the middle of its last line.
        return
    note_sigterm(signum)
    # The exception below is lost if the signal lands where Python ignores exceptions
    # (an at-fork hook while a game is being launched); every wait for a game then
    # ends within a poll slice instead, and main() still reports the signal.
    interrupt_waits()
    raise Terminated


def _quiet_when_terminated(unraisable: Any) -> None:
    """A Terminated that Python had to drop (see :func:`_terminated`) is no error to show."""
    if isinstance(unraisable.exc_value, Terminated):
        return
    sys.__unraisablehook__(unraisable)


_LATE_SIGNALS: list[int] = []
"""Signals that arrived once the command was done, while the process exits."""


def _note_late(signum: int, _frame: object) -> None:
    """While the process exits (atexit callbacks, torch's finalizers) a signal is noted, not
    raised: raised there it is an 'Exception ignored' traceback, or lost."""
    _LATE_SIGNALS.append(signum)


def _exit_code_of_late_signals() -> None:
    """The last atexit callback: a signal that arrived while the process was exiting gives
    its exit code (130, 143), as one that arrived during the command does."""
    if not _LATE_SIGNALS:
        return
    signum = _LATE_SIGNALS[0]
    name = signal.Signals(signum).name
    try:
        error_console.print(f"[yellow]{name} while exiting[/]")
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(128 + signum)


def run_app(app: typer.Typer) -> None:
    """Run ``app`` as the console-script entry point.

    User-facing errors end as one red line in :class:`~cli.common.command_classes.LanderCommands`;
    here is the last guard against a traceback: a signal, a missing training stack, an
    operating-system error that no command expected (a full disk, a vanished folder).
    """
    signal.signal(signal.SIGTERM, _terminated)
    sys.unraisablehook = _quiet_when_terminated
    atexit.register(_exit_code_of_late_signals)  # registered first: runs last
    try:
        _run(app)
    finally:
        for late in (signal.SIGINT, signal.SIGTERM):
            signal.signal(late, _note_late)


def _run(app: typer.Typer) -> None:
    """The app, each way it can end turned into one line and an exit code."""
    try:
        app()
    except (Terminated, SystemExit, LanderError):
        if not terminating():
            raise
        error_console.print("[yellow]terminated[/] (SIGTERM)")
        sys.exit(128 + signal.SIGTERM)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in TRAINING_STACK:
            raise
        error_console.print(
            f"[bold red]error:[/] this needs the training stack ({exc.name} is not installed): "
            "run ./lander setup, or any training command through ./lander, to install it",
            soft_wrap=True,
        )
        sys.exit(1)
    except KeyboardInterrupt:
        # Ctrl-C before a trainer took over the signal (while games start, say).
        error_console.print("[yellow]interrupted[/]")
        sys.exit(130)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        error_console.print(
            f"[bold red]error:[/] {escape(str(exc.strerror or exc) + where)}", soft_wrap=True
        )
        sys.exit(1)
