"""What a CNN camera run spends besides its network's arithmetic, before and after, rounds
alternating in one run: the rollout loop (lander's lean loop against SB3's own, which
played every CNN policy before) and the live bot published every ``--publish-every``
steps (orjson against Python's indented JSON, which wrote it before).

The loop is measured over 8 envs that answer at once with one fixed Atari-sized frame
(84 x 84 x 4 uint8), so what it times is the trainer's side of a rollout: the forward
pass, sampling, storing; on one torch thread, as the trainer collects. The bot is the
real bot document of the same policy (``build_bot_spec``), written to a temporary file.

    .venv/bin/python benchmarks/cnn_rollouts.py [--rounds 5] [--steps 128]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import orjson
import torch
from rich.console import Console
from rich.table import Table
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import DummyVecEnv

from training.bots.bot_spec import build_bot_spec
from training.config import TrainConfig
from training.ppo.lean_ppo import LeanPPO
from training.runs.run_record import write_json_atomic
from training.session.model_builder import make_ppo_model

console = Console()

NETWORKS: dict[str, dict[str, Any]] = {
    "small": {"camera_encoder": "small"},
    "narrow, 512, linear heads (the defaults)": {
        "camera_encoder": "narrow",
        "cnn_features": 512,
        "net_width": 0,
    },
    "nature, 512, linear heads": {"camera_encoder": "nature", "cnn_features": 512, "net_width": 0},
}
ENVS = 8


class _Still(gymnasium.Env[np.ndarray, Any]):
    """One Atari-sized frame, every step: a game that costs nothing."""

    observation_space = gymnasium.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    action_space = gymnasium.spaces.Discrete(6)

    def __init__(self) -> None:
        self.frame = np.random.default_rng(0).integers(0, 256, (4, 84, 84), dtype=np.uint8)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        return self.frame, {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        return self.frame, 0.0, False, False, {}


class _Quiet(BaseCallback):
    def _on_step(self) -> bool:
        return True


def _model(settings: dict[str, Any]) -> tuple[LeanPPO, DummyVecEnv]:
    env = DummyVecEnv([_Still for _ in range(ENVS)])
    model = make_ppo_model(TrainConfig(n_steps=128, device="cpu", **settings), env, None, None)
    assert isinstance(model, LeanPPO) and model.cnn_rollouts()
    model._last_obs = env.reset()  # type: ignore[assignment]
    model._last_episode_starts = np.ones(ENVS, bool)
    model.ep_info_buffer, model.ep_success_buffer = deque(maxlen=100), deque(maxlen=100)
    return model, env


def _timed(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def loop_ms(model: LeanPPO, env: DummyVecEnv, lean: bool, steps: int) -> float:
    """Milliseconds a vectorised step of one rollout by the lean loop or by SB3's."""
    callback = _Quiet()
    callback.init_callback(model)
    model.lean_cnn = lean
    seconds = _timed(lambda: model.collect_rollouts(env, callback, model.rollout_buffer, steps))
    return 1000 * seconds / steps


def bot_seconds(spec: dict[str, Any], path: Path, fast: bool) -> float:
    """Seconds to write the bot document as the live publisher does now (compact, by orjson)
    or did (indented)."""
    return _timed(lambda: write_json_atomic(path, spec, compact=fast))


def measure(settings: dict[str, Any], rounds: int, steps: int, folder: Path) -> dict[str, Any]:
    """Each measurement's rounds for one network, alternating, and its bot's size."""
    model, env = _model(settings)
    loop_ms(model, env, lean=True, steps=8)  # oneDNN builds its kernels
    spec = build_bot_spec(model, None, "bench", None)
    timings: dict[str, Any] = {key: [] for key in ("sb3", "lean", "json", "orjson")}
    for _ in range(rounds):
        timings["sb3"].append(loop_ms(model, env, lean=False, steps=steps))
        timings["lean"].append(loop_ms(model, env, lean=True, steps=steps))
        timings["json"].append(bot_seconds(spec, folder / "bot.json", fast=False))
        timings["orjson"].append(bot_seconds(spec, folder / "bot.json", fast=True))
    env.close()
    timings["megabytes"] = len(orjson.dumps(spec)) / 1e6
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternations per network")
    parser.add_argument("--steps", type=int, default=128, help="steps a rollout")
    args = parser.parse_args()
    torch.set_num_threads(1)
    loops = Table(title=f"Rollout loop, ms a step of {ENVS} envs (median of rounds, alternating)")
    bots = Table(title="Live bot, s to write (median of rounds, alternating)")
    for table, before, after in (
        (loops, "SB3's loop", "lean loop"),
        (bots, "indented JSON", "orjson"),
    ):
        table.add_column("network")
        table.add_column(before, justify="right")
        table.add_column(after, justify="right")
        table.add_column("before / after", justify="right")
    with tempfile.TemporaryDirectory(prefix="lander-cnn-rollouts-") as folder:
        for name, settings in NETWORKS.items():
            timings = measure(settings, args.rounds, args.steps, Path(folder))
            sb3, lean, text, fast = (
                statistics.median(timings[k]) for k in ("sb3", "lean", "json", "orjson")
            )
            loops.add_row(name, f"{sb3:.2f}", f"{lean:.2f}", f"{sb3 / lean:.2f}x")
            bots.add_row(
                f"{name}, {timings['megabytes']:.0f} MB",
                f"{text:.2f}",
                f"{fast:.3f}",
                f"{text / fast:.0f}x",
            )
    console.print(loops)
    console.print(bots)


if __name__ == "__main__":
    main()
