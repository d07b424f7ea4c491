"""Detached tmux sessions of runs, through libtmux.

A run's session ``lander-<checkout>-<run>`` has a window ``train`` running ``lander
train``; ``<checkout>`` is a short hash of the checkout's path, so two clones on one
machine never see (or stop) each other's runs. TensorBoard has a session of its own,
``lander-dashboard-<port>``, shared by every run of the checkout, so tidying a run's
session never takes the dashboard away.
Windows stay after their program exits (``remain-on-exit``), so a person attaching
later reads how it ended; ``lander stop`` and ``lander clean`` remove the sessions of
runs that have ended. Set ``LANDER_TMUX_SOCKET`` to use a private tmux server (tests do).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import sys
from pathlib import Path

import libtmux
from libtmux.exc import LibTmuxException

from game_bridge.errors import LanderError

SESSION_PREFIX = "lander-"
DASHBOARD_PREFIX = SESSION_PREFIX + "dashboard-"
TRAIN_WINDOW = "train"
PAGE_WINDOW = "page"
"""The window of a run's session that serves its live page (``lander play --web RUN``)."""
DASHBOARD_WINDOW = "dashboard"
WINDOW_SIZE = (220, 50)
"""Columns and rows of a detached window: wide enough for the progress line, which
would otherwise wrap and leave a stale copy in the scrollback at every refresh."""


class TmuxError(LanderError):
    """tmux is missing or refused a command."""


def server() -> libtmux.Server:
    """The tmux server lander uses (``LANDER_TMUX_SOCKET`` names a private one)."""
    return libtmux.Server(socket_name=os.environ.get("LANDER_TMUX_SOCKET") or None)


def checkout_tag(root: Path) -> str:
    """Six hex digits naming the checkout (its resolved path) in its sessions' names."""
    return hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:6]


def session_name(root: Path, run: str) -> str:
    """``lander-<checkout>-<run>``, one name per checkout and run.

    tmux turns ``.`` into ``_`` in session names, which would make ``col.x`` and
    ``col_x`` one session: a name with a dot gets ``_`` and a hash of the run's real
    name after ``+`` (a character no run name has, so no other run maps there).
    """
    prefix = f"{SESSION_PREFIX}{checkout_tag(root)}-"
    if "." not in run:
        return prefix + run
    return prefix + run.replace(".", "_") + "+" + hashlib.sha1(run.encode()).hexdigest()[:4]


def find_session(root: Path, run: str) -> libtmux.Session | None:
    """This checkout's session of the run, or None."""
    try:
        return server().sessions.get(session_name=session_name(root, run), default=None)
    except LibTmuxException:
        return None


def train_window_alive(root: Path, run: str) -> bool:
    """True when the run's session in this checkout has a live trainer window."""
    session = find_session(root, run)
    return session is not None and window_alive(session, TRAIN_WINDOW)


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


def _new_session(name: str, window: str, root: Path) -> libtmux.Session:
    return server().new_session(
        session_name=name,
        window_name=window,
        start_directory=str(root),
        window_command="cat",  # a placeholder until remain-on-exit is set
        attach=False,
        x=WINDOW_SIZE[0],
        y=WINDOW_SIZE[1],
    )


def create_run_session(
    run: str,
    root: Path,
    command_args: list[str],
    environment: dict[str, str],
    page_args: list[str] | None = None,
) -> libtmux.Session:
    """Create the detached session: a ``train`` window running ``lander <command_args>``
    (``train RUN ...``, a sweep or a curriculum), and with ``page_args`` a ``page``
    window serving the live page (``lander <page_args>``), which ends with the session.

    :raises TmuxError: when tmux cannot create it.
    """
    try:
        session = _new_session(session_name(root, run), TRAIN_WINDOW, root)
        train_window = _window(session, TRAIN_WINDOW)
        assert train_window is not None
        _run_in_window(train_window, lander_command(*command_args), environment)
        if page_args is not None:
            page_window = session.new_window(
                window_name=PAGE_WINDOW, start_directory=str(root), attach=False,
                window_shell="cat",
            )  # fmt: skip
            _run_in_window(page_window, lander_command(*page_args), environment)
    except (LibTmuxException, OSError) as exc:
        raise TmuxError(f"tmux could not create the session: {exc}") from None
    return session


def dashboard_session_name(port: int) -> str:
    """The dashboard's own session, one per port."""
    return f"{DASHBOARD_PREFIX}{port}"


def start_dashboard(port: int, root: Path, command: list[str], environment: dict[str, str]) -> None:
    """Run TensorBoard in its own detached session (replacing an ended one of that port).

    :raises TmuxError: when tmux cannot create it.
    """
    name = dashboard_session_name(port)
    try:
        old = server().sessions.get(session_name=name, default=None)
        if old is not None:
            old.kill()
        session = _new_session(name, DASHBOARD_WINDOW, root)
        window = _window(session, DASHBOARD_WINDOW)
        assert window is not None
        _run_in_window(window, command, environment)
    except (LibTmuxException, OSError) as exc:
        raise TmuxError(f"tmux could not start the dashboard: {exc}") from None


def _own_sessions(root: Path) -> tuple[list[libtmux.Session], list[libtmux.Session]]:
    """This checkout's run sessions and dashboard sessions (a dashboard is this
    checkout's when it was started in its folder); another clone's are its own."""
    try:
        sessions = list(server().sessions)
    except LibTmuxException:
        return [], []
    runs_prefix = f"{SESSION_PREFIX}{checkout_tag(root)}-"
    runs, dashboards = [], []
    for session in sessions:
        name = session.session_name or ""
        if name.startswith(DASHBOARD_PREFIX):
            if Path(session.session_path or "/").resolve() == root.resolve():
                dashboards.append(session)
        elif name.startswith(runs_prefix):
            runs.append(session)
    return runs, dashboards


def live_dashboards(root: Path) -> list[str]:
    """The names of this checkout's dashboard sessions whose TensorBoard still runs."""
    return [
        session.session_name or ""
        for session in _own_sessions(root)[1]
        if window_alive(session, DASHBOARD_WINDOW)
    ]


def runs_training(root: Path) -> int:
    """How many of this checkout's run sessions have a live trainer window."""
    return sum(window_alive(session, TRAIN_WINDOW) for session in _own_sessions(root)[0])


def stop_dashboards(root: Path) -> list[str]:
    """Kill this checkout's dashboard sessions (TensorBoard ends with its window); return
    their names."""
    stopped = []
    for session in _own_sessions(root)[1]:
        with contextlib.suppress(LibTmuxException):
            session.kill()
            stopped.append(session.session_name or "")
    return stopped


def remove_ended_sessions(root: Path) -> list[str]:
    """Kill this checkout's sessions whose program has ended (runs that finished, failed
    or were stopped; a dashboard of its own that exited); return their names. Another
    clone's sessions on this machine are its own to tidy."""
    runs, dashboards = _own_sessions(root)
    removed = []
    for sessions, window in ((runs, TRAIN_WINDOW), (dashboards, DASHBOARD_WINDOW)):
        for session in sessions:
            if not window_alive(session, window):
                session.kill()
                removed.append(session.session_name or "")
    return removed


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
