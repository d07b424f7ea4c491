"""The duel's chase mode (``--game-arg mode=chase``): a game whose two sides differ.

Agent ``2 m`` is the hunter and ``2 m + 1`` the prey of match ``m``, in the lander's
arena and physics. The hunter flies as the lander does (continuous thrust) and sees its
offset to the prey and the prey's velocity (9 values); the prey picks one of five moves
(hover, up, down, left, right: a discrete action) and sees the hunter and the time left
(10 values). So the sides declare their own observation and action spaces, the case
``--self-play`` trains with a model per side.

The hunter's thrust is weaker (``HUNTER_AGILITY``). The hunter wins by coming within ``CATCH_RADIUS`` of the prey, or when the prey crashes;
the prey wins when the hunter crashes or the round's ``ROUND_S`` game seconds run out;
both crashing at once is a draw. Rewards are zero-sum: the hunter's closeness to the prey
each step (the prey gets its negative), and ``OUTCOME_REWARD`` times the outcome at the end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from games.duel.world import match_physics
from games.lander.controllers import reference_actions
from games.lander.physics import (
    CLOSENESS_RANGE,
    HEIGHT,
    OBS_SIZE,
    POS_SCALE,
    SUCCESS_RADIUS,
    TICKS_PER_SECOND,
    VEL_SCALE,
    WIDTH,
)

CHASE_SIDES = ("hunter", "prey")
ROUND_S = 10.0
CATCH_RADIUS = SUCCESS_RADIUS
OUTCOME_REWARD = 10.0
SHAPING = 0.5
"""The hunter's reward per game second at distance 0 (falling to 0 at the closeness range)."""
HUNTER_OBS = OBS_SIZE + 2
"""The lander's own 7 values (its target is the prey), then the prey's velocity."""
PREY_OBS = OBS_SIZE + 3
"""The lander's own 7 values (its target is the hunter), the hunter's velocity, the time left."""
HUNTER_ACTION = 2
HUNTER_AGILITY = 0.55
"""The hunter's thrust spans this share of the lander's range (a slower turn than the prey's
full-thrust moves), so a prey that flees well can escape."""
PREY_MOVES = np.array([[0.0, 0.0], [1.0, 0.0], [-1.0, 0.0], [0.0, -1.0], [0.0, 1.0]])
"""The prey's five moves as (main, lateral) thrust: hover, up, down, left, right."""
_REFUGES = np.array([[4.0, 4.0], [16.0, 4.0], [4.0, 11.0], [16.0, 11.0], [10.0, 7.5]])
"""Where the scripted prey flees to: the refuge farthest from the hunter."""


@dataclass
class ChaseStep:
    """One step of every match (arrays of length M, hunters then prey where two)."""

    hunter_obs: np.ndarray
    prey_obs: np.ndarray
    hunter_reward: np.ndarray
    ended: np.ndarray
    outcome: np.ndarray
    """The hunter's outcome of a round that ended this step (+1, 0, -1; the prey's is its
    negative); 0 otherwise."""


