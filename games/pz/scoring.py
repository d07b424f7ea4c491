"""A PettingZoo game's evaluation and play in-process: the bot plays every agent of each
table (the agents alike share its policy), only those whose turn it is, none that left,
and a table's score is the mean of its agents' returns (a cooperative game's team score);
in a game of two rivals the bot plays one chair, first on half the tables and second on
the others, against uniformly random legal moves, and its own return is the score (ratings
between bots come from ``lander match`` and ``lander ladder``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from games.pz.client import MASK_KEY, AgentSpaces, make_tables, parse_kwargs, rivals
from games.pz.tables import Table
from games.spec import Policy

MAX_STEPS = 100_000
"""A game that has not ended by then is cut."""


def _batch(rows: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray] | np.ndarray:
    """Observations of several agents as one batch (one key: the array itself)."""
    keys = list(rows[0])
    if len(keys) == 1:
        return np.stack([row[keys[0]] for row in rows])
    return {key: np.stack([row[key] for row in rows]) for key in keys}


def play_tables(
    policy: Policy, tables: list[Table], seed: int, rival: Policy | None = None
) -> np.ndarray:
    """One game on each table; each table's score. The policy plays every agent, or with
    ``rival`` (a game of two rivals) one chair, the rival the other."""
    agents = tables[0].agents
    kinds = {
        agent: AgentSpaces(
            tables[0].env.observation_space(agent), tables[0].env.action_space(agent)
        )
        for agent in agents
    }
    for index, table in enumerate(tables):
        table.reset(seed + index)
    returns = np.zeros((len(tables), len(agents)))
    on = [True] * len(tables)
    for _ in range(MAX_STEPS):
        movers = [
            (t, agent)
            for t, table in enumerate(tables)
            if on[t]
            for agent in sorted(table.to_move())
        ]
        if not movers:
            break
        chosen: dict[int, dict[str, Any]] = {}
        for player, turns in _players(policy, rival, movers, agents):
            rows = [kinds[agent].values(tables[t].observation(agent)) for t, agent in turns]
            for (t, agent), action in zip(turns, np.asarray(player(_batch(rows))), strict=True):
                chosen.setdefault(t, {})[agent] = kinds[agent].game_action(action)
        for t, moves in chosen.items():
            moved = tables[t].step(moves)
            returns[t] += [moved.rewards[agent] for agent in agents]
            on[t] = not moved.over
    if rival is None:
        return returns.mean(axis=1)
    return np.asarray([returns[t, t % 2] for t in range(len(tables))])


def _players(
    policy: Policy, rival: Policy | None, movers: list[tuple[int, str]], agents: list[str]
) -> list[tuple[Policy, list[tuple[int, str]]]]:
    """Who plays which of this step's moves: the policy all, or with a rival the policy
    the chair ``t % 2`` of table ``t`` and the rival the other."""
    if rival is None:
        return [(policy, movers)]
    own = [(t, a) for t, a in movers if agents.index(a) == t % 2]
    other = [(t, a) for t, a in movers if agents.index(a) != t % 2]
    return [(player, turns) for player, turns in ((policy, own), (rival, other)) if turns]


def random_moves(space: spaces.Space[Any], rng: np.random.Generator) -> Policy:
    """Uniformly random actions, among the allowed moves where the game masks them."""

    def act(obs: Any) -> np.ndarray:
        count = len(next(iter(obs.values())) if isinstance(obs, dict) else obs)
        if isinstance(space, spaces.Box):
            return rng.uniform(-1.0, 1.0, (count, *space.shape)).astype(np.float32)
        mask = obs.get(MASK_KEY) if isinstance(obs, dict) else None
        if mask is not None:
            return np.asarray([rng.choice(np.flatnonzero(row > 0.5)) for row in mask])
        assert isinstance(space, spaces.Discrete)
        return rng.integers(0, int(space.n), count)

    return act


@dataclass(frozen=True)
class PettingZooScorer:
    """The settings an evaluation plays a PettingZoo game with."""

    module: str
    game_args: tuple[tuple[str, str], ...]

    def rivals(self) -> bool:
        """Whether the game is one of two rivals (``games/pz/client.py``)."""
        (table,) = self._tables(1)
        table.close()
        return rivals(table)

    def _tables(self, count: int) -> list[Table]:
        kwargs = parse_kwargs(dict(self.game_args))
        first = make_tables(self.module, kwargs, 1)[0]
        return [first, *(make_tables(self.module, kwargs, 1)[0] for _ in range(count - 1))]

    def play(
        self, policy: Policy, episodes: int, seed: int
    ) -> tuple[np.ndarray, np.ndarray | None]:
        tables = self._tables(episodes)
        first = tables[0]
        rival = None
        if rivals(first):
            space = first.env.action_space(first.agents[0])
            rival = random_moves(space, np.random.default_rng(seed))
        try:
            return play_tables(policy, tables, seed, rival), None
        finally:
            for table in tables:
                table.close()

    def baseline_policies(self, rng: np.random.Generator) -> tuple[Policy, float | None]:
        """Uniformly random legal moves (score 0); no score 1 is known."""
        (table,) = self._tables(1)
        space = table.env.action_space(table.agents[0])
        table.close()
        return random_moves(space, rng), None
