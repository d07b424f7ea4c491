"""The lander physics as a single-agent gymnasium environment, ``Lander-v0``.

This is the in-process reference: tests compare the protocol game against it,
benchmarks use it as the speed limit, and ``lander train --in-process`` trains on it.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from games.lander.camera import FRAME_SHAPE, OBSERVATIONS, camera_frames
from games.lander.physics import ACTION_SIZE, N_DISCRETE_ACTIONS, OBS_SIZE, LanderPhysics


class LanderEnv(gym.Env[np.ndarray, Any]):
    """One lander following its moving target.

    :param action_type: ``"continuous"`` (main and lateral thrust in [-1, 1]) or ``"discrete"``.
    :param action_repeat: physics ticks per step.
    :param difficulty: see :data:`games.lander.physics.DIFFICULTY_LEVELS`.
    :param observation: ``"vector"`` (coordinates), ``"pixels"`` (games/lander/camera.py) or
        ``"glimpse"`` (coordinates, the target hidden soon after it moves).
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium's own convention)

    def __init__(
        self,
        action_type: str = "continuous",
        action_repeat: int = 6,
        difficulty: int = 1,
        observation: str = "vector",
    ) -> None:
        if action_type not in ("continuous", "discrete"):
            raise ValueError(f"action_type must be 'continuous' or 'discrete', got {action_type!r}")
        if observation not in OBSERVATIONS:
            raise ValueError(
                f"observation must be 'vector', 'pixels' or 'glimpse', got {observation!r}"
            )
        self.discrete = action_type == "discrete"
        self.pixels = observation == "pixels"
        self.observation_space: spaces.Box = (
            spaces.Box(0, 255, FRAME_SHAPE, np.uint8)
            if self.pixels
            else spaces.Box(-1.0, 1.0, (OBS_SIZE,), np.float32)
        )
        self.action_space: spaces.Space[Any] = (
            spaces.Discrete(N_DISCRETE_ACTIONS)
            if self.discrete
            else spaces.Box(-1.0, 1.0, (ACTION_SIZE,), np.float32)
        )
        self.physics = LanderPhysics(
            1, None, action_repeat, self.discrete, difficulty, glimpse=observation == "glimpse"
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self.physics.seed(seed)
        self.physics.reset_agents(np.ones(1, dtype=bool))
        return self._observe(self.physics.observe()[0]), {}

    def _observe(self, coordinates: np.ndarray) -> np.ndarray:
        if not self.pixels:
            return coordinates
        physics = self.physics
        return camera_frames(physics.pos, physics.vel, physics.target)[0]

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        result = self.physics.step(
            np.asarray(action).reshape(1, -1) if not self.discrete else np.asarray([action])
        )
        terminated = bool(result.terminated[0])
        truncated = bool(result.truncated[0])
        info: dict[str, Any] = {}
        if terminated or truncated:
            info["is_success"] = bool(result.success[0])
        return self._observe(result.obs[0]), float(result.reward[0]), terminated, truncated, info


ENV_ID = "Lander-v0"
"""The gymnasium id this module registers the environment under when imported."""
if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point="games.lander.gym_env:LanderEnv")
