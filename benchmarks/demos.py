"""Time and samples to a good bot with demonstrations against plain PPO, side by side.

Records the reference controller through the real bridge (``lander record``, 10 and 50
episodes), then, sides alternating in each round, trains the same run three ways
(``lander train --no-git --stop-at-score GOAL --eval-every N``): plain PPO, and PPO after
behaviour cloning on each demo file. A side's time is from its launch to the line that
says the goal was reached (read as it is printed), its samples the steps of that
evaluation. Also scores behaviour cloning alone (the cloned policy before any PPO step,
in-process, 50 episodes). Prints medians, ranges and ratios against plain PPO.

    .venv/bin/python benchmarks/demos.py [--rounds 3] [--goal 0.9]
    .venv/bin/python benchmarks/demos.py --game stroke --game-arg reward_mode=delayed
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from measure import free_base_port, run_checked
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
LANDER = ROOT / ".venv" / "bin" / "lander"
REACHED = re.compile(r"normalized score ([0-9.]+) at ([0-9,]+) steps reached --stop-at-score")
console = Console()


def time_to_goal(home: Path, run: str, args: list[str], limit_s: float) -> tuple[float, int] | None:
    """Launch ``lander train RUN ARGS``; seconds from launch to the goal's line and the
    steps there, or None when the run ended without reaching it."""
    command = [str(LANDER), "train", run, *args]
    started = time.monotonic()
    with subprocess.Popen(
        command, cwd=home, env={**os.environ, "LANDER_HOME": str(home)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    ) as process:  # fmt: skip
        assert process.stdout is not None
        found: tuple[float, int] | None = None
        for line in process.stdout:
            match = REACHED.search(line)
            if match and found is None:
                found = (time.monotonic() - started, int(match.group(2).replace(",", "")))
            if time.monotonic() - started > limit_s:
                process.kill()
        process.wait()
    return found


def bc_alone(demo: Path, game: str, game_args: dict[str, str], epochs: int) -> float | None:
    """The normalized score of the policy cloned from ``demo`` before any PPO step."""
    from training.config import TrainConfig
    from training.demos.behaviour_cloning import clone_behaviour
    from training.demos.files import load_demos
    from training.envs.environments import make_vec_env
    from training.evaluation.scoring import evaluate_in_process, game_settings, model_policy
    from training.session.model_builder import make_ppo_model

    config = TrainConfig(game=game, game_args=game_args, in_process=True, bc_epochs=epochs)
    env = make_vec_env(config)
    try:
        model = make_ppo_model(config, env, None, None)
        clone_behaviour(model, [load_demos(demo)], epochs, config.seed)
        settings = game_settings(game, game_args)
        return evaluate_in_process(model_policy(model), 50, 1000, settings).normalized_score
    finally:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--goal", type=float, default=0.9)
    parser.add_argument("--game", default="lander")
    parser.add_argument("--game-arg", action="append", default=[])
    parser.add_argument("--episodes", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--eval-every", type=int, default=8192)
    parser.add_argument("--limit-s", type=float, default=300.0)
    parser.add_argument("--bc-epochs", type=int, default=None)
    args = parser.parse_args()
    game_args = dict(pair.split("=", 1) for pair in args.game_arg)
    flags = ["--game", args.game, *[f for pair in args.game_arg for f in ("--game-arg", pair)]]
    from training.config import TrainConfig

    epochs = args.bc_epochs or TrainConfig().bc_epochs
    with tempfile.TemporaryDirectory(prefix="lander-demos-") as folder:
        home = Path(folder)
        files = {}
        for count in args.episodes:
            files[count] = home / f"reference{count}.json"
            said = run_checked(
                home, str(LANDER), "record", "--policy", "reference", "--episodes", str(count),
                "--out", str(files[count]), "--port", str(free_base_port(1)), "--seed", str(count),
                *flags, env={"LANDER_HOME": str(home)},
            )  # fmt: skip
            console.print(said.strip())
        sides = ["plain", *[f"demos {count}" for count in args.episodes]]
        results: dict[str, list[tuple[float, int] | None]] = {side: [] for side in sides}
        for round_index in range(args.rounds):
            order = sides if round_index % 2 == 0 else sides[::-1]
            for side in order:
                train = [
                    "--no-git", "--timesteps", "2000000", "--seed", str(round_index),
                    "--stop-at-score", str(args.goal), "--eval-every", str(args.eval_every),
                    "--eval-episodes", "20", "--bc-epochs", str(epochs),
                    "--port", str(free_base_port(8)), *flags,
                ]  # fmt: skip
                if side != "plain":
                    train += ["--demos", str(files[int(side.split()[1])])]
                run = f"{side.replace(' ', '')}-r{round_index}"
                found = time_to_goal(home, run, train, args.limit_s)
                results[side].append(found)
                shown = "not reached" if found is None else f"{found[0]:.1f} s, {found[1]:,} steps"
                console.print(f"round {round_index + 1} {side}: {shown}")
        alone = {
            count: bc_alone(files[count], args.game, game_args, epochs) for count in args.episodes
        }
    table = Table(title=f"to a normalized score of {args.goal} on {args.game} {game_args or ''}")
    for column in ("side", "time (median, range)", "samples (median)", "time vs plain",
                   "reached", "behaviour cloning alone"):  # fmt: skip
        table.add_column(column, justify="left" if column == "side" else "right")
    plain_times = [found[0] for found in results["plain"] if found is not None]
    plain = statistics.median(plain_times) if plain_times else None
    for side in sides:
        reached = [found for found in results[side] if found is not None]
        times = [found[0] for found in reached]
        median = statistics.median(times) if times else None
        samples = statistics.median([found[1] for found in reached]) if reached else None
        score = "" if side == "plain" else f"{alone[int(side.split()[1])] or 0:.3f}"
        table.add_row(
            side,
            "-" if median is None else f"{median:.1f} s ({min(times):.1f}-{max(times):.1f})",
            "-" if samples is None else f"{samples:,.0f}",
            "-" if median is None or plain is None else f"{median / plain:.2f}",
            f"{len(reached)}/{len(results[side])}",
            score,
        )
    console.print(table)
    console.print(
        f"behaviour cloning: {epochs} epochs; evaluations every {args.eval_every:,} steps"
    )


if __name__ == "__main__":
    main()
