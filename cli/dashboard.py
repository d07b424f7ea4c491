"""TensorBoard as the run dashboard: the command that serves ``logs/``, whether
one already serves a port, and the address a laptop on the LAN should open."""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

DEFAULT_TB_HOST = "0.0.0.0"
DEFAULT_TB_PORT = 6006


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


def serves_tensorboard(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when a TensorBoard answers on ``host:port``."""
    try:
        with urllib.request.urlopen(
            f"http://{_probe_host(host)}:{port}/data/environment", timeout=timeout
        ) as reply:
            return reply.status == 200 and b"data_location" in reply.read(4096)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def port_is_free(host: str, port: int) -> bool:
    """True when nothing listens on ``host:port``."""
    with socket.socket() as probe:
        try:
            probe.bind((host if host != "0.0.0.0" else "", port))
        except OSError:
            return False
    return True


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


def dashboard_url(host: str, port: int) -> str:
    """The URL to open: the LAN address when serving on all interfaces."""
    shown = lan_address() if host in ("0.0.0.0", "", "::") else host
    return f"http://{shown}:{port}/"
