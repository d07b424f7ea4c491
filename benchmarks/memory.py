"""Bots that remember: what a policy with memory (``--memory N``) wins where it pays and
costs where it does not, measured side by side.

- ``glimpse``: the lander in glimpses (``--game-arg observation=glimpse``: the target shown
  for half a second after it moves, hidden for the next 3.5). Three sides train for the
  same wall time with the mode's defaults: lander with memory, lander without (the
  feed-forward policy), and the feed-forward policy fed each agent's last ``--stack``
  observations joined (what a user without memory would try; lander's own frame stack,
  benchmarks/skill_runner.py). Each side's last snapshot is scored (normalized: random 0,
  the reference pilot that always sees the target 1) on ``--episodes`` episodes.
- ``cost``: the plain lander, with and without memory: time to a normalized score of
  ``--score`` and to a training reward of 200, each side with its defaults.

Sides alternate within each seed (the order flips every seed); medians over ``--seeds``.

    .venv/bin/python benchmarks/memory.py [--parts glimpse,cost] [--seeds 3] [--seconds 150]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from time_to_skill import Scorer, first_skilled, train_side

console = Console(width=150)
GLIMPSE = {"observation": "glimpse"}


@dataclass
class Outcome:
    """One side's run: its score at the end, when it first scored the mark, its steps."""

    final: float
    to_score: float | None
    to_reward: float | None
    steps: int
    curve: list[tuple[float, float]]
    """(clock, score) of every ``--curve``-th snapshot, when asked for."""


def _run(
    settings: dict[str, object], args: argparse.Namespace, scorer: Scorer, scratch: Path
) -> Outcome:
    run_args = argparse.Namespace(**{**vars(args), "candidate": [json.dumps(settings)]})
    trained = train_side("candidate1", "bundled", run_args, scorer, scratch)
    to_score, _ = first_skilled(trained.snapshots, trained.score, args.score)
    final = trained.score(trained.snapshots[-1][1])
    rollouts = [e for e in trained.lines if e["kind"] == "rollout"]
    hit = next((e for e in rollouts if (e["reward"] or -1e9) >= 200.0), None)
    every = args.curve
    curve = [(t, trained.score(path)) for t, path in trained.snapshots[::every]] if every else []
    return Outcome(final, to_score, hit["t"] if hit else None, rollouts[-1]["steps"], curve)


def spread(values: list[float | None], fmt: str) -> str:
    """Median (min-max) of runs; a run that missed the mark counts as beyond every other."""
    reached = [v for v in values if v is not None]
    if len(reached) <= len(values) // 2:
        return f"not reached ({len(values) - len(reached)}/{len(values)} missed)"
    ordered = sorted(reached) + [float("inf")] * (len(values) - len(reached))
    low = fmt.format(min(reached))
    high = "miss" if len(reached) < len(values) else fmt.format(max(reached))
    return f"{fmt.format(statistics.median(ordered))} ({low}-{high})"


def median_reached(values: list[float | None]) -> float | None:
    """The median of runs (a miss beyond every other), or None when half or more missed."""
    reached = [v for v in values if v is not None]
    if len(reached) <= len(values) // 2:
        return None
    return statistics.median(sorted(reached) + [float("inf")] * (len(values) - len(reached)))


def _race(
    title: str,
    sides: dict[str, dict[str, object]],
    args: argparse.Namespace,
    scorer: Scorer,
) -> dict[str, list[Outcome]]:
    results: dict[str, list[Outcome]] = {side: [] for side in sides}
    with tempfile.TemporaryDirectory(prefix="memory-bench-") as scratch:
        for seed in range(args.seeds):
            order = list(sides) if seed % 2 == 0 else list(sides)[::-1]
            for side in order:
                outcome = _run({**sides[side], "seed": seed}, args, scorer, Path(scratch))
                results[side].append(outcome)
                console.print(
                    f"{title} seed {seed} {side}: {outcome.final:.2f} at {args.seconds:g} s, "
                    f"{args.score:g} at {outcome.to_score}, reward 200 at {outcome.to_reward}, "
                    f"{outcome.steps:,} steps"
                )
                if outcome.curve:
                    console.print("  " + ", ".join(f"{t:.0f}s:{v:.2f}" for t, v in outcome.curve))
    table = Table(title=f"{title}: median (min-max) of {args.seeds} seeds, {args.seconds:g} s each")
    for column in (
        "side",
        f"score at {args.seconds:g} s",
        f"to score {args.score:g} (s)",
        "to reward 200 (s)",
        f"steps in {args.seconds:g} s",
    ):
        table.add_column(column, justify="right")
    for side, outcomes in results.items():
        table.add_row(
            side,
            spread([o.final for o in outcomes], "{:.2f}"),
            spread([o.to_score for o in outcomes], "{:.1f}"),
            spread([o.to_reward for o in outcomes], "{:.1f}"),
            spread([float(o.steps) for o in outcomes], "{:,.0f}"),
        )
    console.print(table)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--parts", default="glimpse,cost")
    parser.add_argument(
        "--sides", default="memory,feed-forward,stacked", help="glimpse: the sides to train"
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=150.0, help="glimpse: time per run")
    parser.add_argument("--cost-seconds", type=float, default=60.0, help="cost: time per run")
    parser.add_argument("--memory", type=int, default=64, help="--memory of the memory side")
    parser.add_argument("--stack", type=int, default=4, help="observations the stacked side sees")
    parser.add_argument("--score", type=float, default=0.8, help="normalized score mark")
    parser.add_argument("--episodes", type=int, default=128, help="episodes per evaluation")
    parser.add_argument("--snapshot-every", type=float, default=3.0)
    parser.add_argument(
        "--curve", type=int, default=0, help="also score and print every Nth snapshot (0: none)"
    )
    parser.add_argument("--n-parallel", type=int, default=4)
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--speedup", type=float, default=1000.0)
    parser.add_argument("--busy", type=int, default=0)
    args = parser.parse_args()
    args.difficulty = 1
    parts = args.parts.split(",")
    if "glimpse" in parts:
        scorer = Scorer("bundled", args.episodes, 1, args.speedup)
        sides = {
            "memory": {"game_args": GLIMPSE, "memory": args.memory},
            "feed-forward": {"game_args": GLIMPSE},
            "stacked": {"game_args": GLIMPSE, "stack_coordinates": args.stack},
        }
        chosen = args.sides.split(",")
        results = _race(
            "glimpse lander",
            {
                (f"stacked x{args.stack}" if side == "stacked" else side): sides[side]
                for side in chosen
            },
            args,
            scorer,
        )
        finals = {side: statistics.median(o.final for o in runs) for side, runs in results.items()}
        memory = finals.pop("memory")
        for side, score in finals.items():
            console.print(f"  memory - {side}, score at {args.seconds:g} s: {memory - score:+.2f}")
        console.print(f"  memory's median score at {args.seconds:g} s: {memory:.2f}")
    if "cost" in parts:
        scorer = Scorer("bundled", args.episodes, 1, args.speedup)
        cost_args = argparse.Namespace(**{**vars(args), "seconds": args.cost_seconds})
        results = _race(
            "plain lander",
            {"feed-forward": {}, "memory": {"memory": args.memory}},
            cost_args,
            scorer,
        )
        for mark, key in ((f"score {args.score:g}", "to_score"), ("reward 200", "to_reward")):
            plain = median_reached([getattr(o, key) for o in results["feed-forward"]])
            mine = median_reached([getattr(o, key) for o in results["memory"]])
            if plain and mine:
                console.print(f"  memory / feed-forward, time to {mark}: {mine / plain:.2f}")


if __name__ == "__main__":
    main()
