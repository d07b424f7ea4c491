"""The OpenEnv transport's cost: environment steps per second of the same game through
``--transport openenv`` (sessions of ``lander serve GAME``, over WebSocket) and over
loopback TCP (the game's own processes, one agent each), at 1 and 8 environments, side
by side in one run. Random actions; the sides alternate ``--repeats`` times.

    .venv/bin/python benchmarks/openenv_transport.py [--game lander] [--seconds 3] [--repeats 3]

The server runs in its own process (as a user runs it), one Python for all its sessions:
the OpenEnv figure is the server's and the transport's together.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from measure import free_base_port, timed_steps, warmed_up
from rich.console import Console
from rich.table import Table

from game_bridge.launcher import LaunchConfig
from game_bridge.vec_env import GameVecEnv
from games import launch_settings

console = Console()
LANDER = Path(sys.executable).parent / "lander"


def _serve(game: str, sessions: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_base_port(1)
    server = subprocess.Popen(
        [str(LANDER), "serve", game, "--port", str(port), "--max-sessions", str(sessions)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as answer:
                if json.loads(answer.read()).get("status") == "healthy":
                    return server, url
        except OSError:
            time.sleep(0.05)
    server.kill()
    raise SystemExit("lander serve did not start")


def steps_per_second(transport: str, game: str, envs: int, seconds: float, url: str) -> float:
    settings = (
        {"transport": "openenv", "game_url": url}
        if transport == "openenv"
        else {
            **launch_settings(game),
            "base_port": free_base_port(envs),
            "game_args": {"agents": "1"},
            "fast_wire": True,
        }
    )
    env = GameVecEnv(LaunchConfig(n_instances=envs, **settings))
    try:
        steps, wall = timed_steps(env, warmed_up(env), seconds)
        return steps * env.num_envs / wall
    finally:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--game", default="lander")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    server, url = _serve(args.game, 16)
    table = Table(title=f"{args.game}: env steps per second, OpenEnv against TCP, same run")
    for column in ("environments", "TCP", "OpenEnv", "OpenEnv / TCP"):
        table.add_column(column, justify="right")
    try:
        for envs in (1, 8):
            measured: dict[str, list[float]] = {"tcp": [], "openenv": []}
            for _ in range(args.repeats):
                for transport in measured:
                    measured[transport].append(
                        steps_per_second(transport, args.game, envs, args.seconds, url)
                    )
            tcp, openenv = (statistics.median(measured[t]) for t in ("tcp", "openenv"))
            table.add_row(str(envs), f"{tcp:,.0f}", f"{openenv:,.0f}", f"{openenv / tcp:.2f}")
    finally:
        server.terminate()
        server.wait(timeout=10)
    console.print(table)


if __name__ == "__main__":
    main()
