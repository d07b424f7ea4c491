"""Turns of a game whose sides have their own models: one side learns at a time, the other
side's model learning as many steps in its own turn (:class:`TeamTurns`), and the callbacks
the session adds to a self-play run (:func:`self_play_callbacks`). The session hands in
what it owns (the other side's checkpoint callback), so nothing here reaches up into it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecMonitor, VecNormalize

from training.config import TrainConfig
from training.envs.environments import wrapped_env
from training.envs.game_monitor import IdleRows
from training.envs.sides import SelfPlayEnv
from training.runs.run_paths import RunPaths
from training.self_play.pools import Ratings, SelfPlayPool, SnapshotPool


def resume_view(model: BaseAlgorithm, view: SelfPlayEnv) -> None:
    """Before a side's turn: its model starts from the games' newest observations (the other
    side stepped them), normalised as it normalises them, and its episode statistics start
    afresh (the episodes went on without it)."""
    env: Any = model.get_env()
    obs = view.current()
    normalizer = wrapped_env(env, VecNormalize)
    model._last_obs = normalizer.normalize_obs(obs) if normalizer is not None else obs
    model._last_episode_starts = np.ones(view.num_envs, dtype=bool)
    monitor = wrapped_env(env, VecMonitor)
    if monitor is not None:
        monitor.episode_returns[:] = 0.0
        monitor.episode_lengths[:] = 0


class TeamTurns(BaseCallback):
    """A game whose sides have their own models: every ``--team-change`` steps of the run's
    own side, at the end of its rollout (its update comes after), the other side's model
    learns as many steps against snapshots of this one; then this side goes on from where
    the games are.

    :param every: ``--team-change``.
    :param partner: the other side's model, its view and the callbacks of its turns.
    """

    def __init__(self, every: int, partner: SidePartner) -> None:
        super().__init__()
        self.every, self.partner = every, partner
        self._last = 0

    def _on_training_start(self) -> None:
        self._last = self.num_timesteps

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        if self.num_timesteps - self._last < self.every:
            return
        self._last = self.num_timesteps
        self.partner.turn(self.every)
        view = wrapped_env(self.model.get_env(), SelfPlayEnv)  # type: ignore[arg-type]
        if view is not None:
            resume_view(self.model, view)


class SidePartner:
    """The other side of a game whose sides have their own spaces: its model and the
    callbacks of its turns.

    :param side: its policy name.
    :param learner: its model (whose env is its view, monitored and normalised).
    :param callbacks: run at each of its turns (its checkpoints, its pool, the stop).
    """

    def __init__(self, side: str, learner: SideModel, callbacks: list[BaseCallback]) -> None:
        self.side, self.learner, self.callbacks = side, learner, callbacks

    def turn(self, steps: int) -> None:
        """Learn ``steps`` steps from where the games are."""
        model = self.learner.model
        resume_view(model, self.learner.view)
        model.learn(total_timesteps=steps, callback=self.callbacks, reset_num_timesteps=False)


class FollowStop(BaseCallback):
    """Ends the other side's turn when the run's stop was asked for."""

    def __init__(self, stop: Callable[[], bool]) -> None:
        super().__init__()
        self.stopped = stop

    def _on_step(self) -> bool:
        return not self.stopped()


@dataclass
class SideModel:
    """A side's learning model and its observation statistics (its env is its view)."""

    model: BaseAlgorithm
    normalizer: VecNormalize | None

    @property
    def view(self) -> SelfPlayEnv:
        """The side's view of the games."""
        view = wrapped_env(self.model.get_env(), SelfPlayEnv)  # type: ignore[arg-type]
        assert view is not None
        return view

    def normalize(self) -> Callable[[np.ndarray], np.ndarray]:
        """How an opponent playing as this side sees its observations: as this side's model
        does (the live statistics)."""
        if self.normalizer is None:
            return lambda obs: obs
        return self.normalizer.normalize_obs  # type: ignore[return-value]


def self_play_callbacks(
    config: TrainConfig,
    own: SideModel,
    paths: RunPaths,
    state: dict[str, Any] | None,
    keep: Callable[[dict[str, Any]], None],
    partner: tuple[str, SideModel] | None,
    stopped: Callable[[], bool],
    checkpoints: Callable[[Path, VecNormalize | None], BaseCallback],
    warn: Callable[[str], None] = lambda line: None,
) -> list[BaseCallback]:
    """The callbacks of a self-play run: the pool of the run's own side, and for a game
    whose sides have their own spaces the other side's turns (its pool, its checkpoints
    in ``checkpoints/RUN/sides/SIDE``).

    :param state: the pool as run.json kept it, or None for a new run.
    :param keep: called with the pool's state whenever it changes.
    :param stopped: True once the run was asked to stop (the other side's turn ends too).
    :param checkpoints: the session's checkpoint callback for a folder and its normaliser
        (the other side's checkpoints rotate as the run's own do).
    :param warn: says a damaged snapshot was left out of a pool.
    """
    ratings = Ratings(state)
    mine = SnapshotPool(paths.snapshots, config, warn=warn)
    pools: list[SelfPlayPool] = []

    def save() -> None:
        sides = {pool.env.learner_side: pool.opponent_name for pool in pools[1:]}
        keep(
            {
                "side": own.view.learner_side,
                "ratings": ratings.rounded(),
                "rounds": ratings.rounds,
                "opponent": pools[0].opponent_name if pools else None,
                **({"sides": sides} if sides else {}),
            }
        )

    if partner is None:
        own.view.normalize = own.normalize()  # opponents are the learner's snapshots
        pools.append(SelfPlayPool(config, own.view, mine, ratings, save, config.seed))
        return list(pools)
    side, other = partner
    theirs = SnapshotPool(paths.side_checkpoints(side) / "snapshots", config, side, warn)
    own.view.normalize, other.view.normalize = other.normalize(), own.normalize()
    pools.append(
        SelfPlayPool(config, own.view, mine, ratings, save, config.seed, (theirs, other.model))
    )
    pools.append(
        SelfPlayPool(config, other.view, theirs, ratings, save, config.seed + 1, (mine, own.model))
    )
    turns: list[BaseCallback] = [
        IdleRows(),  # its turns' rows an agent did not act in teach it nothing either
        FollowStop(stopped),
        checkpoints(paths.side_checkpoints(side), other.normalizer),
        pools[1],
    ]
    return [pools[0], TeamTurns(config.team_change, SidePartner(side, other, turns))]
