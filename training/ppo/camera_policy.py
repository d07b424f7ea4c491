"""How a policy sees camera keys: the feature extractor lander builds for image
observations, alone or beside vector keys.

SB3's ``NatureCNN`` was made for 84 x 84 Atari frames on a GPU; on a 2-core box it
learns the bundled lander's 36 x 48 camera slowly (700 steps/s, a normalized 0.23 at
best in 200 s, where this encoder reached 0.74 at the same learning rate, and now,
whitened and trained in numpy, passes 0.8 in a median 25 s; docs/performance.md,
"Camera against coordinates" and "The camera, third part"). What a small game frame
mostly says is *where* things are, so lander's default encoder asks exactly that: a learned
per-pixel mix of the colour channels into a few maps (a 1 x 1 convolution and a ReLU),
and of each map its centroid and its mass (:class:`Centroids`), whitened
(:class:`Whitening`). That is a handful of cheap operations per pixel, keeps positions
to a fraction of a pixel, and lets the dense layers above it learn the way they do from
coordinates. ``--camera-encoder nature`` keeps SB3's CNN for scenes whose textures
matter. Both export (numpy and ONNX) layer for layer: docs/bot-format.md, "Camera keys".
The centroid encoder's rollouts and update run in numpy (``training/ppo/camera_update.py``);
its whitening is refitted after each rollout here (:func:`refit_whitening`).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import torch
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.preprocessing import is_image_space
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, NatureCNN
from torch import nn

from game_bridge.bot_runner import CENTROID_EPSILON
from training.config import CAMERA_ENCODERS, CNN_LAYERS, STRIDED_LAYERS, ConvolutionLayers
from training.ppo.action_heads import merge_moments

CENTROID_MAPS = 8
"""Maps the centroid encoder makes of a frame: each finds one kind of thing."""
CENTROID_POOL = 2
"""Pixels averaged (per side) before the maps are made: a quarter of the work, and a
point drawn across pixels still moves its centroid smoothly."""
CNN_ENCODERS = tuple(CNN_LAYERS)
"""The ``--camera-encoder`` choices that are convolutional networks."""
BYTE_SCALE = 1.0 / 255.0
"""SB3's scaling of image bytes to [0, 1], which a CNN's :class:`ByteConv2d` applies to its
weights instead of to the frames."""
SAVED_FEATURES = 256
"""The width of the CNN encoders' output (``small``, ``nature``) in policies saved before
the width was a saved argument of :class:`CameraExtractor`: they load at it."""


class Centroids(nn.Module):
    """Each map's centroid and mass: ``[N, C, H, W]`` (non-negative) to ``[N, 3C]``,
    every map's x (-1 left, 1 right), then every map's y (-1 top, 1 bottom), then every
    map's mass (the sum of its values)."""

    def __init__(self, height: int, width: int) -> None:
        super().__init__()
        ys, xs = torch.meshgrid(
            torch.linspace(-1.0, 1.0, height), torch.linspace(-1.0, 1.0, width), indexing="ij"
        )
        ones = torch.ones(height * width)
        self.grid: torch.Tensor
        self.register_buffer("grid", torch.stack([xs.reshape(-1), ys.reshape(-1), ones], dim=1))

    def forward(self, maps: torch.Tensor) -> torch.Tensor:
        # [N, C, 3]: sum of x, of y, of the map (in the maps' precision: see CentroidEncoder)
        moments = maps.flatten(2) @ self.grid.to(maps.dtype)
        mass = moments[:, :, 2]
        where = moments[:, :, :2] / (mass + CENTROID_EPSILON).unsqueeze(2)
        return torch.cat([where[:, :, 0], where[:, :, 1], mass], dim=1)


