"""PPO's heads: the update-time forward over them, and a categorical head masked by the
moves a game allows.

:func:`evaluate_actions`: values, log-probabilities of the rollout's actions and entropies,
the distribution written out (no ``torch.distributions`` object); the same numbers as
``ActorCriticPolicy.evaluate_actions`` (tests/test_lean_ppo.py) for a sixth less of the
update's time; the recurrent update feeds it the GRU's output beside the observation
(training/ppo/recurrent_update.py).

:class:`MaskedPolicy`: a policy that never picks a move its game forbids. The game sends
the moves it allows as the observation key ``action_mask`` (PettingZoo's turn-based games
do), and the logits of the others are pushed to a value no sample or argmax reaches, in
training (the rollout's samples and the update's log-probabilities and entropy, both of the
masked distribution), in evaluation and in the exported bot (``action.mask`` in
docs/bot-format.md), so a bot plays only legal moves. The mask itself is also an input of
the network (what is allowed tells where the game stands); it is never normalised
(``training/envs/environments.py``).
"""

from __future__ import annotations

from typing import Any

import torch
from gymnasium import spaces
from stable_baselines3.common.distributions import CategoricalDistribution, Distribution
from stable_baselines3.common.policies import ActorCriticPolicy, MultiInputActorCriticPolicy

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


MASK_KEY = "action_mask"
"""The observation key of the allowed moves (1: allowed), one per choice of the action."""
FORBIDDEN = -1e8
"""The logit of a forbidden move: its probability is 0 in float32, its log-probability
finite (no nan in a loss)."""


def masks_actions(observation_space: spaces.Space[Any], action_space: spaces.Space[Any]) -> bool:
    """True where a game sends the allowed moves of a discrete action with its observation."""
    if not isinstance(observation_space, spaces.Dict) or MASK_KEY not in observation_space.spaces:
        return False
    mask = observation_space.spaces[MASK_KEY]
    return (
        isinstance(action_space, spaces.Discrete)
        and isinstance(mask, spaces.Box)
        and mask.shape == (int(action_space.n),)
    )


class MaskedPolicy(MultiInputActorCriticPolicy):
    """SB3's policy of several observation keys, its categorical masked by ``action_mask``.

    Every path to a distribution (``forward``, ``evaluate_actions``, ``get_distribution``)
    keeps its batch's mask first; the logits the latent gives are masked by it.
    """

    _mask: torch.Tensor | None = None

    def _keep_mask(self, obs: Any) -> None:
        self._mask = obs[MASK_KEY] > 0.5 if isinstance(obs, dict) else None

    def forward(self, obs: Any, deterministic: bool = False) -> Any:
        self._keep_mask(obs)
        return super().forward(obs, deterministic)

    def evaluate_actions(self, obs: Any, actions: torch.Tensor) -> Any:
        self._keep_mask(obs)
        return super().evaluate_actions(obs, actions)

    def get_distribution(self, obs: Any) -> Distribution:
        self._keep_mask(obs)
        return super().get_distribution(obs)

    def _get_action_dist_from_latent(self, latent_pi: torch.Tensor) -> Distribution:
        distribution = super()._get_action_dist_from_latent(latent_pi)
        if self._mask is not None and isinstance(distribution, CategoricalDistribution):
            logits = distribution.distribution.logits
            allowed = self._mask.reshape(logits.shape)
            # A row with no move allowed (an agent not to move) keeps every move: its action
            # goes unused, and a categorical of no choice is no distribution.
            allowed = allowed | ~allowed.any(dim=1, keepdim=True)
            distribution.proba_distribution(logits.masked_fill(~allowed, FORBIDDEN))
        return distribution
