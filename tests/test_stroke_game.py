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


def test_the_scope_is_the_window_and_the_point_and_the_game_sends_it() -> None:
    """games/stroke/camera.py: the newest half of the window in channel 0, the older half
    in channel 1, the corrected point in channel 2, each channel's centroid where its
    points are; the protocol game sends those bytes as the plugin's hex camera."""
    from games.stroke.camera import FRAME_SHAPE, PIXELS_PER_UNIT, SIDE, scope_frames
    from games.stroke.client import StrokeGame

    world = StrokeWorld(5, 3)
    for _ in range(20):
        world.step(random_moves(np.random.default_rng(1), 5))
    obs = world.observe()
    frames = scope_frames(obs)
    assert frames.shape == (5, *FRAME_SHAPE) and frames.dtype == np.uint8
    raw = obs[:, : 2 * WINDOW].reshape(5, WINDOW, 2)
    grid = (np.arange(SIDE) - 0.5) / PIXELS_PER_UNIT - 1.0  # pixel centres, stroke units
    for channel, points in ((0, raw[:, WINDOW // 2 :]), (1, raw[:, : WINDOW // 2])):
        mass = frames[:, channel].astype(float)
        x = (mass.sum(axis=1) * grid).sum(axis=1) / mass.sum(axis=(1, 2))
        y = -(mass.sum(axis=2) * grid).sum(axis=1) / mass.sum(axis=(1, 2))
        np.testing.assert_allclose(x, points[:, :, 0].mean(axis=1), atol=0.01)
        np.testing.assert_allclose(y, points[:, :, 1].mean(axis=1), atol=0.01)
    # every point whole, on the edge of the square too (random moves push it there)
    assert np.abs(obs[:, -2:]).max() == 1.0
    assert frames[:, 2].reshape(5, -1).sum(axis=1).tolist() == pytest.approx([255] * 5, abs=2)

    game = StrokeGame(2, 7, "step", pixels=True)
    info = game.env_info()
    assert info["observation_space"] == {"camera_2d": {"size": [3, SIDE, SIDE], "space": "box"}}
    sent = game.reset()["obs"]
    expected = scope_frames(game.world.observe())
    assert [bytes.fromhex(o["camera_2d"]) for o in sent] == [f.tobytes() for f in expected]
    env = gymnasium.make(STROKE_ENV_ID, observation="pixels")
    check_env(env.unwrapped)
    first, _ = env.reset(seed=0)
    assert first.shape == FRAME_SHAPE and first.dtype == np.uint8