class Whitening(nn.Module):
    """The centroids made uncorrelated and of unit spread: ``(features - mean) @ matrix.T``,
    with ``matrix`` the inverse square root of their covariance (ZCA), refitted after
    every rollout from the frames it saw (:func:`refit_whitening`), never by the
    gradient.

    Why: centroids are positions, and what a policy must act on is mostly their
    *differences*: the target's offset from the lander, the lander's from its trail (its
    velocity, a fraction of a pixel a step). Two centroids that move together are nearly
    the same feature; their difference is a direction of tiny spread, which dense layers
    started for unit inputs learn slowly. Whitened, that direction is as large as any
    other (the bundled lander's camera: 0.8 after a median 78,848 samples where the path
    before needed 191,488 or missed it in 120 s; docs/performance.md, "The camera, third
    part"). It is a linear map, so a bot file holds it as a dense layer, and a refit
    changes how the policy is written, not what it does (the first dense layers are
    rewritten to match).

    :param width: the encoder's features (three per map).
    """

    def __init__(self, width: int) -> None:
        super().__init__()
        self.matrix: torch.Tensor
        self.mean: torch.Tensor
        self.seen_mean: torch.Tensor
        self.seen_covariance: torch.Tensor
        self.refits: torch.Tensor
        self.register_buffer("matrix", torch.eye(width))
        self.register_buffer("mean", torch.zeros(width))
        # The running statistics the matrix comes from, kept so a resumed run goes on
        # from them (float64: a covariance of centroids spans ten orders of magnitude).
        self.register_buffer("seen_mean", torch.zeros(width, dtype=torch.float64))
        self.register_buffer("seen_covariance", torch.zeros(width, width, dtype=torch.float64))
        self.register_buffer("refits", torch.zeros((), dtype=torch.int64))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return (features - self.mean.to(features.dtype)) @ self.matrix.to(features.dtype).T


class CentroidEncoder(nn.Sequential):
    """The default encoder of one camera key: average pool, a 1 x 1 convolution without
    bias, ReLU, :class:`Centroids`, and for policies built since the whitening
    (:class:`Whitening`) that. Its layers are modules as any ``Sequential``'s (the
    export walks them, checkpoints name them), but the convolution runs as one matrix
    product over the pooled pixels: torch's ``conv2d`` on a CPU takes twice as long for
    a handful of channels, and the camera policy's update is most of a run's time."""

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        features = self.centroids(frames)
        whitening = self.whitening
        return (features if whitening is None else whitening(features)).float()

    def centroids(self, frames: torch.Tensor) -> torch.Tensor:
        """The centroids and masses of the maps, before any whitening, in float64.

        Why float64: a map that is nearly dark has a centroid of its moment over a tiny
        mass, and the whitening scales a direction that hardly varies by up to 100, so
        float32 rounding in here (3e-6 in a feature) reached the actions by 1.5e-4 and failed
        export parity against the bot file's float64 numpy. In float64 the model computes
        what the bot file does; the pooling is a mean over a reshape, not ``AvgPool2d``,
        because onnxruntime pools float32 only.
        """
        pool, conv, relu, centroids = list(self)[:4]
        assert isinstance(conv, nn.Conv2d) and isinstance(pool, nn.AvgPool2d)
        kernel = pool.kernel_size
        size = int(kernel if isinstance(kernel, int) else kernel[0])
        _, channels, height, width = frames.shape
        high, wide = height // size, width // size  # AvgPool2d drops a remainder too
        pooled = (
            frames[:, :, : high * size, : wide * size]
            .double()
            .reshape(-1, channels, high, size, wide, size)
            .mean(dim=(3, 5))
        )
        weights = conv.weight.double().reshape(conv.out_channels, channels)
        maps = (weights @ pooled.reshape(-1, channels, high * wide)).reshape(
            -1, conv.out_channels, high, wide
        )
        return centroids(relu(maps))

    @property
    def whitening(self) -> Whitening | None:
        """The encoder's whitening; None in a policy built before it."""
        last = self[-1]
        return last if isinstance(last, Whitening) else None


PIXEL_CLIP = 5.0
"""How many spreads from its mean a normalized pixel may lie (Sample Factory's clip)."""
PIXEL_EPSILON = 1e-5 * 255.0**2
"""Added to each pixel's variance (in bytes): Sample Factory's 1e-5 on frames in [0, 1]."""


