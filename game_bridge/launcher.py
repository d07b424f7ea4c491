"""Starting N game instances at once and waiting for all of them together.

``godot-rl`` starts instances one after another; here every port is opened
first, every process is launched, then all connections are accepted and all
handshakes answered in one pass, so N instances start in about the time of one.
"""

from __future__ import annotations

import os
import selectors
import shutil
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from game_bridge import TRANSPORTS, protocol
from game_bridge.errors import BridgeError, Interrupted, LaunchError, PortInUse
from game_bridge.instance import GameInstance, waits_interrupted
from game_bridge.openenv_instance import OpenEnvInstance
from game_bridge.spaces import EnvInfo, parse_env_info
from game_bridge.stdio_instance import StdioInstance


class GamePlacement(Protocol):
    """Where a run's games run when not here: a Ray cluster's nodes
    (:class:`game_bridge.cluster.GameCluster`), each game relayed to a port of this trainer."""

    address: str
    listen_host: str

    def instance(
        self, index: int, port: int, read_timeout: float, max_frame_bytes: int
    ) -> GameInstance:
        """The trainer's side of instance ``index``."""

    def start(self, instance: GameInstance, config: LaunchConfig, output: Path) -> None:
        """Launch ``instance``'s game on a node."""

    def describe(self, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Where each instance runs (for run.json)."""


_PORT_TRIES = 20


def game_command(game_bin: str | Path) -> list[str]:
    """The command that starts the game executable ``game_bin``.

    :raises LaunchError: when the binary is missing or not executable.
    """
    path = Path(game_bin)
    if not path.is_file():
        raise LaunchError(None, f"game binary {str(path)!r} does not exist")
    if not os.access(path, os.X_OK):
        raise LaunchError(None, f"game binary {str(path)!r} is not executable (chmod +x it)")
    return [str(path.resolve())]


@dataclass
class LaunchConfig:
    """How to start the game instances of one run.

    :param command: the game executable and any fixed arguments before ours.
    :param n_instances: number of game processes.
    :param base_port: instance ``i`` listens on ``base_port + i``.
    :param seed: instance ``i`` gets ``--env_seed=seed + i``.
    :param speedup: passed as ``--speedup`` when set.
    :param action_repeat: passed as ``--action_repeat`` when set.
    :param game_args: extra ``--key=value`` settings for the game.
    :param host: address to bind; loopback unless the user asks otherwise.
    :param connect_timeout: seconds all instances together may take to connect.
    :param read_timeout: seconds one reply may take.
    :param output_dir: where each instance's console output goes (a temporary folder if None).
    :param auto_port: when a port of the block is taken, move to the next free block
        (``base_port`` is updated); else fail naming the port.
    :param fast_wire: offer lander's binary step encoding in the handshake (games
        that do not know it keep speaking JSON).
    :param fork_main: for a game written in Python, its module whose ``main(argv)`` runs
        one game: instances are forked from one server that has imported it
        (milliseconds each) instead of starting a fresh Python per instance (about 0.1 s
        of CPU each). None launches ``command`` per instance.
    :param moved_ports: instances a restart moved off a port that another process took.
    :param cluster: place the games on a Ray cluster's nodes, relayed to this trainer
        (:mod:`game_bridge.cluster`); None launches them here.
    :param transport: ``tcp`` (each game connects to its port) or ``stdio`` (JSON lines on
        each game's standard input and output; no ports).
    :param external: nothing is launched: a person starts the game (Play in the Godot
        editor), which connects to ``base_port``; it is never restarted, and its leaving
        ends the run (:class:`~game_bridge.errors.GameStopped`).
    :param announce: with ``external``, called once the port listens, to tell the person to
        start the game (not before: a game that connects once would find nothing there).
    """

    command: list[str] = field(default_factory=list)
    n_instances: int = 1
    base_port: int = protocol.DEFAULT_PORT
    seed: int = 0
    speedup: float | None = None
    action_repeat: int | None = None
    game_args: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    connect_timeout: float = 60.0
    read_timeout: float = 30.0
    max_frame_bytes: int = protocol.DEFAULT_MAX_FRAME_BYTES
    output_dir: Path | None = None
    temporary_output: bool = False
    """The output folder is one lander made (no ``output_dir`` given): removed at close."""
    auto_port: bool = True
    fast_wire: bool = False
    fork_main: str | None = None
    moved_ports: dict[int, int] = field(default_factory=dict)
    cluster: GamePlacement | None = None
    transport: str = "tcp"
    game_url: str | None = None
    max_episode_steps: int = 1000
    schema_override: dict[str, Any] | None = None
    external: bool = False
    announce: Callable[[LaunchConfig], None] | None = None

    def __post_init__(self) -> None:
        if self.openenv and self.game_url is None:
            raise LaunchError(None, "the openenv transport needs the server's URL")
        if self.external and (self.n_instances != 1 or self.transport != "tcp" or self.cluster):
            raise LaunchError(None, "a game a person starts is one game on one TCP port, here")
        if self.external:
            self.auto_port = False  # the game connects to the port it knows, not another
        if not self.command and not self.openenv and not self.external:
            raise LaunchError(None, "no game to launch: give the command that starts one")
        if self.transport not in TRANSPORTS:
            raise LaunchError(
                None, f"transport must be one of {', '.join(TRANSPORTS)}, got {self.transport!r}"
            )
        if self.transport == "stdio" and self.cluster is not None:
            raise LaunchError(
                None, "stdio games run on this machine only: --cluster needs a TCP game"
            )

    @property
    def openenv(self) -> bool:
        """True when each instance is a session of an OpenEnv server (``game_url``)."""
        return self.transport == "openenv"

    @property
    def stdio(self) -> bool:
        """True when the games speak JSON lines on their standard input and output."""
        return self.transport == "stdio"

    @property
    def offers_fast_wire(self) -> bool:
        """The binary step encoding is offered: asked for, and on TCP (a line holds JSON only)."""
        return self.fast_wire and self.transport == "tcp"

    def port_of(self, index: int) -> int:
        """Instance ``index``'s port: ``base_port + index``, unless a restart moved it."""
        return self.moved_ports.get(index, self.base_port + index)

    @property
    def forks_games(self) -> bool:
        """True when instances come from the fork server of the game's module."""
        return self.fork_main is not None and not self.cluster and self.transport == "tcp"

    @property
    def listen_host(self) -> str:
        """The address the instances' ports are on (a cluster's interface, or ``host``)."""
        return self.cluster.listen_host if self.cluster is not None else self.host

    def listen(self, index: int, port: int) -> GameInstance:
        """The trainer's side of instance ``index``: a listening port, here or for a relay,
        or a stdio game's pipes."""
        if self.stdio:
            return StdioInstance(index, self.read_timeout, self.max_frame_bytes)
        if self.openenv:
            assert self.game_url is not None  # checked at construction
            return OpenEnvInstance(
                index,
                self.game_url,
                self.read_timeout,
                self.max_frame_bytes,
                self.max_episode_steps,
                self.schema_override,
                self.seed + index,
            )
        if self.cluster is not None:
            return self.cluster.instance(index, port, self.read_timeout, self.max_frame_bytes)
        return GameInstance(index, port, self.host, self.read_timeout, self.max_frame_bytes)

    def arguments(self, index: int) -> list[str]:
        """The launch arguments of instance ``index``, as PROTOCOL.md lists them."""
        where = "--transport=stdio" if self.stdio else f"--port={self.port_of(index)}"
        args = [where, f"--env_seed={self.seed + index}", "--disable-render-loop", "--headless"]
        if self.action_repeat is not None:
            args.append(f"--action_repeat={self.action_repeat}")
        if self.speedup is not None:
            args.append(f"--speedup={self.speedup:g}")
        args.extend(f"--{key}={value}" for key, value in self.game_args.items())
        return args


def _accept_all(instances: list[GameInstance], deadline: float) -> None:
    selector = selectors.DefaultSelector()
    waiting = 0
    for instance in instances:
        if instance.listener is not None:
            selector.register(instance.listener, selectors.EVENT_READ, instance)
            waiting += 1
    try:
        while waiting:
            # A new connection wakes the loop; every instance still waiting is asked each
            # round, so one that is judging a connection (a relay's secret) gets its answer.
            selector.select(timeout=0.1)
            for key in list(selector.get_map().values()):
                ready: GameInstance = key.data
                if ready.try_accept():
                    selector.unregister(key.fileobj)
                    waiting -= 1
            for instance in instances:
                if not instance.connected and instance.exit_code() is not None:
                    tail = instance.output_tail(300).replace("\n", " | ")
                    raise LaunchError(
                        instance.index,
                        f"the game exited with code {instance.exit_code()} before connecting"
                        + (f"; last output: {tail}" if tail else ""),
                    )
            if waiting and waits_interrupted():
                late = [i.index for i in instances if not i.connected]
                raise Interrupted(late[0], "stopped while the games were starting")
            if waiting and time.monotonic() > deadline:
                late = [i.index for i in instances if not i.connected]
                raise LaunchError(late[0], f"instances {late} did not connect in time")
    finally:
        selector.close()


def _listen_all(config: LaunchConfig, indices: list[int]) -> list[GameInstance]:
    """Open a listening port per instance; on a port conflict move the whole block
    (when ``config.auto_port``) to the next free one, updating ``config.base_port``."""
    tries = _PORT_TRIES if config.auto_port else 1
    first_error: PortInUse | None = None
    for _ in range(tries):
        instances: list[GameInstance] = []
        try:
            for index in indices:
                instances.append(config.listen(index, config.base_port + index))
            return instances
        except PortInUse as exc:
            close_instances(instances)
            first_error = first_error or exc
            config.base_port += config.n_instances
            if config.base_port + config.n_instances > 65535:
                break
    assert first_error is not None
    raise first_error


def _listen_one(config: LaunchConfig, index: int) -> GameInstance:
    """The listener of one restarted instance. Its port taken meanwhile by another
    process: move it to a free port the kernel picks (``config.moved_ports``)."""
    try:
        return config.listen(index, config.port_of(index))
    except PortInUse:
        if not config.auto_port:
            raise
    with socket.socket() as probe:
        probe.bind((config.listen_host, 0))
        config.moved_ports[index] = probe.getsockname()[1]
    return config.listen(index, config.port_of(index))


def launch_instances(
    config: LaunchConfig, indices: list[int] | None = None
) -> tuple[list[GameInstance], list[EnvInfo]]:
    """Start instances, accept every connection, handshake and read ``env_info``.

    All instances start at once and are awaited together. On any failure every
    instance started so far is closed before the error propagates.

    :param indices: which instances to start (default: all; a restart starts one).
    :return: the connected instances and each one's parsed ``env_info``.
    :raises BridgeError: a launch, connection or protocol fault, naming the instance.
    """
    instances = start_instances(config, indices)
    try:
        return instances, connect_instances(instances, config)
    except BaseException:
        if indices is None:  # a restart's folder is its running siblings' too
            discard_output(config)
        raise


def start_instances(config: LaunchConfig, indices: list[int] | None = None) -> list[GameInstance]:
    """Listen for instances and start their processes, without waiting for them: a
    caller with other work (importing torch) does it while the games start up, then
    calls :func:`connect_instances`. On a failure the instances started are closed.

    :raises BridgeError: a launch fault (a missing binary, no free port), naming the instance.
    """
    if config.n_instances < 1:
        raise LaunchError(
            None, f"the number of game instances must be at least 1, got {config.n_instances}"
        )
    if config.output_dir is None:
        config.output_dir = Path(tempfile.mkdtemp(prefix="lander-games-"))
        config.temporary_output = True
    elif config.temporary_output:  # a config used again after its games closed
        config.output_dir.mkdir(parents=True, exist_ok=True)
    chosen = list(range(config.n_instances)) if indices is None else indices
    instances = (
        _listen_all(config, chosen) if indices is None else [_listen_one(config, i) for i in chosen]
    )
    if config.external and config.announce is not None:
        config.announce(config)
    try:
        for instance in instances:
            output = config.output_dir / f"game_{instance.index}.log"
            if config.cluster is not None:
                config.cluster.start(instance, config, output)
            elif config.external:
                continue  # a person starts it
            elif config.forks_games and config.fork_main is not None:
                instance.start_forked(config.fork_main, config.arguments(instance.index), output)
            else:
                instance.start([*config.command, *config.arguments(instance.index)], output)
    except BaseException:
        close_instances(instances)
        if indices is None:
            discard_output(config)
        raise
    return instances


def connect_instances(instances: list[GameInstance], config: LaunchConfig) -> list[EnvInfo]:
    """Accept the started instances' connections, handshake and read each ``env_info``.
    On any failure every instance is closed before the error propagates.

    :raises BridgeError: a connection or protocol fault, naming the instance.
    """
    try:
        try:
            _accept_all(instances, time.monotonic() + config.connect_timeout)
        except LaunchError:
            if not config.external:
                raise
            raise LaunchError(
                None,
                f"no game connected to port {config.base_port} within "
                f"{config.connect_timeout:g} s: press Play in the Godot editor while lander "
                "waits (its Sync node connects to that port), or wait longer with --editor-wait",
            ) from None
        for instance in instances:
            instance.send(protocol.handshake_message(config.offers_fast_wire))
            instance.send({"type": "env_info"})
        return [
            parse_env_info(instance.receive("env_info"), instance.index) for instance in instances
        ]
    except BaseException:
        close_instances(instances)
        raise


def discard_output(config: LaunchConfig) -> None:
    """Remove the output folder lander made for these games, once they are closed: an
    evaluation's, a match's or a failed launch's output is not left in /tmp (a launch's
    error message carries the output's last lines already)."""
    if config.temporary_output and config.output_dir is not None:
        shutil.rmtree(config.output_dir, ignore_errors=True)


def close_instances(instances: list[GameInstance]) -> None:
    """Close every instance, even when some of them fail to close cleanly."""
    for instance in instances:
        try:
            instance.close()
        except (OSError, BridgeError):
            if instance.process is not None and instance.process.poll() is None:
                instance.process.kill()
