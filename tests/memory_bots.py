"""A bot with memory, exported by lander's own export without training: for the players
that must keep each agent's state as the numpy runner does (the engine, the page)."""

from __future__ import annotations

from pathlib import Path

import torch
from stable_baselines3.common.env_util import make_vec_env

from games.lander.gym_env import LanderEnv
from training.bots.export import export_policy
from training.ppo.lean_ppo import LeanPPO
from training.ppo.recurrent_policy import RecurrentActorCritic


def export_memory_bot(folder: Path, run: str = "recall", units: int = 6) -> Path:
    """``folder/RUN.json`` (and ``.onnx``): a lander bot with a GRU of ``units``, its
    recurrent weights scaled up so that its state changes its actions."""
    model = LeanPPO(
        RecurrentActorCritic,
        make_vec_env(LanderEnv, n_envs=2),
        policy_kwargs={"memory": units, "net_arch": {"pi": [16], "vf": [16]}},
        seed=4,
    )
    with torch.no_grad():
        model.policy.memory_cell.weight_hh.mul_(3.0)
        model.policy.memory_cell.weight_ih.mul_(3.0)
    bot_file = folder / f"{run}.json"
    export_policy(model, None, run, bot_file, folder / f"{run}.onnx")
    return bot_file
