"""A camera policy's PPO update in numpy: lander's centroid encoder written out beside the
MLPs of ``training/ppo/lean_update.py``, and its frames kept as the bytes they arrive as.

A camera run spent 0.78 of its time in ``PPO.train`` (docs/performance.md, "Camera against
coordinates"): every minibatch turned its 512 frames from float32 into torch tensors,
divided them by 255, average-pooled them and ran the encoder and the MLPs through torch's
autograd, ten passes over every rollout. Here:

- the rollout keeps each camera key's frames as uint8 (:class:`CameraRolloutBuffer`, a
  quarter of float32's bytes; what the game sent, exactly), and SB3's own update reads
  the same buffer;
- a frame's pooled pixels depend on nothing the update changes, so they are computed once
  per rollout (:class:`RolloutFeatures`), not once per minibatch and pass;
- the encoder's learned part (a 1 x 1 convolution without bias, a ReLU, each map's
  centroid and mass, their whitening: ``training/ppo/camera_policy.py``) and its gradient
  are a few numpy products over those pooled pixels (:class:`_CentroidKey`); the MLPs,
  the loss, gradient clipping and Adam are the lean update's own.

``tests/test_camera_update.py`` checks that a rollout updated here and by ``PPO.train``
ends with the same weights, Adam moments and logged numbers, as tests/test_lean_update.py
does for the MLP. SB3's CNN (``--camera-encoder nature``), an encoder per head and a GPU
take SB3's update.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer
from stable_baselines3.common.policies import ActorCriticPolicy
from torch import nn

from game_bridge.bot_runner import CENTROID_EPSILON
from training.ppo.camera_policy import CameraExtractor, CentroidEncoder, Centroids, is_camera
from training.ppo.numpy_policy import NumpyActor


class _BytesBuffer(RolloutBuffer):
    """What both camera buffers share: a rollout's camera frames are its only uint8 arrays
    (``reset`` makes them so), and a CNN's buffer (``channels_last``) lays them out channels
    last once a rollout, where it flattens them, so that numpy's indexing hands each
    minibatch its rows in the CNN's layout (``CameraExtractor.channels_last``) with no
    permuting copy of their own. Permuting each minibatch's bytes, after SB3's own copy of
    them, was 7% of a Breakout run's trainer."""

    channels_last = False
    """Hand the update its frames channels last (a CNN encoder's buffer)."""

    def swap_and_flatten(self, arr: np.ndarray) -> np.ndarray:  # type: ignore[override]
        """SB3's ``[steps, envs, ...]`` to ``[envs * steps, ...]``; frames for a CNN in one
        copy, channels last in memory and ``[rows, channels, height, width]`` in shape."""
        if not (self.channels_last and arr.dtype == np.uint8):
            return super().swap_and_flatten(arr)
        steps, envs, channels, height, width = arr.shape
        laid_out = np.ascontiguousarray(arr.transpose(1, 0, 3, 4, 2))
        return laid_out.reshape(envs * steps, height, width, channels).transpose(0, 3, 1, 2)

    def to_torch(self, array: np.ndarray, copy: bool = True) -> torch.Tensor:
        """SB3's, but a CNN's minibatch of frames is taken as it is: numpy's indexing made
        it a fresh copy, channels last where the layout survived (and permuted here, still
        bytes, where it did not)."""
        if not (self.channels_last and array.dtype == np.uint8):
            return super().to_torch(array, copy)
        frames = torch.from_numpy(array).contiguous(memory_format=torch.channels_last)
        return frames.to(self.device)


class CameraRolloutBuffer(_BytesBuffer):
    """SB3's rollout buffer, the frames of a camera observation kept as uint8."""

    def reset(self) -> None:
        super().reset()
        if is_camera(self.observation_space):
            self.observations = np.zeros(self.observations.shape, np.uint8)


class CameraDictRolloutBuffer(_BytesBuffer, DictRolloutBuffer):
    """SB3's rollout buffer of several keys, each camera key's frames kept as uint8."""

    def reset(self) -> None:
        super().reset()
        assert isinstance(self.observation_space, spaces.Dict)
        for key, space in self.observation_space.spaces.items():
            if is_camera(space):
                self.observations[key] = np.zeros(self.observations[key].shape, np.uint8)


def camera_buffer(model: PPO) -> RolloutBuffer:
    """A buffer like ``model``'s, camera frames kept as uint8."""
    settings: dict[str, Any] = {
        "device": model.device,
        "gamma": model.gamma,
        "gae_lambda": model.gae_lambda,
        "n_envs": model.n_envs,
    }
    space = model.observation_space
    buffer: CameraRolloutBuffer | CameraDictRolloutBuffer
    if isinstance(space, spaces.Dict):
        buffer = CameraDictRolloutBuffer(model.n_steps, space, model.action_space, **settings)
    else:
        buffer = CameraRolloutBuffer(model.n_steps, space, model.action_space, **settings)
    extractor = model.policy.features_extractor
    buffer.channels_last = isinstance(extractor, CameraExtractor) and extractor.channels_last
    return buffer


