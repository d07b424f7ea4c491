"""Self-play, as ML-Agents' ghost trainer does it: one learning policy plays one side of a
game, every other side is played by a frozen snapshot of it (or by a fixed bot), and Elo
ratings follow the outcomes of the rounds.

A game names each agent's side by its policy name (``agent_policy_names``). The learner
plays the first side named; its opponents' actions are computed here, in one batch per
step, and only the learner's transitions reach PPO. A snapshot is taken every
``--snapshot-every`` steps (the newest ``--snapshot-window`` are kept as files of the run,
so a resume continues the pool); every ``--swap-every`` steps the opponent becomes the
newest snapshot with probability ``--play-latest``, else one of the window at random.
"""

from __future__ import annotations

import copy
import io
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

from game_bridge.bot_runner import BotRunner
from game_bridge.vec_env import GameVecEnv
from training.config import ConfigError, TrainConfig
from training.ratings import (
    ELO_K,
    ELO_START,
    LEARNER,
    assemble_actions,
    expected_score,
    finished_rounds,
    sides_of,
)
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


class SelfPlayEnv(VecEnvWrapper):
    """The learner's view of the games: only the agents of its side, the others played
    by :attr:`opponent` inside each step.

    :param venv: the games (a :class:`GameVecEnv`; every side has the same spaces).
    :param learner_side: the policy name whose agents learn.
    :param sides: the side of every agent, in the VecEnv's order.
    """

    def __init__(self, venv: VecEnv, learner_side: str, sides: list[str]) -> None:
        self.venv = venv
        names = np.asarray(sides)
        self.learner = np.flatnonzero(names == learner_side)
        self.others = np.flatnonzero(names != learner_side)
        self.learner_side = learner_side
        VecEnv.__init__(self, len(self.learner), venv.observation_space, venv.action_space)
        self.class_attributes: dict[str, Any] = {}
        self.opponent: Opponent | None = None
        self.normalize: Callable[[np.ndarray], np.ndarray] = lambda obs: obs
        self.on_round: Callable[[float], None] = lambda score: None
        self._obs: np.ndarray | None = None

    @classmethod
    def over(cls, games: GameVecEnv) -> SelfPlayEnv:
        """Self-play over ``games``: the learner plays the first side the game names.

        :raises ConfigError: for a game with one side, or with several observation keys.
        """
        names = games.env_info.policy_names
        sides = list(dict.fromkeys(names))
        if len(sides) < 2:
            raise ConfigError(
                f"--self-play needs a game with two sides or more (agent_policy_names); this "
                f"one names only {sides[0]!r}"
            )
        if games.observation_space.shape is None:
            raise ConfigError("--self-play plays games with one observation key")
        return cls(games, sides[0], sides_of(names, games.num_envs))

    def reset(self) -> np.ndarray:
        self._obs = np.asarray(self.venv.reset())
        return self._obs[self.learner]

    def step_async(self, actions: np.ndarray) -> None:
        if self._obs is None or self.opponent is None:
            raise RuntimeError("self-play steps after reset, with an opponent")
        groups = [(self.learner, actions)]
        if len(self.others):
            groups.append((self.others, self.opponent.act(self._obs[self.others])))
        self.venv.step_async(assemble_actions(self.action_space, self.venv.num_envs, groups))

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        self._obs = np.asarray(obs)
        for score in finished_rounds(self.learner, rewards, dones, infos):
            self.on_round(score)
        learner = self.learner
        return self._obs[learner], rewards[learner], dones[learner], [infos[i] for i in learner]


