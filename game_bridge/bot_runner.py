"""Runs an exported bot (``bots/<run>.json``) with numpy alone: no torch needed.

The game side uses this to play a bot; export uses it to prove the file gives
the same actions as the trained model. The format is documented in
``docs/bot-format.md``.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from game_bridge.errors import LanderError
from game_bridge.file_input import read_bounded
from game_bridge.frame_stack import MAX_FRAMES, FrameStack, StackedPolicy
from game_bridge.lfs_pointers import is_lfs_pointer, lfs_pointer_message
from game_bridge.memory import GruWeights, RecurrentPlayer

BOT_FORMAT = "lander-bot"
BOT_FORMAT_VERSION = 1
MEMORY_FORMAT_VERSION = 2
"""A bot with memory (a ``memory`` section) is version 2: a player that knows only version 1
would play it without its state, so it refuses it by its version instead."""
MASK_FORMAT_VERSION = 3
"""A bot that picks among the moves its game allows (``action.mask``) is version 3: a player
that knows only versions 1 and 2 would pick forbidden moves, so it refuses it instead."""
VERSIONS = (BOT_FORMAT_VERSION, MEMORY_FORMAT_VERSION, MASK_FORMAT_VERSION)
MAX_MEMORY_UNITS = 4096
"""The most units of state a bot may keep per agent (``--memory``'s own bound)."""
MAX_BOT_BYTES = 64 * 2**20
"""A bot file larger than this is refused before it is read: a bot of lander's layout with
a million weights is about 20 MB of JSON."""
MAX_WIDTH = 100_000
"""The widest observation, action or layer a bot may declare."""
ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0.0),
    "linear": lambda x: x,
}


class BotFormatError(LanderError, ValueError):
    """A bot file that is not a lander bot or whose shapes do not fit together."""


MAX_ENCODER_LAYERS = 16
"""The most layers a camera key's encoder may have."""
IMAGE_BATCH = 256
"""Frames encoded at once, at most: a convolution's windows of a few thousand frames would
take GBs."""
MAX_FRAME_VALUES = 4_000_000
"""The most values an encoder layer may make of one frame (its output, or a convolution's
windows): a bot file from elsewhere must not ask for gigabytes per frame."""
BATCH_VALUES = 16_000_000
"""Values the encoder may hold at once over a batch of frames (128 MB of float64): a bot
whose layers make more of a frame encodes fewer frames at a time."""


@dataclass(frozen=True)
class Layer:
    """One dense layer: ``activation(x @ weights.T + biases)``."""

    weights: np.ndarray
    biases: np.ndarray
    activation: str


@dataclass(frozen=True)
class EncoderLayer:
    """One layer of a camera key's encoder (docs/bot-format.md, "Camera keys").

    :param kind: ``conv2d``, ``centroids``, ``flatten`` or ``dense``.
    :param weights: conv2d ``[out][in][kh][kw]``, dense ``[out][in]``; None otherwise.
    :param stride: conv2d's (rows, columns).
    """

    kind: str
    weights: np.ndarray | None = None
    biases: np.ndarray | None = None
    activation: str = "linear"
    stride: tuple[int, int] = (1, 1)

    def shape_after(self, shape: tuple[int, ...], where: str) -> tuple[int, ...]:
        """The shape this layer makes of one input of ``shape``.

        :raises BotFormatError: an input this layer cannot take.
        """
        if self.kind == "flatten":
            return (math.prod(shape),)
        if self.kind == "centroids":
            if len(shape) != 3:
                raise BotFormatError(
                    f"{where}: centroids take a [C, H, W] input, not {list(shape)}"
                )
            return (3 * shape[0],)
        weights = self.weights
        assert weights is not None and self.biases is not None  # read with the layer
        if self.biases.shape != (weights.shape[0],):
            raise BotFormatError(
                f"{where}: {self.biases.shape[0]} biases for {weights.shape[0]} units"
            )
        if self.kind == "dense":
            if weights.ndim != 2 or shape != (weights.shape[1],):
                raise BotFormatError(
                    f"{where}: dense weights of shape {weights.shape} do not take {list(shape)}"
                )
            return (weights.shape[0],)
        rows, columns = self.stride
        if (
            weights.ndim != 4
            or len(shape) != 3
            or weights.shape[1] != shape[0]
            or not (1 <= weights.shape[2] <= shape[1] and 1 <= weights.shape[3] <= shape[2])
            or not (1 <= rows <= shape[1] and 1 <= columns <= shape[2])
        ):
            raise BotFormatError(
                f"{where}: conv2d weights of shape {weights.shape} do not take {list(shape)}"
            )
        return (
            weights.shape[0],
            (shape[1] - weights.shape[2]) // rows + 1,
            (shape[2] - weights.shape[3]) // columns + 1,
        )

    def values_made(self, shape: tuple[int, ...], after: tuple[int, ...]) -> int:
        """Values this layer holds for one frame of ``shape`` (output ``after``): its output,
        or a convolution's windows where they are more."""
        if self.kind == "conv2d" and self.weights is not None:
            windows = shape[0] * math.prod(self.weights.shape[2:]) * math.prod(after[1:])
            return max(windows, math.prod(after))
        return math.prod(after)

    def apply(self, x: np.ndarray) -> np.ndarray:
        """This layer on a batch (first axis: frames)."""
        if self.kind == "flatten":
            return x.reshape(len(x), -1)
        if self.kind == "centroids":
            return centroids(x)
        assert self.weights is not None and self.biases is not None
        if self.kind == "dense":
            out = x @ self.weights.T + self.biases
        else:
            out = conv2d(x, self.weights, self.biases, self.stride)
        return ACTIVATIONS[self.activation](out)


