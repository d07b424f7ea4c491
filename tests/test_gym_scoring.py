"""A ``gym:`` game scored in-process: the random policy's baseline against a game's threshold
plays only the episodes its mean needs (CarRacing's 200 random episodes would keep ``lander
eval`` 20 minutes on them), and a policy acts only for the games still on unless it keeps
something of past steps."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from games.gym.scoring import GymScorer
from games.spec import Policy
from training.evaluation.scoring import (
    BASELINE_PRECISION,
    FIRST_ROUND,
    baselines,
    random_mean_against,
)


@dataclass(eq=False)
class _Returns:
    """A scorer whose episode ``seed`` returns ``base + spread * (seed % 7 - 3)``; it keeps
    the rounds it was asked to play."""

    spread: float
    base: float = -40.0
    rounds: list[tuple[int, int]] = field(default_factory=list)

    def play(self, policy: Policy, episodes: int, seed: int) -> tuple[np.ndarray, None]:
        self.rounds.append((seed, episodes))
        seeds = np.arange(seed, seed + episodes)
        return self.base + self.spread * (seeds % 7 - 3), None


def test_a_tight_random_mean_stops_after_its_first_round() -> None:
    game = _Returns(spread=1.0)
    mean = random_mean_against(game, lambda obs: obs, 900.0, 200, 100)  # type: ignore[arg-type]
    assert game.rounds == [(100, FIRST_ROUND)]
    assert mean == pytest.approx(np.mean(-40.0 + (np.arange(100, 105) % 7 - 3)))


def test_a_wide_random_mean_plays_every_episode_asked_in_doubling_rounds() -> None:
    """Seeds run on from round to round, so the episodes are those one round would play."""
    game = _Returns(spread=200.0)
    mean = random_mean_against(game, lambda obs: obs, 900.0, 200, 100)  # type: ignore[arg-type]
    assert [size for _, size in game.rounds] == [5, 5, 10, 20, 40, 80, 40]
    assert [start for start, _ in game.rounds] == [100, 105, 110, 120, 140, 180, 260]
    assert mean == pytest.approx(np.mean(-40.0 + 200.0 * (np.arange(100, 300) % 7 - 3)))


def test_cartpoles_random_baseline_is_its_known_mean() -> None:
    """On the real game: random CartPole lasts about 22 steps (200 episodes' mean); the
    rounds stop within the precision the normalized score is promised, three errors wide."""
    random_mean, threshold = baselines(200, 12345, GymScorer("CartPole-v1", (), 475.0))
    assert threshold == 475.0
    assert abs(random_mean - 22.0) <= 3 * BASELINE_PRECISION * (475.0 - 22.0)


class _Recorder:
    """A policy that pushes left always and keeps the size of every batch it is given."""

    def __init__(self) -> None:
        self.batches: list[int] = []

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        self.batches.append(len(obs))
        return np.zeros(len(obs), dtype=np.int64)


class _Keeper(_Recorder):
    """The same, keeping something of past steps by row (as a frame-stacked bot does)."""

    def __init__(self) -> None:
        super().__init__()
        self.starts: list[list[int]] = []

    def start(self, agents: np.ndarray | None) -> None:
        self.starts.append([] if agents is None else np.flatnonzero(agents).tolist())


def test_a_policy_acts_only_for_the_games_still_on_unless_it_keeps_state() -> None:
    """CartPole pushed left ends in 8 to 10 steps by seed: the batches shrink as games end,
    and each game's return is what it scores played alone; a policy that keeps state by
    row gets every row at every step."""
    scorer = GymScorer("CartPole-v1", (), 475.0)
    lean = _Recorder()
    together, _ = scorer.play(lean, 6, 40)
    alone = [scorer.play(_Recorder(), 1, 40 + i)[0][0] for i in range(6)]
    assert together.tolist() == alone
    assert lean.batches[0] == 6 and lean.batches[-1] < 6
    assert lean.batches == sorted(lean.batches, reverse=True)
    assert len(lean.batches) == max(alone)
    keeper = _Keeper()
    kept, _ = scorer.play(keeper, 6, 40)
    assert kept.tolist() == alone and set(keeper.batches) == {6}


def test_a_policy_that_keeps_state_hears_where_a_game_goes_on_after_a_lost_life() -> None:
    """Breakout's five lives are five episodes to the learner: a policy keeping frames or a
    memory by row is told at each of the four restarts, for that row alone."""
    keeper = _Keeper()
    returns, _ = GymScorer("BreakoutNoFrameskip-v4", (), None).play(keeper, 2, 0)
    told = [row for rows in keeper.starts for row in rows]
    assert sorted(told) == [0] * 4 + [1] * 4
    assert len(returns) == 2 and (returns >= 0).all()  # whole games' raw scores
