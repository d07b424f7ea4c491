"""A PettingZoo game's evaluation and play in-process: the bot plays every agent of each
table (the agents alike share its policy), only those whose turn it is, none that left,
and a table's score is the mean of its agents' returns (a cooperative game's team score);
in a game of two rivals the bot plays one chair, first on half the tables and second on
the others, against uniformly random legal moves, and its own return is the score (ratings
between bots come from ``lander match`` and ``lander ladder``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from games.gym.view import parse_kwargs
from games.pz.client import MASK_KEY, AgentSpaces, make_tables, policy_names, rivals
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


Seating = Callable[[int, str], tuple[Policy, bool]]
"""Who plays agent ``agent`` of table ``t``, and whether its return is the score."""


def play_tables(tables: list[Table], seed: int, seating: Seating) -> np.ndarray:
    """One game on each table; each table's score, the mean return of the agents its
    seating counts."""
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
        turns: dict[tuple[int, str], list[tuple[int, str]]] = {}
        for t, table in enumerate(tables):
            for agent in sorted(table.to_move()) if on[t] else ():
                chair = (id(seating(t, agent)[0]), kinds[agent].signature)
                turns.setdefault(chair, []).append((t, agent))
        if not turns:
            break
        chosen: dict[int, dict[str, Any]] = {}
        for group in turns.values():
            playing = seating(*group[0])[0]
            rows = [kinds[agent].values(tables[t].observation(agent)) for t, agent in group]
            for (t, agent), action in zip(group, np.asarray(playing(_batch(rows))), strict=True):
                chosen.setdefault(t, {})[agent] = kinds[agent].game_action(action)
        for t, moves in chosen.items():
            moved = tables[t].step(moves)
            returns[t] += [moved.rewards[agent] for agent in agents]
            on[t] = not moved.over
    counted = np.asarray([[seating(t, a)[1] for a in agents] for t in range(len(tables))])
    return (returns * counted).sum(axis=1) / counted.sum(axis=1)


def _alike(table: Table) -> bool:
    """Whether every agent of the game shares one policy's spaces (no sides of their own)."""
    first = table.agents[0]
    return all(
        table.env.observation_space(a) == table.env.observation_space(first)
        and table.env.action_space(a) == table.env.action_space(first)
        for a in table.agents
    )


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

    @classmethod
    def of(cls, module: str, game_args: Mapping[str, str]) -> PettingZooScorer:
        """The scorer of a run's ``--game-arg`` settings (the bridge's ``agents`` aside)."""
        return cls(module, tuple(sorted((k, v) for k, v in game_args.items() if k != "agents")))

    def sides(self) -> bool:
        """Whether the game's agents form sides with spaces of their own."""
        (table,) = self._tables(1)
        table.close()
        return not _alike(table)

    def rivals(self) -> bool:
        """Whether the game is one of two rivals (``games/pz/client.py``)."""
        (table,) = self._tables(1)
        table.close()
        return rivals(table)

    def _tables(self, count: int) -> list[Table]:
        kwargs = parse_kwargs(dict(self.game_args))
        return [make_tables(self.module, kwargs, 1)[0] for _ in range(count)]

    def play(
        self, policy: Policy, episodes: int, seed: int
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """The policy plays every agent; in a game of two rivals one chair (the first on even
        tables, the second on odd ones) against random legal moves; in a game of sides with
        spaces of their own the first side (a run's own bot's), the others at random. Only
        the agents it plays count."""
        tables = self._tables(episodes)
        first = tables[0]
        rng = np.random.default_rng(seed)
        others = {agent: random_moves(first.env.action_space(agent), rng) for agent in first.agents}
        names = policy_names(first)
        two, alike = rivals(first), _alike(first)
        chairs = {agent: index for index, agent in enumerate(first.agents)}

        def seating(t: int, agent: str) -> tuple[Policy, bool]:
            index = chairs[agent]
            own = index == t % 2 if two else alike or names[index] == names[0]
            return (policy, True) if own else (others[agent], False)

        try:
            return play_tables(tables, seed, seating), None
        finally:
            for table in tables:
                table.close()

    def baseline_policies(self, rng: np.random.Generator) -> tuple[Policy, float | None]:
        """Uniformly random legal moves (score 0); no score 1 is known."""
        (table,) = self._tables(1)
        space = table.env.action_space(table.agents[0])
        table.close()
        return random_moves(space, rng), None