def camera_update_fits(model: PPO) -> bool:
    """True when :class:`RolloutFeatures` computes ``model``'s features exactly: lander's
    camera extractor shared by both heads, every camera key through the centroid encoder,
    flat (float32) keys beside them."""
    policy = model.policy
    extractor = policy.features_extractor
    return (
        isinstance(extractor, CameraExtractor)
        and policy.share_features_extractor
        and all(isinstance(module, CentroidEncoder | nn.Flatten) for module in extractor.encoders)
        and not model.use_sde
        and not policy.squash_output
        and isinstance(model.action_space, spaces.Box | spaces.Discrete)
        and isinstance(model.rollout_buffer, RolloutBuffer | DictRolloutBuffer)
    )


def pool_frames(frames: np.ndarray, size: int) -> np.ndarray:
    """``[rows, channels, height, width]`` frames (bytes) as the encoder's pool sees them:
    divided by 255 (SB3's image scaling), averaged over ``size`` x ``size`` pixels (the
    last rows and columns that fill no window dropped, as torch's pool drops them);
    ``[rows, channels, pixels]`` float32."""
    rows, channels, height, width = frames.shape
    high, wide = height // size, width // size
    cropped = frames[:, :, : high * size, : wide * size].astype(np.float32)
    summed = cropped.reshape(rows, channels, high, size, wide, size).sum(axis=(3, 5))
    return (summed * np.float32(1.0 / (255.0 * size * size))).reshape(rows, channels, high * wide)


def pool_size(encoder: CentroidEncoder) -> int:
    """The side of the encoder's average pool."""
    pool = encoder[0]
    assert isinstance(pool, nn.AvgPool2d)
    size = pool.kernel_size
    return int(size if isinstance(size, int) else size[0])


class _CentroidKey:
    """One camera key through the centroid encoder: the 1 x 1 convolution, ReLU and
    centroids over pooled pixels, and their gradient.

    :param pooled: ``[rows, channels, pixels]`` (:func:`pool_frames`).
    :param weight: the convolution's weight, ``[maps, channels, 1, 1]`` (a view of the
        policy's or the update's parameters); ``weight_grad`` likewise of its gradients,
        None where nothing learns (a rollout).
    """

    def __init__(
        self,
        encoder: CentroidEncoder,
        pooled: np.ndarray,
        weight: np.ndarray,
        weight_grad: np.ndarray | None = None,
    ) -> None:
        centroids = encoder[3]
        assert isinstance(centroids, Centroids)
        self.pooled = pooled
        self.grid = centroids.grid.detach().numpy()  # [pixels, 3]: x, y, 1
        whitening = encoder.whitening  # a buffer, fixed through an update
        self.whitening = (
            None
            if whitening is None
            else (whitening.matrix.detach().numpy(), whitening.mean.detach().numpy())
        )
        maps = weight.shape[0]
        self.weight = weight.reshape(maps, -1)
        self.weight_grad = None if weight_grad is None else weight_grad.reshape(maps, -1)
        self.width = 3 * maps

    def forward(self, rows: np.ndarray | slice) -> np.ndarray:
        """``[len(rows), 3 * maps]``: every map's x, then y, then mass."""
        pixels = self.pooled[rows]
        maps = np.matmul(self.weight, pixels)  # [rows, maps, pixels]
        np.maximum(maps, 0.0, out=maps)
        moments = maps @ self.grid  # [rows, maps, 3]
        mass = moments[:, :, 2]
        spread = mass + np.float32(CENTROID_EPSILON)
        x, y = moments[:, :, 0] / spread, moments[:, :, 1] / spread
        if self.weight_grad is not None:
            self._saved = (pixels, maps, spread, x, y)
        features = np.concatenate([x, y, mass], axis=1)
        if self.whitening is None:
            return features
        matrix, mean = self.whitening
        return (features - mean) @ matrix.T

    def backward(self, grad: np.ndarray) -> None:
        """Add the convolution's gradient for ``grad`` at :meth:`forward`'s output."""
        assert self.weight_grad is not None
        if self.whitening is not None:
            grad = grad @ self.whitening[0]
        pixels, maps, spread, x, y = self._saved
        count = self.weight.shape[0]
        grad_x, grad_y, grad_mass = (
            grad[:, :count],
            grad[:, count : 2 * count],
            grad[:, 2 * count :],
        )
        along_x, along_y = grad_x / spread, grad_y / spread
        # d x / d map[p] = (grid_x[p] - x) / spread, and so for y; d mass / d map[p] = 1.
        per_moment = np.stack([along_x, along_y, grad_mass - along_x * x - along_y * y], axis=2)
        grad_maps = per_moment @ self.grid.T  # [rows, maps, pixels]
        grad_maps *= maps > 0  # ReLU's gradient (0 where its input was not positive)
        self.weight_grad += np.tensordot(grad_maps, pixels, axes=([0, 2], [0, 2]))


