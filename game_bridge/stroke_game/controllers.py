"""The stroke game's two baselines, which define its normalized score: a random
policy (the floor) and a reference controller, a tuned filter (the ceiling)."""

from __future__ import annotations

import numpy as np

from game_bridge.stroke_game.world import OUTPUTS, WINDOW

LEAD = 3.0
"""Steps the reference extrapolates ahead: the sensor's mean latency."""
BLEND = 0.6
"""How much of its previous output the reference keeps (smoothing)."""


def random_points(rng: np.random.Generator, count: int) -> np.ndarray:
    """Uniform points in [-1, 1]^2."""
    return rng.uniform(-1.0, 1.0, (count, 2)).astype(np.float32)


def reference_points(obs: np.ndarray) -> np.ndarray:
    """A least-squares line through the raw window per axis, read :data:`LEAD` steps past
    the newest sample (undoing the latency), blended with the previous output."""
    obs = np.asarray(obs, dtype=np.float64).reshape(len(obs), -1)
    raw = obs[:, : 2 * WINDOW].reshape(len(obs), WINDOW, 2)
    previous = obs[:, 2 * WINDOW :].reshape(len(obs), OUTPUTS, 2)[:, -1]
    times = np.arange(WINDOW) - (WINDOW - 1)
    centred = times - times.mean()
    slope = (centred[None, :, None] * (raw - raw.mean(axis=1, keepdims=True))).sum(axis=1) / (
        centred**2
    ).sum()
    predicted = raw.mean(axis=1) + slope * (LEAD - times.mean())
    return np.clip(BLEND * previous + (1 - BLEND) * predicted, -1.0, 1.0).astype(np.float32)
