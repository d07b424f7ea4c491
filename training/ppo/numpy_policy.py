"""SB3's MLP actor-critic as numpy layers over the policy's own weights (no copy).

On a CPU, lander's policies are small enough (two layers of 64 a side) that torch's
per-op dispatch, autograd bookkeeping and ``torch.tanh`` (ten times numpy's here) cost
more than the arithmetic. The rollout loop acts through :class:`NumpyActor` and the PPO
update (``training/ppo/lean_update.py``) computes its gradient through :class:`Dense`;
both read and write the torch parameters' memory, so the policy stays SB3's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy
from torch import nn

HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
_ACTIVATIONS = (nn.Tanh, nn.ReLU)


def mlp_layout(net: nn.Module) -> list[tuple[nn.Linear, bool]] | None:
    """An SB3 MLP as (linear layer, followed by tanh rather than ReLU) pairs, or None
    when it is anything else."""
    modules = list(net.children()) if isinstance(net, nn.Sequential) else [net]
    if len(modules) % 2:
        return None
    layout = []
    for linear, activation in zip(modules[::2], modules[1::2], strict=True):
        if not isinstance(linear, nn.Linear) or type(activation) not in _ACTIVATIONS:
            return None
        layout.append((linear, isinstance(activation, nn.Tanh)))
    return layout


def numpy_fits(policy: ActorCriticPolicy) -> bool:
    """True when ``policy``'s extractor and heads are what :func:`policy_stacks` writes
    out: MLPs of linear layers with tanh or ReLU, linear heads, float32 on the CPU."""
    return (
        mlp_layout(policy.mlp_extractor.policy_net) is not None
        and mlp_layout(policy.mlp_extractor.value_net) is not None
        and isinstance(policy.action_net, nn.Linear)
        and isinstance(policy.value_net, nn.Linear)
        and policy.device.type == "cpu"
        and all(p.dtype == torch.float32 for p in policy.parameters())
    )


@dataclass
class Dense:
    """One linear layer and its activation over numpy views of its weights (and, for
    the update, of their gradients)."""

    weight: np.ndarray
    bias: np.ndarray
    tanh: bool | None
    """True: tanh; False: ReLU; None: no activation (a head)."""
    weight_grad: np.ndarray | None = None
    bias_grad: np.ndarray | None = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        out = x @ self.weight.T
        out += self.bias
        if self.tanh is True:
            np.tanh(out, out=out)
        elif self.tanh is False:
            np.maximum(out, 0, out=out)
        return out

    def backward(
        self, x: np.ndarray, out: np.ndarray, grad_out: np.ndarray, need_input: bool
    ) -> Any:
        """Add this layer's weight gradients for ``grad_out`` (the gradient at its
        output ``out``, taken from input ``x``); the gradient at its input if asked."""
        assert self.weight_grad is not None and self.bias_grad is not None
        if self.tanh is True:
            grad_out = grad_out * (1 - out * out)
        elif self.tanh is False:
            grad_out = grad_out * (out > 0)
        self.weight_grad += grad_out.T @ x
        self.bias_grad += grad_out.sum(axis=0)
        return grad_out @ self.weight if need_input else None


Stack = list[Dense]
"""One MLP and its head, input to output."""


def policy_stacks(policy: ActorCriticPolicy, dense: Any = None) -> tuple[Stack, Stack]:
    """The policy's actor and critic, each its MLP then its head (:func:`numpy_fits`).

    :param dense: builds a :class:`Dense` from a linear layer and its activation (the
        update's, with gradient views); by default over the parameters' own memory.
    """

    def own(linear: nn.Linear, tanh: bool | None) -> Dense:
        return Dense(linear.weight.detach().numpy(), linear.bias.detach().numpy(), tanh)

    build = dense or own
    stacks = []
    for net, head in (
        (policy.mlp_extractor.policy_net, policy.action_net),
        (policy.mlp_extractor.value_net, policy.value_net),
    ):
        layout = mlp_layout(net)
        assert layout is not None and isinstance(head, nn.Linear)
        stacks.append([*(build(linear, tanh) for linear, tanh in layout), build(head, None)])
    return stacks[0], stacks[1]


def forward(stack: Stack, x: np.ndarray) -> list[np.ndarray]:
    """Every layer's output from ``x``; the last is the head's."""
    outputs = []
    for layer in stack:
        x = layer.forward(x)
        outputs.append(x)
    return outputs


def backward(
    stack: Stack,
    x: np.ndarray,
    outputs: list[np.ndarray],
    grad: np.ndarray,
    need_input: bool = False,
) -> np.ndarray | None:
    """Add every layer's gradients for ``grad`` at the head's output; the gradient at
    ``x`` if asked (a camera encoder below the MLP learns from it)."""
    inputs = [x, *outputs[:-1]]
    for index in range(len(stack) - 1, -1, -1):
        grad = stack[index].backward(
            inputs[index], outputs[index], grad, need_input=index > 0 or need_input
        )
    return grad if need_input else None


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-probabilities of a batch of categorical logits (each row), stable for large ones."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def gaussian_log_prob(z: np.ndarray, log_std: np.ndarray) -> np.ndarray:
    """Log-density of a diagonal Gaussian at standardised offsets ``z`` (each row)."""
    return (-0.5 * z * z - log_std - HALF_LOG_2PI).sum(axis=1)


def _output(stack: Stack, x: np.ndarray) -> np.ndarray:
    for layer in stack:
        x = layer.forward(x)
    return x


class NumpyActor:
    """Acts for the rollout loop: sampled actions, values and log-probabilities of a
    batch of observations, as ``ActorCriticPolicy.forward`` gives them. The noise and
    categorical draws come from torch's generator, so a run's seed means what it did.

    :param policy: read at every call (its weights may change between calls, in place).
    :param space: its action space (Box or Discrete).
    """

    def __init__(self, policy: ActorCriticPolicy, space: spaces.Space[Any]) -> None:
        self.actor, self.critic = policy_stacks(policy)
        self.continuous = isinstance(space, spaces.Box)
        if self.continuous:
            self.log_std = policy.log_std.detach().numpy()

    def act(
        self, obs: np.ndarray, critic_obs: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:param critic_obs: what the critic reads, where it is not ``obs`` (a critic
        with a memory of its own)."""
        obs = np.asarray(obs, dtype=np.float32)
        head = _output(self.actor, obs)
        values = self.values(obs if critic_obs is None else critic_obs)
        if self.continuous:
            noise = torch.randn(head.shape).numpy()
            actions = head + noise * np.exp(self.log_std)
            return actions, values, gaussian_log_prob(noise, self.log_std)
        log_p = log_softmax(head)
        chosen = torch.multinomial(torch.from_numpy(np.exp(log_p)), 1).numpy()[:, 0]
        return chosen, values, log_p[np.arange(len(chosen)), chosen]

    def values(self, obs: np.ndarray) -> np.ndarray:
        """The critic's estimate of a batch of observations."""
        return _output(self.critic, np.asarray(obs, dtype=np.float32))[:, 0]