def conv2d(
    x: np.ndarray, weights: np.ndarray, biases: np.ndarray, stride: tuple[int, int]
) -> np.ndarray:
    """torch's ``Conv2d`` without padding: x ``[N, C, H, W]``, weights ``[O, C, kh, kw]``."""
    kh, kw = weights.shape[2:]
    windows = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
    windows = windows[:, :, :: stride[0], :: stride[1]]  # [N, C, H', W', kh, kw]
    out = np.tensordot(windows, weights, axes=([1, 4, 5], [1, 2, 3]))  # [N, H', W', O]
    return out.transpose(0, 3, 1, 2) + biases[:, None, None]


CENTROID_EPSILON = 1e-3
"""Added to a map's mass before its centroid is taken (training/ppo/camera_policy.py)."""


def centroids(x: np.ndarray) -> np.ndarray:
    """Each map's centroid and mass: ``[N, C, H, W]`` to ``[N, 3C]``, every map's x (-1
    left to 1 right), then every map's y (-1 top to 1 bottom), then every map's mass (the
    sum of its values); a centroid is its moment over ``mass + 0.001``."""
    count, channels, height, width = x.shape
    flat = x.reshape(count, channels, height * width)
    ys, xs = np.meshgrid(np.linspace(-1, 1, height), np.linspace(-1, 1, width), indexing="ij")
    mass = flat.sum(axis=2)
    return np.concatenate(
        [
            (flat @ xs.reshape(-1)) / (mass + CENTROID_EPSILON),
            (flat @ ys.reshape(-1)) / (mass + CENTROID_EPSILON),
            mass,
        ],
        axis=1,
    )


@dataclass(frozen=True)
class ObservationKey:
    """One observation key of a bot: its flat size, and for a camera key the shape its
    encoder takes, the frames stacked in it and the encoder its pixels go through
    before the dense layers."""

    key: str
    size: int
    shape: tuple[int, ...] = ()
    encoder: tuple[EncoderLayer, ...] = ()
    frames: int = 1
    """The game's last frames of this key, stacked along the channels, oldest first."""


def _encoder_layer(raw: dict[str, Any]) -> EncoderLayer:
    kind = str(raw["type"])
    if kind in ("flatten", "centroids"):
        return EncoderLayer(kind)
    if kind not in ("conv2d", "dense"):
        raise BotFormatError(f"unknown encoder layer type {kind!r}")
    stride = tuple(int(v) for v in raw.get("stride", (1, 1)))
    if len(stride) != 2:
        raise BotFormatError(f"a conv2d stride is two numbers, got {list(stride)}")
    return EncoderLayer(
        kind,
        np.asarray(raw["weights"], dtype=np.float64),
        np.asarray(raw["biases"], dtype=np.float64),
        str(raw.get("activation", "linear")),
        (stride[0], stride[1]),
    )


