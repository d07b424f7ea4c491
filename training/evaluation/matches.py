"""Matches between two bots on a game with sides, played on the real game through the
bridge: wins, draws and losses of the first, its score with a 95% interval, and the Elo
difference that score implies. Bots only (numpy): a laptop plays matches without torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from game_bridge.frame_stack import start_episodes
from training.evaluation.ratings import assemble_actions, elo_difference, finished_rounds, sides_of
from training.evaluation.scoring import Policy

if TYPE_CHECKING:  # a light install plays matches: the VecEnv's module imports SB3
    from game_bridge.vec_env import GameVecEnv

Z_95 = 1.959964
"""The normal quantile of a two-sided 95% interval."""


@dataclass(frozen=True)
class MatchResult:
    """The first player's rounds against the second.

    :param wins: rounds the first won.
    :param draws: rounds drawn.
    :param losses: rounds the first lost.
    """

    wins: int
    draws: int
    losses: int

    @property
    def games(self) -> int:
        """Rounds played."""
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        """The first's mean score: a win 1, a draw 1/2."""
        return (self.wins + self.draws / 2) / max(self.games, 1)

    def interval(self) -> tuple[float, float]:
        """The score's 95% Wilson interval."""
        n, p = self.games, self.score
        if n == 0:
            return 0.0, 1.0
        centre = (p + Z_95**2 / (2 * n)) / (1 + Z_95**2 / n)
        half = Z_95 * math.sqrt(p * (1 - p) / n + Z_95**2 / (4 * n * n)) / (1 + Z_95**2 / n)
        return max(0.0, centre - half), min(1.0, centre + half)

    def elo_difference(self) -> float:
        """The rating difference the score implies (a score of 0 or 1 counts half a round
        less or more, so the figure stays finite)."""
        n = max(self.games, 1)
        return elo_difference(min(max(self.score, 0.5 / n), 1 - 0.5 / n))

    def summary(self) -> str:
        """The tally, the score with its interval and the Elo difference, on one line."""
        low, high = self.interval()
        return (
            f"{self.games} rounds: wins={self.wins} draws={self.draws} losses={self.losses} "
            f"score={self.score:.3f} (95% {low:.3f}-{high:.3f}) "
            f"elo_difference={self.elo_difference():+.0f}"
        )

    def line(self, first: str, second: str) -> str:
        """The one line ``lander match`` prints."""
        return f"{first} vs {second}: {self.summary()}"


def play_match(
    first: Policy,
    second: Policy,
    rounds: int,
    env: GameVecEnv,
    sides: tuple[Any, Any] = (None, None),
) -> MatchResult:
    """``first`` against ``second`` for ``rounds`` rounds on the running games: ``first``
    plays the game's first side for the first half of the rounds, then the second side,
    so neither gains by where its side starts. In a game whose sides have their own spaces
    each bot plays the side it was trained for (``sides``, from the bot files).

    :raises ValueError: for a game with fewer than two sides, or bots that cannot play
        each other there.
    """
    info = env.env_info
    sides_now = np.asarray(sides_of(info.policy_names, env.num_envs))
    names = list(dict.fromkeys(sides_now.tolist()))
    if len(names) < 2:
        raise ValueError(f"a match needs a game with two sides; this one names only {names[0]!r}")
    halves = [(names[0], rounds // 2), (names[1], rounds - rounds // 2)]
    if info.sides:
        if sides[0] not in names or sides[1] not in names or sides[0] == sides[1]:
            raise ValueError(
                f"this game's sides ({', '.join(names)}) have their own spaces: a match is a "
                f"bot of each side, not {sides[0] or 'a bot of no side'} against "
                f"{sides[1] or 'a bot of no side'}"
            )
        halves = [(str(sides[0]), rounds)]
    tally = {1.0: 0, 0.5: 0, 0.0: 0}
    for first_side, wanted in halves:
        mine = np.flatnonzero(sides_now == first_side)
        theirs = np.flatnonzero(sides_now != first_side)
        other_side = names[1] if first_side == names[0] else names[0]
        columns = (info.columns(first_side), info.columns(other_side))
        for score, count in _play_half(first, second, (mine, theirs), columns, wanted, env).items():
            tally[score] += count
    return MatchResult(tally[1.0], tally[0.5], tally[0.0])


def _play_half(
    first: Policy,
    second: Policy,
    agents: tuple[np.ndarray, np.ndarray],
    columns: tuple[int | None, int | None],
    wanted: int,
    env: GameVecEnv,
) -> dict[float, int]:
    """Rounds with ``first`` on the agents ``mine``, until ``wanted`` of theirs have ended."""
    tally = {1.0: 0, 0.5: 0, 0.0: 0}
    mine, theirs = agents
    obs = env.reset()
    space = env.action_space
    start_episodes(first)  # the agents each plays change sides between halves
    start_episodes(second)
    while sum(tally.values()) < wanted:
        groups = [
            (mine, first(_rows(obs, mine, columns[0]))),
            (theirs, second(_rows(obs, theirs, columns[1]))),
        ]
        observed, rewards, dones, infos = env.step(assemble_actions(space, env.num_envs, groups))
        start_episodes(first, dones[mine])
        start_episodes(second, dones[theirs])
        obs = observed
        for score in finished_rounds(mine, rewards, dones, infos)[: wanted - sum(tally.values())]:
            tally[score] += 1
    return tally


def _rows(obs: Any, agents: np.ndarray, columns: int | None) -> Any:
    """The observations of ``agents``: a dictionary's keys each (a board and its allowed
    moves), or rows of one array cut to a side's own columns."""
    if isinstance(obs, dict):
        return {key: np.asarray(value)[agents] for key, value in obs.items()}
    return np.asarray(obs)[agents][:, :columns]


def ladder_ratings(
    results: list[tuple[str, str, MatchResult]], passes: int = 200
) -> dict[str, float]:
    """Ratings that fit a round robin's results (each pair's score against the Elo
    expectation), centred on the first rating every player starts with: the table
    ``lander ladder`` prints. Derived from the results alone, like a champion.
    """
    from training.evaluation.ratings import ELO_START, expected_score

    players = sorted({name for first, second, _ in results for name in (first, second)})
    ratings = dict.fromkeys(players, ELO_START)
    for _ in range(passes):
        change = dict.fromkeys(players, 0.0)
        games = dict.fromkeys(players, 0)
        for first, second, result in results:
            n = result.games
            gap = n * (result.score - expected_score(ratings[first], ratings[second]))
            change[first] += gap
            change[second] -= gap
            games[first] += n
            games[second] += n
        for name in players:
            ratings[name] += 200.0 * change[name] / max(games[name], 1)
        centre = sum(ratings.values()) / max(len(ratings), 1) - ELO_START
        ratings = {name: value - centre for name, value in ratings.items()}
    return ratings
