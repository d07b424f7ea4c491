"""Batched duel rounds: M matches of two landers each, stepped together with numpy.

Agent ``2 m`` flies red and ``2 m + 1`` blue in match ``m``; both chase the same target,
which jumps every few game seconds. A round lasts ``ROUND_S`` game seconds, or ends when a
lander crashes (it loses; both crashing is a draw). Otherwise the lander that held the
target longer (within the lander's success radius) wins; within ``DRAW_MARGIN_S`` it is a
draw. Rewards are zero-sum: each step the difference of the two landers' lander rewards,
and at the round's end ``OUTCOME_REWARD`` times the outcome (+1 win, 0 draw, -1 loss).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from games.lander.physics import POS_SCALE, TICKS_PER_SECOND, VEL_SCALE, LanderPhysics

SIDES = ("red", "blue")
ROUND_S = 12.0
DRAW_MARGIN_S = 0.25
OUTCOME_REWARD = 10.0
SHAPING = 0.5
"""Weight of the per-step reward difference (the lander's closeness and hold reward)."""
OWN_SIZE = 7
OBS_SIZE = OWN_SIZE + 4
"""The lander's own 7 values, then the rival's offset from this lander and its velocity."""
ACTION_SIZE = 2
OUTCOMES = {1: "win", 0: "draw", -1: "loss"}


def match_physics(
    matches: int, seed: int | None, action_repeat: int, round_s: float
) -> LanderPhysics:
    """Two landers a match in one batched physics, its episodes rounds of ``round_s`` game
    seconds (the duel's and the chase's).

    :raises ValueError: for fewer than one match.
    """
    if matches < 1:
        raise ValueError(f"matches must be at least 1, got {matches}")
    physics = LanderPhysics(2 * matches, seed, action_repeat)
    physics.episode_ticks = round(round_s * TICKS_PER_SECOND)
    return physics


@dataclass
class DuelStep:
    """One step of every agent (arrays of length 2 M)."""

    obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    outcome: np.ndarray
    """+1, 0 or -1 for an agent whose round ended this step; 0 otherwise."""


class DuelWorld:
    """``matches`` rounds at once.

    :param matches: matches stepped together (2 landers each).
    :param seed: seed of the world's random generator.
    :param action_repeat: physics ticks per step.
    """

    def __init__(self, matches: int, seed: int | None = None, action_repeat: int = 6) -> None:
        self.matches = matches
        self.n_agents = 2 * matches
        self.physics = match_physics(matches, seed, action_repeat, ROUND_S)
        self.step_s = action_repeat / TICKS_PER_SECOND
        self.partner = np.arange(self.n_agents) ^ 1
        self.held = np.zeros(self.n_agents)
        self._share_targets()

    def _share_targets(self) -> None:
        """Blue chases red's target, moved at the same ticks."""
        self.physics.target[1::2] = self.physics.target[0::2]
        self.physics.target_timer[1::2] = self.physics.target_timer[0::2]

    def reset_matches(self, ended: np.ndarray) -> None:
        """Start new rounds for the agents in ``ended`` (both of a match end together)."""
        self.physics.reset_agents(ended)
        self.held[ended] = 0.0
        self._share_targets()

    def observe(self) -> np.ndarray:
        """Observations in [-1, 1], shape (2 M, 11)."""
        physics, partner = self.physics, self.partner
        rival = np.column_stack(
            [
                (physics.pos[partner] - physics.pos) / POS_SCALE,
                physics.vel[partner] / VEL_SCALE,
            ]
        )
        return np.hstack([physics.observe(), np.clip(rival, -1.0, 1.0)]).astype(np.float32)

    def step(self, actions: np.ndarray) -> DuelStep:
        """Apply one action per agent; rounds that end are not reset here (the caller reads
        their terminal observation, then calls :meth:`reset_matches`)."""
        result = self.physics.step(np.asarray(actions).reshape(self.n_agents, ACTION_SIZE))
        self._share_targets()
        partner = self.partner
        self.held += result.success * self.step_s
        crashed = result.terminated
        ended = crashed | crashed[partner] | result.truncated
        by_hold = np.sign(np.round((self.held - self.held[partner]) / DRAW_MARGIN_S))
        by_crash = crashed[partner].astype(np.int64) - crashed.astype(np.int64)
        outcome = np.where(crashed | crashed[partner], by_crash, by_hold).astype(np.int64)
        outcome = np.where(ended, outcome, 0)
        reward = SHAPING * (result.reward - result.reward[partner]) + OUTCOME_REWARD * outcome
        truncated = ended & ~(crashed | crashed[partner])
        return DuelStep(
            obs=self.observe(),
            reward=reward.astype(np.float32),
            terminated=ended & ~truncated,
            truncated=truncated,
            outcome=outcome,
        )
