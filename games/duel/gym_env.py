"""The duel in-process as a gymnasium env: one lander (red) against the scripted pilot
(blue), for ``--in-process`` training and as the reference of the bridge's duel; in the
chase mode (``mode="chase"``) the hunter against the scripted prey."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from games.duel.chase import HUNTER_ACTION, HUNTER_OBS, ChaseWorld, scripted_prey
from games.duel.controllers import scripted_actions
from games.duel.world import ACTION_SIZE, OBS_SIZE, OUTCOMES, DuelWorld


class DuelEnv(gym.Env[np.ndarray, np.ndarray]):
    """One duel against the scripted opponent.

    :param action_repeat: physics ticks per step.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium's own convention)

    def __init__(self, action_repeat: int = 6, mode: str = "race") -> None:
        if mode not in ("race", "chase"):
            raise ValueError(f"mode must be race or chase, got {mode!r}")
        self.chase = ChaseWorld(1, None, action_repeat) if mode == "chase" else None
        size, width = (HUNTER_OBS, HUNTER_ACTION) if self.chase else (OBS_SIZE, ACTION_SIZE)
        self.observation_space = spaces.Box(-1.0, 1.0, (size,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (width,), np.float32)
        self.world = DuelWorld(1, None, action_repeat)
        self._obs = self.world.observe()
        self._prey = np.zeros((1, 1), np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        world = self.chase or self.world
        if seed is not None:
            world.physics.seed(seed)
        if self.chase is not None:
            self.chase.reset_matches(np.ones(1, dtype=bool))
            hunters, self._prey = self.chase.observe()
            return hunters[0], {}
        self.world.reset_matches(np.ones(2, dtype=bool))
        self._obs = self.world.observe()
        return self._obs[0], {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.chase is not None:
            return self._chase_step(action)
        actions = np.vstack(
            [np.asarray(action, np.float32).reshape(1, -1), scripted_actions(self._obs[1:])]
        )
        result = self.world.step(actions)
        self._obs = result.obs
        info: dict[str, Any] = {}
        if result.terminated[0] or result.truncated[0]:
            info = {
                "outcome": OUTCOMES[int(result.outcome[0])],
                "is_success": result.outcome[0] > 0,
            }
        return (
            self._obs[0],
            float(result.reward[0]),
            bool(result.terminated[0]),
            bool(result.truncated[0]),
            info,
        )

    def _chase_step(
        self, action: np.ndarray
    ) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        assert self.chase is not None
        result = self.chase.step(np.asarray(action).reshape(1, -1), scripted_prey(self._prey))
        self._prey = result.prey_obs
        info: dict[str, Any] = {}
        if result.ended[0]:
            outcome = int(result.outcome[0])
            info = {"outcome": OUTCOMES[outcome], "is_success": outcome > 0}
        return (
            result.hunter_obs[0],
            float(result.hunter_reward[0]),
            bool(result.ended[0]),
            False,
            info,
        )


ENV_ID = "Duel-v0"
"""The gymnasium id this module registers the environment under when imported."""
if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point="games.duel.gym_env:DuelEnv")
