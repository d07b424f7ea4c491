"""What a picture game's frames cost the trainer on the wire: the plugin's hex-in-JSON
against lander's binary picture encoding (``lander-u8-v2``), side by side in one run.

The same ``gym:`` picture game (Breakout's 4 x 84 x 84 stacked frames by default; ``--env-id
lander``: the bundled lander's camera mode, 3 x 36 x 48 frames) runs as N processes of K
copies, as a picture run starts them (4 x 2), stepped with random actions; the two encodings alternate ``--repeats`` times, ``--seconds`` each, on fresh
games. It prints the medians of the env steps per second and of the trainer's own CPU
time per step (its process time, which the games' processes do not add to): the
trainer's share is what the encoding changes, since the games step the emulator either
way.

    .venv/bin/python benchmarks/picture_wire.py [--env-id BreakoutNoFrameskip-v4]
        [--seconds 10] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
from measure import free_base_port
from rich.console import Console
from rich.table import Table

from game_bridge.launcher import LaunchConfig
from game_bridge.vec_env import GameVecEnv
from games import launch_settings

console = Console()


def measure(
    env_id: str, n_instances: int, agents: int, seconds: float, fast_wire: bool
) -> tuple[float, float]:
    """(env steps per second, trainer CPU milliseconds per VecEnv step) of random play."""
    camera = env_id == "lander"
    game = (
        launch_settings("lander")
        if camera
        else {"command": [sys.executable, "-m", "games.gym", f"--env_id={env_id}"]}
    )
    env = GameVecEnv(
        LaunchConfig(
            **game,
            n_instances=n_instances,
            base_port=free_base_port(n_instances),
            game_args={"agents": str(agents), **({"observation": "pixels"} if camera else {})},
            fast_wire=fast_wire,
        )
    )
    try:
        if env.binary != fast_wire:
            raise SystemExit(f"{env_id}: the binary encoding was {'not ' * fast_wire}taken")
        env.reset()
        rng = np.random.default_rng(0)
        actions = (
            rng.uniform(-1, 1, (256, env.num_envs, *(env.action_space.shape or ())))
            if camera
            else rng.integers(0, int(env.action_space.n), (256, env.num_envs))  # type: ignore[attr-defined]
        )
        for i in range(20):
            env.step(actions[i])
        steps = 0
        cpu, started = time.process_time(), time.perf_counter()
        while time.perf_counter() - started < seconds:
            env.step(actions[steps % len(actions)])
            steps += 1
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        return steps * env.num_envs / wall, 1000 * cpu / steps
    finally:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env-id", default="BreakoutNoFrameskip-v4")
    parser.add_argument("--instances", type=int, default=4)
    parser.add_argument("--agents", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    sps: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.repeats):
        for fast_wire in (False, True):
            rate, ms = measure(args.env_id, args.instances, args.agents, args.seconds, fast_wire)
            sps[fast_wire].append(rate)
            cpu[fast_wire].append(ms)
            console.print(
                f"{'binary' if fast_wire else 'json'}: {rate:,.0f} steps/s, {ms:.3f} ms CPU a step"
            )
    table = Table(
        title=f"{args.env_id}, {args.instances} x {args.agents}: the trainer's cost of a picture step"
    )
    for column in ("encoding", "env steps/s", "trainer CPU ms / VecEnv step"):
        table.add_column(column, justify="right")
    for fast_wire, name in ((False, "hex in JSON"), (True, "lander-u8-v2")):
        table.add_row(
            name,
            f"{statistics.median(sps[fast_wire]):,.0f}",
            f"{statistics.median(cpu[fast_wire]):.3f}",
        )
    json_cpu, binary_cpu = (statistics.median(cpu[f]) for f in (False, True))
    json_sps, binary_sps = (statistics.median(sps[f]) for f in (False, True))
    table.add_row("binary / JSON", f"{binary_sps / json_sps:.2f}", f"{binary_cpu / json_cpu:.2f}")
    console.print(table)


if __name__ == "__main__":
    main()
