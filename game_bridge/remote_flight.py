"""Flying a bot in a game known only through the protocol (the Godot lander), so
``lander play --game-bin`` can show and record it like the bundled game.

Positions are recovered from the lander observation layout; a game with
another layout can be evaluated, but not drawn.
"""

from __future__ import annotations

import numpy as np

from game_bridge.lander_game.play import positions_from_obs
from game_bridge.vec_env import GameVecEnv


class BridgeFlight:
    """A :class:`~game_bridge.lander_game.play.Flight` over a :class:`GameVecEnv`.

    :param env: the running games (their agents are the landers).
    """

    def __init__(self, env: GameVecEnv) -> None:
        if env.observation_space.shape != (7,):
            raise ValueError(
                f"play draws games with the lander observation layout (7 values), not {env.observation_space}"
            )
        self.env = env
        self.n_agents = env.num_envs
        self._obs = np.asarray(env.reset())

    def observe(self) -> np.ndarray:
        return self._obs

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        obs, rewards, dones, infos = self.env.step(actions)
        before_obs = np.asarray(obs).copy()
        success = np.zeros(self.n_agents, dtype=bool)
        for index in np.flatnonzero(dones):
            before_obs[index] = infos[index]["terminal_observation"]
            success[index] = bool(infos[index].get("is_success", False))
        self._obs = np.asarray(obs)
        return rewards, dones, success, positions_from_obs(before_obs)[0]

    def targets(self) -> np.ndarray:
        return positions_from_obs(self._obs)[1]

    def positions(self) -> np.ndarray:
        return positions_from_obs(self._obs)[0]
