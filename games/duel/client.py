"""The duel game as a protocol client: ``python -m games.duel --port=P --agents=2M ...``.

Like the lander it behaves as a Godot game with the plugin: it answers ``env_info``
(naming each agent's side, ``red`` or ``blue``, in ``agent_policy_names``), ``reset`` and
``action``, starts new rounds by itself, and at a round's end says its ``outcome``
(``win``, ``draw`` or ``loss``) in each lander's info. With ``--mode=chase`` it is the
chase (:mod:`games.duel.chase`), whose sides ``hunter`` and ``prey`` declare spaces of
their own, per agent, as the plugin sends them for agents of different kinds.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from game_bridge import protocol
from game_bridge.game_loop import StepPacer, read_arguments, run_game
from games.duel.chase import (
    CHASE_SIDES,
    HUNTER_ACTION,
    HUNTER_OBS,
    PREY_MOVES,
    PREY_OBS,
    ChaseWorld,
)
from games.duel.world import ACTION_SIZE, OBS_SIZE, OUTCOMES, SIDES, DuelWorld
from games.lander.physics import TICKS_PER_SECOND

ACTION_KEY = "thrust"
MOVE_KEY = "move"
"""The prey's action key in the chase (one of five moves)."""
OBS_KEY = "obs"
MODES = ("race", "chase")


