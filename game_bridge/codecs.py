"""The codecs that move observations and actions between numpy batches and protocol JSON,
for the spaces a game declared (``spaces.py``): one instance's actions out, its agents'
observations in (camera keys as hex-encoded bytes), and a game with sides padded to one row.

Declared key order is kept everywhere: sorting action keys silently swaps
actions in exported policies (godot-rl issue #234).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from game_bridge.errors import ProtocolViolation
from game_bridge.protocol import wire_floats
from game_bridge.spaces import PADDED_KEY, ActionEntry, EnvInfo, ObservationEntry, action_space_of


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
        self.space = action_space_of(entries)
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
