"""A policy with memory (``--memory N``): a GRU of N units between the observation and SB3's
actor and critic.

Each step the GRU reads the (normalised) observation and the state it left the step
before; the MLPs above it read the observation beside the new state. The observation
passes the memory by (a skip), so what a feed-forward policy learns from one observation
it learns as fast here, and the state is left to hold only what the observation lacks:
where the target was before it was hidden, what the other side did.

A run's critic keeps a GRU of its own (``critic_memory``, RecurrentPPO's default), trained
by the value loss alone, and the actor's is trained by the policy's loss alone: a game
that hides things is one where a value without memory cannot tell states apart, and its
advantages then lead the policy astray (on the glimpse lander a critic reading the actor's
state peaked near 0.85 and fell back to 0.7; with its own it holds 0.95-1.00,
docs/performance.md, "Bots that remember"). A bot plays the actor alone, so it carries
one state per agent. Checkpoints from before (``critic_memory`` False) keep their shared
GRU, which the critic reads without training.

The state is reset to zeros at every episode's start, in the rollout, the update and
every player (``game_bridge/memory.py``). PPO's update (``training/ppo/recurrent_update.py``)
replays each sequence from the state its rollout stored at the sequence's start.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np
import torch
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import MlpExtractor
from torch import nn

from game_bridge.memory import GruWeights, RecurrentPlayer


class RecurrentActorCritic(ActorCriticPolicy):
    """SB3's actor-critic with a GRU of ``memory`` units under its MLPs.

    :param memory: the units of state each agent keeps.
    """

    def __init__(
        self,
        observation_space: gymnasium.spaces.Space[Any],
        action_space: gymnasium.spaces.Space[Any],
        lr_schedule: Any,
        *args: Any,
        memory: int = 64,
        critic_memory: bool = False,
        **kwargs: Any,
    ) -> None:
        # read by _build_mlp_extractor, inside super().__init__
        self.memory, self.critic_memory = memory, critic_memory
        super().__init__(observation_space, action_space, lr_schedule, *args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        """The GRU (and the critic's, with ``critic_memory``), then SB3's MLPs over the
        features beside the state."""
        self.memory_cell = nn.GRUCell(self.features_dim, self.memory)
        if self.critic_memory:
            self.critic_cell = nn.GRUCell(self.features_dim, self.memory)
        self.mlp_extractor = MlpExtractor(
            self.features_dim + self.memory,
            net_arch=self.net_arch,
            activation_fn=self.activation_fn,
            device=self.device,
        )

    @property
    def state_width(self) -> int:
        """The state a rollout carries per agent: the actor's, then the critic's if it has
        one of its own."""
        return 2 * self.memory if self.critic_memory else self.memory

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {
            **super()._get_constructor_parameters(),
            "memory": self.memory,
            "critic_memory": self.critic_memory,
        }

    def gru_weights(self, critic: bool = False) -> GruWeights:
        """The GRU's arrays (the critic's own with ``critic``) as numpy views of its
        parameters (no copy)."""
        cell = self.critic_cell if critic else self.memory_cell
        return GruWeights(
            *(
                p.detach().cpu().numpy()
                for p in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)
            )
        )

    def unroll(
        self,
        features: torch.Tensor,
        starts: torch.Tensor,
        hidden: torch.Tensor,
        critic: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the GRU (the critic's own with ``critic``) along sequences, with gradients.

        :param features: ``[sequences, steps, features]``.
        :param starts: ``[sequences, steps]``, 1 where a step begins an episode (the
            state is zeroed before it).
        :param hidden: ``[sequences, memory]``, the state before each sequence's first step.
        :return: the MLPs' input ``[sequences, steps, features + memory]`` and the last state.
        """
        cell = self.critic_cell if critic else self.memory_cell
        gates_in = features @ cell.weight_ih.T + cell.bias_ih  # every step's at once
        keep = 1.0 - starts
        states = []
        for step in range(features.shape[1]):
            hidden = gru_step(cell, gates_in[:, step], hidden * keep[:, step, None])
            states.append(hidden)
        return torch.cat([features, torch.stack(states, dim=1)], dim=2), hidden

    def predict_value_of(self, inputs: torch.Tensor) -> np.ndarray:
        """The critic's values of MLP inputs (:meth:`unroll`'s output at one step)."""
        return self.value_net(self.mlp_extractor.forward_critic(inputs)).flatten().cpu().numpy()

    def player(
        self,
        space: gymnasium.spaces.Space[Any],
        prepare: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> RecurrentPlayer:
        """The policy as a player of its game: deterministic actions, each agent's state
        kept and reset where episodes start (``frame_stack.start_episodes``).

        :param prepare: what the observations go through first (the run's normalisation).
        """

        def act(obs: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return deterministic_step(self, space, prepare(obs) if prepare else obs, state)

        return RecurrentPlayer(act, self.memory)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise _stateless()

    def _predict(self, *args: Any, **kwargs: Any) -> Any:
        raise _stateless()

    def evaluate_actions(self, *args: Any, **kwargs: Any) -> Any:
        raise _stateless()

    def predict_values(self, *args: Any, **kwargs: Any) -> Any:
        raise _stateless()


def gru_step(cell: nn.GRUCell, gates_in: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
    """torch's ``GRUCell`` from its input's share of the gates (``x @ W_ih.T + b_ih``),
    written in the operators every ONNX runtime has (MatMul, Sigmoid, Tanh): the gates in the
    order reset, update, new, the new gate's hidden part times the reset gate."""
    units = hidden.shape[1]
    gates_h = hidden @ cell.weight_hh.T + cell.bias_hh
    reset = torch.sigmoid(gates_in[:, :units] + gates_h[:, :units])
    update = torch.sigmoid(gates_in[:, units : 2 * units] + gates_h[:, units : 2 * units])
    new = torch.tanh(gates_in[:, 2 * units :] + reset * gates_h[:, 2 * units :])
    return new + update * (hidden - new)


def _stateless() -> RecurrentPolicyError:
    return RecurrentPolicyError(
        "a policy with memory acts from each agent's state: play it through lander's players "
        "(scoring.model_policy, the bot file), not SB3's stateless predict"
    )


class RecurrentPolicyError(RuntimeError):
    """SB3's stateless entry points used on a policy that needs its state."""


def is_recurrent(policy: object) -> bool:
    """True for a policy with memory."""
    return isinstance(policy, RecurrentActorCritic)


def memory_of(policy: object) -> int:
    """The units of state a policy keeps per agent (0: none)."""
    return policy.memory if isinstance(policy, RecurrentActorCritic) else 0


@torch.no_grad()
def deterministic_step(
    policy: RecurrentActorCritic,
    space: gymnasium.spaces.Space[Any],
    obs: np.ndarray,
    hidden: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The policy's deterministic actions for a batch of (normalised) observations seen
    from ``hidden``, as SB3's ``predict`` gives a feed-forward policy's (the Gaussian's
    mean clipped to the bounds, the likeliest choice), and the states after them."""
    x = torch.as_tensor(np.asarray(obs), device=policy.device).float().reshape(len(hidden), -1)
    state = torch.as_tensor(hidden, device=policy.device).float()
    starts = torch.zeros((len(x), 1), device=policy.device)
    inputs, state = policy.unroll(x[:, None], starts, state)
    head = policy.action_net(policy.mlp_extractor.forward_actor(inputs[:, 0])).cpu().numpy()
    if isinstance(space, gymnasium.spaces.Box):
        actions = np.clip(head, space.low, space.high)
    else:
        actions = head.argmax(axis=1)
    return actions, state.cpu().numpy().astype(np.float64)
