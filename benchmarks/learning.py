"""Does PPO learn the bundled games with default flags? Normalized score against steps.

Trains one run per case through the bridge (real game processes: the lander over
loopback TCP, the stroke game over stdio) with ``lander train``'s defaults plus
the case's own settings, evaluating the deterministic policy every ``--eval-every``
steps on ``--episodes`` episodes in-process. The score is normalized in the same
run: the random policy is 0, the game's reference controller is 1. Cases:

- ``lander``: the cursor-following lander. Target: 0.8 within 600,000 steps.
- ``stroke``: the stroke game, a reward every step. Target: 0.8 within 1M steps.
- ``stroke-delayed``: the stroke game scored only at each stroke's end, with the
  settings that helped it (``DELAYED_SETTINGS``).

    .venv/bin/python benchmarks/learning.py [--case lander|stroke|stroke-delayed|all]
        [--timesteps N] [--eval-every N] [--set KEY=VALUE ...] [--in-process]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from training.config import TrainConfig, apply_overrides
from training.evaluation.scoring import EvalResult, baselines, game_settings
from training.session.eval_callback import PeriodicEvaluation
from training.session.trainer import TrainRequest, train

console = Console()

DELAYED_SETTINGS: dict[str, Any] = {"gamma": 0.999, "normalize_rewards": True}
"""What the delayed stroke needs beyond the defaults: a reward 120 steps late must reach
the first step of its stroke (0.99^120 = 0.30, 0.999^120 = 0.89), and a score of
hundreds arriving once per stroke must not swamp the value loss (rewards scaled by the
running spread of returns). Without the scaling the policy ends below random."""
CASES: dict[str, tuple[dict[str, Any], int]] = {
    "lander": ({}, 600_000),
    "stroke": ({"game": "stroke"}, 1_000_000),
    "stroke-delayed": (
        {"game": "stroke", "game_args": {"reward_mode": "delayed"}, **DELAYED_SETTINGS},
        1_000_000,
    ),
}


def run_case(
    name: str, overrides: dict[str, Any], args: argparse.Namespace
) -> tuple[list[tuple[int, EvalResult, float]], float]:
    """Train one case; return its curve and its wall seconds."""
    config = apply_overrides(TrainConfig(), overrides, "benchmark")
    settings = game_settings(config.game, config.game_args, config.action_repeat)
    random_mean, reference_mean = baselines(200, 12345, settings)
    console.print(
        f"[bold]{name}[/]: random policy {random_mean:.1f}, reference controller "
        f"{reference_mean:.1f}; settings {overrides}"
    )
    started = time.monotonic()
    curve: list[tuple[int, EvalResult, float]] = []

    def record(steps: int, result: EvalResult) -> None:
        curve.append((steps, result, time.monotonic() - started))
        console.print(f"{steps:>9,} steps  {result.line()}  ({curve[-1][2]:.0f} s)")

    evaluation = PeriodicEvaluation(args.eval_every, args.episodes, settings, on_result=record)
    with tempfile.TemporaryDirectory() as root:
        train(
            TrainRequest(Path(root), f"learning-{name}", overrides),
            Console(quiet=True),
            extra_callbacks=[evaluation],
        )
    return curve, time.monotonic() - started


def parse_sets(pairs: list[str]) -> dict[str, Any]:
    """``--set gamma=0.999`` as overrides (numbers as numbers, true/false as booleans)."""
    result: dict[str, Any] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        if value.lower() in ("true", "false"):
            result[key] = value.lower() == "true"
            continue
        try:
            result[key] = int(value)
        except ValueError:
            try:
                result[key] = float(value)
            except ValueError:
                result[key] = value
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--case", choices=[*CASES, "all"], default="all")
    parser.add_argument("--timesteps", type=int, help="steps per case (default: the case's own)")
    parser.add_argument("--eval-every", type=int, default=50_000)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--port", type=int, default=23008)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--in-process", action="store_true", help="train in-process instead")
    args = parser.parse_args()

    names = list(CASES) if args.case == "all" else [args.case]
    summary = Table(title="steps to a normalized score of 0.8")
    for column in ("case", "transport", "reached 0.8 at", "best score", "wall s"):
        summary.add_column(column, justify="right")
    for name in names:
        overrides, steps = CASES[name]
        overrides = {
            **overrides,
            "timesteps": args.timesteps or steps,
            "port": args.port,
            "in_process": args.in_process,
            **parse_sets(args.set),
        }
        curve, wall = run_case(name, overrides, args)
        table = Table(title=f"{name}: normalized score against steps")
        for column in ("steps", "mean reward", "normalized", "wall s"):
            table.add_column(column, justify="right")
        for at, result, seconds in curve:
            table.add_row(
                f"{at:,}",
                f"{result.mean_reward:.1f}",
                f"{result.normalized_score:.3f}",
                f"{seconds:.0f}",
            )
        console.print(table)
        reached = next((at for at, r, _ in curve if (r.normalized_score or 0) >= 0.8), None)
        best = max((r.normalized_score or 0) for _, r, _ in curve) if curve else float("nan")
        transport = "in-process" if args.in_process else ("stdio" if "stroke" in name else "tcp")
        summary.add_row(
            name,
            transport,
            f"{reached:,}" if reached else "not reached",
            f"{best:.3f}",
            f"{wall:.0f}",
        )
    console.print(summary)


if __name__ == "__main__":
    main()
