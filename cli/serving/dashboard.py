"""TensorBoard as the run dashboard: the command that serves ``logs/``, whether
one already serves a port, and the address a laptop on the LAN should open."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from cli.common.console import console, fail
from cli.common.options import DEFAULT_PAGE_PORT
from cli.machine.tmux_sessions import stop_dashboards
from game_bridge.errors import LanderError
from game_bridge.local_names import serves_every_interface, who_can_reach
from training.runs.local_state import read_local, write_local

DEFAULT_TB_HOST = "0.0.0.0"
DEFAULT_TB_PORT = 6006
PORTS_TO_TRY = 20
"""How many ports after the chosen one ``start`` tries when it is taken."""
REMEMBERED = "dashboard.json"
PAGE_REMEMBERED = "page.json"


def tensorboard_command(root: Path, host: str, port: int) -> list[str]:
    """TensorBoard over every run's logs (each run is one TensorBoard run)."""
    return [
        sys.executable,
        "-m",
        "tensorboard.main",
        "--logdir",
        str(root / "logs"),
        "--host",
        host,
        "--port",
        str(port),
        "--reload_interval",
        "15",
    ]


def _probe_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


def served_logdir(host: str, port: int, timeout: float = 1.0) -> str | None:
    """The log directory a TensorBoard on ``host:port`` serves (it says so at
    ``/data/environment``), or None when no TensorBoard answers there."""
    try:
        with urllib.request.urlopen(
            f"http://{_probe_host(host)}:{port}/data/environment", timeout=timeout
        ) as reply:
            data = json.loads(reply.read(65536))
    except (urllib.error.URLError, OSError, ValueError):
        return None
    location = data.get("data_location") if isinstance(data, dict) else None
    return str(location) if isinstance(location, str) else None


def serves_logs_of(root: Path, host: str, port: int) -> bool:
    """True when the TensorBoard on ``host:port`` serves this checkout's ``logs/``."""
    served = served_logdir(host, port)
    return served is not None and Path(served).resolve() == (root / "logs").resolve()


def port_is_free(host: str, port: int) -> bool:
    """True when nothing listens on ``host:port``."""
    with socket.socket() as probe:
        try:
            probe.bind((host if host != "0.0.0.0" else "", port))
        except OSError:
            return False
    return True


def free_port(host: str, start: int, avoid: int | None = None) -> int | None:
    """The first free port from ``start`` on (within the ports a dashboard tries), not
    ``avoid`` (a port chosen for a server not started yet); None when all are taken."""
    for candidate in range(start, start + PORTS_TO_TRY):
        if candidate != avoid and port_is_free(host, candidate):
            return candidate
    return None


def lan_address() -> str:
    """This machine's LAN address for the dashboard URL (no packet is sent to find it)."""
    try:
        output = subprocess.run(
            ["hostname", "-I"], capture_output=True, text=True, timeout=2, check=False
        ).stdout
        for address in output.split():
            if "." in address and not address.startswith("127."):
                return address
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            address = str(info[4][0])
            if not address.startswith("127."):
                return address
    except OSError:
        pass
    return socket.gethostname()


@dataclass(frozen=True)
class DashboardChoice:
    """Where the dashboard is, and the command to serve it (None: one already serves it here)."""

    host: str
    port: int
    command: list[str] | None
    note: str

    @property
    def url(self) -> str:
        return dashboard_url(self.host, self.port)

    @property
    def reach(self) -> str:
        """Who can reach it, and how to keep it to this machine or reach it over SSH."""
        line = who_can_reach(self.host, "--tb-host")
        if serves_every_interface(self.host):
            line += f", and reach it over SSH: ssh -L {self.port}:127.0.0.1:{self.port} THIS_BOX"
        return line


class DashboardError(LanderError):
    """No dashboard can be served as asked: a host that is not an address, a port out of
    range, or every port tried taken by something that is not this checkout's dashboard."""


