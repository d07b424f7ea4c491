"""The game's `env_info` reply turned into gymnasium spaces: each observation and action key,
the agents and their sides, checked before anything is allocated (the codecs that move the
values are in ``codecs.py``).

Declared key order is kept everywhere: sorting action keys silently swaps
actions in exported policies (godot-rl issue #234).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from game_bridge.errors import ProtocolViolation
from game_bridge.machine_memory import available_memory, in_gb
from game_bridge.protocol import ENCODINGS, FAST_ENCODING, PICTURE_ENCODING

SHARED_POLICY = "shared_policy"
AGENT_STEP_BYTES = 1024
"""The least one agent costs a step wherever lander holds it (its observation and action
values, reward and flags, the Python objects of its message): a game's agents are bounded
by this machine's memory at that cost, not by a fixed count."""
STEP_SHARE = 8
"""One step of every agent may take an eighth of the available memory: a rollout keeps many
steps of them, and the update copies them."""
MAX_DECLARED_VALUES = 2**24
"""Values one observation key (per agent) or one action may declare: 16.7M, a camera of
2,360 x 2,360 x 3. Checked before any array of that size is made, so a size of 10^9 is a
named fault, not a MemoryError."""


@dataclass(frozen=True)
class ObservationEntry:
    """One observation key of an agent.

    :param key: the key in the game's ``obs`` dict.
    :param space: its gymnasium space (Box float32, Box uint8 for images, or Discrete).
    :param is_image: True for keys containing ``2d``, sent as a hex string of uint8.
    """

    key: str
    space: spaces.Space[Any]
    is_image: bool


@dataclass(frozen=True)
class ActionEntry:
    """One action key of an agent, in the order the game declared it.

    :param key: the key the game expects in its ``action`` dict.
    :param size: vector length (continuous) or number of choices (discrete).
    :param discrete: True for ``action_type: discrete``.
    """

    key: str
    size: int
    discrete: bool


def _entry_per_agent(value: Any, n_agents: int, what: str, instance: int | None) -> list[Any]:
    """Expand the single-dict form ("same for every agent") to a per-agent list."""
    if isinstance(value, dict):
        return [value] * n_agents
    if (
        isinstance(value, list)
        and len(value) == n_agents
        and all(isinstance(v, dict) for v in value)
    ):
        return value
    raise ProtocolViolation(
        instance,
        f"env_info {what} must be a dict or a list of {n_agents} dicts, got {value!r:.120}",
    )


def _positive_int(
    value: Any, what: str, instance: int | None, most: int = MAX_DECLARED_VALUES
) -> int:
    # Godot sends every JSON number as a float: 2.0 is a fine size, 2.5 is not.
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value != int(value)
        or value < 1
    ):
        raise ProtocolViolation(
            instance, f"env_info {what} must be a positive integer, got {value!r:.40}"
        )
    if value > most:
        raise ProtocolViolation(
            instance, f"env_info {what} is {int(value):,}: lander takes at most {most:,}"
        )
    return int(value)


