"""The stroke world as a single-agent gymnasium environment, ``Stroke-v0``: the
in-process reference of the stroke game, as ``Lander-v0`` is of the lander."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from games.stroke.camera import FRAME_SHAPE, OBSERVATIONS, scope_frames
from games.stroke.world import ACTION_SIZE, OBS_SIZE, StrokeWorld


class StrokeEnv(gym.Env[np.ndarray, np.ndarray]):
    """One pen to correct, stroke after stroke.

    :param reward_mode: ``step`` (minus the distance each step) or ``delayed`` (the whole
        stroke's score at its end).
    :param observation: ``vector`` (the numbers) or ``pixels`` (games/stroke/camera.py).
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium's own convention)

    def __init__(self, reward_mode: str = "step", observation: str = "vector") -> None:
        if observation not in OBSERVATIONS:
            raise ValueError(f"observation must be 'vector' or 'pixels', got {observation!r}")
        self.pixels = observation == "pixels"
        self.observation_space = (
            spaces.Box(0, 255, FRAME_SHAPE, np.uint8)
            if self.pixels
            else spaces.Box(-1.0, 1.0, (OBS_SIZE,), np.float32)
        )
        self.action_space = spaces.Box(-1.0, 1.0, (ACTION_SIZE,), np.float32)
        self.world = StrokeWorld(1, None, reward_mode)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self.world.seed(seed)
        self.world.reset_agents(np.ones(1, dtype=bool))
        return self._observe(self.world.observe())[0], {}

    def _observe(self, obs: np.ndarray) -> np.ndarray:
        return scope_frames(obs) if self.pixels else obs

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        result = self.world.step(np.asarray(action).reshape(1, ACTION_SIZE))
        # A stroke ends by its nature, not by a time limit: terminated.
        obs = self._observe(result.obs)[0]
        return obs, float(result.reward[0]), bool(result.done[0]), False, {}


ENV_ID = "Stroke-v0"
"""The gymnasium id this module registers the environment under when imported."""
if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point="games.stroke.gym_env:StrokeEnv")