class ChaseWorld:
    """``matches`` chases stepped together.

    :param matches: hunter and prey pairs.
    :param seed: seed of the world's random generator.
    :param action_repeat: physics ticks per step.
    """

    def __init__(self, matches: int, seed: int | None = None, action_repeat: int = 6) -> None:
        self.matches = matches
        self.physics = match_physics(matches, seed, action_repeat, ROUND_S)
        self.step_s = action_repeat / TICKS_PER_SECOND
        self._aim()

    def _aim(self) -> None:
        """Each lander's target is its rival, and never moves by itself."""
        physics = self.physics
        physics.target[0::2], physics.target[1::2] = physics.pos[1::2], physics.pos[0::2].copy()
        physics.target_timer[:] = physics.episode_ticks + 1

    def reset_matches(self, ended: np.ndarray) -> None:
        """New rounds for the matches in ``ended`` (a mask of length M)."""
        self.physics.reset_agents(np.repeat(ended, 2))
        self._aim()

    def observe(self) -> tuple[np.ndarray, np.ndarray]:
        """The hunters' (M, 9) and the prey's (M, 10) observations, in [-1, 1]."""
        physics = self.physics
        own = physics.observe()
        velocity = np.clip(physics.vel / VEL_SCALE, -1.0, 1.0)
        left = 1.0 - 2.0 * physics.ticks[1::2] / physics.episode_ticks
        hunters = np.hstack([own[0::2], velocity[1::2]])
        prey = np.hstack([own[1::2], velocity[0::2], left[:, None]])
        return hunters.astype(np.float32), prey.astype(np.float32)

    def step(self, hunter_actions: np.ndarray, prey_moves: np.ndarray) -> ChaseStep:
        """Apply the hunters' thrust (M, 2) and the prey's moves (M,); rounds that end are
        not reset here (the caller reads their terminal observations first)."""
        thrust = np.empty((2 * self.matches, 2))
        hunters = np.asarray(hunter_actions, dtype=np.float64).reshape(self.matches, 2)
        thrust[0::2] = np.clip(hunters, -1.0, 1.0) * HUNTER_AGILITY
        moves = np.asarray(prey_moves).reshape(self.matches).astype(np.int64)
        thrust[1::2] = PREY_MOVES[np.clip(moves, 0, len(PREY_MOVES) - 1)]
        result = self.physics.step(thrust)
        self._aim()
        offset = self.physics.pos[1::2] - self.physics.pos[0::2]
        distance = np.hypot(offset[:, 0], offset[:, 1])
        hunter_crash, prey_crash = result.terminated[0::2], result.terminated[1::2]
        caught = distance < CATCH_RADIUS
        timeout = result.truncated[0::2] | result.truncated[1::2]
        outcome = np.where(
            hunter_crash, np.where(prey_crash, 0, -1), np.where(prey_crash | caught, 1, -1)
        )
        ended = hunter_crash | prey_crash | caught | timeout
        closeness = np.maximum(1.0 - distance / CLOSENESS_RANGE, 0.0)
        reward = SHAPING * closeness * self.step_s + OUTCOME_REWARD * np.where(ended, outcome, 0)
        hunters, prey = self.observe()
        return ChaseStep(
            hunter_obs=hunters,
            prey_obs=prey,
            hunter_reward=reward.astype(np.float32),
            ended=ended,
            outcome=np.where(ended, outcome, 0).astype(np.int64),
        )


def scripted_hunter(obs: np.ndarray) -> np.ndarray:
    """The scripted hunter: the lander's reference pilot flying at the prey."""
    return reference_actions(np.asarray(obs).reshape(-1, HUNTER_OBS)[:, :OBS_SIZE])


def scripted_prey(obs: np.ndarray) -> np.ndarray:
    """The scripted prey: the reference pilot flying to the refuge farthest from the
    hunter, its thrust rounded to the nearest of the five moves."""
    obs = np.asarray(obs, dtype=np.float64).reshape(-1, PREY_OBS)
    position = (obs[:, 4:6] + 1.0) * np.array([WIDTH, HEIGHT]) / 2.0
    hunter = position + obs[:, 0:2] * POS_SCALE
    gaps = np.linalg.norm(_REFUGES[None, :, :] - hunter[:, None, :], axis=2)
    refuge = _REFUGES[np.argmax(gaps, axis=1)]
    steered = obs[:, :OBS_SIZE].copy()
    steered[:, 0:2] = np.clip((refuge - position) / POS_SCALE, -1.0, 1.0)
    thrust = reference_actions(steered.astype(np.float32))
    gaps_to_moves = np.linalg.norm(thrust[:, None, :] - PREY_MOVES[None, :, :], axis=2)
    return np.argmin(gaps_to_moves, axis=1).astype(np.int64)
