"""The stroke game scored in-process: strokes batched on its own world, one pen each, and
its baselines (random moves, the tuned filter)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from games.spec import Baseline, GameArgs, Policy
from games.stroke.camera import compose_scope
from games.stroke.controllers import random_moves, reference_moves
from games.stroke.world import STROKE_STEPS, StrokeWorld


@dataclass(frozen=True)
class StrokeSettings:
    """The stroke game's settings an evaluation runs with."""

    reward_mode: str = "step"
    pixels: bool = False
    """The policy sees the scope (``--game-arg observation=pixels``); the baselines read
    the numbers, on the same strokes."""

    @classmethod
    def from_game(cls, game_args: GameArgs, _action_repeat: int | None = None) -> StrokeSettings:
        """The settings a run passed to the game (``--game-arg reward_mode``, ``observation``)."""
        return cls(
            reward_mode=game_args.get("reward_mode", "step"),
            pixels=game_args.get("observation") == "pixels",
        )

    def play(self, policy: Policy, episodes: int, seed: int) -> tuple[np.ndarray, None]:
        """Correct ``episodes`` strokes at once, one pen each; return (returns, None: a
        stroke has no success)."""
        world = StrokeWorld(episodes, seed, self.reward_mode)
        returns = np.zeros(episodes)
        obs = world.observe()
        if self.pixels and not isinstance(policy, Baseline):
            policy = compose_scope(policy)
        for _ in range(STROKE_STEPS):
            result = world.step(policy(obs))
            returns += result.reward
            obs = result.obs
        return returns, None

    def baseline_policies(self, rng: np.random.Generator) -> tuple[Policy, Policy]:
        """Random moves (score 0) and the tuned filter (score 1)."""
        return Baseline(lambda o: random_moves(rng, len(o))), Baseline(reference_moves)
