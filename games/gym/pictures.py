"""Pictures from a Gymnasium game that is not ALE's, as the learner sees them, and the
action repeat of every ``gym:`` game (``--action-repeat``: the game's steps a step of the
learner's, their rewards summed).

A game that shows one picture (a uint8 ``H x W x C`` or ``H x W`` Box, CarRacing's 96 x
96 colour frame) is played as RL Zoo plays CarRacing-v3 and as the pixel-control field
plays its games (DrQ, CURL and Dreamer repeat each action 2 to 8 times): each action held
for :data:`PICTURE_REPEAT` of the game's steps, the frame grey and at most
:data:`PICTURE_SIDE` a side, the last :data:`PICTURE_STACK` frames stacked, channels
first, so the policy sees motion that one frame does not show. The rewards of the held
steps are summed, so an episode's return is the game's own. ALE's games have the Atari
preprocessing of ``games/gym/atari.py`` instead; a dictionary of pictures and vectors is
served as it comes (held actions only).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

PICTURE_REPEAT = 2
"""A picture game's steps per step of the learner where ``--action-repeat`` is not given:
RL Zoo's CarRacing-v3 entry; the game's 50 steps a second are more decisions than a
policy from pictures needs, and each decision costs a pass of the encoder."""
PICTURE_SIDE = 64
"""The longest side a picture is shrunk to (RL Zoo's CarRacing-v3 entry: 96 -> 64)."""
PICTURE_STACK = 2
"""Frames stacked into one observation (RL Zoo's CarRacing-v3 entry)."""


class RepeatAction(gymnasium.Wrapper[Any, Any, Any, Any]):
    """Each action held for ``repeat`` of the game's steps (fewer where the episode ends
    first), their rewards summed, the last step's observation and info returned."""

    def __init__(self, env: gymnasium.Env[Any, Any], repeat: int) -> None:
        super().__init__(env)
        self.repeat = repeat

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        total = 0.0
        for _ in range(self.repeat):
            obs, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        return obs, total, bool(terminated), bool(truncated), info


def is_picture(space: spaces.Space[Any]) -> bool:
    """True for one picture, channels last: a uint8 Box of ``H x W`` or ``H x W x C`` (C
    at most 4) whose sides are at least 8."""
    if not isinstance(space, spaces.Box) or space.dtype != np.uint8:
        return False
    shape = space.shape
    if len(shape) == 3 and shape[2] > 4:
        return False
    return len(shape) in (2, 3) and min(shape[:2]) >= 8


def default_repeat(env: gymnasium.Env[Any, Any]) -> int:
    """The steps of the game a step of the learner holds where the user names none: a
    picture game's :data:`PICTURE_REPEAT`, one for a game of vectors."""
    return PICTURE_REPEAT if is_picture(env.observation_space) else 1


def preprocess(env: gymnasium.Env[Any, Any], held: int) -> gymnasium.Env[Any, Any]:
    """``env`` (not ALE's) as the learner sees it: its actions held ``held`` steps (the
    caller's choice, :func:`default_repeat` where the user names none), and one picture
    grey, shrunk and stacked (see the module's docstring; ``(PICTURE_STACK, side, side)``
    uint8, oldest frame first)."""
    from gymnasium.wrappers import FrameStackObservation, GrayscaleObservation, ResizeObservation

    picture = is_picture(env.observation_space)
    wrapped: gymnasium.Env[Any, Any] = RepeatAction(env, held) if held > 1 else env
    if not picture:
        return wrapped
    shape = env.observation_space.shape
    assert shape is not None
    if len(shape) == 3 and shape[2] == 3:
        wrapped = GrayscaleObservation(wrapped, keep_dim=False)
    elif len(shape) == 3:
        return wrapped  # a picture of 1, 2 or 4 channels (depth, alpha) is served as it comes
    height, width = shape[:2]
    if max(height, width) > PICTURE_SIDE:
        scale = PICTURE_SIDE / max(height, width)
        side = (max(1, round(height * scale)), max(1, round(width * scale)))
        wrapped = ResizeObservation(wrapped, side)
    return FrameStackObservation(wrapped, PICTURE_STACK, padding_type="reset")
