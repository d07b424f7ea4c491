"""Refitting a camera policy's whitening (``camera_policy.Whitening``) once per rollout,
without changing what the policy does.

After each rollout, each whitened encoder's centroids over the rollout's frames update a
running mean and covariance (:data:`MOMENTUM` of the new rollout), and the whitening
becomes the inverse square root of that covariance. The dense layers that read the
features (the first of the actor and of the critic) are rewritten in the same step so the
policy's outputs stay what they were (to float32 rounding): the rollout's stored values
and log-probabilities remain the policy's own, and the refit changes only how easily the
next update moves along each direction of the features. Adam's moments are kept as they
are: each refit moves the statistics by a tenth of one rollout's, so the layers they
belong to change little.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.policies import ActorCriticPolicy
from torch import nn

from training.ppo.camera_policy import CameraExtractor, CentroidEncoder, Whitening

MOMENTUM = 0.1
"""The share of the newest rollout in the running statistics (about the last ten
rollouts count): the centroids' spread moves as the policy learns where to fly."""
FLOOR = 1e-4
"""Added to every variance before the inverse square root, so a direction that hardly
varies (a dead map, pixel rounding) is not blown up into noise. On the bundled lander's
camera a position across the frame varies by about 0.3 (scaled by 1.8) and the lander's
velocity, the difference of its centroid and its trail's, by about 1e-4 (scaled by 70)."""


def whitened(policy: ActorCriticPolicy) -> list[tuple[str, int, CentroidEncoder, Whitening]]:
    """Each whitened encoder of ``policy``'s shared camera extractor, with its key and the
    first column of its features; empty for every other policy."""
    extractor = policy.features_extractor
    if not isinstance(extractor, CameraExtractor) or not policy.share_features_extractor:
        return []
    found = []
    start = 0
    for key, module, width in zip(
        extractor.keys, extractor.encoders, extractor.widths, strict=True
    ):
        if isinstance(module, CentroidEncoder) and module.whitening is not None:
            found.append((key, start, module, module.whitening))
        start += width
    return found


def refit_whitening(policy: ActorCriticPolicy, buffer: RolloutBuffer) -> None:
    """Refit every whitened encoder of ``policy`` to the frames of ``buffer`` (a collected
    rollout, frames as bytes or floats in [0, 255]), the reading layers rewritten so the
    policy acts and values as before."""
    encoders = whitened(policy)
    if not encoders:
        return
    extractor = policy.features_extractor
    assert isinstance(extractor, CameraExtractor)
    readers = _readers(policy)
    with torch.no_grad():
        for key, start, encoder, whitening in encoders:
            frames = _frames(buffer.observations, key if extractor.keyed else None)
            frames = frames.to(whitening.matrix.device)  # a policy on a GPU
            features = encoder.centroids(frames).double()
            old_matrix, old_mean = whitening.matrix.double(), whitening.mean.double()
            _update_statistics(whitening, features)
            values, vectors = torch.linalg.eigh(whitening.seen_covariance)
            spread = torch.sqrt(values.clamp(min=0.0) + FLOOR)
            matrix = vectors @ torch.diag(1.0 / spread) @ vectors.T
            inverse = vectors @ torch.diag(spread) @ vectors.T
            mean = whitening.seen_mean
            columns = slice(start, start + whitening.matrix.shape[0])
            for layer in readers:
                # y = A (M (f - m)) + b for the old M, m: keep A M and the offset.
                raw = layer.weight[:, columns].double() @ old_matrix
                layer.bias.add_((raw @ (mean - old_mean)).to(layer.bias.dtype))
                layer.weight[:, columns] = (raw @ inverse).to(layer.weight.dtype)
            whitening.matrix.copy_(matrix)
            whitening.mean.copy_(mean)


def _update_statistics(whitening: Whitening, features: torch.Tensor) -> None:
    mean = features.mean(dim=0)
    centred = features - mean
    covariance = centred.T @ centred / max(len(features) - 1, 1)
    if int(whitening.refits) == 0:
        whitening.seen_mean.copy_(mean)
        whitening.seen_covariance.copy_(covariance)
    else:
        # The spread about the new running mean: the old covariance, the new rollout's,
        # and how far the two means lie apart.
        shift = mean - whitening.seen_mean
        whitening.seen_covariance.mul_(1.0 - MOMENTUM).add_(
            MOMENTUM * covariance + MOMENTUM * (1.0 - MOMENTUM) * torch.outer(shift, shift)
        )
        whitening.seen_mean.add_(MOMENTUM * shift)
    whitening.refits += 1


def _frames(observations: Any, key: str | None) -> torch.Tensor:
    """A key's stored frames, ``[steps x envs, C, H, W]`` scaled to [0, 1] as SB3 scales
    images."""
    stored = np.asarray(observations[key] if key is not None else observations)
    flat = stored.reshape(-1, *stored.shape[2:])
    return torch.as_tensor(flat, dtype=torch.float32) / 255.0


def _readers(policy: ActorCriticPolicy) -> list[nn.Linear]:
    """The dense layers that read the features: the first of the actor's and of the
    critic's stacks (the action or value layer itself where a stack is empty)."""
    readers = []
    for stack, head in (
        (policy.mlp_extractor.policy_net, policy.action_net),
        (policy.mlp_extractor.value_net, policy.value_net),
    ):
        first = next((m for m in stack.modules() if isinstance(m, nn.Linear)), head)
        if not isinstance(first, nn.Linear):
            raise TypeError(f"a whitened camera policy's heads are dense, not {first}")
        readers.append(first)
    return readers
