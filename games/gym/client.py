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
from game_bridge.errors import ProtocolViolation
from game_bridge.game_loop import read_arguments, run_game
from game_bridge.spaces import parse_env_info
from games.gym.packages import PACKAGE_ARGUMENT, GymPackageError, import_packages, packages_of
from games.gym.view import GameView, UnsupportedEnv, make_view, parse_kwargs

LAUNCH_ARGUMENTS = frozenset(
    {"env_id", "port", "env_seed", "transport", "agents", "speedup", "action_repeat"}
    | {PACKAGE_ARGUMENT}
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
        self.obs_entries, self.action_entries = views[0].env_info_spaces()
        self.parts = views[0].parts
        self.discrete = all(e["action_type"] == "discrete" for e in self.action_entries.values())
        self.width = sum(e["size"] for e in self.action_entries.values())
        self.obs_size = int(np.prod(self.obs_entries[self.parts[0].key]["size"]))
        self.fast = False  # set when the trainer offers :attr:`encoding`
        self.encoding = self._binary_encoding()
        self._seeded = False

    def _binary_encoding(self) -> str | None:
        """The binary encoding these spaces fit, judged as the trainer judges them; None
        (JSON) for spaces it refuses, which it then names to the user."""
        try:
            return parse_env_info(self.env_info()).binary_encoding
        except ProtocolViolation:
            return None

    def env_info(self) -> dict[str, Any]:
        """The same spaces for every agent, bounds per dimension, the binary offer taken."""
        reply = {
            "type": "env_info",
            "observation_space": self.obs_entries,
            "action_space": self.action_entries,
            "n_agents": self.agents,
        }
        if self.fast:
            reply["lander_encoding"] = self.encoding
        return reply

    def _reset_copy(self, index: int) -> Any:
        seed = None if self._seeded else self.seed * 1000 + index
        obs, _ = self.views[index].reset(seed=seed)
        return obs

    def _wire(self, obs: Any) -> dict[str, Any]:
        """One agent's observation as the reply carries it: pictures as hex text of their
        bytes (the plugin's camera encoding), vectors as numbers."""
        values = obs if isinstance(obs, dict) else {self.parts[0].key: obs}
        wired: dict[str, Any] = {}
        for part in self.parts:
            value = values[part.key]
            if part.is_image:
                wired[part.key] = value.tobytes().hex()
            elif isinstance(value, np.ndarray):
                wired[part.key] = protocol.wire_floats(value)
            else:
                wired[part.key] = value
        return wired

    def reset(self) -> dict[str, Any]:
        """Every copy starts an episode (seeded on the first reset only)."""
        obs = [self._wire(self._reset_copy(i)) for i in range(self.agents)]
        self._seeded = True
        return {"type": "reset", "obs": obs, "info": [{}] * self.agents}

    def _advance(
        self, actions: list[Any]
    ) -> tuple[list[Any], np.ndarray, np.ndarray, list[Any], list[dict[str, Any]]]:
        """Step every copy; (observations after resets, rewards, flags, terminal
        observations, and per copy the score of a game that ended and whether one did:
        ``SCORE`` and ``GAME_OVER``, where the view says them)."""
        observations: list[Any] = []
        rewards = np.zeros(self.agents, dtype=np.float64)
        flags = np.zeros(self.agents, dtype=np.uint8)
        terminals: list[Any] = []
        ends: list[dict[str, Any]] = []
        for index, (view, action) in enumerate(zip(self.views, actions, strict=True)):
            obs, reward, terminated, truncated, info = view.step(action)
            rewards[index] = reward
            if "is_success" in info:
                flags[index] |= protocol.SUCCESS if info["is_success"] else protocol.FAILURE
            ends.append({k: info[k] for k in (protocol.SCORE, protocol.GAME_OVER) if k in info})
            if terminated or truncated:
                flags[index] |= protocol.DONE
                if truncated and not terminated:
                    flags[index] |= protocol.TRUNCATED
                terminals.append(obs)
                obs = self._reset_copy(index)
            observations.append(obs)
        return observations, rewards, flags, terminals, ends

    def _actions(self, message: dict[str, Any]) -> list[Any]:
        actions = message.get("action")
        if not isinstance(actions, list) or len(actions) != self.agents:
            raise ValueError(f"expected actions for {self.agents} agents")
        return [[agent[key] for key in self.action_entries] for agent in actions]

    def step(self, message: dict[str, Any]) -> dict[str, Any]:
        """One step of every copy, finished ones reset at once."""
        observations, rewards, flags, terminals, ends = self._advance(self._actions(message))
        infos: list[dict[str, Any]] = []
        ended = iter(terminals)
        for flag, end in zip(flags.tolist(), ends, strict=True):
            info: dict[str, Any] = dict(end)
            if flag & protocol.DONE:
                info["terminal_observation"] = self._wire(next(ended))
                info["TimeLimit.truncated"] = bool(flag & protocol.TRUNCATED)
            if flag & (protocol.SUCCESS | protocol.FAILURE):
                info["is_success"] = bool(flag & protocol.SUCCESS)
            infos.append(info)
        return {
            "type": "step",
            "obs": [self._wire(o) for o in observations],
            "reward": protocol.wire_floats(rewards),
            "done": (flags & protocol.DONE).astype(bool).tolist(),
            "info": infos,
        }

    def step_binary(self, body: bytes) -> bytes:
        """The same step in lander's binary encoding (one observation, numbers or a picture's
        bytes, and one action key), a finished game's raw score and a lost life in its flags
        (an Atari game)."""
        actions = protocol.decode_binary_actions(body, self.agents, self.width, self.discrete)
        observations, rewards, flags, terminals, ends = self._advance(list(actions))
        scores = []
        for index, end in enumerate(ends):
            if protocol.SCORE in end:
                flags[index] |= protocol.SCORED
                scores.append(float(end[protocol.SCORE]))
            if end.get(protocol.GAME_OVER) is False:
                flags[index] |= protocol.GOES_ON
        assert self.encoding is not None  # fast only where the spaces fit one
        key = self.parts[0].key  # a dictionary of one key is that key's value
        rows = [o[key] if isinstance(o, dict) else o for o in (*observations, *terminals)]
        batch = np.asarray(rows).reshape(len(rows), self.obs_size)
        return protocol.encode_binary_step(
            batch[: self.agents],
            rewards,
            flags,
            batch[self.agents :],
            np.asarray(scores),
            self.encoding,
        )

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        """No methods: null per agent."""
        return {"type": "call", "returns": [None] * self.agents}


def _resize_on_one_core() -> None:
    """OpenCV resizes a picture game's frames (``games/gym/atari.py``, ``pictures.py``) on
    every core by default; a game process is one of several stepping beside the trainer,
    where more threads only contend (a Breakout frame: 51 us on one thread, 69 us on two).
    Only where the views' preprocessing loaded it: a game of vectors does not pay its
    import."""
    cv2 = sys.modules.get("cv2")
    if cv2 is not None:
        cv2.setNumThreads(1)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m games.gym``."""
    values = read_arguments(sys.argv[1:] if argv is None else argv)
    env_id = values.get("env_id")
    try:
        agents = int(values.get("agents", "1"))
        seed = int(values.get("env_seed", "0"))
        if env_id is None or agents < 1:
            raise ValueError("give --env_id=ENV_ID and --agents of at least 1")
        repeat = int(values["action_repeat"]) if "action_repeat" in values else None
        if repeat is not None and repeat < 1:
            raise ValueError(f"--action_repeat must be at least 1, got {repeat}")
        import_packages(packages_of(values.get(PACKAGE_ARGUMENT)))
        kwargs = parse_kwargs({k: v for k, v in values.items() if k not in LAUNCH_ARGUMENTS})
        views = [make_view(env_id, kwargs, repeat=repeat) for _ in range(agents)]
    except (ValueError, UnsupportedEnv, GymPackageError) as exc:
        print(f"gym-game: {exc}", file=sys.stderr)
        return 2
    _resize_on_one_core()
    game = GymGame(views, seed)
    return run_game(game, values, f"gym-game {env_id}", game.encoding)
