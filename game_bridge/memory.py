"""A bot's memory: one GRU layer's step in numpy, and a player that keeps each agent's state.

A recurrent policy (``lander train --memory N``) carries N numbers per agent from one
step to the next. The numbers are torch's ``GRUCell``'s (gates in the order reset,
update, new; the new gate's hidden part multiplied by the reset gate after its bias), so a
bot file's ``memory`` section is that cell's four arrays as they are, and the trainer's
rollouts, the numpy bot runner, the ONNX file and the engine's players compute the same
state (docs/bot-format.md, "Memory").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


def sigmoid(x: np.ndarray) -> np.ndarray:
    """The logistic function, without overflow warnings for large negative inputs."""
    return 0.5 * (np.tanh(0.5 * x) + 1.0)


@dataclass(frozen=True)
class GruWeights:
    """One GRU layer's arrays, as torch's ``GRUCell`` holds them.

    :param weight_ih: ``[3N, inputs]``, the rows of the reset, update and new gates.
    :param weight_hh: ``[3N, N]``.
    :param bias_ih: ``[3N]``.
    :param bias_hh: ``[3N]``.
    """

    weight_ih: np.ndarray
    weight_hh: np.ndarray
    bias_ih: np.ndarray
    bias_hh: np.ndarray

    @property
    def units(self) -> int:
        """N, the numbers of state each agent keeps."""
        return int(self.weight_hh.shape[1])

    def step(self, x: np.ndarray, hidden: np.ndarray) -> np.ndarray:
        """The state after input ``x`` (a batch of rows) from state ``hidden``."""
        return gru_step(x @ self.weight_ih.T + self.bias_ih, hidden, self.weight_hh, self.bias_hh)


def gru_step(
    gates_in: np.ndarray, hidden: np.ndarray, weight_hh: np.ndarray, bias_hh: np.ndarray
) -> np.ndarray:
    """torch's ``GRUCell`` from its input's share of the gates (``x @ W_ih.T + b_ih``)."""
    units = hidden.shape[1]
    gates_h = hidden @ weight_hh.T + bias_hh
    reset = sigmoid(gates_in[:, :units] + gates_h[:, :units])
    update = sigmoid(gates_in[:, units : 2 * units] + gates_h[:, units : 2 * units])
    new = np.tanh(gates_in[:, 2 * units :] + reset * gates_h[:, 2 * units :])
    return new + update * (hidden - new)


class RecurrentPlayer:
    """A recurrent bot played step by step: each agent's state kept between calls, and
    set to zeros where a player says an episode starts (``frame_stack.start_episodes``),
    so a bot plays every episode as it was trained to, from an empty memory.

    :param act: the bot's actions from a batch of observations and the states they are
        seen with; returns the actions and the states after them.
    :param units: the numbers of state each agent keeps.
    """

    def __init__(
        self,
        act: Callable[[Any, np.ndarray], tuple[np.ndarray, np.ndarray]],
        units: int,
    ) -> None:
        self._act = act
        self.units = units
        self.state: np.ndarray | None = None
        """``[agents, units]`` after the last step; None before the first."""
        self._starts: np.ndarray | None = None

    def start(self, agents: np.ndarray | None = None) -> None:
        """Mark the agents whose next observation is an episode's first (a mask); None:
        every agent (a new evaluation, a reset)."""
        if agents is None:
            self.state, self._starts = None, None
            return
        mask = np.asarray(agents, dtype=bool)
        self._starts = mask if self._starts is None else self._starts | mask

    def __call__(self, obs: Any) -> np.ndarray:
        agents = _agents(obs)
        if self.state is None or len(self.state) != agents:
            self.state = np.zeros((agents, self.units))
        elif self._starts is not None:
            self.state[self._starts] = 0.0
        self._starts = None
        actions, self.state = self._act(obs, self.state)
        return actions


def _agents(obs: Any) -> int:
    """The batch's size: rows of an array, or of a dict's first key."""
    if isinstance(obs, dict):
        return len(np.asarray(next(iter(obs.values()))))
    array = np.asarray(obs)
    return 1 if array.ndim == 1 else len(array)