def cnn_reads_lone_camera(encoder: str, space: gymnasium.spaces.Space[Any]) -> bool:
    """True for a CNN reading one camera alone (an ALE game's frames), not a dictionary of keys:
    where a :class:`PixelNormalization` may stand before it (and action_heads' ReturnScale)."""
    return encoder in CNN_ENCODERS and is_camera(space)


class PixelNormalization(nn.Module):
    """Each pixel of a camera's frames (bytes) less its running mean, over its running
    spread, clipped at :data:`PIXEL_CLIP`: Sample Factory's ``normalize_input``, which it
    turns on for Atari. A still background goes to 0 and what moves stands out. Its
    statistics are refitted after each rollout (:func:`refit_pixels`), never by the
    gradient; until the first refit it is SB3's scaling to [0, 1]. A bot file carries
    ``mean`` and ``scale`` as its observation's normalization (bot_spec.py)."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        super().__init__()
        self.seen_mean: torch.Tensor
        self.seen_var: torch.Tensor
        self.seen: torch.Tensor
        # As Sample Factory starts: a mean of 0 and a variance of 1 (on [0, 1]) seen once.
        self.register_buffer("seen_mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("seen_var", torch.full(shape, 255.0**2, dtype=torch.float64))
        self.register_buffer("seen", torch.ones((), dtype=torch.float64))
        # The forward's factors, channels last: derived once per refit or load, not saved.
        self.inverse_rows: torch.Tensor
        self.bias_rows: torch.Tensor
        self.register_buffer("inverse_rows", torch.empty(0), persistent=False)
        self.register_buffer("bias_rows", torch.empty(0), persistent=False)
        self.register_load_state_dict_post_hook(_settle_loaded)
        self.settle()

    @property
    def mean(self) -> torch.Tensor:
        """Each pixel's running mean (bytes, float32: what the policy and its bot use)."""
        return self.seen_mean.float()

    @property
    def scale(self) -> torch.Tensor:
        """Each pixel's running spread (bytes, float32), never under the epsilon's root."""
        return torch.sqrt(self.seen_var + PIXEL_EPSILON).float()

    def settle(self) -> None:
        """Derive the forward's channels-last factors from the statistics as they are now."""
        inverse = 1.0 / self.scale  # buffers: no gradient
        self.inverse_rows = inverse.permute(1, 2, 0).contiguous()
        self.bias_rows = (-self.mean * inverse).permute(1, 2, 0).contiguous()

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        # Channels last, as a CNN's frames arrive (CameraExtractor.lay_out): one fused
        # multiply-add over contiguous rows, a sixth of broadcasting the statistics' time.
        rows = frames.contiguous(memory_format=torch.channels_last).permute(0, 2, 3, 1)
        normalized = torch.addcmul(self.bias_rows, rows, self.inverse_rows)
        return normalized.clamp_(-PIXEL_CLIP, PIXEL_CLIP).permute(0, 3, 1, 2)

    def refit(self, frames: np.ndarray) -> None:
        """Add a rollout's frames (bytes, ``[rows, *shape]``) to the running statistics
        (Chan's parallel update, as Sample Factory's), then :meth:`settle`."""
        rows = len(frames)
        total = np.zeros(frames.shape[1:])
        squares = np.zeros(frames.shape[1:])
        for start in range(0, rows, 128):  # float32 within a chunk, float64 across
            chunk = torch.from_numpy(frames[start : start + 128]).float()
            total += chunk.sum(0).double().numpy()
            squares += chunk.square().sum(0).double().numpy()
        mean = total / rows
        var = (squares - rows * mean**2) / max(rows - 1, 1)
        stats = (self.seen_mean, self.seen_var, self.seen)
        merge_moments(*stats, torch.from_numpy(mean), torch.from_numpy(var), rows)
        self.settle()