def _memory(raw: dict[str, Any]) -> GruWeights:
    """A bot file's ``memory`` section (docs/bot-format.md, "Memory"): a GRU's arrays."""
    if raw.get("kind") != "gru":
        raise BotFormatError(f"the bot's memory is of kind {raw.get('kind')!r}; lander plays 'gru'")
    return GruWeights(
        *(
            np.asarray(raw[name], dtype=np.float64)
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        )
    )


def _observation_key(raw: dict[str, Any]) -> ObservationKey:
    shape = tuple(int(v) for v in raw.get("shape", ()))
    encoder = tuple(_encoder_layer(layer) for layer in raw.get("encoder", ()))
    return ObservationKey(
        str(raw["key"]), int(raw["size"]), shape, encoder, int(raw.get("frames", 1))
    )


MASKED_OUT = -1e8
"""The output of a move the game's mask forbids (the trained policy's logit for it)."""


class BotRunner:
    """A policy read from a bot JSON file.

    :param spec: the parsed file (see :meth:`from_file`).
    :raises BotFormatError: when the file is inconsistent.
    """

    def __init__(self, spec: dict[str, Any]) -> None:
        if spec.get("format") != BOT_FORMAT:
            raise BotFormatError(f"not a lander bot (format is {spec.get('format')!r})")
        if spec.get("version") not in VERSIONS:
            raise BotFormatError(f"bot format version {spec.get('version')!r} is not supported")
        if (spec.get("version") == MASK_FORMAT_VERSION) != ("mask" in (spec.get("action") or {})):
            raise BotFormatError(
                f"a bot with action.mask is version {MASK_FORMAT_VERSION}, only it"
            )
        if (spec.get("version") == MEMORY_FORMAT_VERSION) != ("memory" in spec):
            raise BotFormatError(
                f"a bot with memory is version {MEMORY_FORMAT_VERSION} and one without is "
                f"version {BOT_FORMAT_VERSION}; this one is version {spec.get('version')} "
                + ("with" if "memory" in spec else "without")
                + " a memory section"
            )
        self.spec = spec
        self.frames_per_batch = IMAGE_BATCH
        """Frames the encoders take at once (fewer for layers that make much of one)."""
        try:
            observation, action = spec["observation"], spec["action"]
            self.obs_size = int(observation["size"])
            # Several observation keys (or a camera key): their values, concatenated in
            # this order; a camera key's through its encoder.
            self.keys = [_observation_key(k) for k in observation.get("keys", [])]
            self.obs_keys = [(k.key, k.size) for k in self.keys]
            self.action_type = str(action["type"])
            self.action_size = int(action["size"])
            self.layers = [
                Layer(
                    np.asarray(layer["weights"], dtype=np.float64),
                    np.asarray(layer["biases"], dtype=np.float64),
                    str(layer["activation"]),
                )
                for layer in spec["layers"]
            ]
            normalization = observation.get("normalization")
            self.obs_mean = self.obs_scale = None
            self.obs_clip = 0.0
            if normalization:
                self.obs_mean = np.asarray(normalization["mean"], dtype=np.float64)
                self.obs_scale = np.asarray(normalization["scale"], dtype=np.float64)
                # null: no clipping (the pixels of a camera run without VecNormalize)
                clip = normalization["clip"]
                self.obs_clip = math.inf if clip is None else float(clip)
            self.nvec = [int(n) for n in action.get("nvec", [])]
            self.low = np.asarray(action.get("low", [-1.0] * self.action_size), dtype=np.float64)
            self.high = np.asarray(action.get("high", [1.0] * self.action_size), dtype=np.float64)
            self.memory = _memory(spec["memory"]) if "memory" in spec else None
            # The observation key of the moves the game allows: the bot picks among them.
            self.mask_key: str | None = str(action["mask"]) if "mask" in action else None
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise BotFormatError(f"bot file is missing or garbles a field: {exc}") from None
        self._check_sizes()
        self._check_shapes()

    def _check_sizes(self) -> None:
        """Bounds and finiteness of what was read: a hand-edited file must fail here, in one
        line, not as a numpy error in the middle of a game."""
        sizes = [("observation size", self.obs_size), ("action size", self.action_size)]
        sizes += [(f"observation key {key!r}", size) for key, size in self.obs_keys]
        sizes += [("an action segment", n) for n in self.nvec]
        for what, size in sizes:
            if not 1 <= size <= MAX_WIDTH:
                raise BotFormatError(
                    f"the bot's {what} must be from 1 to {MAX_WIDTH:,}, got {size}"
                )
        arrays = [("low", self.low), ("high", self.high)]
        arrays += [(f"layer {i} weights", layer.weights) for i, layer in enumerate(self.layers)]
        arrays += [(f"layer {i} biases", layer.biases) for i, layer in enumerate(self.layers)]
        if self.obs_mean is not None and self.obs_scale is not None:
            arrays += [
                ("normalization mean", self.obs_mean),
                ("normalization scale", self.obs_scale),
            ]
            if not self.obs_clip > 0:  # nan too
                raise BotFormatError(
                    f"normalization clip must be a positive number, got {self.obs_clip}"
                )
            if self.obs_scale.size and not bool(np.all(self.obs_scale > 0)):
                raise BotFormatError("normalization scale must be positive")
        for what, values in arrays:
            if not bool(np.all(np.isfinite(values))):
                raise BotFormatError(f"the bot's {what} hold values that are not finite numbers")
        if self.low.shape != (self.action_size,) or self.high.shape != (self.action_size,):
            raise BotFormatError(f"action low and high must have {self.action_size} values each")

    def _check_encoders(self) -> int:
        """The width the dense layers take: each key's size, or its encoder's output."""
        width = 0
        for key in self.keys:
            if not key.encoder:
                width += key.size
                continue
            if (
                len(key.encoder) > MAX_ENCODER_LAYERS
                or not key.shape
                or min(key.shape) < 1
                or math.prod(key.shape) != key.size
            ):
                raise BotFormatError(
                    f"camera key {key.key!r}: a shape {list(key.shape)} of {key.size} values "
                    f"and at most {MAX_ENCODER_LAYERS} encoder layers"
                )
            if not 1 <= key.frames <= MAX_FRAMES or key.shape[0] % key.frames:
                raise BotFormatError(
                    f"camera key {key.key!r}: {key.frames} frames do not split its "
                    f"{key.shape[0]} channels (1 to {MAX_FRAMES} frames)"
                )
            shape = key.shape
            for index, layer in enumerate(key.encoder):
                if layer.activation not in ACTIVATIONS:
                    raise BotFormatError(
                        f"key {key.key!r} layer {index}: unknown activation {layer.activation!r}"
                    )
                for what, values in (("weights", layer.weights), ("biases", layer.biases)):
                    if values is not None and not bool(np.all(np.isfinite(values))):
                        raise BotFormatError(
                            f"key {key.key!r} layer {index}: {what} that are not finite numbers"
                        )
                after = layer.shape_after(shape, f"key {key.key!r} layer {index}")
                made = layer.values_made(shape, after)
                if made > MAX_FRAME_VALUES:
                    raise BotFormatError(
                        f"key {key.key!r} layer {index} makes {made:,} values of one frame, "
                        f"over the {MAX_FRAME_VALUES:,} a bot's layer may"
                    )
                self.frames_per_batch = max(1, min(self.frames_per_batch, BATCH_VALUES // made))
                shape = after
            if len(shape) != 1:
                raise BotFormatError(f"camera key {key.key!r}: its encoder must end flat")
            width += shape[0]
        return width

    def _check_memory(self, width: int) -> int:
        """The width the dense layers take after the memory: its input ``width`` beside the
        state (docs/bot-format.md, "Memory")."""
        memory = self.memory
        if memory is None:
            return width
        units = memory.weight_hh.shape[1] if memory.weight_hh.ndim == 2 else 0
        if not 1 <= units <= MAX_MEMORY_UNITS:
            raise BotFormatError(
                f"the bot's memory must have from 1 to {MAX_MEMORY_UNITS:,} units, got {units}"
            )
        expected = {
            "weight_ih": (3 * units, width),
            "weight_hh": (3 * units, units),
            "bias_ih": (3 * units,),
            "bias_hh": (3 * units,),
        }
        for name, shape in expected.items():
            values = getattr(memory, name)
            if values.shape != shape:
                raise BotFormatError(
                    f"memory {name} of shape {values.shape}: a GRU of {units} units over "
                    f"{width} inputs takes {shape}"
                )
            if not bool(np.all(np.isfinite(values))):
                raise BotFormatError(f"memory {name} holds values that are not finite numbers")
        return width + units

    def _check_shapes(self) -> None:
        width = self._check_encoders() if any(k.encoder for k in self.keys) else self.obs_size
        width = self._check_memory(width)
        for index, layer in enumerate(self.layers):
            if layer.activation not in ACTIVATIONS:
                raise BotFormatError(f"layer {index}: unknown activation {layer.activation!r}")
            if layer.weights.ndim != 2 or layer.weights.shape[1] != width:
                raise BotFormatError(
                    f"layer {index}: weights of shape {layer.weights.shape} do not take an input of width {width}"
                )
            if layer.biases.shape != (layer.weights.shape[0],):
                raise BotFormatError(
                    f"layer {index}: biases of shape {layer.biases.shape} for {layer.weights.shape[0]} units"
                )
            width = layer.weights.shape[0]
        if self.obs_keys and sum(size for _, size in self.obs_keys) != self.obs_size:
            raise BotFormatError("the observation keys' sizes do not add up to its size")
        expected = sum(self.nvec) if self.action_type == "multi_discrete" else self.action_size
        if len({key.frames for key in self.keys if key.encoder}) > 1:
            raise BotFormatError("the bot's camera keys stack different numbers of frames")
        if any(key.frames != 1 for key in self.keys if not key.encoder):
            raise BotFormatError("only camera keys stack frames")
        if not self.layers or width != expected:
            raise BotFormatError(f"the network outputs {width} values, the action needs {expected}")
        if self.action_type not in ("continuous", "discrete", "multi_discrete"):
            raise BotFormatError(f"unknown action type {self.action_type!r}")
        if self.obs_mean is not None and (
            self.obs_mean.shape != (self.obs_size,)
            or self.obs_scale is None
            or self.obs_scale.shape != (self.obs_size,)
        ):
            raise BotFormatError("normalization mean and scale must have the observation's size")

    @classmethod
    def from_file(cls, path: Path) -> BotRunner:
        """Read a bot JSON file.

        :raises BotFormatError: unreadable, not JSON, or inconsistent.
        """
        try:
            size = Path(path).stat().st_size
            if size > MAX_BOT_BYTES:
                raise BotFormatError(
                    f"bot {str(path)!r} is {size / 2**20:,.0f} MB, over the {MAX_BOT_BYTES // 2**20} MB a bot may be"
                )
            if is_lfs_pointer(Path(path)):
                raise BotFormatError(lfs_pointer_message(Path(path), "bot"))
            spec = json.loads(read_bounded(Path(path), MAX_BOT_BYTES))
        except OSError as exc:
            raise BotFormatError(f"cannot read bot {str(path)!r}: {exc.strerror or exc}") from None
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            raise BotFormatError(f"bot {str(path)!r} is not JSON: {exc}") from None
        if not isinstance(spec, dict):
            raise BotFormatError(f"bot {str(path)!r} is not a JSON object")
        return cls(spec)

    def flat_observations(self, obs: np.ndarray | dict[str, Any]) -> np.ndarray:
        """A batch of observations as one matrix: a dict of the bot's keys is joined in
        the bot's key order (as the trained policy joined them)."""
        if isinstance(obs, dict):
            if not self.obs_keys:
                raise BotFormatError("this bot takes one observation vector, not a dict of keys")
            missing = [key for key, _ in self.obs_keys if key not in obs]
            if missing:
                raise BotFormatError(f"observation lacks the bot's key(s) {', '.join(missing)}")
            parts = [
                np.asarray(obs[key], dtype=np.float64).reshape(-1, size)
                for key, size in self.obs_keys
            ]
            return np.concatenate(parts, axis=1)
        flat = np.asarray(obs, dtype=np.float64)
        if self.sees_images and flat.ndim > 2:  # camera frames, one per agent
            flat = flat.reshape(len(flat), -1)
        flat = flat.reshape(1, -1) if flat.ndim == 1 else flat
        if flat.ndim != 2 or flat.shape[1] != self.obs_size:
            raise BotFormatError(
                f"the bot takes observations of size {self.obs_size}, the game sends shape {flat.shape[1:]}"
            )
        return flat

    @property
    def sees_images(self) -> bool:
        """True for a bot with a camera key (its pixels go through an encoder)."""
        return any(key.encoder for key in self.keys)

    def network_output(self, obs: np.ndarray | dict[str, Any]) -> np.ndarray:
        """The raw output of the network (Gaussian mean or logits) for a batch; a bot with
        memory as at an episode's first step (from an empty state: :meth:`step` carries it)."""
        return self.step(obs, None)[0]

    def step(
        self, obs: np.ndarray | dict[str, Any], state: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """The raw output for a batch and, for a bot with memory, each agent's state after
        it (``state``: the states before it, one row per agent; None: zeros)."""
        x = self.flat_observations(obs)
        batch = self.frames_per_batch
        if self.sees_images and len(x) > batch:
            return np.concatenate(
                [self.network_output(x[i : i + batch]) for i in range(0, len(x), batch)]
            ), None
        if self.obs_mean is not None and self.obs_scale is not None:
            x = np.clip((x - self.obs_mean) / self.obs_scale, -self.obs_clip, self.obs_clip)
        if self.sees_images:
            x = self._encode(x)
        after = None
        if self.memory is not None:
            before = np.zeros((len(x), self.memory.units)) if state is None else state
            after = self.memory.step(x, before)
            x = np.concatenate([x, after], axis=1)
        for layer in self.layers:
            x = ACTIVATIONS[layer.activation](x @ layer.weights.T + layer.biases)
        return x, after

    def _encode(self, x: np.ndarray) -> np.ndarray:
        """The joined (normalised) observation cut back into its keys, each camera key's
        pixels run through its encoder, joined again: what the dense layers take."""
        parts = []
        start = 0
        for key in self.keys:
            part = x[:, start : start + key.size]
            start += key.size
            if key.encoder:
                part = part.reshape(len(part), *key.shape)
                for layer in key.encoder:
                    part = layer.apply(part)
            parts.append(part)
        return np.concatenate(parts, axis=1)

    def act(self, obs: np.ndarray | dict[str, Any]) -> np.ndarray:
        """Deterministic actions for a batch of observations (see :meth:`read_actions`);
        a stacked camera key's frames come stacked (:meth:`policy` stacks them); a move
        the game's ``action_mask`` forbids is never picked."""
        return self.read_actions(self.masked(self.network_output(obs), obs))

    def masked(self, output: np.ndarray, obs: np.ndarray | dict[str, Any]) -> np.ndarray:
        """The outputs with the moves the observation's mask forbids pushed out of reach (a
        row that allows none keeps them all: that agent's move goes unused)."""
        if self.mask_key is None:
            return output
        if not isinstance(obs, dict) or self.mask_key not in obs:
            raise BotFormatError(f"this bot picks among the moves of {self.mask_key!r}: give it")
        allowed = np.asarray(obs[self.mask_key], dtype=np.float64).reshape(len(output), -1) > 0.5
        if allowed.shape != output.shape:
            raise BotFormatError(
                f"{self.mask_key!r} has {allowed.shape[1]} moves, not {len(output.T)}"
            )
        allowed |= ~allowed.any(axis=1, keepdims=True)
        return np.where(allowed, output, MASKED_OUT)

    @property
    def frames(self) -> int:
        """Frames each camera key stacks (``--frame-stack``; 1 for a bot without)."""
        return max((key.frames for key in self.keys), default=1)

    def policy(self) -> Callable[[np.ndarray | dict[str, Any]], np.ndarray]:
        """The bot as a player of the game's own observations: a bot of stacked frames
        keeps each agent's last frames itself, a bot with memory each agent's state (tell
        either where episodes start with ``frame_stack.start_episodes``); any other bot is
        :meth:`act`."""
        if self.memory is not None:

            def remember(obs: Any, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                output, after = self.step(obs, state)
                assert after is not None
                return self.read_actions(output), after

            return RecurrentPlayer(remember, self.memory.units)
        if self.frames == 1:
            return self.act
        cameras = [key.key for key in self.keys if key.encoder]
        return StackedPolicy(self.act, FrameStack(self.frames, cameras))

    def read_actions(self, output: np.ndarray) -> np.ndarray:
        """Turn raw network outputs into actions, by the bot's rule.

        Continuous: the mean clipped to the bounds, shape (K, size). Discrete: the
        argmax, shape (K,). Multi-discrete: the argmax of each segment, shape (K, n).
        The ONNX export's output is read the same way.
        """
        if self.action_type == "continuous":
            return np.clip(output, self.low, self.high).astype(np.float32)
        if self.action_type == "discrete":
            return np.argmax(output, axis=1)
        bounds = np.cumsum([0, *self.nvec])
        return np.stack(
            [np.argmax(output[:, a:b], axis=1) for a, b in itertools.pairwise(bounds)], axis=1
        )
