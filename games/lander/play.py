"""The bundled game playing a bot by itself: a live view in the terminal and a
picture of the trajectories, so a person can see what a bot does.

Uses the numpy bot runner only (no torch). Without a terminal (CI, a pipe) it
skips the live view and runs as fast as it can.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from rich.console import Console
from rich.live import Live
from rich.text import Text

from game_bridge.bot_runner import BotRunner
from game_bridge.frame_stack import start_episodes
from games.lander.camera import camera_frames
from games.lander.physics import (
    HEIGHT,
    OBS_SIZE,
    POS_SCALE,
    TICKS_PER_SECOND,
    WIDTH,
    LanderPhysics,
)

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


class Flight(Protocol):
    """Something landers fly in: the in-process physics, or a game over the bridge."""

    n_agents: int

    def observe(self) -> np.ndarray:
        """Current observations, shape (K, 7)."""
        ...

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Apply actions; return (rewards, dones, successes, positions before any reset)."""
        ...

    def targets(self) -> np.ndarray:
        """Current target positions in metres, shape (K, 2)."""
        ...

    def positions(self) -> np.ndarray:
        """Current lander positions in metres, shape (K, 2)."""
        ...


class PhysicsFlight:
    """The bundled game's physics in this process."""

    def __init__(self, physics: LanderPhysics, pixels: bool = False) -> None:
        self.physics = physics
        self.n_agents = physics.n_agents
        self.pixels = pixels

    def observe(self) -> np.ndarray:
        """Coordinates, or with ``pixels`` the camera's frames (games/lander/camera.py)."""
        if self.pixels:
            return camera_frames(self.physics.pos, self.physics.vel, self.physics.target)
        return self.physics.observe()

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        result = self.physics.step(actions)
        done = result.terminated | result.truncated
        before = self.physics.pos.copy()
        self.physics.reset_agents(done)
        return result.reward, done, result.success, before

    def targets(self) -> np.ndarray:
        return self.physics.target.copy()

    def positions(self) -> np.ndarray:
        return self.physics.pos.copy()


