"""What every lean rollout loop does with one vectorised step: play it (an :class:`Actor`:
one forward pass for all envs, its distribution written out, in numpy over the policy's
own weights where ``numpy_policy.py`` or ``camera_update.py`` write the policy out, else
by its own torch layers, a CNN camera policy's frames handed over channels last while
still bytes), write it into SB3's buffer in place, and find the episodes a time limit
cut, to bootstrap them from their last observation (the feed-forward loop in
``lean_ppo.py``, the loop of a policy with memory in ``recurrent_update.py``); and the
feed-forward loop with the games stepped in halves (:func:`play_in_halves`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import FlattenExtractor
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

from training.ppo.camera_policy import CameraExtractor
from training.ppo.camera_update import CameraActor
from training.ppo.numpy_policy import HALF_LOG_2PI, NumpyActor, numpy_fits


@dataclass
class Played:
    """What one rollout's play left: where the games are, the values to bootstrap the
    rollout's end from, whether all its steps were played, and (played ahead) each
    step's rewards, dones and infos for the callbacks."""

    obs: np.ndarray
    dones: np.ndarray
    last_values: np.ndarray
    whole: bool
    steps: list[tuple[np.ndarray, np.ndarray, list[dict[str, Any]]]] = field(default_factory=list)


StepDone = Callable[[np.ndarray, np.ndarray, list[dict[str, Any]]], bool]
"""What a loop calls after each vectorised step (SB3's callbacks); False stops the rollout."""


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


def store_bootstrapped(
    storage: RolloutBuffer,
    actor: Actor,
    gamma: float,
    obs: Any,
    acted: tuple[np.ndarray, np.ndarray, np.ndarray],
    step: tuple[np.ndarray, np.ndarray, list[dict[str, Any]], np.ndarray],
) -> None:
    """Store one played step of the feed-forward loops, its episodes a time limit cut
    given the discounted value of where they were cut (SB3 #633) first.

    :param acted: the actions, values and log-probabilities ``obs`` was played with.
    :param step: the step's rewards (bootstrapped in place), dones, infos, and the
        episode starts ``obs`` began.
    """
    rewards, dones, infos, starts = step
    cut, last = truncated(dones, infos)
    if cut:
        rewards[cut] += gamma * actor.values(last)
    actions, values, log_probs = acted
    store_step(storage, obs, actions, rewards, starts, values, log_probs)


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


class Halves(Protocol):
    """A run's games in two halves, each sent its actions and read on its own, and a whole
    step of every env given back through the env's wrappers once both have replied
    (``training/envs/half_steps.py``)."""

    env: VecEnv
    rows: tuple[slice, slice]

    def send(self, half: int, actions: np.ndarray) -> None: ...
    def receive(self, half: int) -> Any: ...
    def whole_step(self) -> VecEnvStepReturn: ...


def _rows(obs: Any, rows: slice) -> Any:
    return {key: value[rows] for key, value in obs.items()} if isinstance(obs, dict) else obs[rows]


def play_in_halves(
    start: tuple[Any, np.ndarray],
    actor: Actor,
    halves: Halves,
    storage: RolloutBuffer,
    n_steps: int,
    step_done: StepDone,
    gamma: float,
    bounds: tuple[np.ndarray, np.ndarray] | None,
) -> Played:
    """The lean loop of ``lean_ppo.py`` with the games stepped in halves: each half is sent
    its next actions as soon as it has replied, so the forward pass for one half (and the
    wrappers, callbacks and buffer of the whole step) runs while the other half's games
    step. Every step stored is what the one-batch loop stores: the policy's own values and
    log-probabilities, rewards through the wrappers, truncations bootstrapped.

    :param start: the observations and episode starts where the last rollout left them.
    :param bounds: a Box action space's (low, high), which the games' actions are clipped
        to (the buffer keeps them as sampled); None for discrete actions.
    """
    storage.reset()
    obs, starts = start

    def act(half: int, seen: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        acted = actor.act(seen)
        halves.send(half, np.clip(acted[0], *bounds) if bounds is not None else acted[0])
        return acted

    acting = [act(half, _rows(obs, rows)) for half, rows in enumerate(halves.rows)]
    for step in range(n_steps):
        actions, values, log_probs = (np.concatenate(parts) for parts in zip(*acting, strict=True))
        acted = (actions, values, log_probs)
        more = step + 1 < n_steps
        for half in (0, 1):
            seen = halves.receive(half)
            if more:  # sent before the other half is read: its forward pass overlaps them
                acting[half] = act(half, seen)
        new_obs: Any
        new_obs, rewards, dones, infos = halves.whole_step()
        if not step_done(rewards, dones, infos):
            if more:  # the next step is on its way: read it, so the games wait on nothing
                for half in (0, 1):
                    halves.receive(half)
                new_obs, _, dones, _ = halves.whole_step()
            return Played(new_obs, dones, np.zeros(0), whole=False)
        store_bootstrapped(storage, actor, gamma, obs, acted, (rewards, dones, infos, starts))
        obs, starts = new_obs, dones
    return Played(obs, starts, actor.values(obs), whole=True)
