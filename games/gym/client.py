"""The gym game as a protocol program: ``python -m games.gym --env_id=ENV_ID``.

One instance steps ``--agents`` copies of the environment, one agent each, resets a
copy whose episode ended and sends its terminal observation and whether a time limit
ended it (``TimeLimit.truncated``), so the trainer bootstraps truncated episodes as
Gymnasium's own loop would. Other ``--key=value`` arguments are the environment's
keyword arguments (``--continuous=True``); the launch's own (port, seed, transport,
speed-up, render flags) are not passed on.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from game_bridge import protocol
from game_bridge.game_loop import read_arguments, run_game
from games.gym.view import OBS_KEY, GameView, UnsupportedEnv, make_view, parse_kwargs

LAUNCH_ARGUMENTS = frozenset(
    {"env_id", "port", "env_seed", "transport", "agents", "speedup", "action_repeat"}
)
"""Arguments of the launch itself (PROTOCOL.md), never the environment's."""


class GymGame:
    """K copies of one environment behind the protocol's replies.

    :param views: the copies, each one agent.
    :param seed: the instance's seed: copy ``i`` starts from ``seed * 1000 + i``.
    """

    def __init__(self, views: list[GameView], seed: int) -> None:
        self.views = views
        self.agents = len(views)
        self.seed = seed
        obs_entry, self.action_entries = views[0].env_info_spaces()
        self.obs_entry = obs_entry[OBS_KEY]
        self.discrete = all(e["action_type"] == "discrete" for e in self.action_entries.values())
        self.vector = self.obs_entry["space"] == "box"
        self.width = sum(e["size"] for e in self.action_entries.values())
        # lander's binary steps carry one float vector and one action key
        self.fast = False
        self._seeded = False

    def env_info(self) -> dict[str, Any]:
        """The same spaces for every agent, bounds per dimension, the binary offer taken."""
        reply = {
            "type": "env_info",
            "observation_space": {OBS_KEY: self.obs_entry},
            "action_space": self.action_entries,
            "n_agents": self.agents,
        }
        if self.fast:
            reply["lander_encoding"] = protocol.FAST_ENCODING
        return reply

    def _reset_copy(self, index: int) -> Any:
        seed = None if self._seeded else self.seed * 1000 + index
        obs, _ = self.views[index].reset(seed=seed)
        return obs

    def _wire(self, obs: Any) -> Any:
        return protocol.wire_floats(np.asarray(obs, dtype=np.float32)) if self.vector else obs

    def reset(self) -> dict[str, Any]:
        """Every copy starts an episode (seeded on the first reset only)."""
        obs = [self._wire(self._reset_copy(i)) for i in range(self.agents)]
        self._seeded = True
        return {"type": "reset", "obs": [{OBS_KEY: o} for o in obs], "info": [{}] * self.agents}

    def _advance(self, actions: list[Any]) -> tuple[list[Any], np.ndarray, np.ndarray, list[Any]]:
        """Step every copy; (observations after resets, rewards, flags, terminal observations)."""
        observations: list[Any] = []
        rewards = np.zeros(self.agents, dtype=np.float64)
        flags = np.zeros(self.agents, dtype=np.uint8)
        terminals: list[Any] = []
        for index, (view, action) in enumerate(zip(self.views, actions, strict=True)):
            obs, reward, terminated, truncated, info = view.step(action)
            rewards[index] = reward
            if info.get("is_success"):
                flags[index] |= protocol.SUCCESS
            if terminated or truncated:
                flags[index] |= protocol.DONE
                if truncated and not terminated:
                    flags[index] |= protocol.TRUNCATED
                terminals.append(obs)
                obs = self._reset_copy(index)
            observations.append(obs)
        return observations, rewards, flags, terminals

    def _actions(self, message: dict[str, Any]) -> list[Any]:
        actions = message.get("action")
        if not isinstance(actions, list) or len(actions) != self.agents:
            raise ValueError(f"expected actions for {self.agents} agents")
        return [[agent[key] for key in self.action_entries] for agent in actions]

    def step(self, message: dict[str, Any]) -> dict[str, Any]:
        """One step of every copy, finished ones reset at once."""
        observations, rewards, flags, terminals = self._advance(self._actions(message))
        infos: list[dict[str, Any]] = []
        ended = iter(terminals)
        for flag in flags.tolist():
            info: dict[str, Any] = {}
            if flag & protocol.DONE:
                info["terminal_observation"] = {OBS_KEY: self._wire(next(ended))}
                info["TimeLimit.truncated"] = bool(flag & protocol.TRUNCATED)
            if flag & protocol.SUCCESS:
                info["is_success"] = True
            infos.append(info)
        return {
            "type": "step",
            "obs": [{OBS_KEY: self._wire(o)} for o in observations],
            "reward": protocol.wire_floats(rewards),
            "done": (flags & protocol.DONE).astype(bool).tolist(),
            "info": infos,
        }

    def step_binary(self, body: bytes) -> bytes:
        """The same step in lander's binary encoding (a vector observation, one action key)."""
        actions = protocol.decode_binary_actions(body, self.agents, self.width, self.discrete)
        observations, rewards, flags, terminals = self._advance(list(actions))
        size = int(self.obs_entry["size"][0])
        terminal = np.asarray(terminals, dtype=np.float32).reshape(len(terminals), size)
        return protocol.encode_binary_step(np.asarray(observations), rewards, flags, terminal)

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        """No methods: null per agent."""
        return {"type": "call", "returns": [None] * self.agents}


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m games.gym``."""
    values = read_arguments(sys.argv[1:] if argv is None else argv)
    env_id = values.get("env_id")
    try:
        agents = int(values.get("agents", "1"))
        seed = int(values.get("env_seed", "0"))
        if env_id is None or agents < 1:
            raise ValueError("give --env_id=ENV_ID and --agents of at least 1")
        kwargs = parse_kwargs({k: v for k, v in values.items() if k not in LAUNCH_ARGUMENTS})
        views = [make_view(env_id, kwargs) for _ in range(agents)]
    except (ValueError, UnsupportedEnv) as exc:
        print(f"gym-game: {exc}", file=sys.stderr)
        return 2
    game = GymGame(views, seed)
    fast_capable = game.vector and len(game.action_entries) == 1
    return run_game(game, values, f"gym-game {env_id}", fast_capable=fast_capable)
