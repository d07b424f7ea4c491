"""Frame stacking of camera keys: each agent's last N frames, joined along the channel
axis, oldest first, so a policy sees motion a single frame cannot show.

One class serves the trainer's VecEnv wrapper (``training.envs.environments.CameraFrameStack``)
and every player of a bot or model (``lander play``, ``lander eval``, a game's ``--bot``),
so a stacked policy sees in play exactly what it saw in training. At an episode's first step
the stack holds N copies of its first frame (gymnasium's ``FrameStackObservation`` with
``padding_type="reset"``): no black frames, no motion that did not happen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

MAX_FRAMES = 16
"""The most frames a stack may hold: past this a camera policy is a recurrent one."""

Observation = Any
"""A batch of observations: an array with agents first, or a dict of such arrays."""


class FrameStack:
    """The last ``frames`` frames of each agent's camera keys.

    :param frames: frames a stacked observation holds (1 passes observations through).
    :param keys: the camera keys of a dict observation; an observation that is an array
        (``[agents, C, H, W]``) is a camera's frames itself.
    """

    def __init__(self, frames: int, keys: Sequence[str] = ()) -> None:
        if not 1 <= frames <= MAX_FRAMES:
            raise ValueError(f"a frame stack holds 1 to {MAX_FRAMES} frames, not {frames}")
        self.frames = frames
        self.keys = tuple(keys)
        self._stacks: dict[str, np.ndarray] = {}
        """Per key ``[agents, frames, C, H, W]``; empty until the first observation."""
        self._starts: np.ndarray | None = None

    def start(self, agents: np.ndarray | None = None) -> None:
        """Mark the agents whose next observation is an episode's first frame (a mask);
        None: every agent (a new evaluation, a reset)."""
        if agents is None:
            self._stacks = {}
            self._starts = None
        else:
            mask = np.asarray(agents, dtype=bool)
            self._starts = mask if self._starts is None else self._starts | mask

    def __call__(self, obs: Observation) -> Observation:
        """Push each agent's newest frame and return the stacked observation."""
        if self.frames == 1:
            return obs
        stacked: Observation
        if isinstance(obs, dict):
            stacked = dict(obs)
            for key in self.keys:
                stacked[key] = self._push(key, np.asarray(obs[key]))
        else:
            stacked = self._push("", np.asarray(obs))
        self._starts = None
        return stacked

    def with_last(self, obs: Observation, agent: int) -> Observation:
        """One agent's observation ``obs`` stacked after its previous frames, the stack left
        as it was: the terminal observation of an episode whose next frame starts another."""
        if self.frames == 1:
            return obs
        if not isinstance(obs, dict):
            return self._joined(self._stacks[""][agent], np.asarray(obs))
        stacked = dict(obs)
        for key in self.keys:
            stacked[key] = self._joined(self._stacks[key][agent], np.asarray(obs[key]))
        return stacked

    def _push(self, key: str, frames: np.ndarray) -> np.ndarray:
        stack = self._stacks.get(key)
        if stack is None or stack.shape[0] != len(frames) or stack.shape[2:] != frames.shape[1:]:
            stack = np.repeat(frames[:, None], self.frames, axis=1)
        else:
            stack = np.roll(stack, -1, axis=1)
            stack[:, -1] = frames
            if self._starts is not None:
                stack[self._starts] = frames[self._starts, None]
        self._stacks[key] = stack
        return stack.reshape(len(frames), -1, *frames.shape[2:])

    def _joined(self, previous: np.ndarray, frame: np.ndarray) -> np.ndarray:
        return np.concatenate([previous[1:], frame[None]]).reshape(-1, *frame.shape[1:])


class StackedPolicy:
    """A policy trained on stacked frames, played on the game's single frames: it keeps
    the stack itself; a player tells it where episodes start (:func:`start_episodes`).

    :param policy: the policy of stacked observations.
    :param stack: the stack it keeps.
    """

    def __init__(self, policy: Callable[[Observation], np.ndarray], stack: FrameStack) -> None:
        self.policy = policy
        self.stack = stack

    def __call__(self, obs: Observation) -> np.ndarray:
        return self.policy(self.stack(obs))

    def start(self, agents: np.ndarray | None = None) -> None:
        """Mark where episodes start (:meth:`FrameStack.start`)."""
        self.stack.start(agents)


def start_episodes(policy: object, agents: np.ndarray | None = None) -> None:
    """Tell a policy that keeps something of past steps (frames, a recurrent bot's state:
    ``game_bridge/memory.py``) where episodes start (a mask of agents, or None for all); a
    policy that keeps nothing ignores it. Players call this at their first step and after
    every step that ended episodes."""
    start = getattr(policy, "start", None)
    if callable(start):
        start(agents)
