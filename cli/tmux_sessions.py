"""Detached tmux sessions of runs, through libtmux.

A run's session ``lander-<run>`` has a window ``train`` running ``lander train``
and a window ``dashboard`` running TensorBoard. Windows stay after their program
exits (``remain-on-exit``), so a person attaching later reads how it ended.
Set ``LANDER_TMUX_SOCKET`` to use a private tmux server (tests do).
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import libtmux
from libtmux.exc import LibTmuxException

SESSION_PREFIX = "lander-"
TRAIN_WINDOW = "train"
DASHBOARD_WINDOW = "dashboard"


class TmuxError(Exception):
    """tmux is missing or refused a command."""


def server() -> libtmux.Server:
    """The tmux server lander uses (``LANDER_TMUX_SOCKET`` names a private one)."""
    return libtmux.Server(socket_name=os.environ.get("LANDER_TMUX_SOCKET") or None)


def session_name(run: str) -> str:
    """tmux turns ``.`` into ``_`` in session names, so do it first."""
    return SESSION_PREFIX + run.replace(".", "_")


def find_session(run: str) -> libtmux.Session | None:
    """The run's session, or None."""
    try:
        return server().sessions.get(session_name=session_name(run), default=None)
    except LibTmuxException:
        return None


def _window(session: libtmux.Session, name: str) -> libtmux.Window | None:
    return session.windows.get(window_name=name, default=None)


def window_alive(session: libtmux.Session, name: str) -> bool:
    """True while the program in the named window runs."""
    window = _window(session, name)
    if window is None or window.active_pane is None:
        return False
    return window.active_pane.display_message("#{pane_dead}", get_text=True) == ["0"]


def _run_in_window(window: libtmux.Window, command: list[str], environment: dict[str, str]) -> None:
    """Start ``command`` in ``window`` after ``remain-on-exit`` is on, so no exit is missed."""
    window.set_option("remain-on-exit", "on")
    pane = window.active_pane
    assert pane is not None
    env_args = [item for key, value in environment.items() for item in ("-e", f"{key}={value}")]
    pane.cmd("respawn-pane", "-k", *env_args, shlex.join(command))


def lander_command(*args: str) -> list[str]:
    """This CLI, as a command a tmux window can run."""
    return [sys.executable, "-m", "cli", *args]


def create_run_session(
    run: str,
    root: Path,
    command_args: list[str],
    dashboard: list[str] | None,
    environment: dict[str, str],
) -> libtmux.Session:
    """Create the detached session: a ``train`` window running ``lander <command_args>``
    (``train RUN ...``, a sweep or a curriculum), and ``dashboard`` unless None.

    :raises TmuxError: when tmux cannot create it.
    """
    try:
        session = server().new_session(
            session_name=session_name(run),
            window_name=TRAIN_WINDOW,
            start_directory=str(root),
            window_command="cat",  # a placeholder until remain-on-exit is set
            attach=False,
        )
        train_window = _window(session, TRAIN_WINDOW)
        assert train_window is not None
        _run_in_window(train_window, lander_command(*command_args), environment)
        if dashboard is not None:
            window = session.new_window(
                window_name=DASHBOARD_WINDOW, start_directory=str(root), window_shell="cat"
            )
            _run_in_window(window, dashboard, environment)
        train_window.select()
    except (LibTmuxException, OSError) as exc:
        raise TmuxError(f"tmux could not create the session: {exc}") from None
    return session


def send_interrupt(session: libtmux.Session) -> None:
    """Ctrl-C to the train window: the trainer saves, exports, commits and pushes, then exits."""
    window = _window(session, TRAIN_WINDOW)
    if window is None or window.active_pane is None:
        raise TmuxError(f"session {session.session_name} has no {TRAIN_WINDOW} window")
    window.active_pane.send_keys("C-c", enter=False)


def train_output(session: libtmux.Session, lines: int = 20) -> list[str]:
    """The last lines the train window shows."""
    window = _window(session, TRAIN_WINDOW)
    if window is None or window.active_pane is None:
        return []
    return [line for line in window.active_pane.capture_pane() if line.strip()][-lines:]


def attach(session: libtmux.Session) -> None:
    """Attach this terminal to the session (replaces this process)."""
    socket_name = os.environ.get("LANDER_TMUX_SOCKET")
    command = [
        "tmux",
        *(["-L", socket_name] if socket_name else []),
        "attach-session",
        "-t",
        session.session_name or "",
    ]
    os.execvp("tmux", command)
