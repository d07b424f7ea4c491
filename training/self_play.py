"""Self-play, as ML-Agents' ghost trainer does it: one learning policy plays one side of a
game, every other side is played by a frozen snapshot of it (or by a fixed bot), and Elo
ratings follow the outcomes of the rounds.

A game names each agent's side by its policy name (``agent_policy_names``). The learner
plays the first side named; its opponents' actions are computed here, in one batch per
step, and only the learner's transitions reach PPO. A snapshot is taken every
``--snapshot-every`` steps (the newest ``--snapshot-window`` are kept as files of the run,
so a resume continues the pool); every ``--swap-every`` steps the opponent becomes the
newest snapshot with probability ``--play-latest``, else one of the window at random.

A game whose two sides declare spaces of their own (a hunter and its prey) gets a model
per side. One side learns at a time, against snapshots of the other side's model, and the
learning side changes every ``--team-change`` steps (:class:`TeamTurns`); each side keeps
its own snapshots, checkpoints and bot.
"""

from __future__ import annotations

import copy
import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, VecMonitor, VecNormalize
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

from game_bridge.bot_runner import BotRunner
from game_bridge.vec_env import GameVecEnv
from training.callbacks import RotatingCheckpoints
from training.config import ConfigError, TrainConfig
from training.environments import wrapped_env
from training.ratings import (
    ELO_K,
    ELO_START,
    LEARNER,
    assemble_actions,
    expected_score,
    finished_rounds,
    sides_of,
)
from training.run_paths import InvalidRunName, RunPaths, validate_run_name
from training.run_record import write_bytes_atomic

SNAPSHOT_GLOB = "snap_*.pt"


class Opponent(Protocol):
    """A player of the other sides: a name (for ratings) and batched actions."""

    name: str

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Actions for a batch of observations, as the learner sees them."""


class BotOpponent:
    """A fixed bot file (``--opponent BOT``): it normalises its observations itself."""

    def __init__(self, path: Path) -> None:
        self.name = f"bot:{path.name}"
        self._bot = BotRunner.from_file(path)

    def act(self, obs: np.ndarray) -> np.ndarray:
        return self._bot.act(obs)


class SnapshotOpponent:
    """A frozen copy of the learner's policy from one snapshot file."""

    def __init__(
        self, name: str, policy: Any, normalize: Callable[[np.ndarray], np.ndarray]
    ) -> None:
        self.name = name
        self._policy = policy
        self._normalize = normalize

    def act(self, obs: np.ndarray) -> np.ndarray:
        actions, _ = self._policy.predict(self._normalize(obs), deterministic=False)
        return np.asarray(actions)


class LatestObservations:
    """The games' newest observations of every agent, shared by the views of every side
    (the side that learns steps the games; the other side's view must start from there)."""

    def __init__(self) -> None:
        self.obs: np.ndarray | None = None


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
        if games.observation_space.shape is None:
            raise ConfigError("--self-play plays games with one observation key")
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

    def _cut(self, obs: np.ndarray, agents: np.ndarray, columns: int | None) -> np.ndarray:
        rows = obs[agents]
        return rows[:, :columns] if columns is not None else rows

    def current(self) -> np.ndarray:
        """The learner's newest observations (a turn of this side starts from them)."""
        if self._latest.obs is None:
            raise RuntimeError("self-play views start after the games were reset")
        return self._cut(self._latest.obs, self.learner, self._own_columns)

    def reset(self) -> np.ndarray:
        self._latest.obs = np.asarray(self.venv.reset())
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
        self._latest.obs = np.asarray(obs)
        for score in finished_rounds(self.learner, rewards, dones, infos):
            self.on_round(score)
        learner = self.learner
        own_infos = [infos[i] for i in learner]
        if self._own_columns is not None:  # a padded terminal row, cut to the side's own
            own_infos = [_cut_terminal(info, self._own_columns) for info in own_infos]
        return self.current(), rewards[learner], dones[learner], own_infos


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


