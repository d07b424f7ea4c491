"""The stroke game's camera: the sensor's window and the corrected point as a small
picture, a second camera game beside the lander's (``--observation=pixels``).

The frame is a 34 x 34 scope over the stroke's square [-1, 1]^2 (and a pixel beyond each
edge, so a point on the edge is whole) sent under the plugin's
camera key ``camera_2d`` (channels first, uint8, hex-encoded): the newest half of the raw
window (channel 0), its older half (channel 1), each sample a quarter of a pixel's
brightness, and the corrected point (channel 2). The centre of the newest samples, how
far it moved from the older ones and where the point is are what the reference filter
reads from the numbers (games/stroke/controllers.py); here a policy must find them in
the picture, through the sensor's jitter of about two pixels.
"""

from __future__ import annotations

import numpy as np

from game_bridge.sprites import as_bytes, draw_points
from games.spec import Policy
from games.stroke.world import OUTPUTS, WINDOW

PIXELS_PER_UNIT = 16
SIDE = 2 * PIXELS_PER_UNIT + 2
"""Pixels a side: the [-1, 1] square and a pixel beyond each edge."""
FRAME_SHAPE = (3, SIDE, SIDE)
CAMERA_KEY = "camera_2d"
OBSERVATIONS = ("vector", "pixels")
"""What a pen's corrector sees (``--observation``): the numbers, or this scope."""
_SAMPLE = 0.25
"""A raw sample's brightness: the four of a channel add up to one full pixel."""


def scope_frames(obs: np.ndarray) -> np.ndarray:
    """The frame of each coordinate observation (``StrokeWorld.observe``'s rows), shape
    (K, 3, 34, 34), uint8."""
    obs = np.asarray(obs, dtype=np.float64).reshape(len(obs), -1)
    raw = obs[:, : 2 * WINDOW].reshape(len(obs), WINDOW, 2)
    point = obs[:, 2 * WINDOW : 2 * (WINDOW + OUTPUTS)].reshape(len(obs), OUTPUTS, 2)[:, -1]
    frames = np.zeros((len(obs), *FRAME_SHAPE), dtype=np.float32)
    half = WINDOW // 2
    for channel, points, weight in (
        *((0, raw[:, index], _SAMPLE) for index in range(half, WINDOW)),
        *((1, raw[:, index], _SAMPLE) for index in range(half)),
        (2, point, 1.0),
    ):
        draw_points(frames, channel, *_pixels(points), weight)
    return as_bytes(frames)


def _pixels(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pixels from the left and from the top of [-1, 1] points (y up)."""
    return (points[:, 0] + 1.0) * PIXELS_PER_UNIT + 1.0, (
        1.0 - points[:, 1]
    ) * PIXELS_PER_UNIT + 1.0


def compose_scope(policy: Policy) -> Policy:
    """A policy of frames as a policy of the numbers they are drawn from."""
    return lambda obs: policy(scope_frames(obs))
