"""One side's view of a game with sides (``--self-play``): the learner's agents only, the
other sides' actions filled in by an opponent inside each step, so PPO, its normaliser
and its monitor see one side's transitions. Who the opponent is (a snapshot, a bot) is
the self-play package's to choose; this view only asks it to act.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

from game_bridge.vec_env import GameVecEnv
from training.config import ConfigError
from training.evaluation.ratings import assemble_actions, finished_rounds, sides_of
from training.runs.run_paths import InvalidRunName, validate_run_name


class Opponent(Protocol):
    """A player of the other sides: a name (for ratings) and batched actions."""

    name: str

    def act(self, obs: Any) -> np.ndarray:
        """Actions for a batch of observations, as the learner sees them."""


class LatestObservations:
    """The games' newest observations of every agent, shared by the views of every side
    (the side that learns steps the games; the other side's view must start from there)."""

    def __init__(self) -> None:
        self.obs: Any = None
        """An array, or a dictionary of arrays for a game of several keys."""


class SelfPlayEnv(VecEnvWrapper):
    """One side's view of the games: only the agents of ``learner_side``, the others played
    by :attr:`opponent` inside each step.

    :param games: the games.
    :param learner_side: the policy name whose agents learn.
    :param latest: the observations shared with the views of the other sides.
    """

    venv: GameVecEnv

    def __init__(
        self, games: GameVecEnv, learner_side: str, latest: LatestObservations | None = None
    ) -> None:
        self.venv = games
        info = games.env_info
        names = np.asarray(sides_of(info.policy_names, games.num_envs))
        self.learner = np.flatnonzero(names == learner_side)
        self.others = np.flatnonzero(names != learner_side)
        self.learner_side = learner_side
        own = info.side(learner_side)
        rivals = [side.name for side in info.sides if side.name != learner_side]
        # A game of sides with their own spaces moves padded rows: each side reads its columns.
        self._own_columns = info.columns(learner_side)
        self._rival_columns = info.columns(rivals[0]) if rivals else None
        VecEnv.__init__(self, len(self.learner), own.observation_space, own.action_space)
        self.class_attributes: dict[str, Any] = {}
        self.opponent: Opponent | None = None
        self.normalize: Callable[[np.ndarray], np.ndarray] = lambda obs: obs
        """How the opponent's observations are normalised (its own model's statistics)."""
        self.on_round: Callable[[float], None] = lambda score: None
        self._latest = latest or LatestObservations()

    @classmethod
    def over(cls, games: GameVecEnv) -> SelfPlayEnv:
        """Self-play over ``games``: the learner plays the first side the game names.

        :raises ConfigError: for a game with one side, with several observation keys, or
            with more than two sides of their own spaces.
        """
        sides = list(dict.fromkeys(games.env_info.policy_names))
        if len(sides) < 2:
            raise ConfigError(
                f"--self-play needs a game with two sides or more (agent_policy_names); this "
                f"one names only {sides[0]!r}"
            )
        if games.env_info.sides and len(sides) != 2:
            raise ConfigError(
                f"--self-play trains a model per side for sides with their own spaces, two "
                f"at most; this game has {len(sides)} ({', '.join(sides)})"
            )
        if games.observation_space.shape is None and games.env_info.sides:
            raise ConfigError("--self-play plays sides of their own spaces with one key each")
        for side in sides if games.env_info.sides else ():
            check_side_name(side)
        return cls(games, sides[0])

    @property
    def rival_sides(self) -> list[str]:
        """The sides with their own spaces besides the learner's (empty for a game whose
        sides share one policy)."""
        return [side.name for side in self.venv.env_info.sides if side.name != self.learner_side]

    def view(self, side: str) -> SelfPlayEnv:
        """The view of ``side`` over the same games, starting where this one is."""
        return SelfPlayEnv(self.venv, side, self._latest)

    def _cut(self, obs: Any, agents: np.ndarray, columns: int | None) -> Any:
        if isinstance(obs, dict):  # several keys (a board and its allowed moves)
            return {key: value[agents] for key, value in obs.items()}
        rows = obs[agents]
        return rows[:, :columns] if columns is not None else rows

    def current(self) -> Any:
        """The learner's newest observations (a turn of this side starts from them)."""
        if self._latest.obs is None:
            raise RuntimeError("self-play views start after the games were reset")
        return self._cut(self._latest.obs, self.learner, self._own_columns)

    def reset(self) -> Any:
        self._latest.obs = _as_arrays(self.venv.reset())
        return self.current()

    def step_async(self, actions: np.ndarray) -> None:
        obs = self._latest.obs
        if obs is None or self.opponent is None:
            raise RuntimeError("self-play steps after reset, with an opponent")
        groups = [(self.learner, actions)]
        if len(self.others):
            rival_obs = self._cut(obs, self.others, self._rival_columns)
            groups.append((self.others, self.opponent.act(rival_obs)))
        self.venv.step_async(assemble_actions(self.venv.action_space, self.venv.num_envs, groups))

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        self._latest.obs = _as_arrays(obs)
        for score in finished_rounds(self.learner, rewards, dones, infos):
            self.on_round(score)
        learner = self.learner
        own_infos = [infos[i] for i in learner]
        if self._own_columns is not None:  # a padded terminal row, cut to the side's own
            own_infos = [_cut_terminal(info, self._own_columns) for info in own_infos]
        return self.current(), rewards[learner], dones[learner], own_infos


def _as_arrays(obs: Any) -> Any:
    """The games' observations as arrays (a dictionary's keys each)."""
    if isinstance(obs, dict):
        return {key: np.asarray(value) for key, value in obs.items()}
    return np.asarray(obs)


def _cut_terminal(info: dict[str, Any], columns: int) -> dict[str, Any]:
    terminal = info.get("terminal_observation")
    if terminal is None:
        return info
    return {**info, "terminal_observation": np.asarray(terminal)[:columns]}


def check_side_name(side: str) -> str:
    """A side with its own model names folders (``checkpoints/RUN/sides/SIDE``) and a bot
    (``bots/RUN-SIDE.json``): the game's policy name must be a safe name.

    :raises ConfigError: naming the side.
    """
    try:
        return validate_run_name(side)
    except InvalidRunName:
        raise ConfigError(
            f"side {side[:40]!r} cannot name a side's folder and bot: a game's policy names "
            "for sides with their own spaces must be letters, digits, '-', '_' or '.'"
        ) from None
