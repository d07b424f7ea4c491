"""The lander scored in-process: episodes batched on its own physics, one agent each, and
its baselines (a random policy, the hand-written pilot)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from games.lander.controllers import random_actions, reference_actions, reference_discrete_actions
from games.lander.physics import LanderPhysics
from games.spec import GameArgs, Policy

DEFAULT_ACTION_REPEAT = 6
"""Physics ticks per step unless a run sets ``--action-repeat``."""


@dataclass(frozen=True)
class LanderSettings:
    """The lander's settings an evaluation runs with."""

    discrete: bool = False
    action_repeat: int = DEFAULT_ACTION_REPEAT
    difficulty: int = 1

    @classmethod
    def from_game(cls, game_args: GameArgs, action_repeat: int | None) -> LanderSettings:
        """The settings a run passed to the game (``--game-arg`` and ``--action-repeat``)."""
        return cls(
            discrete=game_args.get("action_type") == "discrete",
            action_repeat=int(action_repeat or DEFAULT_ACTION_REPEAT),
            difficulty=int(game_args.get("difficulty", 1)),
        )

    def play(self, policy: Policy, episodes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """Play ``episodes`` episodes at once, one agent each; return (returns, successes)."""
        physics = LanderPhysics(episodes, seed, self.action_repeat, self.discrete, self.difficulty)
        returns = np.zeros(episodes)
        successes = np.zeros(episodes, dtype=bool)
        running = np.ones(episodes, dtype=bool)
        obs = physics.observe()
        while running.any():
            result = physics.step(policy(obs))
            returns += np.where(running, result.reward, 0.0)
            ended = running & (result.terminated | result.truncated)
            successes |= ended & result.success
            running &= ~ended
            obs = result.obs
        return returns, successes

    def baseline_policies(self, rng: np.random.Generator) -> tuple[Policy, Policy]:
        """The random policy (score 0) and the reference controller (score 1)."""
        reference = reference_discrete_actions if self.discrete else reference_actions
        return (lambda o: random_actions(rng, len(o), self.discrete)), reference
