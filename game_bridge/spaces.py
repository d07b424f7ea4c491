"""The game's `env_info` reply turned into gymnasium spaces, and the codecs that
move observations and actions between numpy batches and protocol JSON.

Declared key order is kept everywhere: sorting action keys silently swaps
actions in exported policies (godot-rl issue #234).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from game_bridge.errors import ProtocolViolation
from game_bridge.protocol import FAST_ENCODING, wire_floats

SHARED_POLICY = "shared_policy"
MAX_GAME_AGENTS = 4096
"""Agents one game instance may declare: a run that starts with them can resume with them
(``--agents-per-instance`` takes as many)."""
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


def _check_memory(
    n_agents: int, observations: tuple[ObservationEntry, ...], instance: int | None
) -> None:
    """One step's observations of every agent fit in an eighth of this machine's memory
    (a rollout keeps many steps of them): else a named fault before any array is made."""
    values = n_agents * sum(math.prod(entry.space.shape or (1,)) for entry in observations)
    step_bytes = values * 4
    try:
        machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        return
    if step_bytes > machine // 8:
        raise ProtocolViolation(
            instance,
            f"env_info declares {values:,} observation values a step over {n_agents:,} agents "
            f"({step_bytes / 2**30:,.1f} GB): more than this machine's memory can hold for a "
            f"rollout ({machine / 2**30:,.0f} GB in all)",
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
        """The per-agent action space SB3 sees (see :class:`ActionCodec`)."""
        return ActionCodec(self.actions).space


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
    """``protocol.FAST_ENCODING`` when the game accepted lander's binary steps."""
    sides: tuple[SideLayout, ...] = ()
    """The layout of each side, in the order the game names them, for a game whose sides
    declare their own spaces; empty when every agent shares one."""

    @property
    def binary_capable(self) -> bool:
        """True when the layout fits the binary encoding: one box observation, one action key."""
        return (
            not self.sides
            and len(self.observations) == 1
            and not self.observations[0].is_image
            and len(self.observations[0].space.shape or ()) == 1
            and isinstance(self.observations[0].space, spaces.Box)
            and len(self.actions) == 1
        )

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
        n_agents = _positive_int(message["n_agents"], "n_agents", instance, MAX_GAME_AGENTS)
    elif isinstance(obs_value, list):
        n_agents = len(obs_value)
        if n_agents < 1:
            raise ProtocolViolation(instance, "env_info declares no agents")
        _positive_int(n_agents, "agent count", instance, MAX_GAME_AGENTS)
    else:
        n_agents = 1
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
    if message.get("lander_encoding") == FAST_ENCODING:
        encoding = FAST_ENCODING
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


def _wire_floats(values: np.ndarray) -> Any:
    return wire_floats(np.clip(values, -1.0, 1.0))


class ActionCodec:
    """Maps SB3 action batches to the game's per-agent action dicts, in declared order.

    - all continuous: a Box(-1, 1) of the summed sizes, split per key;
    - one discrete key: Discrete(n); several discrete keys: MultiDiscrete;
    - continuous and discrete mixed: a Box(-1, 1) where a discrete key of n
      choices takes n slots and the game receives their argmax, so one Gaussian
      policy drives both kinds.
    """

    def __init__(self, entries: tuple[ActionEntry, ...]) -> None:
        self.entries = entries
        kinds = {entry.discrete for entry in entries}
        self.mixed = kinds == {True, False}
        self.all_discrete = kinds == {True}
        self.space: spaces.Space[Any]
        if self.all_discrete:
            if len(entries) == 1:
                self.space = spaces.Discrete(entries[0].size)
            else:
                self.space = spaces.MultiDiscrete([entry.size for entry in entries])
        else:
            width = sum(entry.size for entry in entries)
            self.space = spaces.Box(-1.0, 1.0, (width,), np.float32)
        self._slices: list[tuple[str, int, int, bool]] = []
        offset = 0
        for entry in entries:
            width = 1 if self.all_discrete else entry.size
            self._slices.append((entry.key, offset, offset + width, entry.discrete))
            offset += width

    def encode(self, actions: np.ndarray) -> list[dict[str, Any]]:
        """Turn a batch of actions for consecutive agents into protocol dicts, ready for
        :func:`protocol.encode_json` (continuous values may be float32 arrays).

        :param actions: shape (n_agents,) for Discrete, else (n_agents, width).
        """
        if len(self.entries) == 1:
            key = self.entries[0].key
            if self.all_discrete:
                return [
                    {key: value}
                    for value in np.asarray(actions).reshape(-1).astype(np.int64).tolist()
                ]
            return [{key: row} for row in _wire_floats(actions)]
        batch = np.asarray(actions)
        if self.all_discrete:
            batch = batch.reshape(batch.shape[0], -1)
        columns: list[list[Any]] = []
        for _key, start, stop, discrete in self._slices:
            part = batch[:, start:stop]
            if self.all_discrete:
                columns.append(part[:, 0].astype(np.int64).tolist())
            elif discrete:
                columns.append(np.argmax(part, axis=1).tolist())
            else:
                columns.append(_wire_floats(part))
        keys = [key for key, *_ in self._slices]
        return [dict(zip(keys, values, strict=True)) for values in zip(*columns, strict=True)]


def _check_agent_count(observations: Any, n_agents: int, instance: int | None) -> None:
    """A reply's ``obs`` must be a list of one entry per agent.

    :raises ProtocolViolation: naming what came instead.
    """
    if not isinstance(observations, list) or len(observations) != n_agents:
        count = len(observations) if isinstance(observations, list) else type(observations).__name__
        raise ProtocolViolation(
            instance, f"expected observations for {n_agents} agents, got {count}"
        )


