"""Points drawn into small camera frames, and the frames as a camera sends them, for the
bundled games' camera modes.

A point is spread over the four pixels around it with bilinear weights, so a position
between pixels is seen too (a centroid of the frame recovers it to a fraction of a pixel),
as a game engine's filtered sprite would show it.
"""

from __future__ import annotations

import numpy as np


def draw_points(
    frames: np.ndarray, channel: int, x: np.ndarray, y: np.ndarray, weight: float
) -> None:
    """Add one point per frame to ``frames[:, channel]`` (float, ``[K, C, H, W]``).

    :param x: each frame's point, in pixels from the left edge (pixel centres at
        half-integers).
    :param y: likewise from the top edge.
    :param weight: the point's total brightness (1 is one full pixel).
    """
    count, _, height, width = frames.shape
    agents = np.arange(count)
    x, y = np.asarray(x) - 0.5, np.asarray(y) - 0.5
    left, top = np.floor(x), np.floor(y)
    fx, fy = x - left, y - top
    for dy, wy in ((0, 1 - fy), (1, fy)):
        for dx, wx in ((0, 1 - fx), (1, fx)):
            row = (top + dy).astype(np.int64)
            col = (left + dx).astype(np.int64)
            inside = (row >= 0) & (row < height) & (col >= 0) & (col < width)
            frames[agents[inside], channel, row[inside], col[inside]] += (weight * wy * wx)[inside]


def hex_frames(frames: np.ndarray) -> list[str]:
    """Each frame as the Godot RL Agents plugin sends a camera: its bytes as one hex string."""
    return [frame.tobytes().hex() for frame in frames]


def as_bytes(frames: np.ndarray) -> np.ndarray:
    """Float frames (1 is full brightness) as the uint8 a camera sends, rounded, saturating."""
    return np.minimum(frames * 255.0 + 0.5, 255.0).astype(np.uint8)