def _settle_loaded(module: nn.Module, _keys: object) -> None:
    """After ``load_state_dict`` (a checkpoint; the playing copy each rollout)."""
    if isinstance(module, PixelNormalization):
        module.settle()


class ByteConv2d(nn.Conv2d):
    """A CNN's first convolution reading its frames as bytes (0 to 255, as floats): the
    1/255 that SB3 applies to every frame (``obs.float() / 255``, 12% of a Breakout run's
    trainer) applied to the weights instead, a few thousand numbers. The same function
    and the same gradients (tests/test_atari.py, in float64), one pass over each
    minibatch's frames fewer. Its policy is built with ``normalize_images=False``
    (:func:`camera_policy_kwargs`), so the bot file's normalization leaves the bytes as
    they are and its first ``conv2d`` carries :meth:`scaled_weight`."""

    def scaled_weight(self) -> torch.Tensor:
        """The weights as they meet the bytes (what a bot file and ONNX carry)."""
        return self.weight * BYTE_SCALE

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self._conv_forward(frames, self.scaled_weight(), self.bias)


def _reading_bytes(first: nn.Conv2d) -> ByteConv2d:
    """A :class:`ByteConv2d` of ``first``'s shape and stride (freshly initialized: the
    policy initializes its convolutions after building them)."""
    kernel, stride = first.kernel_size, first.stride
    return ByteConv2d(
        first.in_channels, first.out_channels, (kernel[0], kernel[1]), (stride[0], stride[1])
    )


def strided_cnn(
    space: gymnasium.spaces.Box,
    layers: ConvolutionLayers,
    features: int,
    byte_frames: bool,
) -> nn.Sequential:
    """Strided convolutions (``layers``: maps, kernel, stride each), each with a ReLU, then a
    dense layer of ``features``: the small and narrow encoders (with ``byte_frames``, the
    first convolution a :class:`ByteConv2d`)."""
    parts: list[nn.Module] = []
    channels = int(space.shape[0])
    for index, (maps, kernel, stride) in enumerate(layers):
        conv = nn.Conv2d(channels, maps, kernel, stride=stride)
        parts += [_reading_bytes(conv) if byte_frames and index == 0 else conv, nn.ReLU()]
        channels = maps
    convolutions = nn.Sequential(*parts, nn.Flatten())
    with torch.no_grad():
        width = int(convolutions(torch.zeros(1, *space.shape)).shape[1])
    return nn.Sequential(convolutions, nn.Linear(width, features), nn.ReLU())


def camera_encoder(
    space: gymnasium.spaces.Box, encoder: str, whiten: bool, features: int, byte_frames: bool
) -> nn.Module:
    """The encoder of one camera key named by ``--camera-encoder`` (a CNN's output
    ``features`` wide; with ``byte_frames``, its first convolution a :class:`ByteConv2d`)."""
    if encoder == "centroids":
        return centroid_encoder(space, whiten=whiten)
    if encoder in STRIDED_LAYERS:
        return strided_cnn(space, STRIDED_LAYERS[encoder], features, byte_frames)
    nature = NatureCNN(space, features, normalized_image=False)
    if byte_frames:
        first = nature.cnn[0]
        assert isinstance(first, nn.Conv2d)
        nature.cnn[0] = _reading_bytes(first)
    return nature


