"""Environment steps per second through the bridge, beside the in-process game.

For each N instances x K agents it measures, in the same run, (a) the bundled
game's physics stepped in-process for N*K agents batched (with the same auto-reset
and observation work the game does) and (b) GameVecEnv over N real game processes
on loopback TCP, started as lander starts the bundled game (forked from one
server), with the Godot-compatible JSON and with ``--fast-wire``, and prints b / a.
It also times the start of 4 instances x 8 agents against one instance (the fork
server already running, as it is after a run's first start).

    .venv/bin/python benchmarks/bridge_throughput.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from measure import bridge_steps_per_second, free_base_port
from rich.console import Console
from rich.table import Table

from game_bridge.launcher import LaunchConfig
from game_bridge.vec_env import GameVecEnv
from games import launch_settings
from games.lander.physics import LanderPhysics

console = Console()
SETTINGS = [(1, 1), (1, 16), (2, 8), (4, 4), (4, 16), (8, 8)]


def in_process_sps(n_agents: int, seconds: float) -> float:
    """Steps per second of the physics alone, all agents batched."""
    physics = LanderPhysics(n_agents, 0)
    actions = np.random.default_rng(0).uniform(-1, 1, (256, n_agents, 2)).astype(np.float32)
    steps = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        result = physics.step(actions[steps % 256])
        done = result.terminated | result.truncated
        if done.any():
            physics.reset_agents(done)
            physics.observe()
        steps += 1
    return steps * n_agents / (time.perf_counter() - started)


def start_seconds(n_instances: int, agents: int, repeats: int = 3) -> float:
    """Median time from launch to every instance connected and described."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        env = GameVecEnv(
            LaunchConfig(
                **launch_settings("lander"),
                n_instances=n_instances,
                base_port=free_base_port(n_instances),
                game_args={"agents": str(agents)},
            )
        )
        times.append(time.perf_counter() - started)
        env.close()
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per setting")
    args = parser.parse_args()
    table = Table(title="bridge throughput (env steps/s)")
    for column in (
        "instances x agents",
        "in-process (a)",
        "bridge (b)",
        "b / a",
        "bridge --fast-wire",
        "fast / a",
    ):
        table.add_column(column, justify="right")
    for n_instances, agents in SETTINGS:
        limit = in_process_sps(n_instances * agents, args.seconds)
        bridged = bridge_steps_per_second(n_instances, agents, args.seconds)
        fast = bridge_steps_per_second(n_instances, agents, args.seconds, fast_wire=True)
        table.add_row(
            f"{n_instances} x {agents}",
            f"{limit:,.0f}",
            f"{bridged:,.0f}",
            f"{bridged / limit:.2f}",
            f"{fast:,.0f}",
            f"{fast / limit:.2f}",
        )
    console.print(table)
    one = start_seconds(1, 8)
    four = start_seconds(4, 8)
    console.print(
        f"start: 1 instance x 8 agents {one:.2f} s, 4 instances x 8 agents {four:.2f} s, "
        f"ratio {four / one:.2f} (sequential would be about 4.0)"
    )


if __name__ == "__main__":
    main()
