"""The bundled game as a protocol client: ``lander-game --port=P --env_seed=S ...``.

It behaves like a Godot game with the Godot RL Agents plugin: it connects to the
trainer on 127.0.0.1 (or, given ``--transport=stdio``, speaks JSON lines on its
standard input and output), answers ``env_info``, ``reset``, ``action`` and ``call``,
resets its own finished agents, paces physics to wall time x ``--speedup``
(0 = as fast as possible) and quits on ``close`` or when the trainer goes away.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from game_bridge import protocol
from game_bridge.game_loop import StepPacer, read_arguments, run_game
from game_bridge.sprites import hex_frames
from games.lander.camera import CAMERA_KEY, FRAME_SHAPE, OBSERVATIONS, camera_frames
from games.lander.physics import (
    ACTION_SIZE,
    N_DISCRETE_ACTIONS,
    OBS_SIZE,
    TICKS_PER_SECOND,
    LanderPhysics,
    StepResult,
)

ACTION_KEY = "thrust"
OBS_KEY = "obs"


@dataclass
class GameSettings:
    """Command-line settings; unknown ``--key=value`` arguments are ignored, as Godot does."""

    port: int = protocol.DEFAULT_PORT
    seed: int = 0
    action_repeat: int = 6
    speedup: float = 0.0
    agents: int = 1
    action_type: str = "continuous"
    difficulty: int = 1
    observation: str = "vector"
    """``vector`` (7 coordinates), ``pixels`` (a camera frame: games/lander/camera.py) or
    ``glimpse`` (the coordinates, the target hidden soon after it moves)."""
    bot: str = ""  # a bot JSON to play without a trainer


def parse_arguments(argv: list[str]) -> GameSettings:
    """Read the launch arguments of PROTOCOL.md plus the game's own settings.

    :raises ValueError: when a known argument has a value of the wrong kind.
    """
    values = read_arguments(argv)
    settings = GameSettings()
    settings.port = int(values.get("port", settings.port))
    settings.seed = int(values.get("env_seed", settings.seed))
    settings.action_repeat = int(values.get("action_repeat", settings.action_repeat))
    settings.speedup = float(values.get("speedup", settings.speedup))
    settings.agents = int(values.get("agents", settings.agents))
    settings.action_type = values.get("action_type", settings.action_type)
    settings.difficulty = int(values.get("difficulty", settings.difficulty))
    settings.bot = values.get("bot", "")
    settings.observation = values.get("observation", settings.observation)
    if settings.observation not in OBSERVATIONS:
        raise ValueError(
            f"--observation must be vector, pixels or glimpse, got {settings.observation!r}"
        )
    if settings.action_type not in ("continuous", "discrete"):
        raise ValueError(
            f"--action_type must be continuous or discrete, got {settings.action_type!r}"
        )
    if settings.agents < 1 or settings.action_repeat < 1 or settings.speedup < 0:
        raise ValueError("--agents and --action_repeat must be at least 1 and --speedup at least 0")
    return settings


def binary_encoding(observation: str) -> str | None:
    """The binary encoding a lander game in this observation mode steps in once the trainer
    offers it: its coordinates as floats, its camera frames as their bytes (the plugin's
    hex text inside JSON costs the trainer a parse of twice the bytes every step); glimpses
    keep the plugin's JSON."""
    if observation == "vector":
        return protocol.FAST_ENCODING
    return protocol.PICTURE_ENCODING if observation == "pixels" else None


