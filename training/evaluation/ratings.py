"""Ratings from rounds: the Elo expectation and update, the rating difference a score
implies, a round's score from what the game said, and the sides' share of a VecEnv step
that self-play and matches both need (light: no torch)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

LEARNER = "learner"
"""The learning policy's name in a self-play run's table of ratings (``extra.self_play``)."""
ELO_START = 1200.0
"""Every player's first rating (ML-Agents' initial ELO)."""
ELO_K = 16.0
"""How far one round moves a rating."""
OUTCOME_SCORES = {"win": 1.0, "draw": 0.5, "loss": 0.0}


def expected_score(rating: float, other: float) -> float:
    """The score (1 win, 0.5 draw) ``rating`` is expected to take from ``other``."""
    return 1.0 / (1.0 + 10.0 ** ((other - rating) / 400.0))


def elo_difference(score: float) -> float:
    """The rating difference a mean score implies (+inf at 1, -inf at 0)."""
    if score <= 0.0:
        return -math.inf
    if score >= 1.0:
        return math.inf
    return 400.0 * math.log10(score / (1.0 - score))


def round_score(reward: float, info: dict[str, Any]) -> float:
    """A finished round's score for the agent: ``info["outcome"]`` when the game sends
    one, else the sign of its last reward (ML-Agents' convention: > 0 a win, 0 a draw)."""
    outcome = info.get("outcome")
    if outcome in OUTCOME_SCORES:
        return OUTCOME_SCORES[str(outcome)]
    return 1.0 if reward > 0 else 0.5 if reward == 0 else 0.0


def finished_rounds(
    agents: np.ndarray, rewards: np.ndarray, dones: np.ndarray, infos: list[dict[str, Any]]
) -> list[float]:
    """The scores of the rounds that ended this step for ``agents`` (indices), in their
    order; a round a game restart cut short decides nothing and is left out."""
    return [
        round_score(float(rewards[index]), infos[index])
        for index in agents[np.asarray(dones)[agents]]
        if "game_restarted" not in infos[index]
    ]


def sides_of(policy_names: tuple[str, ...], num_envs: int) -> list[str]:
    """The side of every agent of a VecEnv of ``num_envs`` agents (instance-major), from one
    instance's ``agent_policy_names``."""
    return [policy_names[index % len(policy_names)] for index in range(num_envs)]


def assemble_actions(
    space: Any, num_envs: int, groups: list[tuple[np.ndarray, np.ndarray]]
) -> np.ndarray:
    """One action batch for every agent, from each group's (agent indices, actions). In
    the padded batch of sides with their own spaces a group fills its first columns (a
    discrete side's choice is one column)."""
    full = np.zeros((num_envs, *(space.shape or ())), dtype=space.dtype)
    for agents, actions in groups:
        if not len(agents):
            continue
        if full.ndim == 1:
            full[agents] = np.asarray(actions).reshape(len(agents))
        else:
            values = np.asarray(actions).reshape(len(agents), -1)
            full[agents, : values.shape[1]] = values
    return full