class Ratings:
    """The Elo table of a self-play run: every learner and snapshot, and the rounds played.

    :param state: the pool as run.json kept it (``ratings``, ``rounds``), or None.
    """

    def __init__(self, state: dict[str, Any] | None) -> None:
        state = state or {}
        self.table: dict[str, float] = {
            str(name): float(value) for name, value in (state.get("ratings") or {}).items()
        }
        self.rounds = int(state.get("rounds", 0))

    def of(self, name: str) -> float:
        """``name``'s rating (a newcomer starts at ``ELO_START``)."""
        return self.table.setdefault(name, ELO_START)

    def record(self, player: str, opponent: str, score: float) -> None:
        """A round ``player`` scored ``score`` in: both ratings move (a snapshot's only in
        this table; the snapshot itself does not learn)."""
        mine, theirs = self.of(player), self.of(opponent)
        change = ELO_K * (score - expected_score(mine, theirs))
        self.table[player] = mine + change
        self.table[opponent] = theirs - change
        self.rounds += 1

    def rounded(self) -> dict[str, float]:
        """The table as run.json keeps it."""
        return {name: round(value, 1) for name, value in self.table.items()}


class SnapshotPool:
    """One side's frozen past: its snapshot files, the window an opponent is drawn from,
    and the milestones kept for good.

    :param folder: where the side's snapshots are kept.
    :param config: the run's settings (``--snapshot-every``, ``--snapshot-window``).
    :param side: the side, or None for the run's own side (whose names have no prefix).
    """

    def __init__(self, folder: Path, config: TrainConfig, side: str | None = None) -> None:
        self.folder, self.config = folder, config
        self.prefix = f"{side}:" if side is not None else ""
        self.learner = LEARNER + (f":{side}" if side is not None else "")
        """The rating name of the model whose snapshots these are."""

    def name_of(self, path: Path) -> str:
        """The snapshot's name in the ratings."""
        return self.prefix + path.stem

    def snapshots(self) -> list[Path]:
        """The side's snapshot files, oldest first."""
        return sorted(self.folder.glob(SNAPSHOT_GLOB))

    def take(self, policy: Any, steps: int, ratings: Ratings) -> Path:
        """Freeze ``policy`` now: a file of the run, rated as its learner is. Beyond the
        window only milestones stay (:meth:`milestone`): the run's history, in few files."""
        buffer = io.BytesIO()
        torch.save({k: v.cpu() for k, v in policy.state_dict().items()}, buffer)
        path = self.folder / f"snap_{steps:012d}.pt"
        write_bytes_atomic(path, buffer.getvalue())
        ratings.table[self.name_of(path)] = ratings.of(self.learner)
        for old in self.snapshots()[: -self.config.snapshot_window]:
            if not self.milestone(old):
                old.unlink(missing_ok=True)
                ratings.table.pop(self.name_of(old), None)
        return path

    def milestone(self, path: Path) -> bool:
        """A snapshot kept for good: the first, and the 1st, 2nd, 4th, 8th, ... after it
        (counted in ``--snapshot-every`` steps), so graded bots can come from early on."""
        ordinal = round(int(path.stem.removeprefix("snap_")) / self.config.snapshot_every)
        return ordinal == 0 or ordinal & (ordinal - 1) == 0

    def window(self) -> list[Path]:
        """The snapshots that may be the opponent: the newest ``--snapshot-window``."""
        return self.snapshots()[-self.config.snapshot_window :]

    def choose(self, rng: np.random.Generator) -> Path | None:
        """The next opponent: the newest snapshot with probability ``--play-latest``, else
        one of the window at random (None before any snapshot)."""
        window = self.window()
        if not window:
            return None
        latest = rng.random() < self.config.play_latest
        return window[-1] if latest else window[int(rng.integers(len(window)))]


