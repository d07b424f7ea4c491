"""A Stable-Baselines3 ``VecEnv`` over N game instances of K agents each.

``num_envs`` = N x K, instance-major: env ``i * K + k`` is agent ``k`` of
instance ``i``. A step sends every instance its actions before reading any
reply, so all games step in parallel while the trainer waits once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvObs, VecEnvStepReturn

from game_bridge import protocol
from game_bridge.codecs import ActionCodec, ObservationCodec, PaddedCodec
from game_bridge.errors import (
    BridgeError,
    GameStopped,
    InstanceDied,
    Interrupted,
    ProtocolViolation,
)
from game_bridge.instance import GameInstance
from game_bridge.launcher import LaunchConfig, close_instances, discard_output, launch_instances
from game_bridge.spaces import EnvInfo

_NUMBER_TYPES = frozenset((int, float))
"""What a JSON reward may parse to (``true`` parses to bool, a subclass of int)."""


def _check_finite(
    instance: GameInstance, decoded: dict[str, np.ndarray], reward: np.ndarray
) -> None:
    """Refuse NaN and infinities (or numbers beyond float32) before they reach PPO, where
    they would end the run in a traceback far from the game that sent them."""
    arrays = [reward, *(value for value in decoded.values() if value.dtype.kind == "f")]
    if all(np.isfinite(array).all() for array in arrays):
        return
    instance.faulted = True
    raise ProtocolViolation(
        instance.index,
        "sent non-finite numbers (NaN, infinity, or beyond float32) in observations or rewards",
    )


class TooManyRestarts(BridgeError):
    """Game instances failed more often than the restart limit allows."""


@dataclass(frozen=True)
class Restart:
    """One restart of a faulty instance: when, which, and why."""

    at: float
    instance: int
    reason: str


class GameVecEnv(VecEnv):
    """Game instances driven over TCP or stdio as one vectorized environment.

    A game that dies, hangs or sends garbage mid-run is restarted on the same
    port: its agents' episodes end as truncated (bootstrapped from their last
    observation) and training goes on. More than ``max_restarts_per_minute``
    restarts raise :class:`TooManyRestarts`; 0 turns restarts off.

    :param config: how to launch the instances.
    :param max_restarts_per_minute: restarts tolerated in any 60 s window.
    :param launched: instances already launched with ``config`` and their ``env_info``
        (a launch begun earlier, while the trainer loaded), instead of launching here.
    """

    def __init__(
        self,
        config: LaunchConfig,
        max_restarts_per_minute: int = 0,
        launched: tuple[list[GameInstance], list[EnvInfo]] | None = None,
    ) -> None:
        self.config = config
        # Nobody would answer a restart of a game a person started.
        self.max_restarts_per_minute = 0 if config.external else max_restarts_per_minute
        self.restarts: list[Restart] = []
        self.port_moves: list[tuple[int, int, int]] = []  # (instance, old port, new port)
        self._send_faults: dict[int, BridgeError] = {}
        self.instances, infos = launched if launched is not None else launch_instances(config)
        try:
            self.env_info = self._common_layout(infos)
        except BridgeError:
            close_instances(self.instances)
            raise
        self.agents_per_instance = self.env_info.n_agents
        self.action_codec: ActionCodec | PaddedCodec
        self.obs_codec: ObservationCodec | PaddedCodec
        if self.env_info.sides:  # sides with spaces of their own: one padded batch
            self.action_codec = self.obs_codec = PaddedCodec(self.env_info)
        else:
            self.action_codec = ActionCodec(self.env_info.actions)
            self.obs_codec = ObservationCodec(self.env_info.observations)
        self._single_key = (
            self.env_info.observations[0].key if len(self.env_info.observations) == 1 else None
        )
        self._last_parts: dict[int, dict[str, np.ndarray]] = {}  # by instance
        self._injected: VecEnvStepReturn | None = None
        self._closed = False
        self._sent_at = 0.0
        self._part_sent_at: dict[int, float] = {}  # by a part's first instance
        self._waited_s = 0.0  # in step_wait, over every step: the games' own pace
        self._waited_steps = 0.0  # whole steps (a step in parts counts its share)
        # Binary steps only when offered, every game accepted them and the layout fits.
        encoding = self.env_info.binary_encoding
        self.binary = (
            config.offers_fast_wire
            and encoding is not None
            and all(info.encoding == encoding for info in infos)
        )
        self._encoding = encoding or protocol.FAST_ENCODING
        self._discrete = self.env_info.actions[0].discrete
        self._obs_shape = self.env_info.observations[0].space.shape or (1,)
        self._obs_size = int(np.prod(self._obs_shape))
        super().__init__(
            config.n_instances * self.agents_per_instance,
            self.env_info.observation_space,
            self.env_info.action_space,
        )

    @staticmethod
    def _common_layout(infos: list[EnvInfo]) -> EnvInfo:
        first = infos[0]
        for index, info in enumerate(infos[1:], start=1):
            if not info.same_layout(first):
                raise ProtocolViolation(
                    index, "declares other spaces or agent count than instance 0"
                )
        return first

    # -- observations ----------------------------------------------------------

    def _to_vec_obs(self, parts: list[dict[str, np.ndarray]]) -> VecEnvObs:
        if self._single_key is not None:
            if len(parts) == 1:  # a copy: the part may be a read-only view of a reply
                return np.array(parts[0][self._single_key])
            return np.concatenate([part[self._single_key] for part in parts])
        return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}

    def _one_obs(self, decoded: dict[str, np.ndarray]) -> Any:
        return decoded[self._single_key] if self._single_key is not None else decoded

    # -- VecEnv API ------------------------------------------------------------

    def reset(self) -> VecEnvObs:
        """Reset every game (each resets all its agents)."""
        parts = []
        try:
            for instance in self.instances:
                instance.send({"type": "reset"})
            for instance in self.instances:
                reply = instance.receive("reset")
                parts.append(
                    self.obs_codec.decode(
                        reply.get("obs"), self.agents_per_instance, instance.index
                    )
                )
        except BridgeError as exc:
            self._raise_if_stopped(exc)
            raise
        self._reset_seeds()
        self._reset_options()
        return self._to_vec_obs(parts)

    def step_async(self, actions: np.ndarray) -> None:
        """Send every instance its agents' actions; replies are read in :meth:`step_wait`."""
        self._sent_at = time.perf_counter()
        self._send(actions, self.instances)

    def _send(self, actions: np.ndarray, instances: Sequence[GameInstance]) -> None:
        """Send ``instances`` their agents' actions, ``actions`` their rows in order."""
        k = self.agents_per_instance
        binary_frames = (
            protocol.encode_binary_actions(actions, self._discrete, len(instances))
            if self.binary
            else []
        )
        for position, instance in enumerate(instances):
            if self.binary:
                frame = binary_frames[position]
            else:
                start = position * k
                payload = {
                    "type": "action",
                    "action": self.action_codec.encode(actions[start : start + k]),
                }
                frame = instance.encode(payload)
            try:
                instance.send_bytes(frame)
            except BridgeError as exc:
                self._raise_if_stopped(exc)
                if not self.max_restarts_per_minute or isinstance(exc, Interrupted):
                    raise
                self._send_faults[instance.index] = exc  # handled in step_wait

    def _read_reset(self, instance: GameInstance) -> dict[str, np.ndarray]:
        reply = instance.receive("reset")
        return self.obs_codec.decode(reply.get("obs"), self.agents_per_instance, instance.index)

    def _read_step(
        self, instance: GameInstance
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """One instance's ``step`` reply, checked: observations, rewards, dones, infos
        (normalised for SB3: booleans, numpy terminal observations)."""
        if self.binary:
            return self._read_binary_step(instance)
        k, index = self.agents_per_instance, instance.index
        reply = instance.receive("step")
        decoded = self.obs_codec.decode(reply.get("obs"), k, index)
        reward, done, info = reply.get("reward"), reply.get("done"), reply.get("info", [{}] * k)
        if not (isinstance(reward, list) and isinstance(done, list) and isinstance(info, list)):
            raise ProtocolViolation(
                index, f"step reply lacks reward, done or info lists: {str(reply)[:120]}"
            )
        if not len(reward) == len(done) == len(info) == k:
            raise ProtocolViolation(
                index,
                f"step reply has {len(reward)} rewards, {len(done)} dones, {len(info)} infos for {k} agents",
            )
        if not _NUMBER_TYPES.issuperset(map(type, reward)):  # not bool, str, None, list
            raise ProtocolViolation(
                index, f"step reply has non-numeric rewards: {str(reward)[:120]}"
            )
        dones = np.array([bool(flag) for flag in done])
        infos = [
            self._agent_info(agent_info, agent_done, decoded, agent, index)
            if agent_info or agent_done
            else {}
            for agent, (agent_info, agent_done) in enumerate(zip(info, dones.tolist(), strict=True))
        ]
        return decoded, np.asarray(reward, dtype=np.float32), dones, infos

    def _read_binary_step(
        self, instance: GameInstance
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """A step reply in lander's binary encoding (see :mod:`game_bridge.protocol`)."""
        body = instance.receive_body()
        try:
            if not protocol.is_binary(body):
                raise protocol.FrameError(
                    "bad_binary", f"expected a binary step reply, got {body[:60]!r}"
                )
            obs, reward, flags, terminal, scores = protocol.decode_binary_step(
                body, self.agents_per_instance, self._obs_size, self._encoding
            )
        except protocol.FrameError as exc:
            instance.faulted = True
            raise ProtocolViolation(instance.index, str(exc)) from None
        dones = (flags & protocol.DONE).astype(bool)
        infos: list[dict[str, Any]] = [{} for _ in range(self.agents_per_instance)]
        for row, agent in enumerate(dones.nonzero()[0].tolist()):
            infos[agent] = {
                "TimeLimit.truncated": bool(flags[agent] & protocol.TRUNCATED),
                "terminal_observation": terminal[row].reshape(self._obs_shape).copy(),
            }
            if flags[agent] & (protocol.SUCCESS | protocol.FAILURE):
                infos[agent]["is_success"] = bool(flags[agent] & protocol.SUCCESS)
            if flags[agent] & protocol.GOES_ON:
                infos[agent][protocol.GAME_OVER] = False
        scored = (flags & protocol.SCORED).nonzero()[0].tolist()
        for agent, score in zip(scored, scores.tolist(), strict=True):
            infos[agent][protocol.SCORE] = score
            infos[agent][protocol.GAME_OVER] = True
        # obs and reward are read-only views of the reply: step_wait copies them into the batch.
        obs = obs.reshape((self.agents_per_instance, *self._obs_shape))
        return {self.env_info.observations[0].key: obs}, reward, dones, infos

    def game_ticks_per_second(self) -> float | None:
        """The physics ticks per second the games delivered while the trainer waited for
        their replies (action repeat x steps / time from the actions sent to the last
        reply); None before any step or when the action repeat is the game's own."""
        if self.config.action_repeat is None or self._waited_steps == 0:
            return None
        return self.config.action_repeat * self._waited_steps / max(self._waited_s, 1e-9)

    def step_wait(self) -> VecEnvStepReturn:
        """Gather every instance's ``step`` reply into one batch, restarting faulty games
        (or hand back the step :meth:`inject` was given)."""
        if self._injected is not None:
            step, self._injected = self._injected, None
            return step
        try:
            return self._gather_steps(self.instances)
        finally:
            self._waited_s += time.perf_counter() - self._sent_at
            self._waited_steps += 1

    # -- a step in parts: some games step while the trainer acts for the others ----------

    def send_part(self, actions: np.ndarray, instances: range) -> None:
        """Send the instances ``instances`` (consecutive indices) their agents' actions,
        ``actions`` their rows; :meth:`receive_part` reads their replies."""
        self._part_sent_at[instances.start] = time.perf_counter()
        self._send(actions, [self.instances[index] for index in instances])

    def receive_part(self, instances: range) -> VecEnvStepReturn:
        """The step replies of ``instances``, as :meth:`step_wait` reads every instance's
        (their rows only), restarting faulty games."""
        try:
            return self._gather_steps([self.instances[index] for index in instances])
        finally:
            share, now = len(instances) / len(self.instances), time.perf_counter()
            self._waited_s += share * (now - self._part_sent_at.pop(instances.start, now))
            self._waited_steps += share

    def inject(self, step: VecEnvStepReturn) -> None:
        """The next :meth:`step_wait` returns ``step`` (every instance's replies, read in
        parts) instead of reading the games: the wrappers above see it as any step."""
        self._injected = step

    def _gather_steps(self, instances: Sequence[GameInstance]) -> VecEnvStepReturn:
        k = self.agents_per_instance
        parts: list[dict[str, np.ndarray]] = []
        rewards = np.zeros(len(instances) * k, dtype=np.float32)
        dones = np.ones(len(instances) * k, dtype=bool)
        infos: list[dict[str, Any]] = []
        for position, instance in enumerate(list(instances)):
            index = instance.index
            try:
                fault = self._send_faults.pop(index, None)
                if fault is not None:
                    raise fault
                decoded, reward, done, info = self._read_step(instance)
                _check_finite(instance, decoded, reward)
            except BridgeError as exc:
                # A reply of the wrong shape is a fault too: no grace at close (a stop is none).
                instance.faulted = instance.faulted or not isinstance(exc, Interrupted)
                self._raise_if_stopped(exc)
                if not self.max_restarts_per_minute or isinstance(exc, Interrupted):
                    raise
                decoded = self._restart(index, exc)
                infos.extend(self._restart_infos(index, exc))
                parts.append(decoded)
                self._last_parts[index] = decoded
                continue
            rewards[position * k : (position + 1) * k] = reward
            dones[position * k : (position + 1) * k] = done
            infos.extend(info)
            parts.append(decoded)
            self._last_parts[index] = decoded
        return self._to_vec_obs(parts), rewards, dones, infos

    def _raise_if_stopped(self, fault: BridgeError) -> None:
        """A game a person started that closed its connection was stopped by them: the
        run ends in order (never a restart, which nobody would answer).

        :raises GameStopped: so.
        """
        if self.config.external and isinstance(fault, InstanceDied):
            raise GameStopped(
                fault.instance, "the game was stopped (it closed its connection)"
            ) from None

    def _restart_infos(self, index: int, fault: BridgeError) -> list[dict[str, Any]]:
        """The episodes a restart cut short end as truncated, bootstrapped from the last observation."""
        previous = self._last_parts.get(index)
        infos = []
        for agent in range(self.agents_per_instance):
            info: dict[str, Any] = {"TimeLimit.truncated": True, "game_restarted": str(fault)}
            if previous is not None:
                info["terminal_observation"] = self._one_obs(
                    {key: value[agent].copy() for key, value in previous.items()}
                )
            infos.append(info)
        return infos

    def _restart(self, index: int, fault: BridgeError) -> dict[str, np.ndarray]:
        """Replace a faulty instance with a fresh one on the same port and reset it; a
        relaunch that fails is one more restart, within the same limit (a loop, so
        relaunches that keep failing end at the limit, never in recursion).

        :raises TooManyRestarts: past the per-minute limit (naming the instance, the
            fault and the game's last output).
        """
        while True:
            self._count_restart(index, fault)
            try:
                return self._relaunch(index)
            except Interrupted:
                raise
            except BridgeError as relaunch:
                fault = relaunch

    def _count_restart(self, index: int, fault: BridgeError) -> None:
        """Note a restart of ``index`` and close the old instance.

        :raises TooManyRestarts: past the per-minute limit.
        """
        now = time.monotonic()
        old = self.instances[index]
        tail = old.output_tail(400).replace("\n", " | ")
        self.restarts.append(Restart(now, index, str(fault)))
        recent = [r for r in self.restarts if now - r.at <= 60.0]
        if len(recent) > self.max_restarts_per_minute:
            raise TooManyRestarts(
                index,
                f"{len(recent)} game restarts within a minute (limit {self.max_restarts_per_minute}); "
                f"last fault: {fault.detail}" + (f"; last output: {tail}" if tail else ""),
            )
        old.faulted = True
        close_instances([old])

    def _relaunch(self, index: int) -> dict[str, np.ndarray]:
        """A fresh instance ``index``, checked against the first one's spaces and reset."""
        port = self.config.port_of(index)
        started, infos = launch_instances(self.config, [index])
        if self.config.port_of(index) != port:
            self.port_moves.append((index, port, self.config.port_of(index)))
        fresh = started[0]
        try:
            if not infos[0].same_layout(self.env_info) or (
                self.binary and infos[0].encoding != self._encoding
            ):
                raise ProtocolViolation(
                    index, "the restarted game declares other spaces than before"
                )
            fresh.send({"type": "reset"})
            decoded = self._read_reset(fresh)
        except BaseException:
            close_instances([fresh])
            raise
        self.instances[index] = fresh
        return decoded

    def _agent_info(
        self, raw: Any, done: bool, decoded: dict[str, np.ndarray], agent: int, instance: int
    ) -> dict[str, Any]:
        """Normalise one agent's info: booleans for the flags SB3 reads and a numpy
        ``terminal_observation`` on every finished episode."""
        info: dict[str, Any] = dict(raw) if isinstance(raw, dict) else {}
        if not done:
            info.pop("terminal_observation", None)
            return info
        if "TimeLimit.truncated" in info:
            info["TimeLimit.truncated"] = bool(info["TimeLimit.truncated"])
        if "is_success" in info:
            info["is_success"] = bool(info["is_success"])
        terminal = info.get("terminal_observation")
        if terminal is not None:
            info["terminal_observation"] = self._one_obs(
                self.obs_codec.decode_one(terminal, instance, agent)
            )
        else:
            # The game did not send the observation before its reset: the reset one
            # is the best available, as in godot-rl.
            info["terminal_observation"] = self._one_obs(
                {key: value[agent] for key, value in decoded.items()}
            )
        return info

    def call(self, method: str) -> list[Any]:
        """Call a method on every game's agents; one list of returns per instance."""
        for instance in self.instances:
            instance.send({"type": "call", "method": method})
        return [instance.receive("call").get("returns") for instance in self.instances]

    def close(self) -> None:
        """Send ``close`` to every game and kill any that does not quit."""
        if self._closed:
            return
        self._closed = True
        close_instances(self.instances)
        discard_output(self.config)

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        """Games have no Python attributes; ``render_mode`` is None, others are an error."""
        if attr_name == "render_mode":
            return [None] * len(list(self._get_indices(indices)))
        raise AttributeError(f"game instances have no attribute {attr_name!r}")

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        raise AttributeError(f"cannot set {attr_name!r} on game instances")

    def env_method(
        self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any
    ) -> list[Any]:
        raise AttributeError(f"game instances have no method {method_name!r}; use GameVecEnv.call")

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        return [False] * len(list(self._get_indices(indices)))

    def get_images(self) -> Sequence[np.ndarray | None]:
        return [None] * self.num_envs

    def __del__(self) -> None:
        # A forgotten close must not leave game processes behind.
        if getattr(self, "_closed", True) is False:
            self.close()
