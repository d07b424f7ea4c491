"""Pictures from a Gymnasium game that is not ALE's (games/gym/pictures.py): one picture is
a camera key of grey, shrunk, stacked frames, never a flat vector; each action is held for
the run's action repeat with the rewards summed, so a return is still the game's own."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import cv2
import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from rich.console import Console

from games.gym import pictures
from games.gym.view import IMAGE_KEY, UnsupportedEnv, make_view
from training.config import ConfigError
from training.session.trainer import TrainRequest, train

QUIET = Console(file=open(os.devnull, "w"))  # noqa: SIM115 (lives for the whole module)


class _Counter(gymnasium.Env[Any, Any]):
    """A vector game whose reward is its step number and that ends after ``length`` steps;
    it records the actions it was given."""

    observation_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, length: int) -> None:
        self.length = length
        self.actions: list[int] = []

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> Any:
        self.t += 1
        self.actions.append(int(action))
        return np.array([self.t], np.float32), float(self.t), self.t >= self.length, False, {}


def test_a_held_action_sums_its_rewards_and_stops_at_the_episodes_end() -> None:
    game = _Counter(length=5)
    held = pictures.RepeatAction(game, 2)
    held.reset(seed=0)
    results = [held.step(1)[1:3] for _ in range(2)]
    assert results == [(1.0 + 2.0, False), (3.0 + 4.0, False)]
    obs, reward, terminated, *_ = held.step(0)
    assert (reward, terminated, obs.tolist()) == (5.0, True, [5.0])  # the 5th ended it
    assert game.actions == [1, 1, 1, 1, 0]
    vectors = _Counter(3)
    assert pictures.preprocess(vectors, pictures.default_repeat(vectors)) is vectors  # no repeat


def test_a_picture_is_grey_shrunk_and_stacked_under_a_camera_key() -> None:
    """CarRacing's 96 x 96 x 3 colour frames go on the wire as one camera key of the last two
    frames, grey, 64 x 64, channels first; the newest is the game's own last frame."""
    view = make_view("CarRacing-v3", {})
    assert view.env_info_spaces()[0] == {IMAGE_KEY: {"size": [2, 64, 64], "space": "box"}}
    first, _ = view.reset(seed=0)
    assert first.shape == (2, 64, 64) and first.dtype == np.uint8
    np.testing.assert_array_equal(first[0], first[1])  # the stack starts from the first frame
    obs, *_ = view.step(np.array([0.0, 1.0, 0.0]))
    frame = np.asarray(view.env.unwrapped.state)  # type: ignore[attr-defined]
    grey = (frame @ np.array([0.2125, 0.7154, 0.0721])).astype(np.uint8)
    expected = cv2.resize(grey, (64, 64), interpolation=cv2.INTER_AREA)
    assert np.abs(obs[1].astype(int) - expected.astype(int)).max() <= 1
    assert not np.array_equal(obs[0], obs[1])  # the car moved between the two frames
    view.close()


def test_a_picture_games_return_is_the_games_own_under_the_repeat() -> None:
    """Over a whole CarRacing episode at the picture games' repeat of 2: half the steps,
    the same return as the game's own rewards summed."""
    raw: list[float] = []

    class Raw(gymnasium.Wrapper[Any, Any, Any, Any]):
        def step(self, action: Any) -> Any:
            result = self.env.step(action)
            raw.append(float(result[1]))
            return result

    game = Raw(gymnasium.make("CarRacing-v3"))
    env = pictures.preprocess(game, pictures.default_repeat(game))
    env.reset(seed=1)
    total, steps, done = 0.0, 0, False
    while not done:
        _, reward, terminated, truncated, _ = env.step(np.array([0.0, 0.1, 0.0], np.float32))
        total, steps, done = total + float(reward), steps + 1, terminated or truncated
    assert steps == pytest.approx(len(raw) / 2, abs=1)
    assert total == pytest.approx(sum(raw))
    env.close()


def test_each_view_knows_the_frames_a_step_holds_and_a_second_skip_is_refused() -> None:
    """What ``play --record`` paces its pictures by: Atari's 4 (its own or the
    preprocessing's), a picture game's 2, a vector game's 1, the run's repeat where given;
    an ALE id that skips frames itself refuses ``--action-repeat`` by name."""
    shown = {
        ("ALE/Pong-v5", None): 4,
        ("PongNoFrameskip-v4", None): 4,
        ("PongNoFrameskip-v4", 2): 2,
        ("CarRacing-v3", None): 2,
        ("CarRacing-v3", 3): 3,
        ("CartPole-v1", None): 1,
    }
    for (env_id, repeat), frames in shown.items():
        view = make_view(env_id, {}, repeat=repeat)
        assert view.frames_per_step == frames, (env_id, repeat)
        view.close()
    with pytest.raises(UnsupportedEnv, match="frameskip=N"):
        make_view("ALE/Pong-v5", {}, repeat=2)


def test_a_second_skip_is_refused_before_any_game_process_starts(tmp_path: Path) -> None:
    """``--action-repeat`` on an ALE id that skips frames itself fails the settings check
    (one line, nothing written), not every game process at launch."""
    request = TrainRequest(tmp_path, "arep", {"game": "gym:ALE/Pong-v5", "action_repeat": 2})
    with pytest.raises(ConfigError, match=r"ALE/Pong-v5 skips frames itself.*frameskip=N"):
        train(request, QUIET)
    assert not (tmp_path / "checkpoints" / "arep").exists()