def centroid_encoder(
    space: gymnasium.spaces.Box,
    maps: int = CENTROID_MAPS,
    pool: int = CENTROID_POOL,
    whiten: bool = True,
) -> nn.Sequential:
    """The default encoder of one camera key (channels first).

    :param whiten: end in a :class:`Whitening` (what new policies get; False builds the
        encoder of policies saved before it, whose checkpoints hold no such layer).
    """
    channels, height, width = (int(v) for v in space.shape)
    layers: list[nn.Module] = [
        nn.AvgPool2d(pool),
        # No bias: a map is dark where the frame is, so its mass and centroid are the
        # lit things' alone (a bias lights every pixel and drags centroids to the middle).
        nn.Conv2d(channels, maps, 1, bias=False),
        nn.ReLU(),
        Centroids(height // pool, width // pool),
    ]
    if whiten:
        layers.append(Whitening(3 * maps))
    return CentroidEncoder(*layers)


class CameraExtractor(BaseFeaturesExtractor):
    """Features of an observation with camera keys: each camera key through its encoder,
    each vector key as it is, joined in the observation's key order (as SB3's
    ``CombinedExtractor`` joins them, so a bot's inputs keep the game's order).

    :param observation_space: one camera (a Box image) or a Dict of keys.
    :param encoder: one of :data:`CAMERA_ENCODERS`.
    :param frames: frames each camera key holds (``--frame-stack``), stacked along its
        channels; kept here so the saved model says how its players must stack.
    :param whiten: the centroid encoders end in a :class:`Whitening` (new policies; a
        policy saved before it was built without, and its saved arguments say so).
    :param features: the width of a CNN encoder's output (a policy saved without it has
        :data:`SAVED_FEATURES`).
    :param byte_frames: a CNN encoder takes its frames as bytes and scales its first
        convolution's weights (:class:`ByteConv2d`; its policy does not scale images). A
        policy saved before it scales its frames in SB3 and loads with it False.
    :param pixel_norm: a lone camera's frames pass a :class:`PixelNormalization` before
        its CNN (which then reads them as they come out, not as bytes).
    """

    def __init__(
        self,
        observation_space: gymnasium.spaces.Space[Any],
        encoder: str = "centroids",
        frames: int = 1,
        whiten: bool = False,
        features: int = SAVED_FEATURES,
        byte_frames: bool = False,
        pixel_norm: bool = False,
    ) -> None:
        if encoder not in CAMERA_ENCODERS:
            raise ValueError(f"camera encoder must be one of {', '.join(CAMERA_ENCODERS)}")
        if byte_frames and encoder not in CNN_ENCODERS:
            raise ValueError("only a CNN camera encoder takes its frames as bytes")
        if pixel_norm and (byte_frames or not cnn_reads_lone_camera(encoder, observation_space)):
            raise ValueError("pixels are normalized for a CNN reading one camera alone")
        parts = (
            list(observation_space.spaces.items())
            if isinstance(observation_space, gymnasium.spaces.Dict)
            else [("obs", observation_space)]
        )
        encoders: list[nn.Module] = []
        widths: list[int] = []
        for _, space in parts:
            assert isinstance(space, gymnasium.spaces.Box)
            if is_camera(space):
                module: nn.Module = camera_encoder(space, encoder, whiten, features, byte_frames)
            else:
                module = nn.Flatten()
            with torch.no_grad():
                widths.append(int(module(torch.zeros(1, *space.shape)).shape[1]))
            encoders.append(module)
        super().__init__(observation_space, sum(widths))
        self.widths = tuple(widths)
        """Each key's columns of the features, in order."""
        self.keyed = isinstance(observation_space, gymnasium.spaces.Dict)
        # A list, not a ModuleDict: a game's key may hold a "." that a module name may not.
        self.keys = tuple(key for key, _ in parts)
        self.encoders = nn.ModuleList(encoders)
        self.frames = frames
        self.camera_keys = tuple(key for key, space in parts if is_camera(space))
        self.byte_frames = byte_frames
        self.pixels: PixelNormalization | None = None
        if pixel_norm:
            assert isinstance(observation_space, gymnasium.spaces.Box)
            self.pixels = PixelNormalization(observation_space.shape)
        self.channels_last = encoder in CNN_ENCODERS
        """A CNN's frames go in channels last: torch's CPU convolutions (oneDNN) then run
        an update 1.3x to 1.4x as fast as on the frames' own channels-first layout
        (benchmarks/cnn_layout.py), and a Breakout run played 1.25x the samples in 3
        minutes; the numbers are the same, only their order in memory."""

    def forward(self, observations: Any) -> torch.Tensor:
        if self.pixels is not None:
            observations = self.pixels(observations)
        return self.encode(observations)

    def encode(self, observations: Any) -> torch.Tensor:
        """The features of observations already normalized (a bot file's runner and ONNX
        apply its normalization, :class:`PixelNormalization`'s included, before this)."""
        if not self.keyed:
            return self.encoders[0](self._layout(observations))
        return torch.cat(
            [
                module(self._layout(observations[key]))
                for key, module in zip(self.keys, self.encoders, strict=True)
            ],
            dim=1,
        )

    def lay_out(self, observations: Any) -> Any:
        """Observations (a tensor, or a dict of tensors by key) as :meth:`forward` reads
        them fastest: each camera key channels last for a CNN. A rollout hands its frames
        over so while they are still bytes, a quarter of the memory to move."""
        if isinstance(observations, dict):
            return {key: self._layout(part) for key, part in observations.items()}
        return self._layout(observations)

    def _layout(self, part: torch.Tensor) -> torch.Tensor:
        """A camera key's frames channels last for a CNN; anything else as it is."""
        if self.channels_last and part.dim() == 4:
            return part.contiguous(memory_format=torch.channels_last)
        return part


def is_camera(space: gymnasium.spaces.Space[Any]) -> bool:
    """True for a camera key's space: a uint8 image (SB3's test, channels not checked)."""
    return isinstance(space, gymnasium.spaces.Box) and is_image_space(space, check_channels=False)


def sees_images(space: gymnasium.spaces.Space[Any]) -> bool:
    """True when an observation space has a camera key (a uint8 image, channels first)."""
    parts = list(space.spaces.values()) if isinstance(space, gymnasium.spaces.Dict) else [space]
    return any(is_camera(part) for part in parts)


def camera_policy_kwargs(
    encoder: str, frames: int, features: int, normalize_pixels: bool = False
) -> dict[str, Any]:
    """The ``policy_kwargs`` that give a new policy lander's camera extractor (its centroid
    encoders whitened; a CNN encoder ``features`` wide, ``--cnn-features``, reading its
    frames as bytes, or, with ``normalize_pixels``, through a :class:`PixelNormalization`;
    either way the policy leaves them unscaled)."""
    arguments: dict[str, Any] = {
        "encoder": encoder,
        "frames": frames,
        "whiten": True,
        "features": features,
        "byte_frames": encoder in CNN_ENCODERS and not normalize_pixels,
    }
    if normalize_pixels:  # not named otherwise: a policy saved before it loads as it was
        arguments["pixel_norm"] = True
    return {
        "features_extractor_class": CameraExtractor,
        "features_extractor_kwargs": arguments,
        "normalize_images": encoder not in CNN_ENCODERS,
    }


# -- refitting the whitening after each rollout ------------------------------------------
#
# After each rollout, each whitened encoder's centroids over the rollout's frames update a
# running mean and covariance (MOMENTUM of the new rollout), and the whitening becomes the
# inverse square root of that covariance. The dense layers that read the features (the
# first of the actor and of the critic) are rewritten in the same step so the policy's
# outputs stay what they were (to float32 rounding): the rollout's stored values and
# log-probabilities remain the policy's own, and the refit changes only how easily the
# next update moves along each direction of the features. Adam's moments are kept as they
# are: each refit moves the statistics by a tenth of one rollout's, so the layers they
# belong to change little.

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


def refit_pixels(policy: ActorCriticPolicy, buffer: RolloutBuffer) -> None:
    """Refit ``policy``'s :class:`PixelNormalization` (if it has one) to the frames of
    ``buffer``, a collected rollout: the update that follows reads them by the new
    statistics, as Sample Factory's learner does."""
    extractor = policy.features_extractor
    if isinstance(extractor, CameraExtractor) and extractor.pixels is not None:
        stored = np.asarray(buffer.observations)
        extractor.pixels.refit(stored.reshape(-1, *stored.shape[2:]))


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
