"""Exporting a trained policy: the bot JSON (numpy-playable) and an ONNX file in
the Godot RL Agents plugin's layout, each proven equal to the model before it is
written.

Parity: over 10,000 random observations the numpy runner and onnxruntime give
the same deterministic actions as SB3 ``predict``: continuous within 1e-5,
discrete identical. A bot that fails is not written.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.torch_layers import CombinedExtractor, FlattenExtractor
from stable_baselines3.common.vec_env import VecNormalize

from game_bridge.bot_runner import BOT_FORMAT, BOT_FORMAT_VERSION, MEMORY_FORMAT_VERSION, BotRunner
from game_bridge.frame_stack import start_episodes
from training.errors import ExportError
from training.evaluation.scoring import model_policy
from training.ppo.camera_policy import CameraExtractor, Centroids, Whitening, is_camera
from training.ppo.recurrent_policy import RecurrentActorCritic, gru_step
from training.runs.run_record import now_iso, write_json_atomic

PARITY_SAMPLES = 10_000
CAMERA_PARITY_SAMPLES = 2_000
"""Observations compared for a policy with camera keys: each is thousands of values."""
CONTINUOUS_TOLERANCE = 1e-5
CAMERA_TOLERANCE = 1e-4
"""A camera bot's: float32 sums over a frame's thousands of pixels (a random frame's map
masses reach hundreds) round at 1e-5 of an action in SB3's own forward; a layout or
scaling error shows at 1e-2 and more."""
TIE_TOLERANCE = 1e-6
"""Two logits closer than this are a tie that float32 rounding breaks arbitrarily
(about 1 observation in 200,000 for a barely trained policy)."""
ONNX_OPSET = 17
_ACTIVATION_NAMES = {torch.nn.Tanh: "tanh", torch.nn.ReLU: "relu", torch.nn.Identity: "linear"}


@dataclass(frozen=True)
class ParityReport:
    """How close an exported policy is to the model.

    :param samples: observations compared.
    :param max_abs_diff: largest difference of a continuous action (0 for discrete).
    :param agreement: discrete: fraction of identical actions among decisive observations
        (1.0 for continuous within tolerance).
    :param near_ties: discrete: observations whose two best logits lie within
        :data:`TIE_TOLERANCE`, where float32 rounding may pick either; not counted.
    """

    samples: int
    max_abs_diff: float
    agreement: float
    near_ties: int = 0
    tolerance: float = CONTINUOUS_TOLERANCE
    """The largest difference of a continuous action that passes."""

    def passed(self, discrete: bool) -> bool:
        """True when the export may be written."""
        return self.agreement == 1.0 if discrete else self.max_abs_diff <= self.tolerance


MAX_IR_VERSION = 8
"""The ONNX IR version written: the plugin's pinned onnxruntime (1.15) reads up to 9."""


