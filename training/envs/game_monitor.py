"""Episode statistics as the game scores them: SB3's ``VecMonitor``, except that a game
which shapes what the learner sees (an Atari game: rewards clipped, a life lost ends the
learner's episode) is logged by its own raw score over whole games.

Every ``rollout/ep_rew_mean``, progress line, health check and ``--stop-at-score`` reads
``info["episode"]``, so this one place keeps all of them on the game's score.
"""

from __future__ import annotations

import time

import numpy as np
from stable_baselines3.common.vec_env import VecMonitor
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

from game_bridge.protocol import game_score


class GameMonitor(VecMonitor):
    """``VecMonitor`` whose episodes are the game's: where a finished episode's info holds
    the game's ``score``, that is its return; where it says the game goes on
    (``game_over`` false), no episode is recorded yet and the game's length keeps
    counting; elsewhere (every game that does not shape rewards) exactly ``VecMonitor``."""

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        self.episode_returns += rewards
        self.episode_lengths += 1
        new_infos = list(infos[:])
        for i in np.flatnonzero(dones).tolist():
            info = infos[i].copy()
            score = game_score(info, float(self.episode_returns[i]))
            self.episode_returns[i] = 0
            if score is None:
                continue  # a life lost: the game, and its length, go on
            episode_info = {
                "r": score,
                "l": int(self.episode_lengths[i]),
                "t": round(time.time() - self.t_start, 6),
            }
            for key in self.info_keywords:
                episode_info[key] = info[key]
            info["episode"] = episode_info
            self.episode_count += 1
            self.episode_lengths[i] = 0
            if self.results_writer:
                self.results_writer.write_row(episode_info)
            new_infos[i] = info
        return obs, rewards, dones, new_infos
