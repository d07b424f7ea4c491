"""What a step costs the games, launched one process each or forked from one server.

For N instances x K agents of the bundled game, alternating the two ways of
starting it, it steps the VecEnv with random actions and reads the CPU time the
game processes used (``/proc/PID/stat``) and the trainer used, per env step of
each game, and prints env steps/s and the ratio launched / forked.

    .venv/bin/python benchmarks/forked_games.py [--instances 8] [--agents 8] [--seconds 3] [--fast-wire]
"""

from __future__ import annotations

import argparse
import statistics
import time

from measure import cpu_seconds, free_base_port, timed_steps, warmed_up
from rich.console import Console
from rich.table import Table

from game_bridge.launcher import LaunchConfig
from game_bridge.vec_env import GameVecEnv
from games import launch_settings

console = Console()


def measure(forked: bool, n: int, k: int, seconds: float, fast_wire: bool) -> dict[str, float]:
    """Steps/s and microseconds of CPU per instance step (games) and per VecEnv step (trainer)."""
    env = GameVecEnv(
        LaunchConfig(
            command=launch_settings("lander")["command"],
            n_instances=n,
            base_port=free_base_port(n),
            game_args={"agents": str(k)},
            fast_wire=fast_wire,
            fork_main=launch_settings("lander")["fork_main"] if forked else None,
        )
    )
    try:
        actions = warmed_up(env)
        pids = [instance.process.pid for instance in env.instances if instance.process]
        games_before = sum(cpu_seconds(pid) for pid in pids)
        trainer_before = time.process_time()
        steps, wall = timed_steps(env, actions, seconds)
        trainer = time.process_time() - trainer_before
        games = sum(cpu_seconds(pid) for pid in pids) - games_before
    finally:
        env.close()
    return {
        "sps": steps * env.num_envs / wall,
        "game_us": games / steps / n * 1e6,
        "trainer_us": trainer / steps * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--instances", type=int, default=8)
    parser.add_argument("--agents", type=int, default=8, help="agents per instance")
    parser.add_argument("--seconds", type=float, default=3.0, help="stepping time per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="alternating measurements per side")
    parser.add_argument("--fast-wire", action="store_true", help="binary steps instead of JSON")
    args = parser.parse_args()
    results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for _ in range(args.repeats):
        for forked in (False, True):
            results[forked].append(
                measure(forked, args.instances, args.agents, args.seconds, args.fast_wire)
            )
    median = {
        forked: {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        for forked, runs in results.items()
    }
    table = Table(
        title=f"{args.instances} x {args.agents} bundled games"
        + (", --fast-wire" if args.fast_wire else ", JSON")
    )
    for column in ("started", "env steps/s", "game CPU us / step", "trainer CPU us / step"):
        table.add_column(column, justify="right")
    for forked, name in ((False, "launched"), (True, "forked")):
        row = median[forked]
        table.add_row(
            name, f"{row['sps']:,.0f}", f"{row['game_us']:.0f}", f"{row['trainer_us']:.0f}"
        )
    console.print(table)
    console.print(
        f"launched / forked: game CPU per step "
        f"{median[False]['game_us'] / median[True]['game_us']:.2f}x, "
        f"steps/s {median[False]['sps'] / median[True]['sps']:.2f}x"
    )


if __name__ == "__main__":
    main()