def _decode_images(values: list[Any], shape: tuple[int, ...]) -> np.ndarray:
    """Camera frames as the plugin sends them (each a hex string of uint8, in the declared
    shape's order), one array; what does not fit is refused, naming the agent.

    :raises ValueError: a value that is not hex text, or of another size.
    """
    wanted = int(np.prod(shape))
    frames = []
    for agent, value in enumerate(values):
        try:
            frame = bytes.fromhex(value)
        except (TypeError, ValueError):
            raise ValueError(f"agent {agent} sent {str(value)[:20]!r}, not hex text") from None
        if len(frame) != wanted:
            raise ValueError(
                f"agent {agent} sent {len(frame):,} bytes; its shape {list(shape)} needs {wanted:,}"
            )
        frames.append(frame)
    # A bytearray: the frames stay writable (torch refuses to wrap read-only memory).
    return np.frombuffer(bytearray(b"".join(frames)), dtype=np.uint8).reshape((len(values), *shape))


class ObservationCodec:
    """Turns the game's per-agent observation dicts into numpy batches."""

    def __init__(self, entries: tuple[ObservationEntry, ...]) -> None:
        self.entries = entries

    def _decode_key(self, entry: ObservationEntry, values: list[Any]) -> np.ndarray:
        space = entry.space
        if entry.is_image:
            assert isinstance(space, spaces.Box)
            return _decode_images(values, space.shape)
        if isinstance(space, spaces.Discrete):
            return np.asarray(values, dtype=np.int64).reshape(len(values))
        assert isinstance(space, spaces.Box)
        # A number beyond float32 becomes infinity, which the bridge then refuses as a
        # game fault by name; numpy's overflow warning would only add noise.
        with np.errstate(over="ignore"):
            return np.asarray(values, dtype=np.float32).reshape((len(values), *space.shape))

    def decode(
        self, observations: Any, n_agents: int, instance: int | None
    ) -> dict[str, np.ndarray]:
        """Decode the ``obs`` list of a reply into one array per key.

        :raises ProtocolViolation: on a wrong agent count, a missing key or a wrong shape.
        """
        _check_agent_count(observations, n_agents, instance)
        result: dict[str, np.ndarray] = {}
        for entry in self.entries:
            try:
                values = [agent[entry.key] for agent in observations]
                result[entry.key] = self._decode_key(entry, values)
            except (KeyError, TypeError, ValueError) as exc:
                raise ProtocolViolation(
                    instance,
                    f"observation {entry.key!r} does not match its declared space ({exc!s:.120})",
                ) from None
        return result

    def decode_one(
        self, observation: Any, instance: int | None, agent: int = 0
    ) -> dict[str, np.ndarray]:
        """Decode a single agent's observation (a terminal observation).

        Accepts the agent's observation dict, or for a single-key layout the bare value.
        (``agent``, its index in the instance, matters to :class:`PaddedCodec` only.)
        """
        if not isinstance(observation, dict) and len(self.entries) == 1:
            observation = {self.entries[0].key: observation}
        return {key: value[0] for key, value in self.decode([observation], 1, instance).items()}


class PaddedCodec:
    """The codecs of a game whose sides have their own spaces (:attr:`EnvInfo.sides`):
    each agent's observation is decoded with its side's keys into the first columns of
    one padded row, and each agent's action is cut from the first columns of its row and
    encoded with its side's keys. Both directions of :class:`ObservationCodec` and
    :class:`ActionCodec`, so the bridge moves a sided game as any other.
    """

    def __init__(self, info: EnvInfo) -> None:
        self.n_agents = info.n_agents
        self.obs_width = int((info.observations[0].space.shape or (1,))[0])
        self.action_width = info.actions[0].size
        self._side_of = {agent: side for side in info.sides for agent in side.agents}
        self._codecs = {
            side.name: (ObservationCodec(side.observations), ActionCodec(side.actions))
            for side in info.sides
        }
        self._sides = info.sides

    def decode(
        self, observations: Any, n_agents: int, instance: int | None
    ) -> dict[str, np.ndarray]:
        """The ``obs`` list of a reply as one padded batch under :data:`PADDED_KEY`.

        :raises ProtocolViolation: as :meth:`ObservationCodec.decode` does, per side.
        """
        _check_agent_count(observations, n_agents, instance)
        batch = np.zeros((n_agents, self.obs_width), dtype=np.float32)
        for side in self._sides:
            codec = self._codecs[side.name][0]
            rows = [observations[agent] for agent in side.agents]
            (values,) = codec.decode(rows, len(rows), instance).values()
            batch[list(side.agents), : values.shape[1]] = values
        return {PADDED_KEY: batch}

    def decode_one(
        self, observation: Any, instance: int | None, agent: int = 0
    ) -> dict[str, np.ndarray]:
        """One agent's terminal observation, padded, decoded with its side's keys."""
        side = self._side_of[agent]
        (values,) = self._codecs[side.name][0].decode_one(observation, instance).values()
        row = np.zeros(self.obs_width, dtype=np.float32)
        row[: values.shape[0]] = values
        return {PADDED_KEY: row}

    def encode(self, actions: np.ndarray) -> list[dict[str, Any]]:
        """A padded batch of one instance's actions as each agent's action dict."""
        batch = np.asarray(actions).reshape(self.n_agents, self.action_width)
        result: list[dict[str, Any]] = [{} for _ in range(self.n_agents)]
        for side in self._sides:
            codec = self._codecs[side.name][1]
            rows = batch[list(side.agents), : side.action_width]
            if not isinstance(codec.space, spaces.Box):
                rows = np.rint(rows).astype(np.int64)
            for agent, encoded in zip(side.agents, codec.encode(rows), strict=True):
                result[agent] = encoded
        return result
