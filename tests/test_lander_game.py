"""The bundled game's physics, its gymnasium registration and its controllers."""

from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium.utils.env_checker import check_env

from game_bridge.lander_game import gym_env  # noqa: F401  (registers Lander-v0)
from game_bridge.lander_game.controllers import random_actions, reference_actions
from game_bridge.lander_game.physics import LanderPhysics


def test_lander_v0_is_registered_and_passes_check_env() -> None:
    env = gymnasium.make("Lander-v0")
    check_env(env.unwrapped)
    discrete = gymnasium.make("Lander-v0", action_type="discrete")
    check_env(discrete.unwrapped)


def _rollout(seed: int, steps: int) -> np.ndarray:
    physics = LanderPhysics(4, seed)
    rng = np.random.default_rng(99)
    trace = []
    for _ in range(steps):
        result = physics.step(random_actions(rng, 4, False))
        physics.reset_agents(result.terminated | result.truncated)
        trace.append(result.obs)
    return np.array(trace)


def test_physics_is_deterministic_for_a_seed() -> None:
    assert np.array_equal(_rollout(7, 300), _rollout(7, 300))
    assert not np.array_equal(_rollout(7, 50), _rollout(8, 50))


def _mean_return(policy: str, episodes: int = 64) -> float:
    physics = LanderPhysics(32, 3)
    rng = np.random.default_rng(0)
    returns: list[float] = []
    running = np.zeros(32)
    obs = physics.observe()
    while len(returns) < episodes:
        actions = (
            reference_actions(obs) if policy == "reference" else random_actions(rng, 32, False)
        )
        result = physics.step(actions)
        running += result.reward
        done = result.terminated | result.truncated
        returns.extend(running[done].tolist())
        running[done] = 0.0
        physics.reset_agents(done)
        obs = physics.observe()
    return float(np.mean(returns))


def test_reference_controller_far_outscores_random_policy() -> None:
    reference, random = _mean_return("reference"), _mean_return("random")
    assert reference > 150.0
    assert reference > 4 * random
