"""The random policy's baseline against a game's threshold plays only the episodes its mean
needs: CarRacing's 200 random episodes would keep ``lander eval`` 20 minutes on them."""

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
