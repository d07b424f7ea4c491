"""Gymnasium's ``AtariPreprocessing`` (no-op starts, frames skipped and the last two
max-pooled, 84 x 84 grey) done on the emulator itself: the same observations, rewards,
ends and infos, for a fifth to a quarter less of the game process's time a step.

Through Gymnasium, each emulator frame of a step is a call through its checks to ale-py's
``AtariEnv.step``, which copies the whole colour screen after every frame
(100 KB, four times a step) that the preprocessing never reads: it reads the grey screen
of the last two frames from the emulator itself. Here a step calls the emulator's ``act``
for each frame and reads only those two screens. On this 2-core machine a picture run's
four game processes took 0.56 of its 2 cores (docs/performance.md, "Games that see,
twentieth part"), so what they save goes to the trainer.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker

NOOP = 0
"""The index of NOOP in an ALE game's action set (checked, as Gymnasium checks it)."""


def fits(env: gymnasium.Env[Any, Any]) -> bool:
    """True for ale-py's environment as ``gymnasium.make`` returns it (under its order and
    type checks only: a wrapper that does something each step, a user's or a time limit,
    would be skipped here), with a fixed frame skip of its own and discrete actions (the
    ``NoFrameskip-v4`` ids, ``ALE/...-v5``): what :class:`AleFrames` steps. A stochastic
    skip (``Pong-v4``) or a continuous joystick keeps Gymnasium's wrapper."""
    layer = env
    while isinstance(layer, gymnasium.Wrapper):
        if not isinstance(layer, OrderEnforcing | PassiveEnvChecker):
            return False
        layer = layer.env
    return (
        type(layer).__module__.startswith("ale_py")
        and isinstance(getattr(layer, "_frameskip", None), int)
        and not getattr(layer, "continuous", True)
    )


class AleFrames(gymnasium.Wrapper[Any, Any, Any, Any]):
    """``AtariPreprocessing(env, noop_max, frame_skip, screen, terminal_on_life_loss=False,
    grayscale_obs=True)`` for an ``env`` that :func:`fits`, equal step for step
    (tests/test_atari.py) and faster.

    :param frame_skip: steps of ``env`` a step here holds (each of them the id's own
        frames), the last two screens max-pooled.
    :param noop_max: no-ops at most after each reset (from 1 up, as Gymnasium draws them).
    :param screen: the side of the square grey observation.
    """

    def __init__(
        self, env: gymnasium.Env[Any, Any], frame_skip: int, noop_max: int, screen: int
    ) -> None:
        if not fits(env):
            raise ValueError("AleFrames steps ale-py's games of a fixed skip only")
        game: Any = env.unwrapped
        # Gymnasium's own refusals, so that the two wrappers take the same games.
        if frame_skip > 1 and game._frameskip != 1:
            raise ValueError("the game skips frames itself: give a frame_skip of 1")
        if noop_max > 0 and game.get_action_meanings()[NOOP] != "NOOP":
            raise ValueError("no-op starts need NOOP as the game's first action")
        import cv2  # here, not at the top: a game of vectors does not load OpenCV

        super().__init__(env)
        self._resize = cv2.resize
        self._area = cv2.INTER_AREA
        self._game = game
        self._ale = game.ale
        self._own_skip = int(game._frameskip)
        self._frame_skip = frame_skip
        self._noop_max = noop_max
        self._screen = screen
        height, width = (int(side) for side in self._ale.getScreenDims())
        self._newest = np.zeros((height, width), np.uint8)
        self._previous = np.zeros((height, width), np.uint8)
        self.observation_space = gymnasium.spaces.Box(0, 255, (screen, screen), np.uint8)

    def _env_step(self, action: Any) -> tuple[float, bool, bool]:
        """What ``AtariEnv.step`` does to the emulator (its action's frames, its ends),
        without the colour screen it copies."""
        ale_action = self._game._action_set[action]
        reward = 0.0
        for _ in range(self._own_skip):
            reward += self._ale.act(ale_action)  # full strength: a discrete action
        return reward, self._ale.game_over(with_truncation=False), self._ale.game_truncated()

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        total, terminated, truncated = 0.0, False, False
        for frame in range(self._frame_skip):
            reward, terminated, truncated = self._env_step(action)
            total += reward
            if terminated or truncated:
                break  # the screens are left as they were, as Gymnasium leaves them
            if frame == self._frame_skip - 2:
                self._ale.getScreenGrayscale(self._previous)
            elif frame == self._frame_skip - 1:
                self._ale.getScreenGrayscale(self._newest)
        return self._observation(), total, terminated, truncated, self._game._get_info()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        _, info = self.env.reset(seed=seed, options=options)
        noops = self._game.np_random.integers(1, self._noop_max + 1) if self._noop_max > 0 else 0
        for _ in range(noops):
            _, terminated, truncated = self._env_step(NOOP)
            info.update(self._game._get_info())
            if terminated or truncated:
                _, info = self.env.reset(seed=seed, options=options)
        self._ale.getScreenGrayscale(self._newest)
        self._previous.fill(0)
        return self._observation(), info

    def _observation(self) -> np.ndarray:
        if self._frame_skip > 1:
            np.maximum(self._newest, self._previous, out=self._newest)
        return self._resize(self._newest, (self._screen, self._screen), interpolation=self._area)
