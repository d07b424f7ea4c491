"""The defaults of PettingZoo's games, chosen over a suite: each candidate set of settings
trains every game of the suite for a fixed number of steps, seeds alternating, and its
bot is scored as ``lander eval`` scores it (a cooperative game: the mean return of all its
agents; a game of two rivals, trained by self-play: the bot's return against uniformly
random legal moves).

    .venv/bin/python benchmarks/many_agents.py                       # lander's defaults
    .venv/bin/python benchmarks/many_agents.py --candidates '{"gamma": 0.995}' '{}'
    .venv/bin/python benchmarks/many_agents.py --games mpe2.simple_spread_v3 --seeds 1
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

from measure import free_base_port
from rich.console import Console
from rich.table import Table

from cli.common.train_flags import settings_argv

ROOT = Path(__file__).resolve().parent.parent
SUITE = {
    "mpe2.simple_spread_v3": 300_000,
    "pettingzoo.classic.tictactoe_v3": 60_000,
    "pettingzoo.classic.connect_four_v3": 150_000,
}
"""Each game of the suite and the steps it trains: a cooperative parallel game of three
agents alike, and two turn-based games of two rivals with masked moves."""
console = Console(width=150)


def train_and_score(module: str, steps: int, seed: int, settings: dict[str, object]) -> float:
    """``lander train`` of the game with ``settings`` over lander's defaults, then
    ``lander eval`` of its bot (100 games)."""
    lander = str(ROOT / ".venv" / "bin" / "lander")
    with tempfile.TemporaryDirectory(prefix="many-agents-") as folder:
        env = {**os.environ, "LANDER_HOME": folder}
        subprocess.run(["git", "init", "-q", folder], check=True)
        rivals = "classic" in module  # the suite's turn-based games of two rivals
        trained = subprocess.run(
            [lander, "train", "suite", "--game", f"pz:{module}", "--timesteps", str(steps),
             "--seed", str(seed), "--no-git", "--port", str(free_base_port(8)),
             *(["--self-play"] if rivals else []), *settings_argv(settings)],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if trained.returncode != 0:
            raise SystemExit(f"training {module} failed:\n{trained.stdout[-2000:]}{trained.stderr}")
        scored = subprocess.run(
            [lander, "eval", "suite", "--episodes", "100", "--seed", str(5000 + seed)],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        found = re.search(r"mean_reward=(-?[0-9.]+)", scored.stdout)
        if found is None:
            raise SystemExit(f"eval of {module} failed:\n{scored.stdout}{scored.stderr}")
        return float(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", default=",".join(SUITE), help="comma-separated modules")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument(
        "--candidates", nargs="+", default=["{}"], help="JSON settings over lander's defaults"
    )
    args = parser.parse_args()
    candidates = [json.loads(text) for text in args.candidates]
    table = Table(title="PettingZoo suite: median score of the seeds (higher is better)")
    table.add_column("settings")
    games = args.games.split(",")
    for module in games:
        table.add_column(module.split(".")[-1])
    results: dict[int, dict[str, list[float]]] = {
        i: {m: [] for m in games} for i in range(len(candidates))
    }
    for module in games:
        for seed in range(args.seeds):
            order = range(len(candidates)) if seed % 2 == 0 else reversed(range(len(candidates)))
            for index in order:
                score = train_and_score(module, SUITE.get(module, 200_000), seed, candidates[index])
                results[index][module].append(score)
                console.print(
                    f"  {module} seed {seed} {json.dumps(candidates[index])}: {score:.3f}"
                )
    for index, settings in enumerate(candidates):
        table.add_row(
            json.dumps(settings) or "{}",
            *(f"{statistics.median(results[index][m]):.3f}" for m in games),
        )
    console.print(table)


if __name__ == "__main__":
    main()
