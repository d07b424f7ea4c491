"""The duel game as a protocol client: ``python -m games.duel --port=P --agents=2M ...``.

Like the lander it behaves as a Godot game with the plugin: it answers ``env_info``
(naming each agent's side, ``red`` or ``blue``, in ``agent_policy_names``), ``reset`` and
``action``, starts new rounds by itself, and at a round's end says its ``outcome``
(``win``, ``draw`` or ``loss``) in each lander's info.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from game_bridge import protocol
from game_bridge.game_loop import StepPacer, read_arguments, run_game
from games.duel.world import ACTION_SIZE, OBS_SIZE, OUTCOMES, SIDES, DuelWorld
from games.lander.physics import TICKS_PER_SECOND

ACTION_KEY = "thrust"
OBS_KEY = "obs"


class DuelGame:
    """The game loop's state: the world of every match plus the protocol replies.

    :param values: the launch arguments (``--agents`` counts landers: two per match).
    :raises ValueError: for an odd number of landers or a bad value.
    """

    def __init__(self, values: dict[str, str]) -> None:
        agents = int(values.get("agents", "2"))
        if agents < 2 or agents % 2:
            raise ValueError(
                f"--agents counts landers, two per match: an even number, got {agents}"
            )
        action_repeat = int(values.get("action_repeat", "6"))
        speedup = float(values.get("speedup", "0"))
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


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m games.duel``."""
    values = read_arguments(sys.argv[1:] if argv is None else argv)
    try:
        game = DuelGame(values)
    except ValueError as exc:
        print(f"duel-game: {exc}", file=sys.stderr)
        return 2
    return run_game(game, values, "duel-game", fast_capable=False)


if __name__ == "__main__":
    sys.exit(main())
