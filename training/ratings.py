"""Ratings from rounds: the Elo expectation and update, the rating difference a score
implies, and a round's score from what the game said (light: no torch)."""

from __future__ import annotations

import math
from typing import Any

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
