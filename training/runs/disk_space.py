"""Room on disk for a run, said before its first step: what it will write (checkpoints at its
rate and rotation, TensorBoard and its log, the bot, the commits of its checkpoints) against
the free space where each goes and the largest file this process may write; and whether a
run that failed stopped on a full disk (``status`` says so)."""

from __future__ import annotations

import errno
import os
import resource
import shutil
from dataclasses import dataclass
from pathlib import Path

from training.config import CNN_LAYERS, ConvolutionLayers, TrainConfig
from training.runs.run_paths import RunPaths

DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
"""No space left, a quota reached, a file past the size limit: the disk said no."""
ZIP_OVERHEAD = 30_000
"""Bytes of an SB3 zip besides the tensors: the data JSON, versions, the optimizer's layout."""
PICTURE_SHAPE = (4, 84, 84)
"""The frames a CNN's size is reckoned over: four stacked 84 x 84 greys (what the ALE games
send; a bundled camera's frames are smaller)."""
CENTROID_FEATURES = 24
"""What the centroid encoder hands the actor and critic (its 8 maps' x, y and mass)."""
ROLLOUT_LOG_BYTES = 3_000
"""TensorBoard scalars and ``train.log`` lines a rollout adds (about 20 scalars, one line)."""


def on_full_disk(error: str | None) -> bool:
    """True when a run's error is the disk saying no (no space, a quota, a file size limit)."""
    return error is not None and any(os.strerror(code) in error for code in DISK_FULL_ERRNOS)


def convolution_sizes(
    layers: ConvolutionLayers, shape: tuple[int, int, int] = PICTURE_SHAPE
) -> tuple[int, int]:
    """The weights of a CNN's convolutions over frames of ``shape`` (channels, height,
    width), and how many values they hand the CNN's dense layer (``--cnn-features`` wide)."""
    channels, height, width = shape
    weights = 0
    for maps, kernel, stride in layers:
        weights += (channels * kernel * kernel + 1) * maps
        height, width = (height - kernel) // stride + 1, (width - kernel) // stride + 1
        channels = maps
    return weights, channels * height * width


def estimated_checkpoint_bytes(
    config: TrainConfig, observation_size: int, action_size: int, pictures: bool
) -> int:
    """About how large one checkpoint of a new run is: the actor's and critic's weights
    (``--net-width``, two layers each, or none: the heads read the features), a camera
    encoder where the game sends pictures, each with the optimizer's two moments, and the
    zip's own bytes."""
    width = config.net_width
    layers = CNN_LAYERS.get(config.camera_encoder)
    convolutions, flat = convolution_sizes(layers) if layers else (0, 0)
    cnn = pictures and flat > 0  # the centroids hand their few features on as they are
    if cnn:
        inputs = config.cnn_features
    elif pictures:
        inputs = CENTROID_FEATURES
    else:
        inputs = observation_size
    body = (inputs + 1) * width + (width + 1) * width if width else 0
    read = width or inputs  # what the action and value layers read
    weights = 2 * body + (read + 1) * (action_size + 1) + action_size
    if cnn:
        weights += convolutions + (flat + 1) * config.cnn_features
    return weights * 4 * 3 + ZIP_OVERHEAD


@dataclass(frozen=True)
class DiskNeed:
    """What a run will write in one place.

    :param folder: where (a folder that may not exist yet).
    :param size: bytes.
    :param what: what they are, for the message.
    """

    folder: Path
    size: int
    what: str


def run_disk_needs(
    paths: RunPaths, config: TrainConfig, checkpoint_bytes: int, committed: bool
) -> list[DiskNeed]:
    """What the run will write in each of its places, at its checkpoint rate and rotation.

    :param committed: git carries the run: its checkpoints are also copied into ``.git``.
    """
    written = max(1, config.timesteps // config.checkpoint_every)
    on_disk = min(written, config.keep_checkpoints) + 2  # the kept, one being written, final
    rollouts = max(1, config.timesteps // max(1, config.n_steps * config.num_envs))
    mb = checkpoint_bytes / 1e6
    needs = [
        DiskNeed(
            paths.checkpoints,
            on_disk * checkpoint_bytes,
            f"{on_disk} checkpoints of {mb:.2f} MB in checkpoints/",
        ),
        DiskNeed(paths.logs, max(100_000, rollouts * ROLLOUT_LOG_BYTES), "logs/"),
        DiskNeed(paths.bot_json.parent, 2 * checkpoint_bytes, "the bot in bots/"),
    ]
    if committed:
        commits = written // config.push_every if config.push_every else 0
        copies = (
            min(written, config.keep_checkpoints)
            + 1
            + commits * min(config.push_every, config.keep_checkpoints)
        )
        needs.append(
            DiskNeed(
                paths.root / ".git",
                copies * checkpoint_bytes,
                f"{copies} checkpoints committed to .git",
            )
        )
    return needs


def _existing(folder: Path) -> Path:
    """The folder, or its nearest parent that exists (where it will be made)."""
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    return folder


def disk_warnings(needs: list[DiskNeed], checkpoint_bytes: int) -> list[str]:
    """One line for each disk that has less free space than the run will write there, and
    one for a file size limit (``ulimit -f``) below a checkpoint's size; none when it fits."""
    by_disk: dict[int, list[tuple[DiskNeed, Path]]] = {}
    for need in needs:
        place = _existing(need.folder)
        by_disk.setdefault(place.stat().st_dev, []).append((need, place))
    lines = []
    for entries in by_disk.values():
        total = sum(need.size for need, _ in entries)
        free = shutil.disk_usage(entries[0][1]).free
        if free >= total:
            continue
        parts = ", ".join(f"{need.what}: {need.size / 1e6:.2f} MB" for need, _ in entries)
        lines.append(
            f"low disk: {free / 1e6:.2f} MB free at {entries[0][1]}, and this run will write "
            f"about {total / 1e6:.2f} MB there ({parts}): free some space, or lower "
            "--timesteps or --keep-checkpoints, or it stops at the checkpoint that does not fit"
        )
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft != resource.RLIM_INFINITY and soft < checkpoint_bytes:
        lines.append(
            f"files may grow to {soft / 1e6:.2f} MB here (ulimit -f) and a checkpoint is about "
            f"{checkpoint_bytes / 1e6:.2f} MB: the first checkpoint will fail; raise the limit"
        )
    return lines
