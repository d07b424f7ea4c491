"""The bundled game playing a bot by itself: a live view in the terminal and a
picture of the trajectories, so a person can see what a bot does.

Uses the numpy bot runner only (no torch). Without a terminal (CI, a pipe) it
skips the live view and runs as fast as it can.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.live import Live
from rich.text import Text

from game_bridge.bot_runner import BotRunner
from game_bridge.lander_game.physics import HEIGHT, TICKS_PER_SECOND, WIDTH, LanderPhysics

_COLORS = ["#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4", "#f032e6", "#bfef45"]
_VIEW_COLUMNS = 60
_VIEW_ROWS = 22


@dataclass
class PlayTrace:
    """What happened in a play session.

    :param positions: lander positions per step, shape (steps, K, 2).
    :param targets: target positions per step, shape (steps, K, 2).
    :param returns: finished episode returns.
    :param successes: finished episode success flags.
    """

    positions: list[np.ndarray] = field(default_factory=list)
    targets: list[np.ndarray] = field(default_factory=list)
    returns: list[float] = field(default_factory=list)
    successes: list[bool] = field(default_factory=list)


def _frame(physics: LanderPhysics, step: int, total: int) -> Text:
    """The arena as text: landers as letters, their targets as the same letter in lower case."""
    grid = [[" "] * _VIEW_COLUMNS for _ in range(_VIEW_ROWS)]
    styles: dict[tuple[int, int], str] = {}

    def cell(point: np.ndarray) -> tuple[int, int]:
        column = int(np.clip(point[0] / WIDTH * (_VIEW_COLUMNS - 1), 0, _VIEW_COLUMNS - 1))
        row = int(np.clip((1 - point[1] / HEIGHT) * (_VIEW_ROWS - 1), 0, _VIEW_ROWS - 1))
        return row, column

    for agent in range(physics.n_agents):
        letter = chr(ord("A") + agent % 26)
        color = _COLORS[agent % len(_COLORS)]
        row, column = cell(physics.target[agent])
        grid[row][column] = letter.lower()
        styles[(row, column)] = color
        row, column = cell(physics.pos[agent])
        grid[row][column] = letter
        styles[(row, column)] = f"bold {color}"
    text = Text()
    text.append("+" + "-" * _VIEW_COLUMNS + "+\n")
    for row_index, cells in enumerate(grid):
        text.append("|")
        for column_index, char in enumerate(cells):
            text.append(char, style=styles.get((row_index, column_index), ""))
        text.append("|\n")
    text.append("+" + "=" * _VIEW_COLUMNS + "+\n")
    text.append(f"step {step}/{total}   landers: capitals, their targets: lower case")
    return text


def play_bot(
    bot: BotRunner,
    agents: int = 4,
    seconds: float = 20.0,
    seed: int = 0,
    action_repeat: int = 6,
    difficulty: int = 1,
    console: Console | None = None,
    speed: float = 2.0,
) -> PlayTrace:
    """Let ``bot`` fly ``agents`` landers for ``seconds`` of game time.

    :param speed: game seconds per wall second of the live view (ignored without a terminal).
    """
    discrete = bot.action_type == "discrete"
    physics = LanderPhysics(agents, seed, action_repeat, discrete, difficulty)
    steps = max(1, round(seconds * TICKS_PER_SECOND / action_repeat))
    trace = PlayTrace()
    running = np.zeros(agents)
    live_view = console is not None and console.is_terminal
    step_wall = action_repeat / TICKS_PER_SECOND / speed
    live = (
        Live(_frame(physics, 0, steps), console=console, auto_refresh=False) if live_view else None
    )
    if live is not None:
        live.start()
    try:
        obs = physics.observe()
        for step in range(1, steps + 1):
            started = time.monotonic()
            result = physics.step(bot.act(obs))
            running += result.reward
            trace.positions.append(physics.pos.copy())
            trace.targets.append(physics.target.copy())
            done = result.terminated | result.truncated
            for index in np.flatnonzero(done):
                trace.returns.append(float(running[index]))
                trace.successes.append(bool(result.success[index]))
            running[done] = 0.0
            physics.reset_agents(done)
            obs = physics.observe()
            if live is not None:
                live.update(_frame(physics, step, steps), refresh=True)
                time.sleep(max(0.0, step_wall - (time.monotonic() - started)))
    finally:
        if live is not None:
            live.stop()
    return trace


def _to_pixels(points: np.ndarray, size: tuple[int, int], margin: int) -> list[tuple[float, float]]:
    width, height = size
    xs = margin + points[:, 0] / WIDTH * (width - 2 * margin)
    ys = height - margin - points[:, 1] / HEIGHT * (height - 2 * margin)
    return list(zip(xs.tolist(), ys.tolist(), strict=True))


def record_picture(trace: PlayTrace, path: Path, size: tuple[int, int] = (800, 600)) -> Path:
    """Draw the trajectories: a PNG of whole paths, or a GIF that replays them.

    Each lander's path is a coloured line; its targets are crosses of the same
    colour, so a reader sees at a glance whether the lander reached them.

    :raises ValueError: for a suffix other than .png or .gif, or an empty trace.
    """
    from PIL import Image, ImageDraw

    if path.suffix.lower() not in (".png", ".gif"):
        raise ValueError(f"--record writes .png or .gif, not {path.suffix or 'no suffix'}")
    if not trace.positions:
        raise ValueError("nothing was played, so there is nothing to draw")
    positions = np.stack(trace.positions)
    targets = np.stack(trace.targets)
    margin = 20

    def draw(upto: int) -> Image.Image:
        image = Image.new("RGB", size, "white")
        canvas = ImageDraw.Draw(image)
        canvas.rectangle(
            [margin, margin, size[0] - margin, size[1] - margin], outline="black", width=2
        )
        for agent in range(positions.shape[1]):
            color = _COLORS[agent % len(_COLORS)]
            path_points = _to_pixels(positions[:upto, agent], size, margin)
            jumps = np.flatnonzero(
                np.linalg.norm(np.diff(positions[:upto, agent], axis=0), axis=1) > 2.0
            )
            start = 0
            for end in [*(jumps + 1).tolist(), len(path_points)]:  # a reset is a jump, not a flight
                if end - start > 1:
                    canvas.line(path_points[start:end], fill=color, width=2)
                start = end
            for x, y in {tuple(p) for p in _to_pixels(targets[:upto, agent], size, margin)}:
                canvas.line([x - 6, y - 6, x + 6, y + 6], fill=color, width=3)
                canvas.line([x - 6, y + 6, x + 6, y - 6], fill=color, width=3)
            x, y = path_points[-1]
            canvas.ellipse([x - 5, y - 5, x + 5, y + 5], fill=color)
        return image

    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".png":
        draw(len(positions)).save(path)
    else:
        stride = max(1, len(positions) // 60)
        frames = [draw(upto) for upto in range(stride, len(positions) + 1, stride)]
        frames[0].save(path, save_all=True, append_images=frames[1:], duration=80, loop=0)
    return path
