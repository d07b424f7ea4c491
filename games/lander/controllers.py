"""Hand-written policies that set the score scale: a reference controller (the
ceiling, normalized score 1) and a uniformly random policy (the floor, 0).

Both read only the observation vector, so they can drive the game through the
wire protocol exactly as a trained bot would.
"""

from __future__ import annotations

import numpy as np

from games.lander.physics import (
    ACTION_SIZE,
    DRAG,
    GRAVITY,
    LATERAL_ACCEL,
    MAIN_ACCEL,
    N_DISCRETE_ACTIONS,
    POS_SCALE,
    VEL_SCALE,
)

_APPROACH_GAIN = 1.5
"""Desired velocity per metre of offset to the target (1/s)."""
_MAX_SPEED = np.array([6.0, 8.0])
"""Fastest approach, horizontal and vertical (m/s): keeps the lander within its braking power."""
_VELOCITY_GAIN = 5.0
"""Acceleration per m/s of velocity error (1/s)."""


def _desired_acceleration(obs: np.ndarray) -> np.ndarray:
    """Fly towards the target at a speed that shrinks with distance: (ax, ay) of thrust.

    A velocity-target law rather than a plain PD law, so the saturated lateral
    thruster does not overshoot far targets.
    """
    obs = np.asarray(obs, dtype=np.float64).reshape(-1, 7)
    offset = obs[:, 0:2] * POS_SCALE
    velocity = obs[:, 2:4] * VEL_SCALE
    desired_velocity = np.clip(_APPROACH_GAIN * offset, -_MAX_SPEED, _MAX_SPEED)
    accel = _VELOCITY_GAIN * (desired_velocity - velocity) + DRAG * velocity
    accel[:, 1] += GRAVITY
    return accel


def reference_actions(obs: np.ndarray) -> np.ndarray:
    """Continuous actions of the reference controller, shape (K, 2) in [-1, 1]."""
    accel = _desired_acceleration(obs)
    main = np.clip(accel[:, 1] / MAIN_ACCEL, 0.0, 1.0) * 2.0 - 1.0
    lateral = np.clip(accel[:, 0] / LATERAL_ACCEL, -1.0, 1.0)
    return np.column_stack([main, lateral]).astype(np.float32)


def reference_discrete_actions(obs: np.ndarray) -> np.ndarray:
    """Discrete actions of the reference controller, shape (K,): fire the main
    engine when more lift is needed than gravity gives, else push sideways."""
    accel = _desired_acceleration(obs)
    need_lift = accel[:, 1] > GRAVITY + 0.5
    lateral = np.where(accel[:, 0] < 0.0, 2, 3)
    return np.where(need_lift, 1, np.where(np.abs(accel[:, 0]) > 0.3, lateral, 0)).astype(np.int64)


def random_actions(rng: np.random.Generator, n_agents: int, discrete: bool) -> np.ndarray:
    """Uniform random actions for ``n_agents`` agents."""
    if discrete:
        return rng.integers(0, N_DISCRETE_ACTIONS, n_agents)
    return rng.uniform(-1.0, 1.0, (n_agents, ACTION_SIZE)).astype(np.float32)