class _FlatKey:
    """A vector key beside the camera: its values are the features as they are."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values.reshape(values.shape[0], -1).astype(np.float32, copy=False)
        self.width = self.values.shape[1]

    def forward(self, rows: np.ndarray | slice) -> np.ndarray:
        return self.values[rows]

    def backward(self, grad: np.ndarray) -> None:
        """Nothing learns here."""


def _key_parts(
    extractor: CameraExtractor,
    observations: Any,
    weight_of: Callable[[nn.Conv2d], tuple[np.ndarray, np.ndarray | None]],
) -> list[_CentroidKey | _FlatKey]:
    """Each key's part over ``observations`` (an array, or a dict of arrays by key, rows
    first), its convolution's weight (and gradient) given by ``weight_of``."""
    parts: list[_CentroidKey | _FlatKey] = []
    for key, module in zip(extractor.keys, extractor.encoders, strict=True):
        rows = np.asarray(observations[key] if extractor.keyed else observations)
        if isinstance(module, CentroidEncoder):
            conv = module[1]
            assert isinstance(conv, nn.Conv2d)
            pooled = pool_frames(rows, pool_size(module))
            parts.append(_CentroidKey(module, pooled, *weight_of(conv)))
        else:
            parts.append(_FlatKey(rows))
    return parts


class RolloutFeatures:
    """The features a camera policy's MLPs read, for any rows of the rollout (in the order
    ``RolloutBuffer.get`` gives them), and their gradient back into the encoders; each
    frame pooled once.

    :param model: a model :func:`camera_update_fits`, its rollout just collected.
    :param view: the update's view of a parameter in a flat array
        (``FlatParameters.view``), over ``values`` and over ``grads``.
    """

    def __init__(
        self,
        model: PPO,
        view: Callable[[np.ndarray, torch.Tensor], np.ndarray],
        values: np.ndarray,
        grads: np.ndarray,
    ) -> None:
        extractor = model.policy.features_extractor
        assert isinstance(extractor, CameraExtractor)
        buffer = model.rollout_buffer
        count = buffer.buffer_size * buffer.n_envs

        def env_major(stored: np.ndarray) -> np.ndarray:
            by_env = np.asarray(stored).swapaxes(0, 1)
            return by_env.reshape(count, *by_env.shape[2:])

        stored = buffer.observations
        rows = (
            {key: env_major(stored[key]) for key in extractor.keys}
            if extractor.keyed
            else env_major(stored)
        )
        self.parts = _key_parts(
            extractor, rows, lambda conv: (view(values, conv.weight), view(grads, conv.weight))
        )
        self.bounds = np.cumsum([0, *(part.width for part in self.parts)]).tolist()

    def forward(self, rows: np.ndarray) -> np.ndarray:
        """``[len(rows), features]``: the extractor's output for those rows."""
        return np.concatenate([part.forward(rows) for part in self.parts], axis=1)

    def backward(self, grad: np.ndarray) -> None:
        """Add the encoders' gradients for ``grad`` at :meth:`forward`'s output."""
        for part, start, end in zip(self.parts, self.bounds, self.bounds[1:], strict=False):
            part.backward(grad[:, start:end])


class CameraActor:
    """Plays a camera policy's rollout in numpy: the extractor as above over each step's
    observations, then the heads (``NumpyActor``), over the policy's own weights.

    :param policy: a policy whose model :func:`camera_update_fits`.
    :param space: its action space.
    """

    def __init__(self, policy: ActorCriticPolicy, space: spaces.Space[Any]) -> None:
        extractor = policy.features_extractor
        assert isinstance(extractor, CameraExtractor)
        self.extractor = extractor
        self.heads = NumpyActor(policy, space)

    def features(self, obs: Any) -> np.ndarray:
        """The extractor's output for a batch of observations."""
        parts = _key_parts(self.extractor, obs, lambda conv: (conv.weight.detach().numpy(), None))
        return np.concatenate([part.forward(slice(None)) for part in parts], axis=1)

    def act(self, obs: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.heads.act(self.features(obs))

    def values(self, obs: Any) -> np.ndarray:
        return self.heads.values(self.features(obs))
