"""The stroke game as a protocol program: ``python -m games.stroke``.

It speaks the stdio transport by default (one JSON message a line on its standard
input and output, complaints on standard error), and the TCP framing when launched
with a ``--port=P`` (as lander launches TCP games), so the two transports can be
measured on one game.
Arguments: ``--env_seed``, ``--agents``, ``--reward_mode=step|delayed``,
``--observation=vector|pixels`` (the numbers, or the scope of games/stroke/camera.py);
others are ignored, as Godot does.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from game_bridge import protocol
from game_bridge.game_loop import read_arguments, run_game
from game_bridge.sprites import hex_frames
from games.stroke.camera import CAMERA_KEY, FRAME_SHAPE, OBSERVATIONS, scope_frames
from games.stroke.world import ACTION_SIZE, OBS_SIZE, REWARD_MODES, StrokeWorld

ACTION_KEY = "point"
OBS_KEY = "obs"


class StrokeGame:
    """The game loop's state: a :class:`StrokeWorld` of all agents plus the protocol replies.

    :param agents: pens drawn at once, one per agent.
    :param pixels: send each pen's scope (games/stroke/camera.py) instead of its numbers.
    """

    fast = False  # JSON only: the binary encoding is the lander's

    def __init__(self, agents: int, seed: int, reward_mode: str, pixels: bool = False) -> None:
        self.agents = agents
        self.world = StrokeWorld(agents, seed, reward_mode)
        self.pixels = pixels

    def env_info(self) -> dict[str, Any]:
        """The ``env_info`` reply: the same spaces for every agent."""
        return {
            "type": "env_info",
            "observation_space": (
                {CAMERA_KEY: {"size": list(FRAME_SHAPE), "space": "box"}}
                if self.pixels
                else {OBS_KEY: {"size": [OBS_SIZE], "space": "box"}}
            ),
            "action_space": {ACTION_KEY: {"size": ACTION_SIZE, "action_type": "continuous"}},
            "n_agents": self.agents,
        }

    def reset(self) -> dict[str, Any]:
        """Every pen starts a new stroke."""
        self.world.reset_agents(np.ones(self.agents, dtype=bool))
        obs = self._wire(self.world.observe())
        return {"type": "reset", "obs": obs, "info": [{}] * self.agents}

    def _wire(self, obs: np.ndarray) -> list[dict[str, Any]]:
        """Each pen's observation as the wire carries it: its numbers, or its scope as the
        plugin encodes a camera (hex bytes)."""
        if self.pixels:
            return [{CAMERA_KEY: frame} for frame in hex_frames(scope_frames(obs))]
        return [{OBS_KEY: row} for row in protocol.wire_floats(obs)]

    def step(self, message: dict[str, Any]) -> dict[str, Any]:
        """Place every pen's point; a finished stroke is followed by a new one at once."""
        actions = message.get("action")
        if not isinstance(actions, list) or len(actions) != self.agents:
            raise ValueError(f"expected actions for {self.agents} agents")
        result = self.world.step(np.asarray([agent[ACTION_KEY] for agent in actions], dtype=float))
        obs = result.obs
        infos: list[dict[str, Any]] = [{} for _ in range(self.agents)]
        if result.done.any():
            ended = np.flatnonzero(result.done)
            terminal = self._wire(result.obs[ended])
            for index, last in zip(ended.tolist(), terminal, strict=True):
                # A stroke ends by its nature: terminated, not truncated.
                infos[index] = {"terminal_observation": last}
            self.world.reset_agents(result.done)
            obs = self.world.observe()
        if not self.pixels:
            return protocol.step_message(OBS_KEY, obs, result.reward, result.done, infos)
        return {
            "type": "step",
            "obs": self._wire(obs),
            "reward": protocol.wire_floats(result.reward),
            "done": result.done.tolist(),
            "info": infos,
        }

    def step_binary(self, body: bytes) -> bytes:
        """Never offered a binary encoding it accepts (``fast`` stays False)."""
        raise protocol.FrameError("bad_binary", "the stroke game speaks JSON only")

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        """No methods: null per agent."""
        return {"type": "call", "returns": [None] * self.agents}


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m games.stroke``."""
    values = read_arguments(sys.argv[1:] if argv is None else argv)
    values.setdefault("transport", "tcp" if "port" in values else "stdio")
    try:
        agents = int(values.get("agents", "1"))
        seed = int(values.get("env_seed", "0"))
    except ValueError as exc:
        print(f"stroke-game: {exc}", file=sys.stderr)
        return 2
    mode = values.get("reward_mode", "step")
    observation = values.get("observation", "vector")
    if agents < 1 or mode not in REWARD_MODES or observation not in OBSERVATIONS:
        print(
            f"stroke-game: --agents must be at least 1, --reward_mode one of "
            f"{', '.join(REWARD_MODES)} and --observation one of {', '.join(OBSERVATIONS)} "
            f"(got {agents}, {mode!r}, {observation!r})",
            file=sys.stderr,
        )
        return 2
    game = StrokeGame(agents, seed, mode, observation == "pixels")
    return run_game(game, values, "stroke-game")
