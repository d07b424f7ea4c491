"""The stroke game's two baselines, which define its normalized score: a random
policy (the floor: the corrected point wanders) and a reference controller, a tuned
filter that steers toward its estimate of the pen (the ceiling)."""

from __future__ import annotations

import numpy as np

from games.stroke.world import MOVE, WINDOW

LEAD = 3.0
"""Steps the reference extrapolates ahead: about the sensor's mean latency."""
BLEND = 0.7
"""How much of its current point the reference keeps in its target (smoothing)."""


def random_moves(rng: np.random.Generator, count: int) -> np.ndarray:
    """Uniform moves in [-1, 1]^2: a random walk of the corrected point."""
    return rng.uniform(-1.0, 1.0, (count, 2)).astype(np.float32)


def current_points(obs: np.ndarray) -> np.ndarray:
    """Each pen's corrected point, the newest of its own outputs in the observation."""
    obs = np.asarray(obs, dtype=np.float64).reshape(len(obs), -1)
    return obs[:, -2:]


def steer(obs: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """The moves that bring each corrected point toward ``targets`` as fast as allowed."""
    return np.clip((targets - current_points(obs)) / MOVE, -1.0, 1.0).astype(np.float32)


def reference_moves(obs: np.ndarray) -> np.ndarray:
    """Steer toward a least-squares line through the raw window per axis, read
    :data:`LEAD` steps past the newest sample (undoing the latency), blended with the
    current point."""
    obs = np.asarray(obs, dtype=np.float64).reshape(len(obs), -1)
    raw = obs[:, : 2 * WINDOW].reshape(len(obs), WINDOW, 2)
    times = np.arange(WINDOW) - (WINDOW - 1)
    centred = times - times.mean()
    slope = (centred[None, :, None] * (raw - raw.mean(axis=1, keepdims=True))).sum(axis=1) / (
        centred**2
    ).sum()
    predicted = raw.mean(axis=1) + slope * (LEAD - times.mean())
    target = BLEND * current_points(obs) + (1 - BLEND) * predicted
    return steer(obs, np.clip(target, -1.0, 1.0))
