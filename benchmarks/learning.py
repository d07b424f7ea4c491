"""Does PPO learn the bundled game with default flags? Normalized score against steps.

Trains one run through the bridge (real game processes over loopback TCP) with
``lander train``'s defaults, evaluating the deterministic policy every
``--eval-every`` steps on 100 episodes. The score is normalized in the same run:
the random policy is 0, the hand-written reference controller is 1.
Target: 0.8 or more within 600,000 steps on a 2-core machine.

    .venv/bin/python benchmarks/learning.py [--timesteps 600000] [--eval-every 50000] [--in-process]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from training.eval_callback import PeriodicEvaluation
from training.evaluation import EvalResult, LanderSettings, baselines
from training.trainer import TrainRequest, train

console = Console()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--timesteps", type=int, default=600_000)
    parser.add_argument("--eval-every", type=int, default=50_000)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--port", type=int, default=23008)
    parser.add_argument(
        "--in-process", action="store_true", help="train on in-process Lander-v0 instead"
    )
    args = parser.parse_args()

    random_mean, reference_mean = baselines(200, 12345, LanderSettings())
    console.print(
        f"baselines: random policy {random_mean:.1f}, reference controller {reference_mean:.1f}"
    )
    started = time.monotonic()
    curve: list[tuple[int, EvalResult, float]] = []

    def record(steps: int, result: EvalResult) -> None:
        curve.append((steps, result, time.monotonic() - started))
        console.print(f"{steps:>9,} steps  {result.line()}  ({curve[-1][2]:.0f} s)")

    evaluation = PeriodicEvaluation(
        args.eval_every, args.episodes, LanderSettings(), on_result=record
    )
    with tempfile.TemporaryDirectory() as root:
        overrides = {"timesteps": args.timesteps, "port": args.port, "in_process": args.in_process}
        quiet = Console(quiet=True)
        outcome = train(
            TrainRequest(Path(root), "learning", overrides), quiet, extra_callbacks=[evaluation]
        )
    elapsed = time.monotonic() - started
    table = Table(
        title=f"normalized score against steps ({'in-process' if args.in_process else 'bridge'})"
    )
    for column in ("steps", "mean reward", "success", "normalized", "wall s"):
        table.add_column(column, justify="right")
    for steps, result, seconds in curve:
        table.add_row(
            f"{steps:,}",
            f"{result.mean_reward:.1f}",
            f"{result.success_rate:.2f}",
            f"{result.normalized_score:.3f}",
            f"{seconds:.0f}",
        )
    console.print(table)
    reached = next(
        (steps for steps, result, _ in curve if (result.normalized_score or 0) >= 0.8), None
    )
    console.print(
        f"run {outcome.status} in {elapsed:.0f} s; "
        + (
            f"normalized score 0.8 first reached at {reached:,} steps"
            if reached
            else "0.8 not reached"
        )
    )


if __name__ == "__main__":
    main()
