"""A bot correcting strokes by itself, and the picture of it: for each pen the true
stroke, the raw samples the sensor reported and the bot's corrected stroke, so a
person sees at a glance whether the bot smooths the jitter and catches up the lag.

Uses the numpy bot runner only (no torch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from games.stroke.world import STROKE_STEPS, WINDOW, StrokeWorld

_TRUE, _RAW, _CORRECTED = "#2a9d3a", "#9a9a9a", "#e8590c"
_PANEL = 300
_MARGIN = 20
_HEADER = 60


@dataclass
class StrokeTrace:
    """One stroke per pen, step by step: (pens, steps, 2) arrays, and each stroke's return."""

    true: np.ndarray
    raw: np.ndarray
    corrected: np.ndarray
    returns: list[float]


def play_strokes(
    act: Callable[[np.ndarray], np.ndarray], pens: int, seed: int, reward_mode: str = "step"
) -> StrokeTrace:
    """Let ``act`` correct one stroke for each of ``pens`` pens."""
    world = StrokeWorld(pens, seed, reward_mode)
    true, raw, corrected = [], [], []
    returns = np.zeros(pens)
    obs = world.observe()
    for _ in range(STROKE_STEPS):
        true.append(world.pens())
        raw.append(obs[:, 2 * WINDOW - 2 : 2 * WINDOW])  # the newest sample
        result = world.step(np.asarray(act(obs), dtype=np.float32).reshape(pens, 2))
        corrected.append(world.corrected())
        returns += result.reward
        obs = result.obs
    return StrokeTrace(
        np.stack(true, axis=1), np.stack(raw, axis=1), np.stack(corrected, axis=1), returns.tolist()
    )


def _pixels(points: np.ndarray, column: int) -> list[tuple[float, float]]:
    """[-1, 1]^2 into panel ``column`` (y up)."""
    x0 = _MARGIN + column * (_PANEL + _MARGIN)
    xs = x0 + (points[:, 0] + 1) / 2 * _PANEL
    ys = _HEADER + (1 - points[:, 1]) / 2 * _PANEL
    return list(zip(xs.tolist(), ys.tolist(), strict=True))


def record_strokes(trace: StrokeTrace, path: Path, title: str = "", panels: int = 4) -> Path:
    """Draw up to ``panels`` pens side by side: a PNG of whole strokes, or a GIF that
    draws them step by step.

    :raises ValueError: for a suffix other than .png or .gif.
    """
    from PIL import Image, ImageDraw

    if path.suffix.lower() not in (".png", ".gif"):
        raise ValueError(f"--record writes .png or .gif, not {path.suffix or 'no suffix'}")
    shown = min(panels, len(trace.true))
    size = (_MARGIN + shown * (_PANEL + _MARGIN), _HEADER + _PANEL + _MARGIN)

    def draw(upto: int) -> Image.Image:
        image = Image.new("RGB", size, "white")
        canvas = ImageDraw.Draw(image)
        canvas.text((_MARGIN, 8), title or f"{len(trace.true)} strokes", fill="black")
        canvas.text(
            (_MARGIN, 28),
            "green: the true stroke; grey dots: the sensor's raw samples; orange: the bot's",
            fill="#444444",
        )
        for pen in range(shown):
            x0 = _MARGIN + pen * (_PANEL + _MARGIN)
            canvas.rectangle([x0, _HEADER, x0 + _PANEL, _HEADER + _PANEL], outline="black")
            for x, y in _pixels(trace.raw[pen, :upto], pen):
                canvas.ellipse([x - 1.5, y - 1.5, x + 1.5, y + 1.5], fill=_RAW)
            for points, color in ((trace.true, _TRUE), (trace.corrected, _CORRECTED)):
                line = _pixels(points[pen, :upto], pen)
                if len(line) > 1:
                    canvas.line(line, fill=color, width=2)
        return image

    path.parent.mkdir(parents=True, exist_ok=True)
    steps = trace.true.shape[1]
    if path.suffix.lower() == ".png":
        draw(steps).save(path)
    else:
        frames = [draw(upto) for upto in range(4, steps + 1, 4)]
        frames[0].save(path, save_all=True, append_images=frames[1:], duration=60, loop=0)
    return path
