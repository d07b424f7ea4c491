"""What every lean rollout loop does with one vectorised step: write it into SB3's buffer in
place, and find the episodes a time limit cut, to bootstrap them from their last observation
(the feed-forward loop in ``lean_ppo.py``, the loop of a policy with memory in
``recurrent_update.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.buffers import RolloutBuffer


def store_step(
    storage: RolloutBuffer,
    obs: Any,
    actions: np.ndarray,
    rewards: np.ndarray,
    starts: np.ndarray,
    values: np.ndarray,
    log_probs: np.ndarray,
) -> int:
    """Write one step of every env at the buffer's position and advance it; its index.
    ``obs`` is an array, or a dict of arrays by key for a buffer of several keys."""
    position = storage.pos
    if isinstance(storage.observations, dict):
        for key, stored in storage.observations.items():
            stored[position] = obs[key]
    else:
        storage.observations[position] = obs
    storage.actions[position] = actions.reshape(storage.actions[0].shape)
    storage.rewards[position] = rewards
    storage.episode_starts[position] = starts
    storage.values[position] = values
    storage.log_probs[position] = log_probs
    storage.pos += 1
    storage.full = storage.pos == storage.buffer_size
    return position


def truncated(dones: np.ndarray, infos: list[dict[str, Any]]) -> tuple[list[int], Any]:
    """The envs whose episode a time limit (or a restarted game) cut this step, and their
    last observations stacked (by key for observations of several keys): what SB3 #633
    bootstraps from (empty when none)."""
    cut = [
        (i, infos[i]["terminal_observation"])
        for i in np.flatnonzero(dones).tolist()
        if infos[i].get("TimeLimit.truncated", False)
        and infos[i].get("terminal_observation") is not None
    ]
    if not cut:
        return [], np.zeros(0)
    last = [obs for _, obs in cut]
    if isinstance(last[0], dict):
        return [i for i, _ in cut], {key: np.stack([o[key] for o in last]) for key in last[0]}
    return [i for i, _ in cut], np.stack(last)
