"""A game process's share of a picture run: an ALE game's step as lander preprocesses it
(``AleFrames``, the emulator stepped directly) against Gymnasium's ``AtariPreprocessing``
that it replaced, both under the same lives, rewards and frame stack, rounds alternating in
one run, on one core as a game process runs (OpenCV on one thread).

Each round plays ``--steps`` random actions from the same seed on each side (games reset
as they end: lost lives, whole games, no-op starts). The observations are the same on both
sides (tests/test_atari.py), so only the time differs.

    .venv/bin/python benchmarks/ale_frames.py [--envs ...] [--rounds 5] [--steps 2000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import cv2
import gymnasium
import numpy as np
from rich.console import Console
from rich.table import Table

from games.gym import atari

console = Console()


def gymnasiums(env: gymnasium.Env[Any, Any]) -> gymnasium.Env[Any, Any]:
    """The preprocessing as it was: Gymnasium's wrapper under lander's lives and rewards."""
    return atari.preprocess(env, on_the_emulator=False)


SIDES: dict[str, Callable[[gymnasium.Env[Any, Any]], gymnasium.Env[Any, Any]]] = {
    "gymnasium": gymnasiums,
    "lander": atari.preprocess,
}


def microseconds_a_step(env_id: str, side: str, steps: int) -> float:
    """Wall microseconds a step over ``steps`` random actions from seed 0."""
    env = SIDES[side](gymnasium.make(env_id))
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))  # type: ignore[attr-defined]
        if terminated or truncated:
            env.reset()
    return (time.perf_counter() - start) / steps * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--envs",
        default="PongNoFrameskip-v4,BreakoutNoFrameskip-v4,SpaceInvadersNoFrameskip-v4",
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    atari.register_ale()
    cv2.setNumThreads(1)
    table = Table(title="an ALE game's step, microseconds (median of rounds)")
    for column in ("game", *SIDES, "gymnasium / lander"):
        table.add_column(column, justify="right")
    for env_id in args.envs.split(","):
        times: dict[str, list[float]] = {side: [] for side in SIDES}
        for round_ in range(args.rounds):
            order = list(SIDES) if round_ % 2 == 0 else list(reversed(SIDES))
            for side in order:
                times[side].append(microseconds_a_step(env_id, side, args.steps))
        medians = {side: statistics.median(values) for side, values in times.items()}
        ratio = medians["gymnasium"] / medians["lander"]
        table.add_row(env_id, *(f"{medians[side]:.0f}" for side in SIDES), f"{ratio:.2f}x")
    console.print(table)


if __name__ == "__main__":
    main()
