"""``lander tune``: short training runs over a grid of instance counts, speedups
and agents per instance, to find the fastest setting for this machine and game.

Each setting trains PPO for a few seconds in a scratch folder (nothing is kept)
and is scored by its steady training fps (steps after the first rollout over the
time they took), the way operators compare two-minute smoke runs by hand.
"""

from __future__ import annotations

import itertools
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from stable_baselines3.common.callbacks import BaseCallback

from game_bridge.errors import BridgeError
from training.trainer import TrainRequest, train


@dataclass(frozen=True)
class TuneResult:
    """One setting and its measured speed (fps None when it failed)."""

    n_parallel: int
    agents_per_instance: int
    speedup: float | None
    fps: float | None
    note: str = ""


class _Timer(BaseCallback):
    """Stops training after ``seconds`` and measures fps after the first rollout."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.started = 0.0
        self.steady_from: tuple[float, int] | None = None
        self.fps: float | None = None

    def _on_training_start(self) -> None:
        self.started = time.monotonic()

    def _on_rollout_end(self) -> None:
        now = time.monotonic()
        if self.steady_from is None:
            self.steady_from = (now, self.num_timesteps)
        else:
            then, steps = self.steady_from
            self.fps = (self.num_timesteps - steps) / max(now - then, 1e-9)

    def _on_step(self) -> bool:
        return time.monotonic() - self.started < self.seconds


def tune(
    n_parallel: list[int],
    agents: list[int],
    speedups: list[float | None],
    seconds: float,
    base_overrides: dict[str, Any],
    console: Console,
) -> list[TuneResult]:
    """Measure every combination; print each as it completes."""
    results = []
    for n, k, speedup in itertools.product(n_parallel, agents, speedups):
        timer = _Timer(seconds)
        overrides = {
            **base_overrides,
            "n_parallel": n,
            "agents_per_instance": k,
            "speedup": speedup,
            "timesteps": 10**9,
            "checkpoint_every": 10**9,
            # Short rollouts, so several fit in the measuring time.
            "n_steps": max(32, min(int(base_overrides.get("n_steps", 256)), 4096 // (n * k) or 32)),
        }
        with tempfile.TemporaryDirectory(prefix="lander-tune-") as scratch:
            try:
                outcome = train(
                    TrainRequest(Path(scratch), "tune", overrides),
                    Console(quiet=True),
                    extra_callbacks=[timer],
                )
                note = "" if outcome.status != "failed" else (outcome.error or "failed")
            except BridgeError as exc:
                note = str(exc)
        result = TuneResult(n, k, speedup, timer.fps, note)
        results.append(result)
        shown = "failed: " + note if timer.fps is None else f"{timer.fps:,.0f} fps"
        console.print(
            f"n_parallel={n} agents={k} speedup={speedup if speedup is not None else 'game default'}: {shown}"
        )
    return results


def best(results: list[TuneResult]) -> TuneResult | None:
    """The fastest setting that worked."""
    working = [r for r in results if r.fps is not None]
    return max(working, key=lambda r: r.fps or 0.0) if working else None
