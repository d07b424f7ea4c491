"""Self-play on the duel game: what it learns and what it costs, side by side in one run.

Trains the duel twice through the bridge (real game processes over loopback TCP), the
same steps and settings: once with ``--self-play`` (the learner against snapshots of
itself) and once plainly (every lander the same learning policy). Then, in-process:

- the learner's Elo over the run (TensorBoard ``self_play/elo``);
- the final bot's score against its first snapshot (goal >= 0.9) and against the
  scripted pilot (goal >= 0.6), each over ``--rounds`` rounds on each side;
- the tiers ``easy,medium,hard`` (``lander export --tiers``) against each other, which
  must be ordered;
- the wall seconds until an evaluation against the pilot (``--eval-every``) first scored
  a win rate of 0.6, and the fps of each run (what self-play costs).

    .venv/bin/python benchmarks/self_play.py [--timesteps N] [--rounds N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from games.duel.controllers import scripted_actions
from games.duel.scoring import DuelSettings
from training.bots.tiers import export_tiers
from training.evaluation.scoring import Policy, model_policy
from training.ppo.inference import load_for_inference
from training.runs.run_paths import SNAPSHOT_GLOB, RunPaths
from training.session.trainer import TrainRequest, train

console = Console()
SETTINGS: dict[str, Any] = {
    "game": "duel", "n_parallel": 4, "agents_per_instance": 8, "n_steps": 256,
    "batch_size": 1024, "checkpoint_every": 50_000, "eval_every": 25_000, "eval_episodes": 64,
}  # fmt: skip
SELF_PLAY: dict[str, Any] = {
    "self_play": True, "snapshot_every": 20_000, "snapshot_window": 10, "swap_every": 10_000,
}  # fmt: skip


def score(red: Policy, blue: Policy, rounds: int) -> float:
    """``red``'s mean score (win 1, draw 1/2) over ``rounds`` rounds on each side."""
    duel = DuelSettings()
    _, first = duel.rounds(red, blue, rounds, seed=101)
    _, second = duel.rounds(blue, red, rounds, seed=202)
    outcomes = np.concatenate([first, -second])
    return float(np.mean((outcomes + 1) / 2))


def policy_of(path: Path, final: Path | None = None) -> Policy:
    """A model .zip, or a snapshot's state dict loaded into the final model's network."""
    model, normalizer = load_for_inference(final if path.suffix == ".pt" and final else path)
    if path.suffix == ".pt":
        model.policy.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return model_policy(model, normalizer)


def first_reaching(
    logs: Path, tag: str, goal: float
) -> tuple[float | None, list[tuple[int, float]]]:
    """Wall seconds from the run's first event to the first ``tag`` at or above ``goal``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = []
    starts = []
    for path in sorted(logs.glob("events.out.tfevents.*")):
        accumulator = EventAccumulator(str(path))
        accumulator.Reload()
        if tag in accumulator.Tags()["scalars"]:
            events.extend(accumulator.Scalars(tag))
        scalars = accumulator.Tags()["scalars"]
        if scalars:
            starts.append(min(e.wall_time for e in accumulator.Scalars(scalars[0])))
    curve = [(e.step, e.value) for e in sorted(events, key=lambda e: e.step)]
    reached = [e for e in events if e.value >= goal]
    if not reached or not starts:
        return None, curve
    return min(e.wall_time for e in reached) - min(starts), curve


def run(home: Path, name: str, overrides: dict[str, Any]) -> tuple[float, Any]:
    """Train one run; its wall seconds and record."""
    started = time.monotonic()
    outcome = train(TrainRequest(home, name, overrides), Console(quiet=True))
    if outcome.status != "finished":
        raise SystemExit(f"{name} {outcome.status}: {outcome.error}")
    return time.monotonic() - started, outcome.record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timesteps", type=int, default=400_000)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lander-self-play-") as scratch:
        home = Path(scratch)
        common = {**SETTINGS, "timesteps": args.timesteps}
        sp_seconds, sp_record = run(home, "sp", {**common, **SELF_PLAY})
        plain_seconds, plain_record = run(home, "plain", common)
        paths = RunPaths(home, "sp")
        final = paths.final
        learner = policy_of(final)
        snapshots = sorted(paths.snapshots.glob(SNAPSHOT_GLOB))
        first_snapshot = paths.snapshots / "snap_000000000000.pt"
        versus_first = (
            score(learner, policy_of(first_snapshot, final), args.rounds)
            if first_snapshot.exists()
            else None
        )
        versus_pilot = score(learner, scripted_actions, args.rounds)
        plain_versus_pilot = score(
            policy_of(RunPaths(home, "plain").final), scripted_actions, args.rounds
        )
        tiers = export_tiers(paths, ["easy", "medium", "hard"])
        tier_policies = {t.name: policy_of(t.candidate.path, final) for t in tiers}
        easy_medium = score(tier_policies["medium"], tier_policies["easy"], args.rounds)
        medium_hard = score(tier_policies["hard"], tier_policies["medium"], args.rounds)
        easy_hard = score(tier_policies["hard"], tier_policies["easy"], args.rounds)
        to_pilot, _ = first_reaching(paths.logs, "eval/success_rate", 0.6)
        plain_to_pilot, _ = first_reaching(RunPaths(home, "plain").logs, "eval/success_rate", 0.6)
        _, elo = first_reaching(paths.logs, "self_play/elo", float("inf"))

    table = Table(
        title=f"duel, {args.timesteps:,} steps each, {args.rounds} rounds a side per score"
    )
    table.add_column("figure")
    table.add_column("self-play", justify="right")
    table.add_column("plain", justify="right")
    table.add_column("goal", justify="right")
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    table.add_row("score vs its first snapshot", fmt(versus_first), "", ">= 0.9")
    table.add_row(
        "score vs the scripted pilot", fmt(versus_pilot), fmt(plain_versus_pilot), ">= 0.6"
    )
    table.add_row("hard vs medium / medium vs easy / hard vs easy",
                  f"{medium_hard:.3f} / {easy_medium:.3f} / {easy_hard:.3f}", "", "> 0.5 each")  # fmt: skip
    table.add_row(
        "wall s to a 0.6 win rate vs the pilot (eval)",
        "-" if to_pilot is None else f"{to_pilot:.0f}",
        "-" if plain_to_pilot is None else f"{plain_to_pilot:.0f}",
        "",
    )
    table.add_row(
        "fps", f"{sp_record.extra.last_fps:,.0f}", f"{plain_record.extra.last_fps:,.0f}", ""
    )
    table.add_row("wall s for the run", f"{sp_seconds:.0f}", f"{plain_seconds:.0f}", "")
    console.print(table)
    console.print(
        "learner Elo over the run: "
        + ", ".join(f"{step:,}: {value:.0f}" for step, value in elo[:: max(len(elo) // 10, 1)])
    )
    console.print(f"snapshots kept: {len(snapshots)}; tiers from " + ", ".join(
        f"{t.name}={t.candidate.name} (elo {t.candidate.rating:.0f})" for t in tiers))  # fmt: skip


if __name__ == "__main__":
    main()