class SelfPlayPool(BaseCallback):
    """The snapshots, the opponent of the moment and the ratings of one learning model.

    :param config: the run's settings (``--snapshot-every`` and the rest).
    :param env: the learner's view of the games.
    :param own: the learner's snapshots (and its name in the ratings).
    :param ratings: the run's table (shared by every side's pool).
    :param save: called whenever the pool changes (into run.json).
    :param seed: seed of the opponent choices.
    :param rival: the other side's snapshots and its live model, for a game whose sides
        have their own models; None: the opponents are snapshots of the learner itself.
    """

    def __init__(
        self,
        config: TrainConfig,
        env: SelfPlayEnv,
        own: SnapshotPool,
        ratings: Ratings,
        save: Callable[[], None],
        seed: int,
        rival: tuple[SnapshotPool, BaseAlgorithm] | None = None,
    ) -> None:
        super().__init__()
        self.config, self.env, self.own, self.ratings = config, env, own, ratings
        self.learner, self.save, self.rival = own.learner, save, rival
        self.rng = np.random.default_rng(seed)
        self._frozen: Any = None
        self._last_snapshot = self._last_swap = -math.inf
        env.on_round = self.round_ended

    @property
    def opponent_name(self) -> str | None:
        """Who plays the other sides now."""
        return self.env.opponent.name if self.env.opponent is not None else None

    def _on_training_start(self) -> None:
        """Called at every turn of this side: the pools get their first snapshots, and a
        fresh opponent is drawn (the other side may have new snapshots since)."""
        self.ratings.of(self.learner)
        if self.config.opponent is not None:
            self.env.opponent = BotOpponent(Path(self.config.opponent))
            self.ratings.of(self.env.opponent.name)
            return
        if not self.own.snapshots():
            self.own.take(self.model.policy, self.num_timesteps, self.ratings)
        if self.rival is not None and not self.rival[0].snapshots():
            pool, model = self.rival
            pool.take(model.policy, model.num_timesteps, self.ratings)
        if self._frozen is None:
            template = self.rival[1].policy if self.rival is not None else self.model.policy
            self._frozen = copy.deepcopy(template).to("cpu").eval()
        if self._last_snapshot == -math.inf:
            self._last_snapshot = self.num_timesteps
        self._last_swap = self.num_timesteps
        self.swap()

    def swap(self) -> None:
        """The next opponent, from the rival side's snapshots (the learner's own for a
        game whose sides share one policy)."""
        pool = self.rival[0] if self.rival is not None else self.own
        chosen = pool.choose(self.rng)
        if chosen is None:
            return
        self._frozen.load_state_dict(torch.load(chosen, map_location="cpu", weights_only=True))
        name = pool.name_of(chosen)
        self.ratings.table.setdefault(name, self.ratings.of(self.learner))
        self.env.opponent = SnapshotOpponent(name, self._frozen, self.env.normalize)
        self.save()

    def round_ended(self, score: float) -> None:
        """A learner's round ended with ``score``: both ratings move."""
        opponent = self.env.opponent
        if opponent is not None:
            self.ratings.record(self.learner, opponent.name, score)

    def _on_step(self) -> bool:
        if self.config.opponent is not None:
            return True
        if self.num_timesteps - self._last_snapshot >= self.config.snapshot_every:
            self._last_snapshot = self.num_timesteps
            self.own.take(self.model.policy, self.num_timesteps, self.ratings)
            self.save()
        if self.num_timesteps - self._last_swap >= self.config.swap_every:
            self._last_swap = self.num_timesteps
            self.swap()
        return True

    def _on_rollout_end(self) -> None:
        self.logger.record("self_play/elo", self.ratings.of(self.learner))
        self.logger.record("self_play/rounds", self.ratings.rounds)
        self.save()


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
) -> list[BaseCallback]:
    """The callbacks of a self-play run: the pool of the run's own side, and for a game
    whose sides have their own spaces the other side's turns (its pool, its checkpoints
    in ``checkpoints/RUN/sides/SIDE``).

    :param state: the pool as run.json kept it, or None for a new run.
    :param keep: called with the pool's state whenever it changes.
    :param stopped: True once the run was asked to stop (the other side's turn ends too).
    """
    ratings = Ratings(state)
    mine = SnapshotPool(paths.snapshots, config)
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
    theirs = SnapshotPool(paths.side_checkpoints(side) / "snapshots", config, side)
    own.view.normalize, other.view.normalize = other.normalize(), own.normalize()
    pools.append(
        SelfPlayPool(config, own.view, mine, ratings, save, config.seed, (theirs, other.model))
    )
    pools.append(
        SelfPlayPool(config, other.view, theirs, ratings, save, config.seed + 1, (mine, own.model))
    )
    turns: list[BaseCallback] = [
        FollowStop(stopped),
        RotatingCheckpoints(
            paths.side_checkpoints(side),
            config.checkpoint_every,
            config.keep_checkpoints,
            other.normalizer,
        ),
        pools[1],
    ]
    return [pools[0], TeamTurns(config.team_change, SidePartner(side, other, turns))]