class SelfPlayPool(BaseCallback):
    """The snapshots, the opponent of the moment and the ratings of a self-play run.

    :param config: the run's settings (``--snapshot-every`` and the rest).
    :param env: the learner's view of the games.
    :param folder: where the run's snapshots are kept (``checkpoints/RUN/snapshots``).
    :param state: the pool as run.json kept it (ratings, rounds), or None for a new run.
    :param keep: called with the pool's state whenever it changes (into run.json).
    :param seed: seed of the opponent choices.
    """

    def __init__(
        self,
        config: TrainConfig,
        env: SelfPlayEnv,
        folder: Path,
        state: dict[str, Any] | None,
        keep: Callable[[dict[str, Any]], None],
        seed: int,
    ) -> None:
        super().__init__()
        self.config, self.env, self.folder, self.keep = config, env, folder, keep
        state = state or {}
        self.ratings: dict[str, float] = {
            str(name): float(value) for name, value in (state.get("ratings") or {}).items()
        }
        self.ratings.setdefault(LEARNER, ELO_START)
        self.rounds = int(state.get("rounds", 0))
        self.rng = np.random.default_rng(seed)
        self._frozen: Any = None
        self._last_snapshot = self._last_swap = -math.inf
        env.on_round = self.round_ended

    def _on_training_start(self) -> None:
        if self.config.opponent is not None:
            self.env.opponent = BotOpponent(Path(self.config.opponent))
            self.ratings.setdefault(self.env.opponent.name, ELO_START)
            return
        self._frozen = copy.deepcopy(self.model.policy).to("cpu").eval()
        if not self.snapshots():
            self.take_snapshot()
        self._last_snapshot = self._last_swap = self.num_timesteps
        self.swap()

    def snapshots(self) -> list[Path]:
        """The run's snapshot files, oldest first."""
        return sorted(self.folder.glob(SNAPSHOT_GLOB))

    def take_snapshot(self) -> Path:
        """Freeze the learner now: a file of the run, rated as the learner is. Beyond the
        window only milestones stay (:meth:`milestone`): the run's history, in few files."""
        buffer = io.BytesIO()
        torch.save({k: v.cpu() for k, v in self.model.policy.state_dict().items()}, buffer)
        path = self.folder / f"snap_{self.num_timesteps:012d}.pt"
        write_bytes_atomic(path, buffer.getvalue())
        self.ratings[path.stem] = self.ratings[LEARNER]
        for old in self.snapshots()[: -self.config.snapshot_window]:
            if not self.milestone(old):
                old.unlink(missing_ok=True)
                self.ratings.pop(old.stem, None)
        self._save_state()
        return path

    def milestone(self, path: Path) -> bool:
        """A snapshot kept for good: the first, and the 1st, 2nd, 4th, 8th, ... after it
        (counted in ``--snapshot-every`` steps), so graded bots can come from early on."""
        ordinal = round(int(path.stem.removeprefix("snap_")) / self.config.snapshot_every)
        return ordinal == 0 or ordinal & (ordinal - 1) == 0

    def window(self) -> list[Path]:
        """The snapshots that may be the opponent: the newest ``--snapshot-window``."""
        return self.snapshots()[-self.config.snapshot_window :]

    def swap(self) -> None:
        """The next opponent: the newest snapshot with probability ``--play-latest``, else
        one of the window at random."""
        window = self.window()
        if not window:
            return
        latest = self.rng.random() < self.config.play_latest
        chosen = window[-1] if latest else window[int(self.rng.integers(len(window)))]
        self._frozen.load_state_dict(torch.load(chosen, map_location="cpu", weights_only=True))
        self.ratings.setdefault(chosen.stem, self.ratings[LEARNER])
        self.env.opponent = SnapshotOpponent(chosen.stem, self._frozen, self.env.normalize)
        self._save_state()

    def round_ended(self, score: float) -> None:
        """A learner's round ended with ``score``: both ratings move (the snapshot's only in
        the pool's table; the snapshot itself does not learn)."""
        opponent = self.env.opponent
        if opponent is None:
            return
        mine, theirs = self.ratings[LEARNER], self.ratings.get(opponent.name, ELO_START)
        change = ELO_K * (score - expected_score(mine, theirs))
        self.ratings[LEARNER] = mine + change
        self.ratings[opponent.name] = theirs - change
        self.rounds += 1

    def _on_step(self) -> bool:
        if self.config.opponent is not None:
            return True
        if self.num_timesteps - self._last_snapshot >= self.config.snapshot_every:
            self._last_snapshot = self.num_timesteps
            self.take_snapshot()
        if self.num_timesteps - self._last_swap >= self.config.swap_every:
            self._last_swap = self.num_timesteps
            self.swap()
        return True

    def _on_rollout_end(self) -> None:
        self.logger.record("self_play/elo", self.ratings[LEARNER])
        self.logger.record("self_play/rounds", self.rounds)
        self._save_state()

    def _save_state(self) -> None:
        opponent = self.env.opponent
        self.keep(
            {
                "side": self.env.learner_side,
                "ratings": {name: round(value, 1) for name, value in self.ratings.items()},
                "rounds": self.rounds,
                "opponent": opponent.name if opponent is not None else None,
            }
        )