def choose_dashboard(root: Path, host: str | None, port: int | None) -> DashboardChoice:
    """Reuse a TensorBoard that serves this checkout's ``logs/``; else serve one on the first
    free port from ``port`` on, and say why when it is not ``port``. Host and port not given
    are the ones this checkout used last; the choice is remembered (untracked, ``.lander/``).

    :raises DashboardError: a bad host or port, or the port and the next ones all taken.
    """
    remembered = read_local(root, REMEMBERED)
    host = host or str(remembered.get("host") or DEFAULT_TB_HOST)
    wanted = port or int(remembered.get("port") or DEFAULT_TB_PORT)
    if not 1 <= wanted <= 65535 - PORTS_TO_TRY:
        raise DashboardError(
            f"--tb-port must be between 1 and {65535 - PORTS_TO_TRY}, got {wanted}"
        )
    try:
        socket.getaddrinfo(host, wanted, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise DashboardError(f"--tb-host {host!r} is not an address or host name") from None
    for candidate in range(wanted, wanted + PORTS_TO_TRY):
        if serves_logs_of(root, host, candidate):
            choice = DashboardChoice(
                host,
                candidate,
                None,
                f"reusing the TensorBoard of this checkout on port {candidate}",
            )
            break
        if port_is_free(host, candidate):
            note = "a new TensorBoard"
            if candidate != wanted:
                note += f" on port {candidate}: port {wanted} serves something else"
            choice = DashboardChoice(
                host, candidate, tensorboard_command(root, host, candidate), note
            )
            break
    else:
        raise DashboardError(
            f"ports {wanted}-{wanted + PORTS_TO_TRY - 1} are all taken: choose one with --tb-port"
        )
    write_local(root, REMEMBERED, {"host": host, "port": candidate})
    return choice


def choose_page_port(root: Path, host: str, wanted: int | None, avoid: int) -> tuple[int, str]:
    """The live page's port and what to say about it: ``wanted`` (``--web-port``), else the
    port this checkout's pages used last, else 6010, so a run's page stays where the last
    one was; a taken port moves to the next free one, and the note says why. Remembered
    (untracked, ``.lander/``).

    :param avoid: the dashboard's port (chosen, maybe not serving yet).
    :raises DashboardError: a port out of range, or it and the next ones all taken.
    """
    first = wanted or int(read_local(root, PAGE_REMEMBERED).get("port") or DEFAULT_PAGE_PORT)
    if not 1 <= first <= 65535 - PORTS_TO_TRY:
        raise DashboardError(
            f"--web-port must be between 1 and {65535 - PORTS_TO_TRY}, got {first}"
        )
    port = free_port(host, first, avoid)
    if port is None:
        raise DashboardError(
            f"ports {first}-{first + PORTS_TO_TRY - 1} are all taken: choose one with --web-port"
        )
    if wanted is not None or port == first:  # a port taken for now is no new default
        write_local(root, PAGE_REMEMBERED, {"port": first})
    if port == first:
        return port, ""
    taken = "is the dashboard's" if first == avoid else "is taken"
    return port, f"port {first} {taken}"


def dashboard_url(host: str, port: int) -> str:
    """The URL to open: the LAN address when serving on all interfaces."""
    shown = lan_address() if host in ("0.0.0.0", "", "::") else host
    return f"http://{shown}:{port}/"


def stop_dashboard(root: Path) -> None:
    """``lander dashboard --stop``: end this checkout's TensorBoard sessions in tmux."""
    stopped = stop_dashboards(root)
    if stopped:
        console.print(f"stopped the dashboard: {', '.join(stopped)}")
        return
    remembered = read_local(root, REMEMBERED)
    host, port = str(remembered.get("host") or DEFAULT_TB_HOST), remembered.get("port")
    if isinstance(port, int) and serves_logs_of(root, host, port):
        fail(
            f"the dashboard on port {port} was not started by lander start (no tmux session): "
            "stop it with Ctrl-C where it runs"
        )
    fail("no dashboard of this checkout is running")
