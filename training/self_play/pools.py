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
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback

from game_bridge.bot_runner import BotRunner
from training.config import TrainConfig
from training.envs.sides import SelfPlayEnv
from training.evaluation.ratings import (
    ELO_K,
    ELO_START,
    LEARNER,
    expected_score,
)
from training.runs.checkpoints import DamagedSnapshot, first_line, read_snapshot
from training.runs.run_paths import SNAPSHOT_GLOB
from training.runs.run_record import write_bytes_atomic


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

    def __init__(
        self,
        folder: Path,
        config: TrainConfig,
        side: str | None = None,
        warn: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.folder, self.config, self.warn = folder, config, warn
        self.damaged: set[Path] = set()
        """Snapshots that would not load: left out of the window, said once each."""
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
        """The snapshots that may be the opponent: the newest ``--snapshot-window`` that load."""
        loadable = [path for path in self.snapshots() if path not in self.damaged]
        return loadable[-self.config.snapshot_window :]

    def load(self, path: Path, policy: Any) -> bool:
        """Load snapshot ``path`` into ``policy``; a damaged one (cut short, edited, of
        another shape) is dropped from the pool with one warning: False."""
        try:
            policy.load_state_dict(read_snapshot(path))
            return True
        except DamagedSnapshot as exc:
            said = str(exc)
        except RuntimeError as exc:  # a state dict of another network's shape
            said = f"snapshot {path} does not load ({first_line(exc)})"
        self.damaged.add(path)
        self.warn(f"self-play: {said}; left out of the pool")
        return False

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
        while (chosen := pool.choose(self.rng)) is not None and not pool.load(chosen, self._frozen):
            pass  # a damaged snapshot is out of the window now: draw again
        if chosen is None:
            if self.env.opponent is not None or self._last_swap == -math.inf:
                return
            # Every snapshot was damaged: the model frozen now, as at a run's first turn.
            model = self.rival[1] if self.rival is not None else self.model
            chosen = pool.take(model.policy, model.num_timesteps, self.ratings)
            if not pool.load(chosen, self._frozen):
                return
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
