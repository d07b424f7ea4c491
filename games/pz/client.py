"""A PettingZoo game as a protocol program: ``python -m games.pz --module=MODULE``.

One instance plays ``--agents`` agents: as many tables (copies of the game) as that fills,
each agent of each table one agent of the protocol, table-major, as SuperSuit's vector
wrappers lay them out. Agents alike (one kind, the same spaces) share a policy name; a
turn-based game of two rivals of one kind names each chair (``player_a``, ``player_b``),
so ``--self-play`` plays one against snapshots of itself; agents of different spaces are
sides with models of their own. A table whose game ended starts again at once.

Each step's info marks what PettingZoo's games do that a vector environment does not:
``lander_idle`` where the step did not use the agent's action (not its turn), and
``lander_gone`` while an agent that left mid-episode waits for its table to end (its own
episode ended, with its terminal observation, on the step it left).
"""

from __future__ import annotations

import re
import sys
from typing import Any

import numpy as np
from gymnasium import spaces

from game_bridge import protocol
from game_bridge.game_loop import read_arguments, run_game
from games.gym.packages import PACKAGE_ARGUMENT, GymPackageError, import_packages, packages_of
from games.gym.parts import ObservationPart, UnsupportedEnv, space_parts
from games.gym.view import action_scale, parse_kwargs, to_bounds
from games.pz.tables import GameModuleError, Table, make_env

LAUNCH_ARGUMENTS = frozenset(
    {"module", "port", "env_seed", "transport", "agents", "speedup", "action_repeat"}
    | {PACKAGE_ARGUMENT}
)
"""Arguments of the launch itself (PROTOCOL.md), never the game's."""
ACTION_KEY = "action"
MASK_KEY = "action_mask"
"""The observation key of the moves a turn-based game allows (PettingZoo's own name): the
policy never picks a move outside it (``training/ppo/action_heads.py``)."""


def _kind(agent: str) -> str:
    return re.sub(r"_[0-9]+$", "", agent)


def policy_names(table: Table) -> list[str]:
    """Each agent's policy name: its kind (``pursuer_3`` is a ``pursuer``), or in a game of
    two rivals each chair's (``player_a``, ``player_b``): the rivals change seats every game
    (:class:`PettingZooGame`), so a side plays first as often as second."""
    kinds = [_kind(agent) for agent in table.agents]
    if rivals(table):
        return [f"{kinds[0]}_a", f"{kinds[0]}_b"]
    return kinds


def rivals(table: Table) -> bool:
    """A turn-based game of two agents of one kind: two rivals (tic-tac-toe's players). Two
    agents of one kind that move at once may as well be partners (they share a policy)."""
    agents = table.agents
    return not table.parallel and len(agents) == 2 and len({_kind(a) for a in agents}) == 1


class AgentSpaces:
    """How one agent's observation and action travel.

    :raises UnsupportedEnv: spaces the game cannot serve.
    """

    def __init__(self, observation: spaces.Space[Any], action: spaces.Space[Any]) -> None:
        self.parts: tuple[ObservationPart, ...] = space_parts(observation)
        if any(part.is_image for part in self.parts) and len(self.parts) > 1:
            raise UnsupportedEnv("a picture beside other keys: give the picture alone")
        self.action = action
        if isinstance(action, spaces.Box):
            low = np.asarray(action.low, dtype=np.float64).reshape(-1)
            high = np.asarray(action.high, dtype=np.float64).reshape(-1)
            self.scale: tuple[np.ndarray, np.ndarray, np.ndarray] | None = action_scale(low, high)
            self.entries = {ACTION_KEY: {"size": int(low.size), "action_type": "continuous"}}
        elif isinstance(action, spaces.Discrete):
            self.scale = None
            self.entries = {ACTION_KEY: {"size": int(action.n), "action_type": "discrete"}}
        else:
            raise UnsupportedEnv(
                f"an agent acts in a {type(action).__name__} space; PettingZoo games are "
                "served with Box and Discrete actions"
            )

    def observation_entries(self) -> dict[str, Any]:
        return {part.key: part.entry() for part in self.parts}

    @property
    def signature(self) -> str:
        """The same text for agents of the same spaces (their observations batch together)."""
        return repr((self.observation_entries(), self.entries))

    def values(self, obs: Any) -> dict[str, np.ndarray]:
        """One observation by key, as a policy reads it (a turn-based game's mask with at
        least one move: an agent not to move is told every move, and its action goes
        unused)."""
        values: dict[str, np.ndarray] = {}
        for part in self.parts:
            value = np.asarray(part.convert(part.pick(obs)))
            if part.key == MASK_KEY and not np.any(value):
                value = np.ones_like(value)
            values[part.key] = value
        return values

    def wire(self, obs: Any) -> dict[str, Any]:
        """One observation as the reply carries it (a picture as hex text of its bytes)."""
        return {
            key: value.tobytes().hex() if value.dtype == np.uint8 else protocol.wire_floats(value)
            for key, value in self.values(obs).items()
        }

    def game_action(self, sent: Any) -> Any:
        """The protocol's action as the game takes it."""
        if self.scale is not None:
            assert isinstance(self.action, spaces.Box)
            return to_bounds(self.scale, sent).astype(self.action.dtype).reshape(self.action.shape)
        return int(np.asarray(sent).reshape(-1)[0]) + int(getattr(self.action, "start", 0))


