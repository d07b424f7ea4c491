"""The lander's camera: a small picture of the arena instead of coordinates.

``--observation=pixels`` makes the game send each agent this frame under the image key
``camera_2d`` (a key with ``2d`` in it: the Godot RL Agents plugin's mark for a camera
sensor), channels first, uint8, hex-encoded as the plugin encodes its cameras. One frame
has no velocity in it, so its three channels are the lander now, where the lander was a
quarter of a second ago at its present velocity (its trail), and the target: a policy
sees where it is, where it is heading and where it must go, as a pilot looking at the
screen would. Points are drawn with bilinear weights, so positions between pixels are
seen too.
"""

from __future__ import annotations

import numpy as np

from game_bridge.sprites import as_bytes, draw_points
from games.lander.physics import HEIGHT, WIDTH

FRAME_HEIGHT = 36
FRAME_WIDTH = 48
"""36 x 48 pixels: 2.4 a unit of the 20 x 15 arena; 36 is the smallest side SB3's CNN takes."""
CHANNELS = 3
FRAME_SHAPE = (CHANNELS, FRAME_HEIGHT, FRAME_WIDTH)
CAMERA_KEY = "camera_2d"
OBSERVATIONS = ("vector", "pixels", "glimpse")
"""What a lander can see (``--observation``): its coordinates, this camera, or its
coordinates with the target shown only briefly after it moves (``GLIMPSE_S``)."""
TRAIL_S = 0.25
"""How far back along its velocity the lander's trail is drawn, in game seconds."""
_PIXELS_PER_UNIT = FRAME_WIDTH / WIDTH
assert abs(FRAME_HEIGHT / HEIGHT - _PIXELS_PER_UNIT) < 1e-9, "square pixels"


def camera_frames(pos: np.ndarray, vel: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Every agent's frame, shape (K, 3, 36, 48), uint8.

    :param pos: positions (K, 2) in arena units, y up.
    :param vel: velocities (K, 2) in units a second.
    :param target: targets (K, 2) in arena units.
    """
    frames = np.zeros((pos.shape[0], *FRAME_SHAPE), dtype=np.float32)
    for channel, points in enumerate((pos, pos - vel * TRAIL_S, target)):
        # Row 0 is the top of the arena.
        x = points[:, 0] * _PIXELS_PER_UNIT
        y = (HEIGHT - points[:, 1]) * _PIXELS_PER_UNIT
        draw_points(frames, channel, x, y, 1.0)
    return as_bytes(frames)
