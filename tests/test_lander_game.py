"""The bundled game's physics, its gymnasium registration and its controllers."""

from __future__ import annotations

import copy

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from games.lander import gym_env  # noqa: F401  (registers Lander-v0)
from games.lander.controllers import random_actions, reference_actions
from games.lander.physics import LanderPhysics


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


def _tick_by_tick(
    physics: LanderPhysics, actions: np.ndarray, gusts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The physics' definition, one semi-implicit Euler tick at a time: (pos, vel,
    crashed, ticks lived). An agent that leaves the arena stops at that tick."""
    from games.lander import physics as world

    pos, vel = physics.pos.copy(), physics.vel.copy()
    act = np.clip(actions, -1.0, 1.0)
    thrust = np.column_stack(
        [
            act[:, 1] * world.LATERAL_ACCEL,
            (act[:, 0] + 1.0) * 0.5 * world.MAIN_ACCEL - world.GRAVITY,
        ]
    )
    crashed = np.zeros(len(pos), dtype=bool)
    lived = np.zeros(len(pos), dtype=np.int64)
    for tick in range(physics.action_repeat):
        flying = ~crashed
        accel = thrust + np.column_stack([gusts[tick], np.zeros(len(pos))])
        vel[flying] += (accel[flying] - world.DRAG * vel[flying]) * physics.dt
        pos[flying] += vel[flying] * physics.dt
        lived[flying] += 1
        low = (pos < world.HULL).any(axis=1)
        high = (pos[:, 0] > world.WIDTH - world.HULL) | (pos[:, 1] > world.HEIGHT - world.HULL)
        crashed |= flying & (low | high)
    return pos, vel, crashed, lived


# The continuous action that each discrete one equals: coast, main engine, left, right.
_DISCRETE_AS_CONTINUOUS = np.array([[-1.0, 0.0], [1.0, 0.0], [-1.0, -1.0], [-1.0, 1.0]])


@pytest.mark.parametrize(
    ("difficulty", "discrete"),
    [(1, False), (2, False), (1, True)],
    ids=["calm", "gusts", "discrete"],
)
def test_closed_form_step_matches_tick_by_tick_integration(difficulty: int, discrete: bool) -> None:
    physics = LanderPhysics(64, 5, action_repeat=8, discrete=discrete, difficulty=difficulty)
    rng = np.random.default_rng(1)
    crashes = 0
    for _ in range(300):
        # Full thrust one way or the other half the time, so agents do crash.
        actions = rng.uniform(-1.0, 1.0, (64, 2)) * rng.choice([1.0, 3.0], (64, 1))
        if discrete:
            choices = rng.integers(0, 4, 64)
            actions = _DISCRETE_AS_CONTINUOUS[choices]
        gust_rng = copy.deepcopy(physics.rng)  # the step draws its gusts first
        gusts = gust_rng.uniform(-physics.gust, physics.gust, (8, 64)) if physics.gust else None
        expected = _tick_by_tick(physics, actions, np.zeros((8, 64)) if gusts is None else gusts)
        ticks_before = physics.ticks.copy()
        result = physics.step(choices if discrete else actions)
        assert np.allclose(physics.pos, expected[0], atol=1e-9)
        assert np.allclose(physics.vel, expected[1], atol=1e-9)
        assert np.array_equal(result.terminated, expected[2])
        assert np.array_equal(physics.ticks - ticks_before, expected[3])
        crashes += int(result.terminated.sum())
        physics.reset_agents(result.terminated | result.truncated)
    assert crashes > 50