class LanderGame:
    """The game loop's state: physics for all agents plus the protocol replies."""

    def __init__(self, settings: GameSettings) -> None:
        self.settings = settings
        self.discrete = settings.action_type == "discrete"
        self.physics = LanderPhysics(
            settings.agents,
            settings.seed,
            settings.action_repeat,
            self.discrete,
            settings.difficulty,
            glimpse=settings.observation == "glimpse",
        )
        self.pacer = StepPacer.for_game(settings.action_repeat, TICKS_PER_SECOND, settings.speedup)
        self.fast = False  # set when the trainer offers lander's binary encoding
        self.pixels = settings.observation == "pixels"
        self.encoding = binary_encoding(settings.observation)

    def env_info(self) -> dict[str, Any]:
        """The ``env_info`` reply: the same spaces for every agent."""
        n = self.settings.agents
        action = (
            {"size": N_DISCRETE_ACTIONS, "action_type": "discrete"}
            if self.discrete
            else {"size": ACTION_SIZE, "action_type": "continuous"}
        )
        observation = (
            {CAMERA_KEY: {"size": list(FRAME_SHAPE), "space": "box"}}
            if self.pixels
            else {OBS_KEY: {"size": [OBS_SIZE], "space": "box"}}
        )
        reply = {
            "type": "env_info",
            "observation_space": [observation] * n,
            "action_space": [{ACTION_KEY: action}] * n,
            "n_agents": n,
            "agent_policy_names": ["shared_policy"] * n,
        }
        if self.fast:
            reply["lander_encoding"] = self.encoding
        return reply

    def reset(self) -> dict[str, Any]:
        """Reset every agent (the trainer's ``reset``)."""
        self.physics.reset_agents(np.ones(self.settings.agents, dtype=bool))
        obs = self._observations()
        return {"type": "reset", "obs": obs, "info": [{}] * len(obs)}

    def _observations(self) -> list[dict[str, Any]]:
        """Every agent's observation as the wire carries it: its coordinates, or its
        camera frame hex-encoded (the plugin's encoding of a camera sensor)."""
        physics = self.physics
        if self.pixels:
            frames = camera_frames(physics.pos, physics.vel, physics.target)
            return [{CAMERA_KEY: frame} for frame in hex_frames(frames)]
        return [{OBS_KEY: row} for row in protocol.wire_floats(physics.observe())]

    def _read_actions(self, message: dict[str, Any]) -> np.ndarray:
        actions = message.get("action")
        if not isinstance(actions, list) or len(actions) != self.settings.agents:
            raise ValueError(f"expected actions for {self.settings.agents} agents")
        values = [agent[ACTION_KEY] for agent in actions]
        if self.discrete:
            # Godot-style trainers may send 1.0 for 1.
            return np.asarray(values, dtype=np.float64).astype(np.int64)
        return np.asarray(values, dtype=np.float64)

    def _advance(
        self, actions: np.ndarray
    ) -> tuple[StepResult, np.ndarray, np.ndarray, np.ndarray | None]:
        """Step the physics and reset finished agents: (result, done mask, coordinates
        after resets, the finished agents' last camera frames, taken before their reset;
        None without a camera)."""
        self.pacer.wait()
        physics = self.physics
        result = physics.step(actions)
        done = result.terminated | result.truncated
        obs = result.obs
        frames = None
        if self.pixels:
            frames = (
                camera_frames(physics.pos[done], physics.vel[done], physics.target[done])
                if done.any()
                else np.zeros((0, *FRAME_SHAPE), dtype=np.uint8)
            )
        if done.any():
            physics.reset_agents(done)
            obs = physics.observe()
        return result, done, obs, frames

    def step(self, message: dict[str, Any]) -> dict[str, Any]:
        """Apply one action per agent, reset finished agents, build the ``step`` reply."""
        result, done, obs, frames = self._advance(self._read_actions(message))
        terminal = (
            [{CAMERA_KEY: frame} for frame in hex_frames(frames)]
            if frames is not None
            else [{OBS_KEY: row} for row in protocol.wire_floats(result.obs[done])]
        )
        infos: list[dict[str, Any]] = [{} for _ in range(self.settings.agents)]
        for index, last in zip(np.flatnonzero(done).tolist(), terminal, strict=True):
            infos[index] = {
                "is_success": bool(result.success[index]),
                "TimeLimit.truncated": bool(result.truncated[index]),
                "terminal_observation": last,
            }
        if not self.pixels:
            return protocol.step_message(OBS_KEY, obs, result.reward, done, infos)
        return {
            "type": "step",
            "obs": self._observations(),
            "reward": protocol.wire_floats(result.reward),
            "done": done.tolist(),
            "info": infos,
        }

    def step_binary(self, body: bytes) -> bytes:
        """The same step in lander's binary encoding (after the trainer offered it)."""
        actions = protocol.decode_binary_actions(
            body, self.settings.agents, ACTION_SIZE, self.discrete
        )
        result, done, obs, frames = self._advance(actions)
        flags = (
            done * protocol.DONE
            + result.truncated * protocol.TRUNCATED
            + result.success * protocol.SUCCESS
            + (done & ~result.success) * protocol.FAILURE
        ).astype(np.uint8)
        if frames is None:
            return protocol.encode_binary_step(obs, result.reward, flags, result.obs[done])
        physics = self.physics  # every agent's frame after the resets, as bytes
        now = camera_frames(physics.pos, physics.vel, physics.target)
        size = int(np.prod(FRAME_SHAPE))
        return protocol.encode_binary_step(
            now.reshape(len(now), size),
            result.reward,
            flags,
            frames.reshape(len(frames), size),
            encoding=protocol.PICTURE_ENCODING,
        )

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        """Answer a ``call``: known methods return one value per agent, others null."""
        method = message.get("method")
        n = self.settings.agents
        if method == "get_difficulty":
            return {"type": "call", "returns": [self.settings.difficulty] * n}
        return {"type": "call", "returns": [None] * n}


def play_alone(settings: GameSettings) -> int:
    """``--bot=FILE``: play one episode with a bot and print its result, no trainer needed."""
    from game_bridge.bot_runner import BotFormatError, BotRunner
    from games.lander.play import play_bot

    try:
        bot = BotRunner.from_file(Path(settings.bot))
    except BotFormatError as exc:
        print(f"lander-game: {exc}", file=sys.stderr)
        return 2
    trace = play_bot(
        bot,
        settings.agents,
        seed=settings.seed,
        action_repeat=settings.action_repeat,
        difficulty=settings.difficulty,
        pixels=settings.observation == "pixels",
        glimpse=settings.observation == "glimpse",
    )
    mean = float(np.mean(trace.returns)) if trace.returns else float("nan")
    print(
        f"episodes={len(trace.returns)} mean_reward={mean:.2f} success_rate={np.mean(trace.successes):.2f}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``lander-game``."""
    arguments = sys.argv[1:] if argv is None else argv
    values = read_arguments(arguments)
    try:
        settings = parse_arguments(arguments)
    except ValueError as exc:
        print(f"lander-game: {exc}", file=sys.stderr)
        return 2
    if settings.bot:
        return play_alone(settings)
    game = LanderGame(settings)
    return run_game(game, values, "lander-game", game.encoding)


if __name__ == "__main__":
    sys.exit(main())
