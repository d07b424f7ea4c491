"""A picture run's rollout with its games stepped in halves (the trainer's forward pass for
one half while the other half's games step) against one batch, rounds alternating in one
run, on real games.

The games are a picture run's: ``PongNoFrameskip-v4`` as 4 processes of 2 copies over TCP
in lander's binary picture encoding, under the run's wrappers (the monitor, and rewards
scaled where the defaults scale them); the policy is the defaults' for pictures
(``PICTURE_DEFAULTS``), played by the lean loop on one torch thread as the trainer
collects. It prints the median samples a second of whole rollouts each way and their
ratio: the update is not in it, so the end-to-end gain is this one times the share of a
run's time spent collecting.

    .venv/bin/python benchmarks/half_steps.py [--env-id PongNoFrameskip-v4] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import deque

import numpy as np
import torch
from measure import free_base_port
from rich.console import Console
from rich.table import Table
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecNormalize

from game_bridge.launcher import LaunchConfig
from game_bridge.vec_env import GameVecEnv
from training.config import PICTURE_DEFAULTS, TrainConfig
from training.envs.game_monitor import GameMonitor
from training.envs.half_steps import game_halves
from training.ppo.lean_ppo import LeanPPO
from training.session.model_builder import make_ppo_model

console = Console()


class _Quiet(BaseCallback):
    def _on_step(self) -> bool:
        return True


def rollout_rate(model: LeanPPO, halved: bool) -> float:
    """Samples a second of one whole rollout, its games in halves or in one batch."""
    assert model.env is not None
    halves = game_halves(model.env) if halved else None
    assert halved == (halves is not None)
    model.halves = halves
    callback = _Quiet()
    callback.init_callback(model)
    started = time.perf_counter()
    model.collect_rollouts(model.env, callback, model.rollout_buffer, model.n_steps)
    return model.n_steps * model.env.num_envs / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="PongNoFrameskip-v4")
    parser.add_argument("--rounds", type=int, default=5, help="alternations")
    args = parser.parse_args()
    torch.set_num_threads(1)
    games = GameVecEnv(
        LaunchConfig(
            command=[sys.executable, "-m", "games.gym", f"--env_id={args.env_id}"],
            n_instances=4,
            base_port=free_base_port(4),
            seed=0,
            game_args={"agents": "2"},
            fast_wire=True,
        )
    )
    try:
        config = TrainConfig(**{**PICTURE_DEFAULTS, "device": "cpu"})
        env = VecNormalize(GameMonitor(games), norm_obs=False, norm_reward=config.normalize_rewards)
        model = make_ppo_model(config, env, None, None)
        assert isinstance(model, LeanPPO) and model.cnn_rollouts()
        model._last_obs = env.reset()
        model._last_episode_starts = np.ones(env.num_envs, bool)
        model.ep_info_buffer, model.ep_success_buffer = deque(maxlen=100), deque(maxlen=100)
        rollout_rate(model, halved=True)  # oneDNN builds its kernels; the games warm up
        rates: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.rounds):
            for halved in (False, True):
                rates[halved].append(rollout_rate(model, halved))
                console.print(f"{'halves' if halved else 'one batch'}: {rates[halved][-1]:,.0f}/s")
    finally:
        games.close()
    one, two = (statistics.median(rates[h]) for h in (False, True))
    table = Table(title=f"{args.env_id}, 4 x 2 games: collection samples a second (median)")
    for column in ("one batch", "halves", "halves / one batch"):
        table.add_column(column, justify="right")
    table.add_row(f"{one:,.0f}", f"{two:,.0f}", f"{two / one:.2f}x")
    console.print(table)


if __name__ == "__main__":
    main()
