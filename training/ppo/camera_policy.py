"""How a policy sees camera keys: the feature extractor lander builds for image
observations, alone or beside vector keys.

SB3's ``NatureCNN`` was made for 84 x 84 Atari frames on a GPU; on a 2-core box it
learns the bundled lander's 36 x 48 camera slowly (700 steps/s, a normalized 0.23 at
best in 200 s, where this encoder reached 0.74 at the same learning rate, and now,
whitened and trained in numpy, passes 0.8 in a median 19 s; docs/performance.md,
"Camera against coordinates" and "The camera, third part"). What a small game frame
mostly says is *where* things are, so lander's default encoder asks exactly that: a learned
per-pixel mix of the colour channels into a few maps (a 1 x 1 convolution and a ReLU),
and of each map its centroid and its mass (:class:`Centroids`), whitened
(:class:`Whitening`). That is a handful of cheap operations per pixel, keeps positions
to a fraction of a pixel, and lets the dense layers above it learn the way they do from
coordinates. ``--camera-encoder nature`` keeps SB3's CNN for scenes whose textures
matter. Both export (numpy and ONNX) layer for layer: docs/bot-format.md, "Camera keys".
The centroid encoder's rollouts and update run in numpy (``training/ppo/camera_update.py``).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import torch
from stable_baselines3.common.preprocessing import is_image_space
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, NatureCNN
from torch import nn

from game_bridge.bot_runner import CENTROID_EPSILON
from training.config import CAMERA_ENCODERS

CENTROID_MAPS = 8
"""Maps the centroid encoder makes of a frame: each finds one kind of thing."""
CENTROID_POOL = 2
"""Pixels averaged (per side) before the maps are made: a quarter of the work, and a
point drawn across pixels still moves its centroid smoothly."""
NATURE_FEATURES = 256
"""The width of SB3's CNN's output when ``--camera-encoder nature``."""


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
        moments = maps.flatten(2) @ self.grid  # [N, C, 3]: sum of x, of y, of the map
        mass = moments[:, :, 2]
        return torch.cat(
            [
                moments[:, :, 0] / (mass + CENTROID_EPSILON),
                moments[:, :, 1] / (mass + CENTROID_EPSILON),
                mass,
            ],
            dim=1,
        )


class Whitening(nn.Module):
    """The centroids made uncorrelated and of unit spread: ``(features - mean) @ matrix.T``,
    with ``matrix`` the inverse square root of their covariance (ZCA), refitted after
    every rollout from the frames it saw (:mod:`training.ppo.whitening`), never by the
    gradient.

    Why: centroids are positions, and what a policy must act on is mostly their
    *differences*: the target's offset from the lander, the lander's from its trail (its
    velocity, a fraction of a pixel a step). Two centroids that move together are nearly
    the same feature; their difference is a direction of tiny spread, which dense layers
    started for unit inputs learn slowly. Whitened, that direction is as large as any
    other (the bundled lander's camera: 0.8 after a median 62,464 samples where the path
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
        return (features - self.mean) @ self.matrix.T


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
        return features if whitening is None else whitening(features)

    def centroids(self, frames: torch.Tensor) -> torch.Tensor:
        """The centroids and masses of the maps, before any whitening."""
        pool, conv, relu, centroids = list(self)[:4]
        assert isinstance(conv, nn.Conv2d)
        pooled = pool(frames)
        count, channels, height, width = pooled.shape
        weights = conv.weight.reshape(conv.out_channels, channels)
        maps = (weights @ pooled.reshape(count, channels, height * width)).reshape(
            count, conv.out_channels, height, width
        )
        return centroids(relu(maps))

    @property
    def whitening(self) -> Whitening | None:
        """The encoder's whitening; None in a policy built before it."""
        last = self[-1]
        return last if isinstance(last, Whitening) else None


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
    """

    def __init__(
        self,
        observation_space: gymnasium.spaces.Space[Any],
        encoder: str = "centroids",
        frames: int = 1,
        whiten: bool = False,
    ) -> None:
        if encoder not in CAMERA_ENCODERS:
            raise ValueError(f"camera encoder must be one of {', '.join(CAMERA_ENCODERS)}")
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
                module: nn.Module = (
                    centroid_encoder(space, whiten=whiten)
                    if encoder == "centroids"
                    else NatureCNN(space, NATURE_FEATURES, normalized_image=False)
                )
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

    def forward(self, observations: Any) -> torch.Tensor:
        if not self.keyed:
            return self.encoders[0](observations)
        return torch.cat(
            [
                module(observations[key])
                for key, module in zip(self.keys, self.encoders, strict=True)
            ],
            dim=1,
        )


def is_camera(space: gymnasium.spaces.Space[Any]) -> bool:
    """True for a camera key's space: a uint8 image (SB3's test, channels not checked)."""
    return isinstance(space, gymnasium.spaces.Box) and is_image_space(space, check_channels=False)


def sees_images(space: gymnasium.spaces.Space[Any]) -> bool:
    """True when an observation space has a camera key (a uint8 image, channels first)."""
    parts = list(space.spaces.values()) if isinstance(space, gymnasium.spaces.Dict) else [space]
    return any(is_camera(part) for part in parts)


def camera_policy_kwargs(encoder: str, frames: int = 1) -> dict[str, Any]:
    """The ``policy_kwargs`` that give a new policy lander's camera extractor (its centroid
    encoders whitened)."""
    return {
        "features_extractor_class": CameraExtractor,
        "features_extractor_kwargs": {"encoder": encoder, "frames": frames, "whiten": True},
    }