def agent_limit(available: int | None = None) -> int:
    """The most agents one game instance may hold on this machine now: one step of them
    (:data:`AGENT_STEP_BYTES` each) within a :data:`STEP_SHARE` of the available memory.

    :param available: the available memory, when the caller has read it.
    """
    available = available if available is not None else available_memory()
    if available is None:
        return MAX_DECLARED_VALUES
    return max(1, available // STEP_SHARE // AGENT_STEP_BYTES)


def agents_beyond_memory(agents: int, what: str) -> str | None:
    """None when ``agents`` fit this machine (:func:`agent_limit`); else one line with the
    figures: what they need, what the machine has, how many it takes.

    :param what: what declared them, for the line (``n_agents``, ``--agents-per-instance``).
    """
    available = available_memory()
    limit = agent_limit(available)
    if agents <= limit:
        return None
    return (
        f"{what} is {agents:,}: one step of that many agents needs at least "
        f"{in_gb(agents * AGENT_STEP_BYTES)} (1 KB an agent), more than an eighth of the "
        f"{in_gb(available or 0)} this machine has available; it takes at most {limit:,} agents"
    )


def _check_memory(
    n_agents: int, observations: tuple[ObservationEntry, ...], instance: int | None
) -> None:
    """One step's observations of every agent fit in a :data:`STEP_SHARE` of this machine's
    available memory (a rollout keeps many steps of them): else a named fault before any
    array is made."""
    values = n_agents * sum(math.prod(entry.space.shape or (1,)) for entry in observations)
    step_bytes = values * 4
    available = available_memory()
    if available is None:
        return
    if step_bytes > available // STEP_SHARE:
        raise ProtocolViolation(
            instance,
            f"env_info declares {values:,} observation values a step over {n_agents:,} agents "
            f"({in_gb(step_bytes)}): more than this machine's memory can hold for a rollout "
            f"({in_gb(available)} available)",
        )


def _check_values(key: str, shape: tuple[int, ...], instance: int | None) -> None:
    """A key's values per agent, bounded before any array of them is made."""
    values = math.prod(shape)
    if values > MAX_DECLARED_VALUES:
        raise ProtocolViolation(
            instance,
            f"observation {key!r} declares {values:,} values per agent (shape "
            f"{list(shape)}): lander takes at most {MAX_DECLARED_VALUES:,}",
        )


def _parse_observation_entry(key: str, spec: Any, instance: int | None) -> ObservationEntry:
    if not isinstance(spec, dict):
        raise ProtocolViolation(instance, f"observation {key!r} must be a dict, got {spec!r:.80}")
    kind = spec.get("space", "box")
    size = spec.get("size")
    if kind == "discrete":
        return ObservationEntry(
            key, spaces.Discrete(_positive_int(size, f"size of {key!r}", instance)), False
        )
    if kind != "box":
        raise ProtocolViolation(instance, f"observation {key!r} has unknown space {kind!r}")
    dims = size if isinstance(size, list) else [size]
    if not 1 <= len(dims) <= 4:
        raise ProtocolViolation(instance, f"observation {key!r} must have 1 to 4 dimensions")
    shape = tuple(_positive_int(d, f"size of {key!r}", instance) for d in dims)
    _check_values(key, shape, instance)
    if "2d" in key:
        return ObservationEntry(key, spaces.Box(0, 255, shape, np.uint8), True)
    low = _bound(spec, "low", -1.0, shape, key, instance)
    high = _bound(spec, "high", 1.0, shape, key, instance)
    inverted = np.flatnonzero(low > high)
    if inverted.size:
        i = int(inverted[0])
        raise ProtocolViolation(
            instance,
            f"observation {key!r} declares low {low.flat[i]:g} above high {high.flat[i]:g} "
            f"(value {i}{f' and {inverted.size - 1} more' if inverted.size > 1 else ''})",
        )
    return ObservationEntry(key, spaces.Box(low, high, shape, np.float32), False)


def _bound(
    spec: dict[str, Any],
    side: str,
    default: float,
    shape: tuple[int, ...],
    key: str,
    instance: int | None,
) -> np.ndarray:
    """One side of a box's bounds: a number for every value, or one per value (a list, flat
    or nested as the shape), ``null`` for an unbounded side (JSON has no infinity); a
    number beyond float32 is unbounded too, as float32 itself would make it.

    :raises ProtocolViolation: text, a list of another size, or nan.
    """
    value = spec.get(side, default)
    unbounded = -np.inf if side == "low" else np.inf
    wanted = int(np.prod(shape))
    flat = np.ravel(np.asarray(value, dtype=object)) if isinstance(value, list) else None
    if flat is not None and flat.size != wanted:
        raise ProtocolViolation(
            instance,
            f"observation {key!r} declares {flat.size} {side} bounds for {wanted} values",
        )
    items = flat.tolist() if flat is not None else [value]
    numbers = []
    for item in items:
        if item is None:
            numbers.append(unbounded)
        elif isinstance(item, int | float) and not isinstance(item, bool) and item == item:
            numbers.append(float(item) if abs(item) < 3.5e38 else np.sign(item) * np.inf)
        else:
            raise ProtocolViolation(
                instance,
                f"observation {key!r} {side} bound must be a number or null, got {item!r:.40}",
            )
    bounds = np.asarray(numbers, dtype=np.float64)
    with np.errstate(over="ignore"):
        bounds = bounds.astype(np.float32)
    return bounds.reshape(shape) if flat is not None else np.full(shape, bounds[0], np.float32)


def _parse_action_entry(key: str, spec: Any, instance: int | None) -> ActionEntry:
    if not isinstance(spec, dict):
        raise ProtocolViolation(instance, f"action {key!r} must be a dict, got {spec!r:.80}")
    kind = spec.get("action_type")
    if kind not in ("continuous", "discrete"):
        raise ProtocolViolation(instance, f"action {key!r} has unknown action_type {kind!r}")
    return ActionEntry(
        key,
        _positive_int(spec.get("size"), f"size of action {key!r}", instance),
        kind == "discrete",
    )


def action_space_of(entries: tuple[ActionEntry, ...]) -> spaces.Space[Any]:
    """The per-agent action space SB3 sees for the declared action keys: Discrete or
    MultiDiscrete when every key is discrete, else one Box(-1, 1) in which a discrete key of
    n choices takes n slots (``codecs.ActionCodec`` sends their argmax)."""
    if all(entry.discrete for entry in entries):
        if len(entries) == 1:
            return spaces.Discrete(entries[0].size)
        return spaces.MultiDiscrete([entry.size for entry in entries])
    width = sum(entry.size for entry in entries)
    return spaces.Box(-1.0, 1.0, (width,), np.float32)


class AgentLayout:
    """The keys of one kind of agent: what a policy of them reads and writes."""

    observations: tuple[ObservationEntry, ...]
    actions: tuple[ActionEntry, ...]

    def layout(self) -> dict[str, Any]:
        """The agents' keys as the game declared them, JSON-ready: what an export needs to
        lay out its ONNX inputs and outputs the way the plugin reads them."""
        return {
            "observations": [
                {"key": e.key, "shape": list(e.space.shape or ()), "image": e.is_image}
                for e in self.observations
            ],
            "actions": [
                {
                    "key": e.key,
                    "size": e.size,
                    "action_type": "discrete" if e.discrete else "continuous",
                }
                for e in self.actions
            ],
        }

    @property
    def observation_space(self) -> spaces.Space[Any]:
        """The per-agent observation space SB3 sees: the space itself for one key, else a Dict."""
        if len(self.observations) == 1:
            return self.observations[0].space
        # A list of pairs keeps the declared order (a mapping would be sorted).
        return spaces.Dict([(entry.key, entry.space) for entry in self.observations])

    @property
    def action_space(self) -> spaces.Space[Any]:
        """The per-agent action space SB3 sees (see :func:`action_space_of`)."""
        return action_space_of(self.actions)


@dataclass(frozen=True)
class SideLayout(AgentLayout):
    """One side of a game whose sides declare their own spaces (a hunter and its prey).

    :param name: the side's policy name.
    :param agents: the indices of its agents within one instance.
    """

    name: str
    agents: tuple[int, ...]
    observations: tuple[ObservationEntry, ...]
    actions: tuple[ActionEntry, ...]

    @property
    def observation_size(self) -> int:
        """Values in one agent's observation (one vector key, see :func:`parse_env_info`)."""
        return int((self.observations[0].space.shape or (1,))[0])

    @property
    def action_width(self) -> int:
        """Columns of one agent's action in the padded batch: a Box's width, else one per
        discrete key."""
        shape = self.action_space.shape
        return int(shape[0]) if shape else 1


PADDED_KEY = "sides"
"""The one key of the padded batch of a game whose sides have their own spaces."""


@dataclass(frozen=True)
class EnvInfo(AgentLayout):
    """What one game instance declared about its agents.

    Usually every agent shares one observation and action layout (the plugin's
    ``shared_policy``). A game whose sides (policy names) declare their own spaces has
    :attr:`sides`, and then :attr:`observations` and :attr:`actions` describe the padded
    batch the bridge moves (each agent's vector in the first columns of one
    :data:`PADDED_KEY` row, zeros after), which ``training/envs/sides.py`` cuts per side.
    """

    n_agents: int
    observations: tuple[ObservationEntry, ...]
    actions: tuple[ActionEntry, ...]
    policy_names: tuple[str, ...]
    encoding: str = "json"
    """The binary encoding the game accepted (one of ``protocol.ENCODINGS``), else JSON."""
    sides: tuple[SideLayout, ...] = ()
    """The layout of each side, in the order the game names them, for a game whose sides
    declare their own spaces; empty when every agent shares one."""

    @property
    def binary_encoding(self) -> str | None:
        """The binary encoding the layout fits: one action key and one observation key,
        a vector (``FAST_ENCODING``) or a picture (``PICTURE_ENCODING``); None for
        anything else, which travels as JSON."""
        if self.sides or len(self.observations) != 1 or len(self.actions) != 1:
            return None
        entry = self.observations[0]
        if not isinstance(entry.space, spaces.Box):
            return None
        if entry.is_image:
            return PICTURE_ENCODING
        return FAST_ENCODING if len(entry.space.shape or ()) == 1 else None

    def side(self, name: str) -> AgentLayout:
        """The layout a policy of side ``name`` reads and writes."""
        for side in self.sides:
            if side.name == name:
                return side
        return self

    def columns(self, name: str) -> int | None:
        """The columns of the padded batch side ``name`` reads; None (all of them) when
        every agent shares one layout."""
        layout = self.side(name)
        return layout.observation_size if isinstance(layout, SideLayout) else None

    def same_layout(self, other: EnvInfo) -> bool:
        """True when two instances can feed one policy."""
        return (
            self.n_agents == other.n_agents
            and self.observations == other.observations
            and self.actions == other.actions
            and self.sides == other.sides
        )


def parse_env_info(message: dict[str, Any], instance: int | None = None) -> EnvInfo:
    """Parse an ``env_info`` reply.

    Accepts the per-agent list form and the single-dict form of both spaces, and a
    missing ``agent_policy_names`` (all ``shared_policy``). Godot floats (``2.0``)
    are accepted wherever an integer is meant.

    :param message: the decoded reply.
    :param instance: index of the game instance, for error messages.
    :raises ProtocolViolation: when anything is missing or inconsistent.
    """
    if message.get("type") != "env_info":
        raise ProtocolViolation(
            instance, f"expected an env_info reply, got type {message.get('type')!r}"
        )
    obs_value = message.get("observation_space")
    act_value = message.get("action_space")
    if "n_agents" in message:
        n_agents = _positive_int(message["n_agents"], "n_agents", instance, 2**62)
    elif isinstance(obs_value, list):
        n_agents = len(obs_value)
        if n_agents < 1:
            raise ProtocolViolation(instance, "env_info declares no agents")
    else:
        n_agents = 1
    beyond = agents_beyond_memory(n_agents, "n_agents")
    if beyond is not None:  # before any list of that many agents is made
        raise ProtocolViolation(instance, beyond)
    obs_per_agent = _entry_per_agent(obs_value, n_agents, "observation_space", instance)
    act_per_agent = _entry_per_agent(act_value, n_agents, "action_space", instance)
    names_value = message.get("agent_policy_names")
    if names_value is None:
        names = (SHARED_POLICY,) * n_agents
    elif isinstance(names_value, list) and len(names_value) == n_agents:
        names = tuple(str(name) for name in names_value)
    else:
        raise ProtocolViolation(
            instance, f"agent_policy_names must list {n_agents} names, got {names_value!r:.120}"
        )
    encoding = "json"
    if message.get("lander_encoding") in ENCODINGS:
        encoding = str(message["lander_encoding"])
    if all(spec == obs_per_agent[0] for spec in obs_per_agent) and all(
        spec == act_per_agent[0] for spec in act_per_agent
    ):
        observations, actions = _parse_keys(obs_per_agent[0], act_per_agent[0], instance)
        _check_memory(n_agents, observations, instance)
        return EnvInfo(n_agents, observations, actions, names, encoding)
    sides = _side_layouts(names, obs_per_agent, act_per_agent, instance)
    padded_obs = ObservationEntry(
        PADDED_KEY,
        spaces.Box(-np.inf, np.inf, (max(s.observation_size for s in sides),), np.float32),
        False,
    )
    padded_action = ActionEntry(PADDED_KEY, max(s.action_width for s in sides), False)
    _check_memory(n_agents, (padded_obs,), instance)
    return EnvInfo(n_agents, (padded_obs,), (padded_action,), names, encoding, sides)


def _parse_keys(
    observation: dict[str, Any], action: dict[str, Any], instance: int | None
) -> tuple[tuple[ObservationEntry, ...], tuple[ActionEntry, ...]]:
    """One agent's observation and action keys, in declared order."""
    if not observation or not action:
        raise ProtocolViolation(instance, "env_info declares no observation or no action keys")
    return (
        tuple(_parse_observation_entry(str(k), v, instance) for k, v in observation.items()),
        tuple(_parse_action_entry(str(k), v, instance) for k, v in action.items()),
    )


def _side_layouts(
    names: tuple[str, ...],
    obs_per_agent: list[Any],
    act_per_agent: list[Any],
    instance: int | None,
) -> tuple[SideLayout, ...]:
    """The sides of a game whose agents declare different spaces: each side's agents must
    agree, and each side reads one vector (the padded batch holds one row per agent)."""
    sides = []
    for name in dict.fromkeys(names):
        agents = tuple(i for i, agent_side in enumerate(names) if agent_side == name)
        if any(obs_per_agent[i] != obs_per_agent[agents[0]] for i in agents) or any(
            act_per_agent[i] != act_per_agent[agents[0]] for i in agents
        ):
            raise ProtocolViolation(
                instance,
                f"agents of side {name!r} declare different spaces; the agents of one side "
                "(policy name) share one policy",
            )
        observations, actions = _parse_keys(
            obs_per_agent[agents[0]], act_per_agent[agents[0]], instance
        )
        if (
            len(observations) != 1
            or observations[0].is_image
            or len(observations[0].space.shape or ()) != 1
        ):
            raise ProtocolViolation(
                instance,
                f"side {name!r} has spaces of its own: lander plays such sides with one "
                "vector observation key each",
            )
        sides.append(SideLayout(name, agents, observations, actions))
    if len(sides) < 2:
        raise ProtocolViolation(instance, "agents declare different spaces under one policy name")
    return tuple(sides)
