"""``lander play`` of a bot on a Gymnasium environment: its episodes scored, and what the
environment renders (``render_mode="rgb_array"``) written as a GIF or a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from game_bridge.bot_runner import BotRunner
from game_bridge.frame_stack import start_episodes
from game_bridge.protocol import game_score
from games.gym.view import UnsupportedEnv, batch_observations, make_view, parse_kwargs
from games.spec import PlayOptions, PlayResult

DEFAULT_FPS = 50
"""Steps per second of an environment that does not say (``metadata["render_fps"]``)."""
MAX_FRAMES = 3000
"""Frames kept for a picture: a long episode's GIF stays a few MB."""


def play_episodes(env_id: str, bot: BotRunner, options: PlayOptions) -> PlayResult:
    """Play ``options.agents`` copies for ``options.seconds`` seconds of the environment's
    clock, each starting a new episode when one ends; copy 0 is drawn when asked.

    :raises ValueError: a picture other than .png or .gif, or an environment that renders
        no pictures.
    """
    if options.record is not None and options.record.suffix.lower() not in (".png", ".gif"):
        raise ValueError(
            f"--record writes .png or .gif, not {options.record.suffix or 'no suffix'}"
        )
    kwargs = parse_kwargs(dict(options.game_args))
    mode = "rgb_array" if options.record is not None else None
    try:
        views = [
            make_view(env_id, kwargs, mode if i == 0 else None, options.action_repeat)
            for i in range(options.agents)
        ]
    except UnsupportedEnv as exc:
        raise ValueError(f"gym:{env_id}: {exc}") from None
    # a step holds an action for several of the game's frames (Atari's 4, a picture's 2)
    fps = float(views[0].metadata.get("render_fps") or DEFAULT_FPS) / views[0].frames_per_step
    steps = max(1, round(options.seconds * fps))
    obs = [view.reset(seed=options.seed + i)[0] for i, view in enumerate(views)]
    running = np.zeros(len(views))
    returns: list[float] = []
    frames: list[np.ndarray] = []
    policy = bot.policy()  # a bot with memory keeps each view's state
    start_episodes(policy)
    for _ in range(steps):
        if mode is not None and len(frames) < MAX_FRAMES:
            frames.append(np.asarray(views[0].render()))
        actions = policy(batch_observations(obs))
        ended = np.zeros(len(views), dtype=bool)
        for i, view in enumerate(views):
            ob, reward, terminated, truncated, info = view.step(actions[i])
            running[i] += reward
            if terminated or truncated:
                score = game_score(info, running[i])  # an Atari game's raw score, whole
                if score is not None:
                    returns.append(score)
                running[i] = 0.0
                ob, _ = view.reset()
                ended[i] = True
            obs[i] = ob
        start_episodes(policy, ended)
    for view in views:
        view.close()
    if returns:
        mean = float(np.mean(returns))
        score = options.normalize(mean)
        shown = "" if score is None else f" normalized_score={score:.3f}"
        lines = [f"{len(returns)} episode(s): mean_reward={mean:.2f}{shown}"]
    else:
        lines = [f"no episode ended in {options.seconds:g} seconds (longer: --seconds)"]
    if options.record is None:
        return PlayResult(lines)
    return PlayResult(lines, _write_picture(frames, options.record, fps))


def _write_picture(frames: list[Any], path: Path, fps: float) -> Path:
    """A GIF of the frames, or a PNG of the last one."""
    from PIL import Image

    if not frames or np.asarray(frames[0]).ndim != 3:
        raise ValueError("the environment renders no pictures (render_mode rgb_array)")
    images = [Image.fromarray(np.asarray(frame, dtype=np.uint8)) for frame in frames]
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".png":
        images[-1].save(path)
    else:
        images[0].save(
            path, save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0
        )
    return path