class PettingZooGame:
    """Tables of one PettingZoo game behind the protocol's replies.

    :param tables: the copies, each ``len(table.agents)`` protocol agents.
    :param seed: table ``i`` starts from ``seed * 1000 + i``.
    """

    fast = False  # JSON: agents observe several keys, and say idle and gone per step

    def __init__(self, tables: list[Table], seed: int) -> None:
        self.tables = tables
        first = tables[0]
        self.agents = first.agents
        self.spaces = {
            agent: AgentSpaces(first.env.observation_space(agent), first.env.action_space(agent))
            for agent in self.agents
        }
        self.names = policy_names(first)
        self.rivals = rivals(first)
        self.seed = seed
        self._seeded = False
        self._gone: list[set[str]] = [set() for _ in tables]
        self._swapped = [False] * len(tables)
        """Per table, whether its rivals sit in each other's chairs this game."""
        if (
            self.rivals
            and self.spaces[self.agents[0]].entries != self.spaces[self.agents[1]].entries
        ):
            raise UnsupportedEnv("two rivals of one kind act in different spaces")

    def seats(self, table: int) -> list[str]:
        """The game's agent in each of the table's protocol agents' chairs."""
        return self.agents[::-1] if self._swapped[table] else self.agents

    @property
    def slots(self) -> list[tuple[int, str]]:
        """``(table, agent)`` of every protocol agent now, table-major."""
        return [(t, agent) for t in range(len(self.tables)) for agent in self.seats(t)]

    def env_info(self) -> dict[str, Any]:
        chairs = [(t, a) for t in range(len(self.tables)) for a in self.agents]
        return {
            "type": "env_info",
            "observation_space": [self.spaces[a].observation_entries() for _, a in chairs],
            "action_space": [self.spaces[a].entries for _, a in chairs],
            "n_agents": len(chairs),
            "agent_policy_names": self.names * len(self.tables),
        }

    def _reset_table(self, index: int) -> None:
        if self._seeded and self.rivals:
            self._swapped[index] = not self._swapped[index]  # the rivals change chairs
        self.tables[index].reset(None if self._seeded else self.seed * 1000 + index)
        self._gone[index] = set()

    def _observe(self, table: int, agent: str) -> dict[str, Any]:
        return self.spaces[agent].wire(self.tables[table].observation(agent))

    def reset(self) -> dict[str, Any]:
        for index in range(len(self.tables)):
            self._reset_table(index)
        self._seeded = True
        obs = [self._observe(t, a) for t, a in self.slots]
        return {"type": "reset", "obs": obs, "info": [{}] * len(obs)}

    def step(self, message: dict[str, Any]) -> dict[str, Any]:
        sent = message.get("action")
        if not isinstance(sent, list) or len(sent) != len(self.slots):
            raise ValueError(f"expected actions for {len(self.slots)} agents")
        rewards, dones, infos = [], [], []
        per_table = len(self.agents)
        for t, table in enumerate(self.tables):
            row = sent[t * per_table : (t + 1) * per_table]
            moving = table.to_move()
            seated = self.seats(t)
            actions = {
                agent: self.spaces[agent].game_action(row[i][ACTION_KEY])
                for i, agent in enumerate(seated)
                if agent in moving
            }
            moved = table.step(actions)
            gone_before = set(self._gone[t])
            for agent in seated:
                info: dict[str, Any] = {}
                if agent in gone_before:
                    info[protocol.GONE] = True
                else:
                    info.update(_plain(moved.infos.get(agent, {})))
                    if agent not in moved.used:
                        info[protocol.IDLE] = True
                done = agent in moved.left or moved.over  # a gone agent's wait ends too
                if done:
                    info["terminal_observation"] = self._observe(t, agent)
                    info["TimeLimit.truncated"] = moved.left.get(agent, False)
                rewards.append(0.0 if agent in gone_before else moved.rewards[agent])
                dones.append(done)
                infos.append(info)
            self._gone[t] |= set(moved.left)
            if moved.over:
                self._reset_table(t)
        return {
            "type": "step",
            "obs": [self._observe(t, a) for t, a in self.slots],
            "reward": protocol.wire_floats(np.asarray(rewards)),
            "done": dones,
            "info": infos,
        }

    def step_binary(self, body: bytes) -> bytes:
        raise NotImplementedError("PettingZoo games answer in JSON")

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        return {"type": "call", "returns": [None] * len(self.slots)}


def _plain(info: dict[str, Any]) -> dict[str, Any]:
    """What of a PettingZoo agent's info travels as JSON (numbers, text, flags)."""
    return {k: v for k, v in info.items() if isinstance(v, bool | int | float | str)}


def make_tables(module: str, kwargs: dict[str, Any], agents: int) -> list[Table]:
    """As many tables of the game as ``agents`` protocol agents need (one at least; the
    game declares the agents of its whole tables)."""
    env, parallel = make_env(module, kwargs)
    first = Table(env, parallel)
    count = max(1, -(-agents // max(1, len(first.agents))))
    return [first, *(Table(*make_env(module, kwargs)) for _ in range(count - 1))]


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m games.pz``."""
    values = read_arguments(sys.argv[1:] if argv is None else argv)
    module = values.get("module")
    try:
        if module is None:
            raise ValueError("give --module=MODULE")
        agents = int(values.get("agents", "1"))
        seed = int(values.get("env_seed", "0"))
        import_packages(packages_of(values.get(PACKAGE_ARGUMENT)))
        kwargs = parse_kwargs({k: v for k, v in values.items() if k not in LAUNCH_ARGUMENTS})
        game = PettingZooGame(make_tables(module, kwargs, agents), seed)
    except (ValueError, UnsupportedEnv, GameModuleError, GymPackageError) as exc:
        print(f"pz-game: {exc}", file=sys.stderr)
        return 2
    return run_game(game, values, f"pz-game {module}")
