"""``lander record``: a bot, a run's bot or a game's reference controller plays through the
real bridge (the game's own processes over its transport, as training sees them), and
each episode's observations, actions and rewards become a demo file in lander's layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from game_bridge.frame_stack import start_episodes
from game_bridge.launcher import LaunchConfig
from game_bridge.vec_env import GameVecEnv
from games.spec import Policy
from training.demos.files import DemoEpisode


@dataclass(frozen=True)
class Recording:
    """The episodes played and the spaces they were played in."""

    episodes: list[DemoEpisode]
    observation_space: spaces.Box
    action_space: spaces.Space

    @property
    def steps(self) -> int:
        return sum(episode.steps for episode in self.episodes)

    @property
    def mean_return(self) -> float:
        return float(
            np.mean([float(np.sum(e.rewards)) for e in self.episodes if e.rewards is not None])
        )


def _applied(actions: np.ndarray, space: spaces.Space) -> np.ndarray:
    """The actions as the game applies them: a Box's clipped to its bounds (as SB3 clips a
    Gaussian's samples), a choice as an integer."""
    if isinstance(space, spaces.Box):
        return np.clip(np.asarray(actions, dtype=np.float32), space.low, space.high)
    return np.asarray(actions).astype(np.int64).reshape(-1, 1)


def record_episodes(policy: Policy, launch: LaunchConfig, episodes: int) -> Recording:
    """Play ``policy`` on the games ``launch`` starts until ``episodes`` episodes have
    ended; each agent's episode is kept whole, the first ``episodes`` to end.

    :raises BridgeError: the game could not be started or failed.
    :raises ValueError: the game's observations are not one vector (a demo holds those).
    """
    env = GameVecEnv(launch)
    try:
        observation_space, action_space = env.observation_space, env.action_space
        if not isinstance(observation_space, spaces.Box) or len(observation_space.shape) != 1:
            raise ValueError(f"this game's observations ({observation_space}) are not one vector")
        steps: list[list[tuple[np.ndarray, np.ndarray, float]]] = [[] for _ in range(env.num_envs)]
        finished: list[DemoEpisode] = []
        obs = np.asarray(env.reset())  # one vector per agent (checked above)
        start_episodes(policy)
        while len(finished) < episodes:
            actions = _applied(policy(obs), action_space)
            sent = actions.reshape(-1) if isinstance(action_space, spaces.Discrete) else actions
            next_obs, rewards, dones, _infos = env.step(sent)
            start_episodes(policy, dones)
            for index in range(env.num_envs):
                steps[index].append((np.asarray(obs[index]), actions[index], float(rewards[index])))
                if dones[index]:
                    played = steps[index]
                    finished.append(
                        DemoEpisode(
                            np.stack([step[0] for step in played]).astype(np.float32),
                            np.stack([step[1] for step in played]).astype(np.float32),
                            np.asarray([step[2] for step in played], dtype=np.float32),
                        )
                    )
                    steps[index] = []
            obs = np.asarray(next_obs)
    finally:
        env.close()
    return Recording(finished[:episodes], observation_space, action_space)
