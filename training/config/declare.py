"""How a training setting is declared (:func:`setting`), the error every bad setting raises
(:class:`ConfigError`), and the bounds the declarations share."""

from __future__ import annotations

from dataclasses import MISSING, field
from typing import Any

from game_bridge.errors import LanderError


class ConfigError(LanderError, ValueError):
    """A configuration file or value that cannot be used."""


MAX_TIMESTEPS = 10**12
"""A trillion steps: beyond any run, and far inside the int64 step counters."""
MAX_ACTION_REPEAT = 1000
"""Physics ticks per step: 1,000 ticks are 16 game seconds, past any sane control rate."""
MAX_SPEEDUP = 1e6
MAX_MEMORY = 4096
"""The most units ``--memory`` may ask for: a GRU of 4,096 is 50M weights, past any bot."""
CAMERA_ENCODERS = ("centroids", "nature", "small", "narrow")
"""What ``--camera-encoder`` may name (training/ppo/camera_policy.py)."""
ConvolutionLayers = tuple[tuple[int, int, int], ...]
"""A CNN encoder's convolutions, each its maps, kernel and stride (a ReLU after each)."""
SMALL_LAYERS: ConvolutionLayers = ((16, 8, 4), (32, 4, 2))
"""``--camera-encoder small``: the network of the first DQN (Mnih et al. 2013), 16 maps of
8 x 8 by 4, then 32 of 4 x 4 by 2: on 84 x 84 x 4 frames 2.9M multiply-adds a frame against
the Nature CNN's 9.4M, for a CPU that pays for every one of them in each of PPO's epochs."""
NARROW_LAYERS: ConvolutionLayers = ((16, 8, 4), (32, 4, 2), (32, 3, 1))
"""``--camera-encoder narrow``: the Nature CNN's three convolutions at half its maps (16,
32, 32 where it has 32, 64, 64): the small CNN's work (3.2M multiply-adds a frame at 256
features) with the Nature CNN's depth; the default for pictures, where the small one learned
Breakout slowly per sample (docs/performance.md, "Games that see, seventeenth part")."""
NATURE_LAYERS: ConvolutionLayers = ((32, 8, 4), (64, 4, 2), (64, 3, 1))
"""``--camera-encoder nature``: SB3's ``NatureCNN`` (Mnih et al. 2015), which SB3 builds;
written here for what its size is."""
STRIDED_LAYERS = {"small": SMALL_LAYERS, "narrow": NARROW_LAYERS}
"""The encoders lander builds itself (``strided_cnn`` in training/ppo/camera_policy.py)."""
CNN_LAYERS = {**STRIDED_LAYERS, "nature": NATURE_LAYERS}
"""Every convolutional ``--camera-encoder``'s layers (the centroids have none)."""


def setting(
    default: Any = MISSING,
    *,
    help: str,
    low: float | None = None,
    high: float | None = None,
    choices: tuple[str, ...] | None = None,
    resumable: bool = False,
    shown: str | None = None,
    factory: Any = MISSING,
    inherited: bool = True,
    shape: bool = False,
    panel: str,
) -> Any:
    """Declare one training setting: everything lander knows of it lives here. The
    command-line options of every training command are generated from these
    declarations (``cli/common/train_flags.py``), :meth:`TrainConfig.validate` checks the
    bounds, and a resume changes only the ``resumable`` ones.

    :param help: one line for ``--help``.
    :param low: smallest value allowed (inclusive); ``high`` likewise.
    :param choices: the values a text setting may take.
    :param resumable: a resumed PPO model takes the new value (others are the
        network's shape or the games' set-up, kept from the checkpoint's run).
    :param shown: the default as ``--help`` shows it, when the value itself says
        too little (None: "the game's own").
    :param inherited: a resume starts from the parent run's value; False for where a
        session runs (a cluster may be gone by then), which each session names anew.
    :param shape: the policy network's shape, fixed when a run starts: a resume that names
        another value is refused (the checkpoint's network could only keep its own).
    :param panel: the group ``--help`` lists the option in (Games, PPO, Health, ...).
    """
    metadata = {
        "help": help,
        "low": low,
        "high": high,
        "choices": choices,
        "resumable": resumable,
        "shown": shown,
        "inherited": inherited,
        "shape": shape,
        "panel": panel,
    }
    if factory is not MISSING:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)
