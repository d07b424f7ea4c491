"""Episode statistics as the game scores them: SB3's ``VecMonitor``, except that a game
which shapes what the learner sees (an Atari game: rewards clipped, a life lost ends the
learner's episode) is logged by its own raw score over whole games.

Every ``rollout/ep_rew_mean``, progress line, health check and ``--stop-at-score`` reads
``info["episode"]``, so this one place keeps all of them on the game's score.

:class:`IdleRows` takes out of the update the rows whose action the game did not use: a
turn-based game's agent that was not to move (``lander_idle``), or an agent that left its
game and waits for the others (``lander_gone``: a PettingZoo agent that died). PettingZoo's
usual recipe pads them over (SuperSuit's ``black_death``: zeros that train like any step);
here they teach nothing. After the rollout's advantages are computed, an idle row's
advantage is 0, so the policy loss has no gradient there, and the others are normalised
among themselves (the update's own per-minibatch normalisation would move the zeros). A gone
row's return is its value, so the critic learns nothing from it either; an idle row's return
stays, since its state is the agent's own (the reward of the other side's move reaches the
move before it through the advantage's sum). What is left on an idle row is the entropy
bonus, which the update applies to every row.
"""

from __future__ import annotations

import time

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecMonitor
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

from game_bridge.protocol import GONE, IDLE, game_score


class GameMonitor(VecMonitor):
    """``VecMonitor`` whose episodes are the game's: where a finished episode's info holds
    the game's ``score``, that is its return; where it says the game goes on
    (``game_over`` false), no episode is recorded yet and the game's length keeps
    counting; the steps an agent waits after it left its game (a PettingZoo agent that died:
    ``lander_gone``) are no episode; elsewhere (every game that does not shape rewards)
    exactly ``VecMonitor``."""

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        self.episode_returns += rewards
        self.episode_lengths += 1
        new_infos = list(infos[:])
        for i in np.flatnonzero(dones).tolist():
            info = infos[i].copy()
            score = game_score(info, float(self.episode_returns[i]))
            self.episode_returns[i] = 0
            if info.get(GONE):  # the wait of an agent that left: its episode ended then
                self.episode_lengths[i] = 0
                continue
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


class IdleRows(BaseCallback):
    """Marks each step's idle and gone rows; at the rollout's end, takes them out of what
    the update learns (see the module's docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.normalize = True
        """Whether the run normalises advantages (its model's ``normalize_advantage``)."""
        self._idle: list[np.ndarray] = []
        self._gone: list[np.ndarray] = []
        self.rows_idle = 0
        """Rows taken out of the last rollout's policy loss."""

    def _on_training_start(self) -> None:
        self.normalize = bool(self.model.normalize_advantage)  # type: ignore[attr-defined]

    def _on_training_end(self) -> None:
        self.model.normalize_advantage = self.normalize  # type: ignore[attr-defined]

    def _on_rollout_start(self) -> None:
        self._idle, self._gone = [], []

    def _on_step(self) -> bool:
        infos = self.locals.get("infos") or []
        self._idle.append(np.fromiter((bool(i.get(IDLE) or i.get(GONE)) for i in infos), bool))
        self._gone.append(np.fromiter((bool(i.get(GONE)) for i in infos), bool))
        return True

    def _on_rollout_end(self) -> None:
        buffer = self.model.rollout_buffer  # type: ignore[attr-defined]
        model = self.model
        steps = len(self._idle)
        if steps != buffer.buffer_size or not any(row.any() for row in self._idle):
            model.normalize_advantage = self.normalize  # type: ignore[attr-defined]
            self.rows_idle = 0
            return
        idle = np.stack(self._idle)
        gone = np.stack(self._gone)
        advantages = buffer.advantages
        active = ~idle
        if self.normalize and active.sum() > 1:
            kept = advantages[active]
            advantages[active] = (kept - kept.mean()) / (kept.std() + 1e-8)
        advantages[idle] = 0.0
        buffer.returns[gone] = buffer.values[gone]
        model.normalize_advantage = False  # type: ignore[attr-defined]
        self.rows_idle = int(idle.sum())
