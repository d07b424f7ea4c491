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

:class:`ReturnScale`: a value head that learns returns over their running spread
(``--normalize-returns``, Sample Factory's ``normalize_returns``) and answers in returns.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.distributions import CategoricalDistribution, Distribution
from stable_baselines3.common.policies import (
    ActorCriticCnnPolicy,
    ActorCriticPolicy,
    MultiInputActorCriticPolicy,
)
from stable_baselines3.common.type_aliases import Schedule
from torch import nn

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


def merge_moments(
    seen_mean: torch.Tensor,
    seen_var: torch.Tensor,
    seen: torch.Tensor,
    mean: torch.Tensor,
    var: torch.Tensor,
    rows: int,
) -> None:
    """Merge a batch's mean and variance (of ``rows``) into running statistics kept as buffers,
    in place: Chan's parallel update, as Sample Factory's running mean and std. Both running
    normalizations keep them: :class:`ReturnScale` and camera_policy's ``PixelNormalization``."""
    with torch.no_grad():
        before = seen.item()
        both = before + rows
        delta = mean - seen_mean
        merged = (seen_var * before + var * rows) + delta**2 * (before * rows / both)
        seen_mean.add_(delta * (rows / both))
        seen_var.copy_(merged / both)
        seen.fill_(both)


RETURN_CLIP = 5.0
"""How many spreads from their running mean a normalized return may lie (Sample Factory's)."""
RETURN_EPSILON = 1e-5
"""Added to the returns' variance before its root (Sample Factory's)."""


class ReturnScale(nn.Module):
    """A value head that learns each return less the returns' running mean, over their running
    spread (Sample Factory's ``normalize_returns``, on in its Atari defaults), but answers in
    returns: whatever reads ``value_net`` (a rollout's values, a cut game's bootstrap, GAE)
    reads returns as before. Early in a game of rare rewards its returns are small, and the
    value loss's share of a shared encoder's gradient with them; normalized, it is not. The
    statistics are refitted after each rollout (:func:`refit_returns`), never by the
    gradient; the update's value loss is the normalized one (:func:`normalized_value_loss`).
    """

    def __init__(self, head: nn.Module) -> None:
        super().__init__()
        self.head = head
        self.seen_mean: torch.Tensor
        self.seen_var: torch.Tensor
        self.seen: torch.Tensor
        # As Sample Factory starts: a mean of 0 and a variance of 1, seen once.
        self.register_buffer("seen_mean", torch.zeros((), dtype=torch.float64))
        self.register_buffer("seen_var", torch.ones((), dtype=torch.float64))
        self.register_buffer("seen", torch.ones((), dtype=torch.float64))

    def scale(self) -> float:
        """The returns' running spread."""
        return float(torch.sqrt(self.seen_var + RETURN_EPSILON))

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        spread = torch.sqrt(self.seen_var + RETURN_EPSILON).to(latent.dtype)
        return self.head(latent) * spread + self.seen_mean.to(latent.dtype)

    def refit(self, returns: np.ndarray) -> np.ndarray:
        """Add a rollout's returns to the statistics (Chan's parallel update, as Sample
        Factory's) and give them back within :data:`RETURN_CLIP` spreads of the new mean."""
        values = torch.from_numpy(np.asarray(returns, dtype=np.float64)).flatten()
        var = values.var() if values.numel() > 1 else torch.zeros((), dtype=torch.float64)
        merge_moments(self.seen_mean, self.seen_var, self.seen, values.mean(), var, values.numel())
        centre, reach = float(self.seen_mean), RETURN_CLIP * self.scale()
        return np.clip(returns, centre - reach, centre + reach)


class ReturnNormalizedCnnPolicy(ActorCriticCnnPolicy):
    """SB3's policy for a lone camera, its value head a :class:`ReturnScale` (built around
    the same linear layer, so the optimizer and the initialization are SB3's)."""

    def _build(self, lr_schedule: Schedule) -> None:
        super()._build(lr_schedule)
        self.value_net = ReturnScale(self.value_net)  # type: ignore[assignment]  # SB3 says Linear


def refit_returns(policy: ActorCriticPolicy, buffer: RolloutBuffer) -> None:
    """Refit ``policy``'s :class:`ReturnScale` (if it has one) to a collected rollout's
    returns, clipping them as Sample Factory clips its normalized returns."""
    head = policy.value_net
    if isinstance(head, ReturnScale):
        buffer.returns[:] = head.refit(buffer.returns)


@contextmanager
def normalized_value_loss(model: PPO) -> Iterator[None]:
    """SB3's update with the value loss's weight over the returns' variance: its
    ``(return - value)^2`` is then ``((return - mean) / spread - head)^2``, the normalized
    loss Sample Factory minimizes (the same gradient, not an approximation)."""
    head = model.policy.value_net
    if not isinstance(head, ReturnScale):
        yield
        return
    weight = model.vf_coef
    model.vf_coef = weight / head.scale() ** 2
    try:
        yield
    finally:
        model.vf_coef = weight