def positions_from_obs(obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lander and target positions (metres) recovered from lander-layout observations,
    for games known only through the protocol (the Godot lander)."""
    obs = np.asarray(obs, dtype=np.float64).reshape(-1, 7)
    position = np.column_stack([(obs[:, 4] + 1.0) * WIDTH / 2.0, (obs[:, 5] + 1.0) * HEIGHT / 2.0])
    return position, position + obs[:, 0:2] * POS_SCALE


def _frame(positions: np.ndarray, targets: np.ndarray, step: int, total: int) -> Text:
    """The arena as text: landers as letters, their targets as the same letter in lower case."""
    grid = [[" "] * _VIEW_COLUMNS for _ in range(_VIEW_ROWS)]
    styles: dict[tuple[int, int], str] = {}

    def cell(point: np.ndarray) -> tuple[int, int]:
        column = int(np.clip(point[0] / WIDTH * (_VIEW_COLUMNS - 1), 0, _VIEW_COLUMNS - 1))
        row = int(np.clip((1 - point[1] / HEIGHT) * (_VIEW_ROWS - 1), 0, _VIEW_ROWS - 1))
        return row, column

    for agent in range(len(positions)):
        letter = chr(ord("A") + agent % 26)
        color = _COLORS[agent % len(_COLORS)]
        row, column = cell(targets[agent])
        grid[row][column] = letter.lower()
        styles[(row, column)] = color
        row, column = cell(positions[agent])
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
    flight: Flight | None = None,
    pixels: bool = False,
    glimpse: bool = False,
) -> PlayTrace:
    """Let ``bot`` fly landers for ``seconds`` of game time.

    :param pixels: the bot sees the camera's frames (a ``observation=pixels`` run's bot).
    :param glimpse: the bot sees the target only briefly (an ``observation=glimpse`` run's).
    :param flight: where to fly (default: ``agents`` landers of the in-process physics).
    :param speed: game seconds per wall second of the live view (ignored without a terminal).
    """
    if flight is None:
        discrete = bot.action_type == "discrete"
        physics = LanderPhysics(agents, seed, action_repeat, discrete, difficulty, glimpse)
        flight = PhysicsFlight(physics, pixels)
    steps = max(1, round(seconds * TICKS_PER_SECOND / action_repeat))
    trace = PlayTrace()
    running = np.zeros(flight.n_agents)
    live_view = console is not None and console.is_terminal
    step_wall = action_repeat / TICKS_PER_SECOND / speed
    live = (
        Live(
            _frame(flight.positions(), flight.targets(), 0, steps),
            console=console,
            auto_refresh=False,
        )
        if live_view
        else None
    )
    if live is not None:
        live.start()
    try:
        policy = bot.policy()  # a bot of stacked frames keeps the last ones
        obs = flight.observe()
        start_episodes(policy)
        for step in range(1, steps + 1):
            started = time.monotonic()
            targets = flight.targets()
            rewards, done, success, before = flight.step(policy(obs))
            start_episodes(policy, done)
            running += rewards
            trace.positions.append(before)
            trace.targets.append(targets)
            for index in np.flatnonzero(done):
                trace.returns.append(float(running[index]))
                trace.successes.append(bool(success[index]))
            running[done] = 0.0
            obs = flight.observe()
            if live is not None:
                live.update(_frame(flight.positions(), flight.targets(), step, steps), refresh=True)
                time.sleep(max(0.0, step_wall - (time.monotonic() - started)))
    finally:
        if live is not None:
            live.stop()
    return trace


_PLOT_BOX = (70, 80, 20, 50)
"""Left, top, right and bottom margins of the plot in pixels: room for the title,
the legend and the axes."""


def _to_pixels(points: np.ndarray, size: tuple[int, int]) -> list[tuple[float, float]]:
    left, top, right, bottom = _PLOT_BOX
    width, height = size[0] - left - right, size[1] - top - bottom
    xs = left + points[:, 0] / WIDTH * width
    ys = top + height - points[:, 1] / HEIGHT * height
    return list(zip(xs.tolist(), ys.tolist(), strict=True))


def _draw_frame(canvas: Any, size: tuple[int, int], title: str) -> None:
    """Title, legend, and the axes in game metres."""
    left, top, right, bottom = _PLOT_BOX
    x0, y0, x1, y1 = left, top, size[0] - right, size[1] - bottom
    canvas.rectangle([x0, y0, x1, y1], outline="black", width=2)
    canvas.text((left, 8), title, fill="black")
    legend = (
        "line: a lander's flight, faint at its start, full colour at its end; "
        "dots: one per game second; o start, filled circle end; x: its targets"
    )
    canvas.text((left, 28), legend, fill="#444444")
    tick = 2 if max(WIDTH, HEIGHT) <= 30 else 10
    for metres in range(0, int(WIDTH) + 1, tick):
        x = x0 + metres / WIDTH * (x1 - x0)
        canvas.line([x, y1, x, y1 + 5], fill="black")
        canvas.text((x - 6, y1 + 8), str(metres), fill="black")
    for metres in range(0, int(HEIGHT) + 1, tick):
        y = y1 - metres / HEIGHT * (y1 - y0)
        canvas.line([x0 - 5, y, x0, y], fill="black")
        canvas.text((x0 - 30, y - 6), str(metres), fill="black")
    canvas.text(((x0 + x1) / 2 - 40, y1 + 26), "x (metres)", fill="black")
    canvas.text((6, y0 - 16), "y (metres)", fill="black")


def _faded(color: str, amount: float) -> tuple[int, int, int]:
    """``color`` mixed with white: 0 is white, 1 the colour itself."""
    red, green, blue = (int(color[k : k + 2], 16) for k in (1, 3, 5))
    return tuple(round(255 - (255 - c) * amount) for c in (red, green, blue))  # type: ignore[return-value]


def record_picture(
    trace: PlayTrace,
    path: Path,
    size: tuple[int, int] = (900, 680),
    title: str = "",
    steps_per_second: float = 10.0,
) -> Path:
    """Draw the trajectories: a PNG of whole paths, or a GIF that replays them.

    Each lander's path is a line in its colour that darkens with time, with a dot per
    game second, a ring where it started and a disc where it ended; its targets are
    crosses of the same colour, so a reader sees at a glance whether, and how soon,
    the lander reached them. The title names the bot and its score; the axes are in
    game metres.

    :param title: the first line of the picture (the bot and its score).
    :param steps_per_second: bot steps per game second (60 / action repeat).
    :raises ValueError: for a suffix other than .png or .gif, or an empty trace.
    """
    from PIL import Image, ImageDraw

    if path.suffix.lower() not in (".png", ".gif"):
        raise ValueError(f"--record writes .png or .gif, not {path.suffix or 'no suffix'}")
    if not trace.positions:
        raise ValueError("nothing was played, so there is nothing to draw")
    positions = np.stack(trace.positions)
    targets = np.stack(trace.targets)
    every = max(1, round(steps_per_second))
    total = len(positions)

    def draw(upto: int) -> Image.Image:
        image = Image.new("RGB", size, "white")
        canvas = ImageDraw.Draw(image)
        _draw_frame(
            canvas,
            size,
            title or f"{positions.shape[1]} landers, {total / steps_per_second:.0f} game seconds",
        )
        for agent in range(positions.shape[1]):
            color = _COLORS[agent % len(_COLORS)]
            points = _to_pixels(positions[:upto, agent], size)
            jumps = set(
                (
                    np.flatnonzero(
                        np.linalg.norm(np.diff(positions[:upto, agent], axis=0), axis=1) > 2.0
                    )
                    + 1
                ).tolist()
            )  # a reset is a jump, not a flight
            for step in range(1, len(points)):
                if step not in jumps:
                    shade = _faded(color, 0.25 + 0.75 * step / max(total - 1, 1))
                    canvas.line([points[step - 1], points[step]], fill=shade, width=2)
                if step % every == 0:
                    x, y = points[step]
                    canvas.ellipse([x - 2, y - 2, x + 2, y + 2], fill=color)
            for x, y in {tuple(p) for p in _to_pixels(targets[:upto, agent], size)}:
                canvas.line([x - 6, y - 6, x + 6, y + 6], fill=color, width=3)
                canvas.line([x - 6, y + 6, x + 6, y - 6], fill=color, width=3)
            x, y = points[0]
            canvas.ellipse([x - 6, y - 6, x + 6, y + 6], outline=color, width=2)
            x, y = points[-1]
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


class RemoteFlight:
    """A :class:`Flight` over a game known only through the protocol (the Godot lander, for
    ``lander play --game-bin``): positions are recovered from the observation layout.

    :param env: the running games as a VecEnv (``reset``, ``step``, ``num_envs``,
        ``observation_space``); their agents are the landers.
    """

    def __init__(self, env: Any) -> None:
        if env.observation_space.shape != (OBS_SIZE,):
            raise ValueError(
                f"play draws games with the lander observation layout ({OBS_SIZE} values), not {env.observation_space}"
            )
        self.env = env
        self.n_agents = env.num_envs
        self._obs = np.asarray(env.reset())

    def observe(self) -> np.ndarray:
        return self._obs

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        obs, rewards, dones, infos = self.env.step(actions)
        before_obs = np.asarray(obs).copy()
        success = np.zeros(self.n_agents, dtype=bool)
        for index in np.flatnonzero(dones):
            before_obs[index] = infos[index]["terminal_observation"]
            success[index] = bool(infos[index].get("is_success", False))
        self._obs = np.asarray(obs)
        return rewards, dones, success, positions_from_obs(before_obs)[0]

    def targets(self) -> np.ndarray:
        return positions_from_obs(self._obs)[1]

    def positions(self) -> np.ndarray:
        return positions_from_obs(self._obs)[0]
