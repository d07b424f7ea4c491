"""The bot JSON of a trained policy (docs/bot-format.md): its observation keys and their
normalization, its encoders (camera keys), its dense layers and activations, its actions and
memory, in the form the numpy runner (``game_bridge/bot_runner.py``) plays."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.torch_layers import CombinedExtractor, FlattenExtractor
from stable_baselines3.common.vec_env import VecNormalize

from game_bridge.bot_runner import (
    BOT_FORMAT,
    BOT_FORMAT_VERSION,
    MASK_FORMAT_VERSION,
    MEMORY_FORMAT_VERSION,
)
from training.bots.plugin_layout import OnnxLayout
from training.errors import ExportError
from training.ppo.action_heads import MASK_KEY, MaskedPolicy
from training.ppo.camera_policy import (
    PIXEL_CLIP,
    ByteConv2d,
    CameraExtractor,
    Centroids,
    Whitening,
    is_camera,
)
from training.ppo.recurrent_policy import RecurrentActorCritic
from training.runs.run_record import now_iso

_ACTIVATION_NAMES = {torch.nn.Tanh: "tanh", torch.nn.ReLU: "relu", torch.nn.Identity: "linear"}


def all_parts(model: PPO) -> list[tuple[str, spaces.Space[Any]]]:
    """The policy's observation keys in the order it joins them, each with its space (one
    ``obs`` for a single observation)."""
    space = model.observation_space
    return list(space.spaces.items()) if isinstance(space, spaces.Dict) else [("obs", space)]


def input_parts(model: PPO) -> list[tuple[str, spaces.Box]]:
    """:func:`all_parts` that are boxes: the inputs an exportable policy takes."""
    return [(key, part) for key, part in all_parts(model) if isinstance(part, spaces.Box)]


def observation_keys(model: PPO) -> list[tuple[str, int]] | None:
    """A policy of several observation keys: each key and its flat width, in the order
    the policy joins them; None for one observation."""
    if not isinstance(model.observation_space, spaces.Dict):
        return None
    return [(key, int(np.prod(part.shape))) for key, part in input_parts(model)]


def input_widths(model: PPO) -> list[int]:
    """The flat width of each observation input of the policy (a camera frame's bytes)."""
    return [int(np.prod(part.shape)) for _, part in input_parts(model)]


def check_exportable(model: PPO) -> None:
    """One line for a policy lander cannot export, before anything assumes its shape."""
    for key, part in all_parts(model):
        vector = isinstance(part, spaces.Box) and len(part.shape) == 1 and part.dtype == np.float32
        if not (vector or is_camera(part)):
            raise ExportError(
                f"export supports vector observations and camera frames; {key!r} is a "
                f"{type(part).__name__} of shape {getattr(part, 'shape', None)}"
            )
    extractor = model.policy.features_extractor
    flat = isinstance(extractor, FlattenExtractor) or (
        isinstance(extractor, CombinedExtractor)
        and all(isinstance(m, torch.nn.Flatten) for m in extractor.extractors.values())
    )
    if not (flat or isinstance(extractor, CameraExtractor)):
        raise ExportError(
            "export supports lander's own policies (MlpPolicy, MultiInputPolicy, the camera "
            f"extractor); this one uses {type(extractor).__name__}"
        )


def _encoder_layers(module: torch.nn.Module, shape: tuple[int, ...]) -> list[dict[str, Any]]:
    """A camera key's encoder as the bot file's layers (docs/bot-format.md, "Camera keys"),
    walked module by module; ``shape`` is the frame's."""
    layers: list[dict[str, Any]] = []
    channels = int(shape[0])
    for child in _leaves(module):
        if isinstance(child, torch.nn.AvgPool2d):
            layers.append(_average_pool(child, channels))
        elif isinstance(child, torch.nn.Conv2d):
            channels = child.out_channels
            if (
                child.padding not in ((0, 0), "valid")
                or child.dilation != (1, 1)
                or child.groups != 1
            ):
                raise ExportError("cannot export a convolution with padding, dilation or groups")
            layers.append(
                {
                    "type": "conv2d",
                    "weights": _conv_weights(child).detach().cpu().double().numpy().tolist(),
                    "biases": child.bias.detach().cpu().double().numpy().tolist()
                    if child.bias is not None
                    else [0.0] * child.out_channels,
                    "stride": list(child.stride),
                    "activation": "linear",
                }
            )
        elif isinstance(child, torch.nn.Linear):
            layers.append({"type": "dense", **_dense(child)})
        elif isinstance(child, torch.nn.Flatten):
            layers.append({"type": "flatten"})
        elif isinstance(child, Centroids):
            layers.append({"type": "centroids"})
        elif isinstance(child, Whitening):  # (f - mean) @ matrix.T: a dense layer
            matrix = child.matrix.detach().cpu().double().numpy()
            mean = child.mean.detach().cpu().double().numpy()
            layers.append(
                {
                    "type": "dense",
                    "weights": matrix.tolist(),
                    "biases": (-(matrix @ mean)).tolist(),
                    "activation": "linear",
                }
            )
        elif (
            type(child) in _ACTIVATION_NAMES
            and layers
            and layers[-1]["type"] in ("conv2d", "dense")
        ):
            layers[-1]["activation"] = _ACTIVATION_NAMES[type(child)]
        else:
            raise ExportError(f"cannot export an encoder layer of type {type(child).__name__}")
    return layers


def _conv_weights(conv: torch.nn.Conv2d) -> torch.Tensor:
    """A convolution's weights as they meet its input (a :class:`ByteConv2d`'s scaled to
    the bytes it reads)."""
    return conv.scaled_weight() if isinstance(conv, ByteConv2d) else conv.weight


def _average_pool(pool: torch.nn.AvgPool2d, channels: int) -> dict[str, Any]:
    """An average pool as the convolution it is: each channel's own window, averaged."""
    size = pool.kernel_size if isinstance(pool.kernel_size, tuple) else (pool.kernel_size,) * 2
    stride = pool.stride if isinstance(pool.stride, tuple) else (pool.stride or size[0],) * 2
    if pool.padding not in (0, (0, 0)) or pool.ceil_mode:
        raise ExportError("cannot export an average pool with padding or ceil_mode")
    weights = np.zeros((channels, channels, *size))
    weights[np.arange(channels), np.arange(channels)] = 1.0 / (size[0] * size[1])
    return {
        "type": "conv2d",
        "weights": weights.tolist(),
        "biases": [0.0] * channels,
        "stride": [int(v) for v in stride],
        "activation": "linear",
    }


def _leaves(module: torch.nn.Module) -> list[torch.nn.Module]:
    """The modules that compute, in order (a Sequential's or a NatureCNN's parts)."""
    children = list(module.children())
    if not children or isinstance(module, Centroids):
        return [module]
    return [leaf for child in children for leaf in _leaves(child)]


def _observation_spec(
    model: PPO, normalizer: VecNormalize | None, layout: OnnxLayout
) -> dict[str, Any]:
    """The bot file's ``observation``: its size, keys, normalisation and camera encoders."""
    keys = observation_keys(model)
    observation: dict[str, Any] = {
        "size": sum(input_widths(model)),
        "normalization": _normalization(normalizer, model),
    }
    extractor = model.policy.features_extractor
    if isinstance(extractor, CameraExtractor):
        names = [key for key, _ in input_parts(model)] if keys else list(layout.input_names[:1])
        observation["keys"] = []
        for name, (_, part), encoder in zip(
            names, input_parts(model), extractor.encoders, strict=True
        ):
            entry: dict[str, Any] = {"key": name, "size": int(np.prod(part.shape))}
            if is_camera(part):
                entry["shape"] = [int(v) for v in part.shape]
                entry["frames"] = int(extractor.frames)
                entry["encoder"] = _encoder_layers(encoder, part.shape)
            observation["keys"].append(entry)
    elif keys:
        observation["keys"] = [{"key": key, "size": size} for key, size in keys]
    return observation


def _dense_layers(model: PPO) -> list[dict[str, Any]]:
    """The actor's layers: the policy MLP then the action head, as plain lists."""
    policy = model.policy
    modules = [*policy.mlp_extractor.policy_net, policy.action_net]
    layers: list[dict[str, Any]] = []
    for module in modules:
        if isinstance(module, torch.nn.Linear):
            layers.append(_dense(module))
        elif type(module) in _ACTIVATION_NAMES and layers:
            layers[-1]["activation"] = _ACTIVATION_NAMES[type(module)]
        else:
            raise ExportError(f"cannot export a layer of type {type(module).__name__}")
    return layers


def _dense(module: torch.nn.Linear) -> dict[str, Any]:
    return {
        "weights": module.weight.detach().cpu().double().numpy().tolist(),
        "biases": module.bias.detach().cpu().double().numpy().tolist(),
        "activation": "linear",
    }


def _action_spec(space: spaces.Space[Any], layout: OnnxLayout | None = None) -> dict[str, Any]:
    spec = _action_reading(space)
    if layout is not None and layout.actions:
        spec["keys"] = [
            {"key": key, "size": size, "action_type": "discrete" if discrete else "continuous"}
            for key, size, discrete in layout.actions
        ]
    return spec


def _action_reading(space: spaces.Space[Any]) -> dict[str, Any]:
    """The action's type, size and how the network's output is read."""
    if isinstance(space, spaces.Box):
        return {
            "type": "continuous",
            "size": int(space.shape[0]),
            "low": space.low.astype(float).tolist(),
            "high": space.high.astype(float).tolist(),
            "read": "gaussian mean clipped to [low, high]",
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "discrete", "size": int(space.n), "read": "argmax of the outputs"}
    if isinstance(space, spaces.MultiDiscrete):
        return {
            "type": "multi_discrete",
            "size": len(space.nvec),
            "nvec": [int(n) for n in space.nvec],
            "read": "argmax of each segment of nvec outputs",
        }
    raise ExportError(f"cannot export a policy for action space {space}")


def _normalization(normalizer: VecNormalize | None, model: PPO) -> dict[str, Any] | None:
    """The observation's normalisation over its joined keys: VecNormalize's statistics
    where it has them, and a camera's bytes scaled to [0, 1] as SB3 scales images (no
    clipping of its own when no VecNormalize clips)."""
    normalizing = normalizer is not None and normalizer.norm_obs
    cameras = any(is_camera(part) for _, part in input_parts(model))
    if not (normalizing or cameras):
        return None
    rms = normalizer.obs_rms if normalizer is not None and normalizing else None
    extractor = model.policy.features_extractor
    pixels = extractor.pixels if isinstance(extractor, CameraExtractor) else None
    means, scales = [], []
    for key, part in input_parts(model):
        size = int(np.prod(part.shape))
        stats = (rms.get(key) if isinstance(rms, dict) else rms) if rms is not None else None
        if pixels is not None:  # a lone camera through a PixelNormalization
            means.append(pixels.mean.detach().cpu().double().numpy().reshape(-1))
            scales.append(pixels.scale.detach().cpu().double().numpy().reshape(-1))
        elif is_camera(part):
            means.append(np.zeros(size))
            scales.append(np.full(size, 255.0 if model.policy.normalize_images else 1.0))
        elif stats is not None:
            assert normalizer is not None
            means.append(np.asarray(stats.mean, dtype=np.float64).reshape(-1))
            scales.append(
                np.sqrt(
                    np.asarray(stats.var, dtype=np.float64).reshape(-1) + float(normalizer.epsilon)
                )
            )
        else:
            means.append(np.zeros(size))
            scales.append(np.ones(size))
    return {
        "mean": np.concatenate(means).tolist(),
        "scale": np.concatenate(scales).tolist(),
        "clip": PIXEL_CLIP
        if pixels is not None
        else float(normalizer.clip_obs)
        if normalizer is not None and normalizing
        else None,
        "rule": "clip((obs - mean) / scale, -clip, clip)",
    }


MASKED_READ = f"argmax of the outputs the observation's {MASK_KEY} allows (1: allowed)"


def build_bot_spec(
    model: PPO,
    normalizer: VecNormalize | None,
    run: str,
    git_commit: str | None,
    trained_with: dict[str, Any] | None = None,
    layout: OnnxLayout | None = None,
) -> dict[str, Any]:
    """The bot JSON document for ``model`` (see docs/bot-format.md); with the game's
    ``layout``, the action lists the game's keys, so a player in the engine can build
    the action dict the game expects.

    :raises ExportError: a policy lander cannot export.
    """
    check_exportable(model)
    observation = _observation_spec(model, normalizer, layout or OnnxLayout())
    policy = model.policy
    memory = _memory_spec(policy) if isinstance(policy, RecurrentActorCritic) else None
    return {
        "format": BOT_FORMAT,
        "version": MEMORY_FORMAT_VERSION
        if memory
        else MASK_FORMAT_VERSION
        if isinstance(policy, MaskedPolicy)
        else BOT_FORMAT_VERSION,
        "run": run,
        "timesteps": int(model.num_timesteps),
        "git_commit": git_commit,
        "exported_at": now_iso(),
        "trained_with": trained_with or {},
        "observation": observation,
        "action": {
            **_action_spec(model.action_space, layout),
            **({"mask": MASK_KEY, "read": MASKED_READ} if isinstance(policy, MaskedPolicy) else {}),
        },
        **({"memory": memory} if memory else {}),
        "layers": _dense_layers(model),
    }


def _memory_spec(policy: RecurrentActorCritic) -> dict[str, Any]:
    """The GRU as the bot file's ``memory`` section (docs/bot-format.md, "Memory")."""
    gru = policy.gru_weights()
    return {
        "kind": "gru",
        "units": gru.units,
        **{
            name: np.asarray(getattr(gru, name), dtype=np.float64).tolist()
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        },
    }
