"""The lander scored in-process: episodes batched on its own physics, one agent each, and
its baselines (a random policy, the hand-written pilot)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from games.lander.camera import camera_frames
from games.lander.controllers import random_actions, reference_actions, reference_discrete_actions
from games.lander.physics import LanderPhysics
from games.spec import Baseline, GameArgs, Policy

DEFAULT_ACTION_REPEAT = 6
"""Physics ticks per step unless a run sets ``--action-repeat``."""


@dataclass(frozen=True)
class LanderSettings:
    """The lander's settings an evaluation runs with."""

    discrete: bool = False
    action_repeat: int = DEFAULT_ACTION_REPEAT
    difficulty: int = 1
    pixels: bool = False
    """The policy sees camera frames (``--game-arg observation=pixels``)."""
    glimpse: bool = False
    """The policy sees the target only briefly after it moves (``observation=glimpse``)."""

    @classmethod
    def from_game(cls, game_args: GameArgs, action_repeat: int | None) -> LanderSettings:
        """The settings a run passed to the game (``--game-arg`` and ``--action-repeat``)."""
        return cls(
            discrete=game_args.get("action_type") == "discrete",
            action_repeat=int(action_repeat or DEFAULT_ACTION_REPEAT),
            difficulty=int(game_args.get("difficulty", 1)),
            pixels=game_args.get("observation") == "pixels",
            glimpse=game_args.get("observation") == "glimpse",
        )

    def play(self, policy: Policy, episodes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """Play ``episodes`` episodes at once, one agent each; return (returns, successes).
        With pixels the policy sees camera frames and with glimpse the target only briefly,
        except the baselines, which read the whole coordinates (the same episodes, so the
        normalized score means the same: 1 is the pilot that always sees the target)."""
        physics = LanderPhysics(
            episodes, seed, self.action_repeat, self.discrete, self.difficulty, self.glimpse
        )
        returns = np.zeros(episodes)
        successes = np.zeros(episodes, dtype=bool)
        running = np.ones(episodes, dtype=bool)
        baseline = isinstance(policy, Baseline)
        frames = self.pixels and not baseline
        obs = physics.observe()
        while running.any():
            if frames:
                seen = camera_frames(physics.pos, physics.vel, physics.target)
            else:
                seen = physics.coordinates() if baseline and self.glimpse else obs
            result = physics.step(policy(seen))
            returns += np.where(running, result.reward, 0.0)
            ended = running & (result.terminated | result.truncated)
            successes |= ended & result.success
            running &= ~ended
            obs = result.obs
        return returns, successes

    def baseline_policies(self, rng: np.random.Generator) -> tuple[Policy, Policy]:
        """The random policy (score 0) and the reference controller (score 1)."""
        reference = reference_discrete_actions if self.discrete else reference_actions
        return Baseline(lambda o: random_actions(rng, len(o), self.discrete)), Baseline(reference)
