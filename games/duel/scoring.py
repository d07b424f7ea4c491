"""The duel scored in-process: the policy flies red against the scripted pilot (blue), one
round per match, all matches at once; the random player scores 0 and the pilot itself 1.
In the chase mode the policy is the hunter against the scripted prey."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from games.duel.chase import ChaseWorld, scripted_hunter, scripted_prey
from games.duel.controllers import random_actions, scripted_actions
from games.duel.world import DuelWorld
from games.spec import GameArgs, Policy

DEFAULT_ACTION_REPEAT = 6


@dataclass(frozen=True)
class DuelSettings:
    """The duel's settings an evaluation runs with."""

    action_repeat: int = DEFAULT_ACTION_REPEAT

    @property
    def scripted_opponent(self) -> Policy:
        """The fixed player of the other side (``lander play`` of a bot plays against it)."""
        return scripted_actions

    @classmethod
    def from_game(
        cls, game_args: GameArgs, action_repeat: int | None
    ) -> DuelSettings | ChaseSettings:
        """The settings a run passed to the game (``--action-repeat``, the mode)."""
        repeat = int(action_repeat or DEFAULT_ACTION_REPEAT)
        if game_args.get("mode") == "chase":
            return ChaseSettings(action_repeat=repeat)
        return cls(action_repeat=repeat)

    def rounds(
        self,
        red: Policy,
        blue: Policy,
        matches: int,
        seed: int,
        watch: Callable[[DuelWorld], None] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """One round of each of ``matches`` matches: red's returns and outcomes (+1, 0, -1).

        :param watch: called with the world before each step (to draw it).
        """
        world = DuelWorld(matches, seed, self.action_repeat)
        returns = np.zeros(2 * matches)
        outcomes = np.zeros(2 * matches, dtype=np.int64)
        running = np.ones(2 * matches, dtype=bool)
        obs = world.observe()
        while running.any():
            if watch is not None:
                watch(world)
            actions = np.empty((2 * matches, 2), dtype=np.float32)
            actions[0::2] = np.asarray(red(obs[0::2])).reshape(matches, 2)
            actions[1::2] = np.asarray(blue(obs[1::2])).reshape(matches, 2)
            result = world.step(actions)
            returns += np.where(running, result.reward, 0.0)
            ended = running & (result.terminated | result.truncated)
            outcomes[ended] = result.outcome[ended]
            running &= ~ended
            obs = result.obs
        return returns[0::2], outcomes[0::2]

    def play(self, policy: Policy, episodes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """``episodes`` rounds against the scripted pilot: red's returns, and its wins."""
        returns, outcomes = self.rounds(policy, scripted_actions, episodes, seed)
        return returns, outcomes > 0

    def baseline_policies(self, rng: np.random.Generator) -> tuple[Policy, Policy]:
        """Random thrust (score 0) and the scripted pilot itself (score 1)."""
        return (lambda o: random_actions(rng, len(o))), scripted_actions


@dataclass(frozen=True)
class ChaseSettings:
    """The chase's settings: the policy is the hunter, against the scripted prey."""

    action_repeat: int = DEFAULT_ACTION_REPEAT

    @property
    def scripted_opponent(self) -> Policy:
        """The scripted prey."""
        return scripted_prey

    def rounds(
        self,
        hunter: Policy,
        prey: Policy,
        matches: int,
        seed: int,
        watch: Callable[[ChaseWorld], None] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """One round of each of ``matches`` chases: the hunters' returns and outcomes."""
        world = ChaseWorld(matches, seed, self.action_repeat)
        returns = np.zeros(matches)
        outcomes = np.zeros(matches, dtype=np.int64)
        running = np.ones(matches, dtype=bool)
        hunters, prey_obs = world.observe()
        while running.any():
            if watch is not None:
                watch(world)
            result = world.step(np.asarray(hunter(hunters)), np.asarray(prey(prey_obs)))
            returns += np.where(running, result.hunter_reward, 0.0)
            ended = running & result.ended
            outcomes[ended] = result.outcome[ended]
            running &= ~ended
            hunters, prey_obs = result.hunter_obs, result.prey_obs
        return returns, outcomes

    def play(self, policy: Policy, episodes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """``episodes`` chases against the scripted prey: the hunter's returns and catches."""
        returns, outcomes = self.rounds(policy, scripted_prey, episodes, seed)
        return returns, outcomes > 0

    def baseline_policies(self, rng: np.random.Generator) -> tuple[Policy, Policy]:
        """Random thrust (score 0) and the scripted hunter (score 1)."""
        return (lambda o: random_actions(rng, len(o))), scripted_hunter