@dataclass(frozen=True)
class OnnxLayout:
    """How the Godot RL Agents plugin feeds and reads the ONNX file of one game.

    The plugin feeds one input per observation key, named after the key, and reads
    the ``output`` key by key in the declared order: a discrete key's logits
    (argmax), a continuous key's means, followed by as many log-std slots unless
    every key is continuous and the output holds means only (its
    ``action_means_only``). A mixed policy's discrete slots are written clipped to
    [-1, 1], as lander's games receive them, so the plugin's argmax is lander's.

    :param input_names: the observation keys, one ONNX input each, in the game's order.
    :param actions: (key, size, discrete) per action key, in the game's order.
    """

    input_names: tuple[str, ...] = ("obs",)
    actions: tuple[tuple[str, int, bool], ...] = ()

    @classmethod
    def of_game(cls, layout: dict[str, Any] | None) -> OnnxLayout:
        """The layout of a run's game (``run.json``'s ``game_layout``; None: the bundled game).

        :raises ExportError: a layout lander cannot export (an image or a grid key).
        """
        if not layout:
            return cls()
        observations = layout.get("observations") or []
        for observation in observations:
            shape = observation.get("shape") or []
            if len(shape) != (3 if observation.get("image") else 1):
                raise ExportError(
                    f"observation {observation.get('key')!r} of shape {shape} is not a flat "
                    "vector: lander exports vectors and camera frames only"
                )
        actions = tuple(
            (str(a["key"]), int(a["size"]), a.get("action_type") == "discrete")
            for a in layout.get("actions") or []
        )
        return cls(tuple(str(o["key"]) for o in observations) or ("obs",), actions)

    @property
    def mixed(self) -> bool:
        """Continuous and discrete keys together (lander trains them as one Box)."""
        return len({discrete for _, _, discrete in self.actions}) == 2

    def plugin_read(self, output: np.ndarray) -> np.ndarray:
        """A mixed policy's ONNX output read as the plugin reads it, one column per
        continuous value (clamped to [-1, 1]) and one per discrete key (its argmax)."""
        columns = []
        index = 0
        for _, size, discrete in self.actions:
            part = output[:, index : index + size]
            if discrete:
                columns.append(np.argmax(part, axis=1)[:, None].astype(np.float64))
                index += size
            else:
                columns.append(np.clip(part, -1.0, 1.0).astype(np.float64))
                index += 2 * size  # the log-std slots after the means
        return np.concatenate(columns, axis=1)

    def game_read(self, actions: np.ndarray) -> np.ndarray:
        """A mixed policy's Box actions as lander's games receive them (see
        :class:`game_bridge.spaces.ActionCodec`), in :meth:`plugin_read`'s columns."""
        columns = []
        index = 0
        for _, size, discrete in self.actions:
            part = actions[:, index : index + size]
            columns.append(
                np.argmax(part, axis=1)[:, None].astype(np.float64)
                if discrete
                else part.astype(np.float64)
            )
            index += size
        return np.concatenate(columns, axis=1)


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote and how it checked out."""

    bot_json: Path
    bot_onnx: Path
    bot_parity: ParityReport
    onnx_parity: ParityReport


def _all_parts(model: PPO) -> list[tuple[str, spaces.Space[Any]]]:
    """The policy's observation keys in the order it joins them, each with its space (one
    ``obs`` for a single observation)."""
    space = model.observation_space
    return list(space.spaces.items()) if isinstance(space, spaces.Dict) else [("obs", space)]


def _parts(model: PPO) -> list[tuple[str, spaces.Box]]:
    """:func:`_all_parts` that are boxes: the inputs an exportable policy takes."""
    return [(key, part) for key, part in _all_parts(model) if isinstance(part, spaces.Box)]


def _observation_keys(model: PPO) -> list[tuple[str, int]] | None:
    """A policy of several observation keys: each key and its flat width, in the order
    the policy joins them; None for one observation."""
    if not isinstance(model.observation_space, spaces.Dict):
        return None
    return [(key, int(np.prod(part.shape))) for key, part in _parts(model)]


def _input_widths(model: PPO) -> list[int]:
    """The flat width of each observation input of the policy (a camera frame's bytes)."""
    return [int(np.prod(part.shape)) for _, part in _parts(model)]


def _check_exportable(model: PPO) -> None:
    """One line for a policy lander cannot export, before anything assumes its shape."""
    for key, part in _all_parts(model):
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
                    "weights": child.weight.detach().cpu().double().numpy().tolist(),
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
    keys = _observation_keys(model)
    observation: dict[str, Any] = {
        "size": sum(_input_widths(model)),
        "normalization": _normalization(normalizer, model),
    }
    extractor = model.policy.features_extractor
    if isinstance(extractor, CameraExtractor):
        names = [key for key, _ in _parts(model)] if keys else list(layout.input_names[:1])
        observation["keys"] = []
        for name, (_, part), encoder in zip(names, _parts(model), extractor.encoders, strict=True):
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
    cameras = any(is_camera(part) for _, part in _parts(model))
    if not (normalizing or cameras):
        return None
    rms = normalizer.obs_rms if normalizer is not None and normalizing else None
    means, scales = [], []
    for key, part in _parts(model):
        size = int(np.prod(part.shape))
        stats = (rms.get(key) if isinstance(rms, dict) else rms) if rms is not None else None
        if is_camera(part):
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
        "clip": float(normalizer.clip_obs) if normalizer is not None and normalizing else None,
        "rule": "clip((obs - mean) / scale, -clip, clip)",
    }


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
    _check_exportable(model)
    observation = _observation_spec(model, normalizer, layout or OnnxLayout())
    policy = model.policy
    memory = _memory_spec(policy) if isinstance(policy, RecurrentActorCritic) else None
    return {
        "format": BOT_FORMAT,
        "version": MEMORY_FORMAT_VERSION if memory else BOT_FORMAT_VERSION,
        "run": run,
        "timesteps": int(model.num_timesteps),
        "git_commit": git_commit,
        "exported_at": now_iso(),
        "trained_with": trained_with or {},
        "observation": observation,
        "action": _action_spec(model.action_space, layout),
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


def _parity_observations(
    model: PPO, normalizer: VecNormalize | None, samples: int, seed: int
) -> Any:
    """Observations to prove the export on: an array, or a dict of arrays for several keys.

    Where the run normalised observations, three quarters are drawn from what it saw (its
    running mean and spread, out to several spreads either side: a physics game's
    positions may be hundreds, far outside any box it declares) and a quarter from the
    declared space; elsewhere all from the declared space (10 where it is unbounded)."""
    rng = np.random.default_rng(seed)
    rms = normalizer.obs_rms if normalizer is not None and normalizer.norm_obs else None

    def draw(key: str | None, space: spaces.Space[Any]) -> np.ndarray:
        assert isinstance(space, spaces.Box)
        if is_camera(space):
            # Half any bytes, half dark frames with a few lit pixels (a small game's frame).
            frames = rng.integers(0, 256, (samples, *space.shape), dtype=np.uint8)
            dark = rng.random((samples // 2, *space.shape)) > 0.01
            frames[: samples // 2][dark] = 0
            return frames
        low = np.where(np.isfinite(space.low), space.low, -10.0)
        high = np.where(np.isfinite(space.high), space.high, 10.0)
        drawn = rng.uniform(low, high, (samples, space.shape[0]))
        stats = rms.get(key) if isinstance(rms, dict) else rms
        if stats is not None:
            seen = samples - samples // 4
            spread = np.sqrt(np.asarray(stats.var, dtype=np.float64).reshape(-1))
            drawn[:seen] = np.asarray(stats.mean, dtype=np.float64).reshape(-1) + spread * (
                3.0 * rng.standard_normal((seen, space.shape[0]))
            )
        return drawn.astype(np.float32)

    space = model.observation_space
    if isinstance(space, spaces.Dict):
        return {key: draw(key, sub) for key, sub in space.spaces.items()}
    return draw(None, space)


def decisive(bot: BotRunner, obs: Any) -> np.ndarray:
    """Mask of observations whose discrete choice is not a near-tie (see :data:`TIE_TOLERANCE`)."""
    return _decisive_output(bot, bot.network_output(obs))


def _decisive_output(bot: BotRunner, output: np.ndarray) -> np.ndarray:
    """:func:`decisive` of the network's raw outputs."""
    segments = [bot.action_size] if bot.action_type == "discrete" else bot.nvec
    mask = np.ones(len(output), dtype=bool)
    for start, stop in itertools.pairwise(np.cumsum([0, *segments])):
        ranked = np.sort(output[:, start:stop], axis=1)
        mask &= ranked[:, -1] - ranked[:, -2] > TIE_TOLERANCE
    return mask


def _compare(
    expected: np.ndarray,
    actual: np.ndarray,
    decisive_mask: np.ndarray | None,
    tolerance: float = CONTINUOUS_TOLERANCE,
) -> ParityReport:
    """Compare actions: within tolerance (continuous) or identical where decisive (discrete)."""
    if decisive_mask is not None:
        same = np.all(
            expected.reshape(len(expected), -1) == actual.reshape(len(actual), -1), axis=1
        )
        agreement = float(np.mean(same[decisive_mask])) if decisive_mask.any() else 1.0
        return ParityReport(len(expected), 0.0, agreement, int((~decisive_mask).sum()))
    diff = float(np.max(np.abs(expected.astype(np.float64) - actual.astype(np.float64))))
    tolerance = scaled_tolerance(tolerance, expected)
    return ParityReport(len(expected), diff, 1.0 if diff <= tolerance else 0.0, 0, tolerance)


def scaled_tolerance(tolerance: float, expected: np.ndarray) -> float:
    """``tolerance`` for actions of size up to 1, in proportion beyond: float32 rounds at
    about 1e-7 of a value, so a head whose raw actions reach 300 (clipped later by the game)
    differs from float64 by 3e-5 with nothing wrong (a self-play tier's export failed so)."""
    size = float(np.max(np.abs(expected))) if expected.size else 0.0
    return tolerance * max(1.0, size)


class _OnnxPolicy(torch.nn.Module):
    """The deterministic actor in the plugin's layout: (obs, state_ins) -> (output, state_outs)."""

    def __init__(
        self, model: PPO, normalization: dict[str, Any] | None, layout: OnnxLayout
    ) -> None:
        super().__init__()
        self.policy_net = model.policy.mlp_extractor.policy_net
        self.action_net = model.policy.action_net
        policy = model.policy
        self.memory_cell = policy.memory_cell if isinstance(policy, RecurrentActorCritic) else None
        extractor = model.policy.features_extractor
        # Camera keys: the joined inputs cut back into the keys and run through the
        # policy's own extractor (its encoders), as the numpy runner does.
        self.extractor = extractor if isinstance(extractor, CameraExtractor) else None
        self.parts = [(key, tuple(part.shape)) for key, part in _parts(model)]
        # A mixed policy's output as the plugin reads it: per key, a continuous key's
        # means then its log-std, a discrete key's slots clipped as the games get them.
        self.pieces = (
            [(start, size, discrete) for start, (_, size, discrete) in _starts(layout.actions)]
            if layout.mixed
            else []
        )
        log_std = getattr(model.policy, "log_std", None)
        self.log_std: torch.Tensor
        self.register_buffer(
            "log_std",
            log_std.detach().clone().float() if log_std is not None else torch.zeros(1),
        )
        self.normalize = normalization is not None
        mean = torch.tensor(normalization["mean"] if normalization else [0.0], dtype=torch.float32)
        scale = torch.tensor(
            normalization["scale"] if normalization else [1.0], dtype=torch.float32
        )
        self.mean: torch.Tensor
        self.scale: torch.Tensor
        self.register_buffer("mean", mean)
        self.register_buffer("scale", scale)
        clip = normalization["clip"] if normalization else None
        self.clip = float(clip) if clip is not None else float(np.finfo(np.float32).max)

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # One input per observation key, then state_ins, as the plugin feeds them.
        *keys, state_ins = inputs
        obs = keys[0] if len(keys) == 1 else torch.cat(keys, dim=1)
        if self.normalize:
            obs = torch.clamp((obs - self.mean) / self.scale, -self.clip, self.clip)
        if self.extractor is not None:
            obs = self.extractor(self._split(obs))
        if self.memory_cell is not None:
            # A bot with memory: state_ins is each agent's state [batch, units] (zeros at an
            # episode's start) and state_outs the state after this step (docs/godot.md).
            cell = self.memory_cell
            state_ins = gru_step(cell, obs @ cell.weight_ih.T + cell.bias_ih, state_ins)
            obs = torch.cat([obs, state_ins], dim=1)
        output = self.action_net(self.policy_net(obs))
        if not self.pieces:
            return output, state_ins
        parts = []
        for start, size, discrete in self.pieces:
            values = output[:, start : start + size]
            if discrete:
                parts.append(torch.clamp(values, -1.0, 1.0))
            else:
                log_std = self.log_std[start : start + size].unsqueeze(0)
                parts += [values, log_std.expand(values.shape[0], size)]
        return torch.cat(parts, dim=1), state_ins

    def _split(self, joined: torch.Tensor) -> Any:
        """The joined observation as the extractor takes it: each key in its shape."""
        parts = {}
        start = 0
        for key, shape in self.parts:
            size = int(np.prod(shape))
            parts[key] = joined[:, start : start + size].reshape(-1, *shape)
            start += size
        assert self.extractor is not None
        return parts if self.extractor.keyed else parts[self.parts[0][0]]


def _starts(actions: tuple[tuple[str, int, bool], ...]) -> list[tuple[int, tuple[str, int, bool]]]:
    """Each action key with the index of its first slot in lander's Box."""
    starts = list(itertools.accumulate((size for _, size, _ in actions), initial=0))
    return list(zip(starts, actions, strict=False))


def export_onnx(
    model: PPO, normalization: dict[str, Any] | None, path: Path, layout: OnnxLayout | None = None
) -> None:
    """Write the ONNX file in the plugin's layout: inputs named after the observation key
    [batch, dim] and ``state_ins`` [batch], outputs ``output`` and ``state_outs``, opset 17,
    IR version 8 (what the plugin's onnxruntime 1.15 loads)."""
    layout = layout or OnnxLayout()
    module = _OnnxPolicy(model, normalization, layout).to("cpu").eval()
    widths = _input_widths(model)
    if len(widths) != len(layout.input_names):
        raise ExportError(
            f"the policy takes {len(widths)} observation input(s), the game declares "
            f"{len(layout.input_names)} key(s) ({', '.join(layout.input_names)})"
        )
    names = [*layout.input_names, "state_ins", "output", "state_outs"]
    policy = model.policy
    state = (
        torch.zeros(1, policy.memory)
        if isinstance(policy, RecurrentActorCritic)
        else torch.zeros(1)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(
            module,
            (*(torch.zeros(1, width) for width in widths), state),
            str(path),
            opset_version=ONNX_OPSET,
            input_names=names[:-2],
            output_names=names[-2:],
            dynamic_axes={name: {0: "batch_size"} for name in names},
            dynamo=False,
        )
    import onnx

    written = onnx.load(str(path))
    if written.ir_version > MAX_IR_VERSION:
        written.ir_version = MAX_IR_VERSION
        onnx.save(written, str(path))


def onnx_output(path: Path, obs: Any, input_names: tuple[str, ...] = ("obs",)) -> np.ndarray:
    """Run the ONNX file with onnxruntime, fed as the plugin feeds it (one input per
    observation key, and ``state_ins``): its ``output`` (a bot with memory's from an
    episode's start)."""
    return OnnxPlayer(path, input_names).step(obs, None)[0]


class OnnxPlayer:
    """An ONNX bot run with onnxruntime as a game runs it: one input per observation key
    and ``state_ins`` (zeros for a bot without memory; each agent's state for one with).

    :param path: the ONNX file.
    :param input_names: its observation inputs, in the game's order.
    """

    def __init__(self, path: Path, input_names: tuple[str, ...] = ("obs",)) -> None:
        import onnxruntime

        self.session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        self.input_names = input_names
        shape = next(i for i in self.session.get_inputs() if i.name == "state_ins").shape
        self.units = int(shape[1]) if len(shape) == 2 else 0
        """The state's width: 0 for the plugin's placeholder ``state_ins`` [batch]."""

    def step(self, obs: Any, state: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """``output`` and ``state_outs`` for a batch, from ``state`` (None: zeros)."""
        parts = [obs[name] for name in self.input_names] if isinstance(obs, dict) else [obs]
        # A camera's frame goes in flat, its bytes as floats, as the plugin feeds any key.
        feed: dict[str, np.ndarray] = {
            name: np.asarray(part, np.float32).reshape(len(part), -1)
            for name, part in zip(self.input_names, parts, strict=True)
        }
        batch = len(parts[0])
        if state is not None:
            feed["state_ins"] = np.asarray(state, np.float32)
        elif self.units:
            feed["state_ins"] = np.zeros((batch, self.units), dtype=np.float32)
        else:
            feed["state_ins"] = np.zeros(batch, dtype=np.float32)
        output, after = self.session.run(None, feed)
        return np.asarray(output), np.asarray(after)


def onnx_actions(
    path: Path, obs: Any, bot: BotRunner, input_names: tuple[str, ...] = ("obs",)
) -> np.ndarray:
    """Run the ONNX file with onnxruntime and read actions with the bot's rule."""
    return bot.read_actions(onnx_output(path, obs, input_names))


def _mixed_parity(
    path: Path, obs: Any, expected: np.ndarray, layout: OnnxLayout, tolerance: float
) -> ParityReport:
    """A mixed policy's ONNX file read with the plugin's rule against the model's actions
    as the games receive them: continuous within tolerance, discrete keys identical
    except where two clipped slots lie within :data:`TIE_TOLERANCE` of each other."""
    actual = layout.plugin_read(onnx_output(path, obs, layout.input_names))
    wanted = layout.game_read(expected)
    discrete_columns, decisive_rows = [], np.ones(len(expected), dtype=bool)
    column = 0
    for start, (_, size, discrete) in _starts(layout.actions):
        if discrete:
            ranked = np.sort(np.clip(expected[:, start : start + size], -1, 1), axis=1)
            gap = ranked[:, -1] - ranked[:, -2]
            decisive_rows &= (gap == 0) | (gap > TIE_TOLERANCE)
            discrete_columns.append(column)
            column += 1
        else:
            column += size
    continuous = [c for c in range(wanted.shape[1]) if c not in discrete_columns]
    diff = (
        float(np.max(np.abs(wanted[:, continuous] - actual[:, continuous]))) if continuous else 0.0
    )
    same = np.all(wanted[:, discrete_columns] == actual[:, discrete_columns], axis=1)
    agreement = float(np.mean(same[decisive_rows])) if decisive_rows.any() else 1.0
    tolerance = scaled_tolerance(tolerance, wanted[:, continuous])
    if diff > tolerance:
        agreement = 0.0
    return ParityReport(len(expected), diff, agreement, int((~decisive_rows).sum()), tolerance)


EPISODE_STEPS = 100
"""A bot with memory is compared over episodes of this many steps (its state carried from
step to step), not single observations: a state that drifts shows only over time."""


def _episodes(obs: np.ndarray) -> np.ndarray:
    """The parity observations as ``[steps, agents, ...]``: episodes of
    :data:`EPISODE_STEPS` played side by side (the agents a batch)."""
    agents = max(1, len(obs) // EPISODE_STEPS)
    steps = len(obs) // agents
    return np.asarray(obs[: steps * agents]).reshape(steps, agents, *np.shape(obs)[1:])


def _restarts(step: int, agents: int) -> np.ndarray | None:
    """Agents whose episode starts anew at ``step`` (every other one half-way through),
    so the comparison covers a state reset while the others carry theirs."""
    if step != EPISODE_STEPS // 2:
        return None
    return np.arange(agents) % 2 == 0


def _played_episodes(
    model_player: Any, bot: BotRunner, episodes: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The model's and the bot's actions over whole episodes, each keeping its own state:
    (the model's, the bot's, the decisive mask for a discrete bot)."""
    bot_player = bot.policy()
    start_episodes(model_player)
    start_episodes(bot_player)
    expected, actual, masks = [], [], []
    state: np.ndarray | None = None
    for step, obs in enumerate(episodes):
        restarted = _restarts(step, len(obs))
        if restarted is not None:
            start_episodes(model_player, restarted)
            start_episodes(bot_player, restarted)
            if state is not None:  # the decisive mask's own copy of the state
                state = np.where(restarted[:, None], 0.0, state)
        expected.append(np.asarray(model_player(obs)))
        actual.append(np.asarray(bot_player(obs)))
        if bot.action_type != "continuous":
            output, state = bot.step(obs, state)
            masks.append(_decisive_output(bot, output))
        else:
            state = None
    mask = np.concatenate(masks) if masks else None
    return np.concatenate(expected), np.concatenate(actual), mask


def _onnx_episodes(
    path: Path, bot: BotRunner, episodes: np.ndarray, layout: OnnxLayout
) -> np.ndarray:
    """The ONNX file's actions over the same episodes, its state fed back step by step as a
    game keeps it (zeros where an episode starts)."""
    player = OnnxPlayer(path, layout.input_names)
    state = np.zeros((episodes.shape[1], player.units), dtype=np.float32)
    actions = []
    for step, obs in enumerate(episodes):
        restarted = _restarts(step, len(obs))
        if restarted is not None:
            state[restarted] = 0.0
        output, state = player.step(obs, state)
        actions.append(bot.read_actions(output))
    return np.concatenate(actions)


def export_policy(
    model: PPO,
    normalizer: VecNormalize | None,
    run: str,
    bot_json: Path,
    bot_onnx: Path,
    git_commit: str | None = None,
    trained_with: dict[str, Any] | None = None,
    samples: int = PARITY_SAMPLES,
    seed: int = 0,
    layout: OnnxLayout | None = None,
    notes: dict[str, Any] | None = None,
) -> ExportResult:
    """Export ``model`` as a bot JSON and an ONNX file, after proving both equal to it
    (the ONNX file read as the Godot plugin reads it, for the game's ``layout``).

    :param notes: more top-level fields of the bot file (its ``rating``, its ``tier``).
    :raises ExportError: unsupported policy, or a parity failure (nothing is written then).
    """
    layout = layout or OnnxLayout()
    spec = build_bot_spec(model, normalizer, run, git_commit, trained_with, layout)  # checks it
    camera = any(is_camera(part) for _, part in _parts(model))
    tolerance = CAMERA_TOLERANCE if camera else CONTINUOUS_TOLERANCE
    if camera:
        samples = min(samples, CAMERA_PARITY_SAMPLES)
    spec.update(notes or {})
    bot = BotRunner(spec)
    discrete = bot.action_type != "continuous"
    obs = _parity_observations(model, normalizer, samples, seed)
    recurrent = isinstance(model.policy, RecurrentActorCritic)
    if recurrent:
        episodes = _episodes(obs)
        expected, bot_actions, mask = _played_episodes(
            model_policy(model, normalizer), bot, episodes
        )
    else:
        expected = model_policy(model, normalizer, stacked=True)(obs)
        mask = decisive(bot, obs) if discrete else None
        bot_actions = bot.act(obs)
    bot_parity = _compare(expected, bot_actions, mask, tolerance)
    if not bot_parity.passed(discrete):
        raise ExportError(f"bot JSON disagrees with the model: {bot_parity}")
    bot_onnx.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=bot_onnx.parent, prefix=".export-") as scratch:
        candidate = Path(scratch) / bot_onnx.name
        export_onnx(model, spec["observation"]["normalization"], candidate, layout)
        if recurrent:
            onnx_parity = _compare(
                expected, _onnx_episodes(candidate, bot, episodes, layout), mask, tolerance
            )
        else:
            onnx_parity = (
                _mixed_parity(candidate, obs, expected, layout, tolerance)
                if layout.mixed
                else _compare(
                    expected, onnx_actions(candidate, obs, bot, layout.input_names), mask, tolerance
                )
            )
        if not onnx_parity.passed(discrete or layout.mixed):
            raise ExportError(f"ONNX export disagrees with the model: {onnx_parity}")
        try:
            write_json_atomic(bot_json, spec)
            os.replace(candidate, bot_onnx)
        except OSError as exc:
            raise ExportError(
                f"cannot write {bot_json.name} or {bot_onnx.name}: {exc.strerror or exc}"
            ) from None
    return ExportResult(bot_json, bot_onnx, bot_parity, onnx_parity)
