"""A checkpoint loaded to play, evaluate or export: the model on the CPU with the
normalisation statistics saved beside it (what every bot command needs of a run)."""

from __future__ import annotations

import pickle
from pathlib import Path

from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecNormalize

from training.ppo.lean_ppo import LeanPPO
from training.runs.checkpoints import normalization_path


def load_for_inference(model_path: Path) -> tuple[PPO, VecNormalize | None]:
    """Load a checkpoint on the CPU with its normalisation statistics, if any (for export
    and evaluation)."""
    model = LeanPPO.load(str(model_path), device="cpu")
    stats = normalization_path(model_path)
    normalizer = None
    if stats.exists():
        with stats.open("rb") as handle:
            normalizer = pickle.load(handle)
    return model, normalizer
