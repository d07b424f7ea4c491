"""``lander cluster``: this machine as a node of a Ray cluster that only its own can use.

Ray's ``ray start`` with what a cluster open to the LAN needs: token authentication
(:mod:`game_bridge.ray_token`; the head's machine makes the token once, every other machine
gets a copy), and the dashboard on loopback unless asked (it runs jobs: code). A joining
machine first asks the head whether it takes this machine's token, so a cluster without
authentication, or a token that does not match, is one line before anything starts.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from cli.common.console import console, fail
from game_bridge.local_names import who_can_reach
from game_bridge.ray_token import (
    RayTokenError,
    check_cluster_token,
    ensure_token,
    token_environment,
    token_path,
)

DEFAULT_HEAD_PORT = 6379
DEFAULT_DASHBOARD_HOST = "127.0.0.1"
RAY_DASHBOARD_PORT = 8265


def _ray() -> str:
    ray = Path(sys.executable).with_name("ray")
    if not ray.is_file():
        fail("lander cluster needs Ray: install it with `./lander setup --cluster`")
    return str(ray)


def _run_ray(args: list[str], with_token: bool = True) -> str:
    """``ray ARGS`` (with the token); its output, or one red line with its last error."""
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    try:
        env.update(token_environment() if with_token else {})
    except RayTokenError as exc:
        fail(str(exc))
    try:
        result = subprocess.run(
            [_ray(), *args], env=env, capture_output=True, text=True, timeout=300, check=False
        )
    except subprocess.TimeoutExpired:
        fail(f"`ray {args[0]}` did not finish within 5 minutes")
    if result.returncode != 0:
        lines = [line.strip() for line in (result.stderr + result.stdout).splitlines()]
        errors = [line for line in lines if "error" in line.lower()] or [
            line for line in lines if line
        ]
        fail(f"`ray {' '.join(args[:2])}` failed: {errors[-1] if errors else 'no output'}")
    return result.stdout


def start_node(
    join: str | None, port: int, node_ip: str | None, dashboard_host: str, ray_args: list[str]
) -> None:
    """Start a head here (``join`` None) or join the head at ``join``, with the token."""
    if join is None:
        created = ensure_token()
        if created:
            console.print(f"made this cluster's Ray token: {token_path()} (kept out of git)")
        args = ["start", "--head", f"--port={port}", f"--dashboard-host={dashboard_host}"]
    else:
        try:
            check_cluster_token(join)
        except RayTokenError as exc:
            fail(str(exc))
        args = ["start", f"--address={join}"]
    if node_ip:
        args.append(f"--node-ip-address={node_ip}")
    output = _run_ray([*args, "--disable-usage-stats", *ray_args])
    if join is not None:
        console.print(f"joined the Ray cluster at {join} with this machine's token")
        return
    said = [
        line.split("Local node IP:", 1)[1].strip()
        for line in output.splitlines()
        if "Local node IP:" in line
    ]
    where = f"{node_ip or (said[0] if said else socket.gethostname())}:{port}"
    console.print(f"started a Ray head at {where}, with token authentication ({token_path()})")
    console.print(
        f"another machine: copy the token (scp {os.uname().nodename}:{token_path()} "
        f"~/.ray/auth_token), then ./lander cluster --join {where}"
    )
    console.print(f"train on it: ./lander start RUN --cluster {where}")
    if "--include-dashboard=false" not in ray_args:
        console.print(
            f"Ray's dashboard: http://{dashboard_host}:{RAY_DASHBOARD_PORT} "
            f"({who_can_reach(dashboard_host, '--dashboard-host')})"
        )


def stop_nodes() -> None:
    """``ray stop``: end every Ray node this user runs on this machine."""
    _run_ray(["stop"], with_token=False)
    console.print("stopped this machine's Ray nodes")
