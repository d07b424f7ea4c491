"""Self-play on the chase, a game whose sides have their own spaces: what a model per side
learns, against the scripted players and against each other.

Trains the duel's chase mode (``--game-arg mode=chase``) through the bridge (real game
processes over loopback TCP) with ``--self-play``: the hunter is the run's model, the prey
has its own, each learning ``--team-change`` steps in turn. Then, in-process over
``--rounds`` rounds each:

- the final hunter against the scripted prey and the final prey against the scripted
  hunter (goal: one side's final bot wins >= 0.6 against the scripted player of the other
  side), beside the scripted players against each other;
- the two final bots against each other;
- the wall seconds until the prey first escaped the scripted hunter in 60% of rounds (its
  kept snapshots, each timed by when its file was written);
- both ratings at the end, the wall seconds and the run's fps (one side's steps over the
  wall time of both sides' turns).

    .venv/bin/python benchmarks/chase.py [--timesteps N] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from game_bridge.bot_runner import BotRunner
from games.duel.chase import scripted_hunter, scripted_prey
from games.duel.scoring import ChaseSettings
from training.bots.run_bots import export_sides
from training.evaluation.scoring import Policy
from training.runs.run_paths import RunPaths
from training.session.trainer import TrainRequest, train

console = Console()
SETTINGS: dict[str, Any] = {
    "game": "duel", "game_args": {"mode": "chase"}, "n_parallel": 4, "agents_per_instance": 8,
    "self_play": True, "team_change": 20_000, "play_latest": 0.2, "snapshot_window": 20,
    "learning_rate": 0.0005, "checkpoint_every": 200_000,
}  # fmt: skip
"""The chase's settings: turns of 20,000 steps, old opponents more often than the default
(``--play-latest`` 0.2 over a window of 20) and a smaller step size than the lander's, which
in trials kept the arms race from swinging (docs/performance.md)."""


def hunter_wins(hunter: Policy, prey: Policy, rounds: int) -> float:
    """The share of ``rounds`` chases the hunter wins."""
    _, outcomes = ChaseSettings().rounds(hunter, prey, rounds, seed=7)
    return float(np.mean(outcomes == 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timesteps", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lander-chase-") as scratch:
        home = Path(scratch)
        request = TrainRequest(home, "hunt", {**SETTINGS, "timesteps": args.timesteps})
        outcome = train(request, Console(quiet=True))
        if outcome.status != "finished":
            raise SystemExit(f"hunt {outcome.status}: {outcome.error}")
        paths = RunPaths(home, "hunt")
        from training.bots.run_bots import export_run

        export_run(paths, paths.final)
        export_sides(paths)
        hunter = BotRunner.from_file(paths.bot_json).act
        prey = BotRunner.from_file(paths.side_bot_json("prey")).act
        record = json.loads(paths.run_json.read_text())
        ratings = record["extra"]["self_play"]["ratings"]
        seconds = sum(
            (
                _seconds(session["started_at"], session["ended_at"])
                for session in record["sessions"]
            ),
            0.0,
        )
        escaped_at = first_escape(paths, record["sessions"][0]["started_at"], args.rounds // 4)
        figures = [
            ("scripted hunter vs scripted prey", hunter_wins(scripted_hunter, scripted_prey, args.rounds), ""),
            ("the run's hunter vs the scripted prey", hunter_wins(hunter, scripted_prey, args.rounds), ">= 0.6 (one side)"),
            ("the scripted hunter vs the run's prey", hunter_wins(scripted_hunter, prey, args.rounds), "<= 0.4 (one side)"),
            ("the run's hunter vs the run's prey", hunter_wins(hunter, prey, args.rounds), ""),
        ]  # fmt: skip

    table = Table(title=f"chase, {args.timesteps:,} steps a side, {args.rounds} rounds each")
    table.add_column("hunter vs prey")
    table.add_column("hunter wins", justify="right")
    table.add_column("goal", justify="right")
    for name, value, goal in figures:
        table.add_row(name, f"{value:.3f}", goal)
    console.print(table)
    console.print(
        f"ratings at the end: hunter {ratings['learner']:.0f}, prey {ratings['learner:prey']:.0f}; "
        f"wall {seconds:.0f} s; fps {record['extra']['last_fps']:,.0f} (the hunter's steps over "
        "both sides' turns)"
    )
    if escaped_at is None:
        console.print(
            "the prey's kept snapshots never escaped the scripted hunter in 60% of rounds"
        )
    else:
        console.print(
            f"the prey first escaped the scripted hunter in 60% of rounds at {escaped_at[0]:,} "
            f"steps, {escaped_at[1]:.0f} s after launch (its kept snapshots)"
        )


def first_escape(paths: RunPaths, started: str, rounds: int) -> tuple[int, float] | None:
    """The steps and wall seconds of the prey's first kept snapshot that the scripted
    hunter catches in at most 40% of ``rounds`` chases, or None."""
    import os
    from datetime import datetime

    import torch

    from training.evaluation.scoring import model_policy
    from training.ppo.inference import load_for_inference

    folder = paths.side_checkpoints("prey")
    model, normalizer = load_for_inference(folder / "final.zip")
    start = datetime.fromisoformat(started).timestamp()
    for snapshot in sorted((folder / "snapshots").glob("snap_*.pt")):
        model.policy.load_state_dict(torch.load(snapshot, map_location="cpu", weights_only=True))
        if hunter_wins(scripted_hunter, model_policy(model, normalizer), rounds) <= 0.4:
            steps = int(snapshot.stem.removeprefix("snap_"))
            return steps, os.path.getmtime(snapshot) - start
    return None


def _seconds(started: str, ended: str) -> float:
    from datetime import datetime

    return (datetime.fromisoformat(ended) - datetime.fromisoformat(started)).total_seconds()


if __name__ == "__main__":
    main()
