"""The second bundled game, stroke: a gymnasium environment in both reward modes, and
the baselines that define its normalized score."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from game_bridge import STROKE_ENV_ID
from game_bridge.stroke_game import gym_env  # noqa: F401  (registers Stroke-v0)
from game_bridge.stroke_game.controllers import random_points, reference_points
from game_bridge.stroke_game.world import OBS_SIZE, STROKE_STEPS, StrokeWorld


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
        points = reference_points(obs) if policy == "reference" else random_points(rng, pens)
        total += world.step(points).reward
    return float(total.mean())


@pytest.mark.parametrize("mode", ["step", "delayed"])
def test_the_reference_filter_is_far_better_than_random_and_than_the_raw_signal(mode: str) -> None:
    reference, random_ = _mean_return("reference", mode), _mean_return("random", mode)
    assert reference > 0.5 * random_  # both negative: the filter loses less than half
    world = StrokeWorld(64, seed=0, reward_mode=mode)
    raw = np.zeros(64)
    for _ in range(STROKE_STEPS):  # echoing the newest raw sample
        raw += world.step(world.observe()[:, 14:16]).reward
    assert reference > float(raw.mean())


def test_a_stroke_is_the_same_for_a_seed() -> None:
    first, second = StrokeWorld(2, seed=9), StrokeWorld(2, seed=9)
    for _ in range(10):
        action = np.full((2, 2), 0.1)
        np.testing.assert_array_equal(first.step(action).obs, second.step(action).obs)
