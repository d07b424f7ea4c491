"""The second bundled game, stroke: a gymnasium environment in both reward modes, and
the baselines that define its normalized score."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from games.stroke.controllers import random_moves, reference_moves, steer
from games.stroke.gym_env import ENV_ID as STROKE_ENV_ID
from games.stroke.world import OBS_SIZE, STROKE_STEPS, WINDOW, StrokeWorld


@pytest.mark.parametrize("mode", ["step", "delayed"])
def test_stroke_is_a_gymnasium_environment(mode: str) -> None:
    env = gymnasium.make(STROKE_ENV_ID, reward_mode=mode)
    check_env(env.unwrapped)
    obs, _ = env.reset(seed=3)
    assert obs.shape == (OBS_SIZE,) and np.all(np.abs(obs) <= 1.0)
    rewards, steps, terminated = [], 0, False
    while not terminated:
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        rewards.append(reward)
        steps += 1
        assert not truncated
    assert steps == STROKE_STEPS
    if mode == "delayed":  # nothing until the stroke ends, then its score
        assert all(r == 0.0 for r in rewards[:-1]) and rewards[-1] < 0.0
    else:
        assert all(r <= 0.0 for r in rewards) and len(set(rewards)) > 100


def _mean_return(policy: str, mode: str, pens: int = 64) -> float:
    world = StrokeWorld(pens, seed=0, reward_mode=mode)
    rng = np.random.default_rng(1)
    total = np.zeros(pens)
    for _ in range(STROKE_STEPS):
        obs = world.observe()
        if policy == "reference":
            moves = reference_moves(obs)
        elif policy == "random":
            moves = random_moves(rng, pens)
        elif policy == "hold":
            moves = np.zeros((pens, 2))
        else:  # echo: steer onto the newest raw sample
            moves = steer(obs, obs[:, 2 * WINDOW - 2 : 2 * WINDOW])
        total += world.step(moves).reward
    return float(total.mean())


@pytest.mark.parametrize("mode", ["step", "delayed"])
def test_the_reference_filter_beats_holding_still_and_echoing_the_sensor(mode: str) -> None:
    """The normalized score means skill: holding the point still scores little, echoing the
    raw signal less than the filter."""
    reference, random_ = _mean_return("reference", mode), _mean_return("random", mode)

    def normalized(policy: str) -> float:
        return (_mean_return(policy, mode) - random_) / (reference - random_)

    assert reference > 0.5 * random_  # both negative: the filter loses less than half
    assert normalized("hold") < 0.5
    assert normalized("echo") < 0.99


def test_a_stroke_is_the_same_for_a_seed() -> None:
    first, second = StrokeWorld(2, seed=9), StrokeWorld(2, seed=9)
    for _ in range(10):
        action = np.full((2, 2), 0.1)
        np.testing.assert_array_equal(first.step(action).obs, second.step(action).obs)