class DuelGame:
    """The game loop's state: the world of every match plus the protocol replies.

    :param values: the launch arguments (``--agents`` counts landers: two per match).
    :raises ValueError: for an odd number of landers or a bad value.
    """

    def __init__(self, values: dict[str, str]) -> None:
        agents, action_repeat, speedup = _matches(values)
        self.world = DuelWorld(agents // 2, int(values.get("env_seed", "0")), action_repeat)
        self.n = agents
        self.pacer = StepPacer.for_game(action_repeat, TICKS_PER_SECOND, speedup)
        self.fast = False

    def env_info(self) -> dict[str, Any]:
        """The ``env_info`` reply: every lander's spaces, and its side."""
        return {
            "type": "env_info",
            "observation_space": [{OBS_KEY: {"size": [OBS_SIZE], "space": "box"}}] * self.n,
            "action_space": [{ACTION_KEY: {"size": ACTION_SIZE, "action_type": "continuous"}}]
            * self.n,
            "n_agents": self.n,
            "agent_policy_names": [SIDES[index % 2] for index in range(self.n)],
        }

    def reset(self) -> dict[str, Any]:
        """Start a new round in every match."""
        self.world.reset_matches(np.ones(self.n, dtype=bool))
        obs = protocol.wire_floats(self.world.observe())
        return {"type": "reset", "obs": [{OBS_KEY: row} for row in obs], "info": [{}] * self.n}

    def step(self, message: dict[str, Any]) -> dict[str, Any]:
        """One action per lander; a round that ends says its outcome and starts again."""
        actions = message.get("action")
        if not isinstance(actions, list) or len(actions) != self.n:
            raise ValueError(f"expected actions for {self.n} agents")
        self.pacer.wait()
        result = self.world.step(np.asarray([agent[ACTION_KEY] for agent in actions], float))
        done = result.terminated | result.truncated
        obs = result.obs
        infos: list[dict[str, Any]] = [{} for _ in range(self.n)]
        if done.any():
            terminal = protocol.wire_floats(result.obs)
            for index in np.flatnonzero(done).tolist():
                outcome = OUTCOMES[int(result.outcome[index])]
                infos[index] = {
                    "outcome": outcome,
                    "is_success": outcome == "win",
                    "TimeLimit.truncated": bool(result.truncated[index]),
                    "terminal_observation": {OBS_KEY: terminal[index]},
                }
            self.world.reset_matches(done)
            obs = self.world.observe()
        return protocol.step_message(OBS_KEY, obs, result.reward, done, infos)

    def step_binary(self, body: bytes) -> bytes:
        """Never: the duel speaks JSON only (it sends outcomes in infos)."""
        raise ValueError("the duel game speaks JSON only")

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        """Answer a ``call``: no methods of its own."""
        return {"type": "call", "returns": [None] * self.n}


def _matches(values: dict[str, str]) -> tuple[int, int, float]:
    """Landers (two per match), action repeat and speed-up of the launch arguments."""
    agents = int(values.get("agents", "2"))
    if agents < 2 or agents % 2:
        raise ValueError(f"--agents counts landers, two per match: an even number, got {agents}")
    return agents, int(values.get("action_repeat", "6")), float(values.get("speedup", "0"))


class ChaseGame:
    """The chase's game loop state: hunters and prey, each side with its own spaces.

    :param values: the launch arguments (``--agents`` counts landers: two per match).
    :raises ValueError: for an odd number of landers or a bad value.
    """

    def __init__(self, values: dict[str, str]) -> None:
        self.n, action_repeat, speedup = _matches(values)
        self.world = ChaseWorld(self.n // 2, int(values.get("env_seed", "0")), action_repeat)
        self.pacer = StepPacer.for_game(action_repeat, TICKS_PER_SECOND, speedup)
        self.fast = False

    def env_info(self) -> dict[str, Any]:
        """Per-agent spaces, as the plugin sends agents of different kinds."""
        hunter = (
            {OBS_KEY: {"size": [HUNTER_OBS], "space": "box"}},
            {ACTION_KEY: {"size": HUNTER_ACTION, "action_type": "continuous"}},
        )
        prey = ({OBS_KEY: {"size": [PREY_OBS], "space": "box"}},
                {MOVE_KEY: {"size": len(PREY_MOVES), "action_type": "discrete"}})  # fmt: skip
        kinds = [hunter if index % 2 == 0 else prey for index in range(self.n)]
        return {
            "type": "env_info",
            "observation_space": [kind[0] for kind in kinds],
            "action_space": [kind[1] for kind in kinds],
            "n_agents": self.n,
            "agent_policy_names": [CHASE_SIDES[index % 2] for index in range(self.n)],
        }

    def _observations(self, hunters: np.ndarray, prey: np.ndarray) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = [{} for _ in range(self.n)]
        for match, (h, p) in enumerate(
            zip(protocol.wire_floats(hunters), protocol.wire_floats(prey), strict=True)
        ):
            rows[2 * match], rows[2 * match + 1] = {OBS_KEY: h}, {OBS_KEY: p}
        return rows

    def reset(self) -> dict[str, Any]:
        """Start a new round in every match."""
        self.world.reset_matches(np.ones(self.n // 2, dtype=bool))
        return {
            "type": "reset",
            "obs": self._observations(*self.world.observe()),
            "info": [{}] * self.n,
        }

    def step(self, message: dict[str, Any]) -> dict[str, Any]:
        """The hunters' thrust and the prey's moves; a round that ends says its outcome."""
        actions = message.get("action")
        if not isinstance(actions, list) or len(actions) != self.n:
            raise ValueError(f"expected actions for {self.n} agents")
        self.pacer.wait()
        hunters = np.asarray([agent[ACTION_KEY] for agent in actions[0::2]], float)
        moves = np.asarray([agent[MOVE_KEY] for agent in actions[1::2]], np.int64)
        result = self.world.step(hunters, moves)
        reward = np.repeat(result.hunter_reward, 2) * np.tile([1.0, -1.0], self.n // 2)
        done = np.repeat(result.ended, 2)
        infos: list[dict[str, Any]] = [{} for _ in range(self.n)]
        if result.ended.any():
            terminal = self._observations(result.hunter_obs, result.prey_obs)
            for match in np.flatnonzero(result.ended).tolist():
                hunter_outcome = int(result.outcome[match])
                for agent, outcome in (
                    (2 * match, hunter_outcome),
                    (2 * match + 1, -hunter_outcome),
                ):
                    infos[agent] = {
                        "outcome": OUTCOMES[outcome],
                        "is_success": outcome > 0,
                        "terminal_observation": terminal[agent],
                    }
            self.world.reset_matches(result.ended)
        obs = self._observations(*self.world.observe())
        return {
            "type": "step",
            "obs": obs,
            "reward": protocol.wire_floats(reward),
            "done": done.tolist(),
            "info": infos,
        }

    def step_binary(self, body: bytes) -> bytes:
        """Never: the chase speaks JSON only (its sides' spaces differ)."""
        raise ValueError("the chase speaks JSON only")

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        """Answer a ``call``: no methods of its own."""
        return {"type": "call", "returns": [None] * self.n}


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m games.duel``."""
    values = read_arguments(sys.argv[1:] if argv is None else argv)
    try:
        mode = values.get("mode", MODES[0])
        if mode not in MODES:
            raise ValueError(f"--mode must be one of {', '.join(MODES)}, got {mode!r}")
        game: DuelGame | ChaseGame = ChaseGame(values) if mode == "chase" else DuelGame(values)
    except ValueError as exc:
        print(f"duel-game: {exc}", file=sys.stderr)
        return 2
    return run_game(game, values, "duel-game")


if __name__ == "__main__":
    sys.exit(main())
