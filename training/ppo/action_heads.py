"""PPO's update-time forward over the heads: values, log-probabilities of the rollout's
actions and entropies, the distribution written out (no ``torch.distributions`` object).

The same numbers as ``ActorCriticPolicy.evaluate_actions`` (tests/test_lean_ppo.py) for a
sixth less of the update's time; the recurrent update feeds it the GRU's output beside the
observation (training/ppo/recurrent_update.py).
"""

from __future__ import annotations

from typing import Any

import torch
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy

from training.ppo.numpy_policy import HALF_LOG_2PI


def evaluate_actions(
    policy: ActorCriticPolicy,
    space: spaces.Space[Any],
    obs: torch.Tensor,
    actions: torch.Tensor,
    critic_obs: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Values, log-probabilities of ``actions`` and entropies, with gradients, as
    ``ActorCriticPolicy.evaluate_actions`` computes them for a flat observation.

    :param critic_obs: what the critic reads instead of ``obs`` (the same values with
        another gradient path: a memory's state the value loss must not train), or None.
    """
    if critic_obs is None:
        latent_pi, latent_vf = policy.mlp_extractor(obs.float())
    else:
        latent_pi = policy.mlp_extractor.forward_actor(obs.float())
        latent_vf = policy.mlp_extractor.forward_critic(critic_obs.float())
    head = policy.action_net(latent_pi)
    if isinstance(space, spaces.Box):
        log_std = policy.log_std
        z = (actions - head) * torch.exp(-log_std)
        log_prob = (-0.5 * z.square() - log_std - HALF_LOG_2PI).sum(dim=1)
        entropy = (0.5 + HALF_LOG_2PI + log_std).sum().expand(head.shape[0])
    else:
        log_p = torch.log_softmax(head, dim=1)
        log_prob = log_p.gather(1, actions.long().reshape(-1, 1)).flatten()
        entropy = -(log_p.exp() * log_p).sum(dim=1)
    return policy.value_net(latent_vf), log_prob, entropy
