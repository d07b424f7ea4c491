"""What every lean rollout loop does with one vectorised step: play it (an :class:`Actor`:
one forward pass for all envs, its distribution written out, in numpy over the policy's
own weights where ``numpy_policy.py`` or ``camera_update.py`` write the policy out, else
by its own torch layers, a CNN camera policy's frames handed over channels last while
still bytes), write it into SB3's buffer in place, and find the episodes a time limit
cut, to bootstrap them from their last observation (the feed-forward loop in
``lean_ppo.py``, the loop of a policy with memory in ``recurrent_update.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import FlattenExtractor
from stable_baselines3.common.utils import obs_as_tensor

from training.ppo.camera_policy import CameraExtractor
from training.ppo.camera_update import CameraActor
from training.ppo.numpy_policy import HALF_LOG_2PI, NumpyActor, numpy_fits


def store_step(
    storage: RolloutBuffer,
    obs: Any,
    actions: np.ndarray,
    rewards: np.ndarray,
    starts: np.ndarray,
    values: np.ndarray,
    log_probs: np.ndarray,
) -> int:
    """Write one step of every env at the buffer's position and advance it; its index.
    ``obs`` is an array, or a dict of arrays by key for a buffer of several keys."""
    position = storage.pos
    if isinstance(storage.observations, dict):
        for key, stored in storage.observations.items():
            stored[position] = obs[key]
    else:
        storage.observations[position] = obs
    storage.actions[position] = actions.reshape(storage.actions[0].shape)
    storage.rewards[position] = rewards
    storage.episode_starts[position] = starts
    storage.values[position] = values
    storage.log_probs[position] = log_probs
    storage.pos += 1
    storage.full = storage.pos == storage.buffer_size
    return position


def truncated(dones: np.ndarray, infos: list[dict[str, Any]]) -> tuple[list[int], Any]:
    """The envs whose episode a time limit (or a restarted game) cut this step, and their
    last observations stacked (by key for observations of several keys): what SB3 #633
    bootstraps from (empty when none)."""
    cut = [
        (i, infos[i]["terminal_observation"])
        for i in np.flatnonzero(dones).tolist()
        if infos[i].get("TimeLimit.truncated", False)
        and infos[i].get("terminal_observation") is not None
    ]
    if not cut:
        return [], np.zeros(0)
    last = [obs for _, obs in cut]
    if isinstance(last[0], dict):
        return [i for i, _ in cut], {key: np.stack([o[key] for o in last]) for key in last[0]}
    return [i for i, _ in cut], np.stack(last)


class Actor(Protocol):
    """Actions, values and log-probabilities of a batch of observations; values alone."""

    def act(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...
    def values(self, obs: np.ndarray) -> np.ndarray: ...


def make_actor(policy: ActorCriticPolicy, space: spaces.Space[Any], numpy_camera: bool) -> Actor:
    """What plays a rollout: numpy over the policy's own weights where it writes the
    policy out (a third of torch's time per step here; a camera policy's where
    ``numpy_camera``, :meth:`LeanPPO.camera_rollouts`), else torch."""
    if numpy_camera:
        return CameraActor(policy, space)
    if isinstance(policy.features_extractor, FlattenExtractor) and numpy_fits(policy):
        return NumpyActor(policy, space)
    return TorchActor(policy, space)


@dataclass
class TorchActor:
    """The policy's own torch layers, its distribution written out."""

    policy: ActorCriticPolicy
    space: spaces.Space[Any]

    def act(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return _act(self.policy, self.space, obs)

    def values(self, obs: np.ndarray) -> np.ndarray:
        return _values(self.policy, obs)


def _features(policy: ActorCriticPolicy, obs: Any) -> torch.Tensor:
    """What the heads read: a flat policy's observations as they are (its extractor only
    flattens vectors), else its own extractor's output, a camera key's frames handed over
    channels last while still bytes where a CNN reads them so (as the update's buffer
    does)."""
    extractor = policy.features_extractor
    if isinstance(extractor, FlattenExtractor):
        return torch.as_tensor(obs, device=policy.device).float()
    tensors = obs_as_tensor(obs, policy.device)
    if isinstance(extractor, CameraExtractor):
        tensors = extractor.lay_out(tensors)
    features = policy.extract_features(tensors)
    assert isinstance(features, torch.Tensor)  # one extractor, shared by the heads
    return features


@torch.no_grad()
def _act(
    policy: ActorCriticPolicy, space: spaces.Space[Any], obs: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sampled actions, values and log-probabilities of a batch of observations, in one
    forward pass (the policy's own layers, its distribution written out)."""
    features = _features(policy, obs)
    latent_pi, latent_vf = policy.mlp_extractor(features)
    values = policy.value_net(latent_vf).flatten()
    head = policy.action_net(latent_pi)
    if isinstance(space, spaces.Box):
        log_std = policy.log_std
        noise = torch.randn_like(head)
        actions = head + noise * log_std.exp()
        log_probs = (-0.5 * noise.square() - log_std - HALF_LOG_2PI).sum(dim=1)
    else:
        log_p = torch.log_softmax(head, dim=1)
        actions = torch.multinomial(log_p.exp(), 1)
        log_probs = log_p.gather(1, actions).flatten()
        actions = actions.flatten()
    return actions.cpu().numpy(), values.cpu().numpy(), log_probs.cpu().numpy()


@torch.no_grad()
def _values(policy: ActorCriticPolicy, obs: np.ndarray) -> np.ndarray:
    """The value head's estimate of a batch of observations."""
    features = _features(policy, obs)
    return policy.value_net(policy.mlp_extractor.forward_critic(features)).flatten().cpu().numpy()
