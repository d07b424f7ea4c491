"""A PettingZoo game's evaluation and play in-process: the bot plays every agent of each
table (the agents alike share its policy), only those whose turn it is, none that left.
A table's score is the mean of its agents' returns (a cooperative game's team score; in a
game of rivals, ratings from matches say more: ``lander match``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from games.pz.client import AgentSpaces, make_tables, parse_kwargs
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


def play_tables(policy: Policy, tables: list[Table], seed: int) -> np.ndarray:
    """One game on each table, the policy playing every agent; each table's mean return."""
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
        rows = [kinds[agent].values(tables[t].observation(agent)) for t, agent in movers]
        actions = np.asarray(policy(_batch(rows)))
        chosen: dict[int, dict[str, Any]] = {}
        for (t, agent), action in zip(movers, actions, strict=True):
            chosen.setdefault(t, {})[agent] = kinds[agent].game_action(action)
        for t, moves in chosen.items():
            moved = tables[t].step(moves)
            returns[t] += [moved.rewards[agent] for agent in agents]
            on[t] = not moved.over
    return returns.mean(axis=1)


@dataclass(frozen=True)
class PettingZooScorer:
    """The settings an evaluation plays a PettingZoo game with."""

    module: str
    game_args: tuple[tuple[str, str], ...]

    def _tables(self, count: int) -> list[Table]:
        kwargs = parse_kwargs(dict(self.game_args))
        first = make_tables(self.module, kwargs, 1)[0]
        return [first, *(make_tables(self.module, kwargs, 1)[0] for _ in range(count - 1))]

    def play(
        self, policy: Policy, episodes: int, seed: int
    ) -> tuple[np.ndarray, np.ndarray | None]:
        tables = self._tables(episodes)
        try:
            return play_tables(policy, tables, seed), None
        finally:
            for table in tables:
                table.close()

    def baseline_policies(self, rng: np.random.Generator) -> tuple[Policy, float | None]:
        """Uniform random actions (score 0); no score 1 is known."""
        (table,) = self._tables(1)
        space = table.env.action_space(table.agents[0])
        table.close()

        def random_actions(obs: Any) -> np.ndarray:
            count = len(next(iter(obs.values())) if isinstance(obs, dict) else obs)
            if isinstance(space, spaces.Box):
                return rng.uniform(-1.0, 1.0, (count, *space.shape)).astype(np.float32)
            mask = obs.get("action_mask") if isinstance(obs, dict) else None
            if mask is not None:  # a random legal move
                return np.asarray([rng.choice(np.flatnonzero(row > 0.5)) for row in mask])
            return rng.integers(0, int(space.n), count)

        return random_actions, None
