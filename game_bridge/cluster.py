"""Game instances placed on the nodes of a Ray cluster (``--cluster ADDRESS``).

The trainer and PPO stay on this box. Each instance is launched on a node by a
:class:`~game_bridge.relay.GameHost` actor, which relays the game's frames to the
trainer; the trainer's side of each instance is a :class:`RelayedInstance`, an
ordinary :class:`GameInstance` whose connection crosses the network. So the step
loop, the deadlines and the restarts are those of local games: a game, a relay or
a whole node that dies is a dead instance, restarted on a live node.

The trainer listens beyond loopback only here, and only for connections that
begin with the run's secret (a random 32 bytes handed to the relays through Ray).

Ray is an optional dependency (``lander[cluster]``): it is imported when a cluster
is asked for, never otherwise.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import math
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from game_bridge.errors import LaunchError
from game_bridge.instance import GameInstance
from game_bridge.ray_token import RayTokenError, check_cluster_token, use_token_here
from game_bridge.relay import PREAMBLE, PYTHON_MODULE, SECRET_BYTES, GameHost, checkout_root

if TYPE_CHECKING:
    from game_bridge.launcher import LaunchConfig

LOST_EXIT_CODE = 255
"""Reported for a game whose relay or node was lost before it could say how the game ended."""
_ADMIT_TIMEOUT_S = 2.0
"""How long a new connection may take to present the run's secret."""
_MAX_OPENING = 16
"""Connections to one port waiting to show the secret, at most."""
_SUSPECT_S = 60.0
"""A node where an instance failed is avoided by restarts for this long (a node that
died is still listed as alive for a while)."""


class ClusterError(LaunchError):
    """The cluster cannot be reached or cannot host the games (the message says why)."""

    def __init__(self, message: str) -> None:
        super().__init__(None, message)


@dataclass(frozen=True)
class Node:
    """A live node of the cluster as placement sees it."""

    id: str
    address: str
    cpus: float


def plan_placement(nodes: list[Node], count: int, per_node: int | None = None) -> list[Node]:
    """The node of each of ``count`` instances.

    By free CPUs (each instance goes where CPUs per instance placed so far are
    highest, so a node with twice the CPUs gets twice the games), or at most
    ``per_node`` on each node, filling nodes in order.

    :raises ClusterError: no nodes, or too few for ``per_node``.
    """
    if not nodes:
        raise ClusterError("the cluster has no live node with a CPU")
    if per_node is not None:
        if per_node * len(nodes) < count:
            raise ClusterError(
                f"{count} instances do not fit {len(nodes)} node(s) at {per_node} per node"
            )
        return [nodes[i // per_node] for i in range(count)]
    placed = [0] * len(nodes)
    chosen = []
    for _ in range(count):
        best = max(range(len(nodes)), key=lambda n: (nodes[n].cpus / (placed[n] + 1), -n))
        placed[best] += 1
        chosen.append(nodes[best])
    return chosen


class RemoteGame:
    """A game on a node, seen through its :class:`GameHost` actor as the launcher sees a
    process (:class:`game_bridge.forked_games.GameProcess`)."""

    def __init__(self, actor: Any, started: Any, ended: Any) -> None:
        self.actor = actor
        self.started = started
        self.ended = ended
        self.lost = False  # the actor or its node died (not a plain game exit)
        self._code: int | None = None

    @property
    def pid(self) -> int:
        """The game's process id on its node (-1 until it is known)."""
        info = self.placement(0.0)
        return int(info["pid"]) if info else -1

    def placement(self, timeout: float) -> dict[str, Any] | None:
        """Where the game runs (``node``, ``host``, ``pid``), once the relay has said so."""
        import ray

        ready, _ = ray.wait([self.started], timeout=timeout)
        if not ready:
            return None
        try:
            info: dict[str, Any] = ray.get(self.started)
        except ray.exceptions.RayError:
            return None
        return info

    def poll(self) -> int | None:
        """The game's exit code, or None while it runs."""
        if self._code is not None:
            return self._code
        import ray

        for ref in (self.started, self.ended):
            ready, _ = ray.wait([ref], timeout=0)
            if not ready:
                continue
            try:
                value = ray.get(ref)
            except ray.exceptions.RayTaskError:
                self._code = 1  # the relay said why: output_tail
                return self._code
            except ray.exceptions.RayError:
                self.lost, self._code = True, LOST_EXIT_CODE
                return self._code
            if ref is self.ended:
                self._code = int(value)
                return self._code
        return None

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the game's end; :class:`subprocess.TimeoutExpired` after ``timeout``."""
        import ray

        ray.wait([self.ended], timeout=timeout)
        code = self.poll()
        if code is None:
            raise subprocess.TimeoutExpired("remote game", timeout or 0.0)
        return code

    def kill(self) -> None:
        """End the actor, and with it the game and the relay."""
        import ray

        with contextlib.suppress(ray.exceptions.RayError):
            ray.kill(self.actor, no_restart=True)

    def output_tail(self, limit: int) -> str:
        """What the game printed last on its node; empty when its node is gone."""
        import ray

        try:
            tail: str = ray.get(self.actor.output_tail.remote(limit), timeout=2.0)
        except (ray.exceptions.RayError, TimeoutError):
            return "" if not self.lost else "(its relay or node was lost)"
        return tail


@dataclass
class _Opening:
    """A connection to a relayed port that has not yet shown the run's secret."""

    conn: socket.socket
    peer: tuple[str, int]
    deadline: float
    received: bytes = b""


class RelayedInstance(GameInstance):
    """An instance whose game runs on a cluster node and reaches this port through a relay.

    A connection is the relay when it comes from one of the cluster's nodes and its first
    bytes are :data:`PREAMBLE` and the run's secret, sent within :data:`_ADMIT_TIMEOUT_S`.
    Any other is closed and noted in the game's log; one that says nothing waits beside the
    others without holding up the relay, and is dropped at its deadline. Once the relay is
    in, the port closes: a later connection is refused by the kernel.

    :param secret: the run's secret; a connection must begin with it.
    :param allowed: whether an address is one of the cluster's nodes (None: any).
    """

    def __init__(
        self,
        index: int,
        port: int,
        host: str,
        secret: bytes,
        allowed: Callable[[str], bool] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(index, port, host, **kwargs)
        self.secret = secret
        self.allowed = allowed
        self.remote: RemoteGame | None = None
        self._opening: list[_Opening] = []

    def try_accept(self) -> bool:
        """Admit the relay if it has shown the secret; never blocks (see the class)."""
        if self.connected or self.listener is None:
            return self.connected
        while True:
            try:
                conn, peer = self.listener.accept()
            except BlockingIOError:
                break
            if self.allowed is not None and not self.allowed(peer[0]):
                self._refuse(conn, peer, "the address is not one of the cluster's nodes")
                continue
            conn.setblocking(False)
            if len(self._opening) >= _MAX_OPENING:  # many at once: the oldest goes first
                oldest = self._opening.pop(0)
                self._refuse(oldest.conn, oldest.peer, "too many connections said nothing")
            self._opening.append(_Opening(conn, peer, time.monotonic() + _ADMIT_TIMEOUT_S))
        for opening in list(self._opening):
            verdict = self._verdict(opening)
            if verdict is None:
                continue
            self._opening.remove(opening)
            if verdict:
                self._admitted(opening.conn)
                return True
            why = (
                "it did not send the run's secret in time"
                if time.monotonic() > opening.deadline
                else "it did not begin with the run's secret"
            )
            self._refuse(opening.conn, opening.peer, why)
        return False

    def _verdict(self, opening: _Opening) -> bool | None:
        """True: the relay; False: not it; None: not told yet."""
        expected = PREAMBLE + self.secret
        try:
            chunk = opening.conn.recv(len(expected) - len(opening.received))
        except (BlockingIOError, InterruptedError):
            return None if time.monotonic() <= opening.deadline else False
        except OSError:
            return False
        if not chunk:
            return False
        opening.received += chunk
        public = opening.received[: len(PREAMBLE)]
        if public != PREAMBLE[: len(public)]:
            return False  # not a relay at all (an HTTP request, a scanner)
        if len(opening.received) < len(expected):
            # Judged only whole: a verdict on part of the secret would tell a stranger,
            # byte by byte, which guesses were right.
            return None if time.monotonic() <= opening.deadline else False
        return hmac.compare_digest(opening.received, expected)

    def _admitted(self, conn: socket.socket) -> None:
        """The relay is in: take it, drop the rest, and stop listening."""
        self._take(conn)
        for other in self._opening:
            self._refuse(other.conn, other.peer, "the run's relay is already connected")
        self._opening.clear()
        if self.listener is not None:
            self.listener.close()
            self.listener = None

    def output_tail(self, limit: int = 2000) -> str:
        """The game's output on its node (lander's own notes stay in the local log)."""
        if self.remote is None:
            return super().output_tail(limit)
        return self.remote.output_tail(limit)

    def close(self, grace_s: float = 3.0) -> None:
        """Close as a local instance, then end the relay's actor (its worker goes back)."""
        for opening in self._opening:
            opening.conn.close()
        self._opening.clear()
        try:
            super().close(grace_s)
        finally:
            if self.remote is not None:
                self.remote.kill()


def _check_reachable(address: str, timeout: float = 10.0) -> None:
    """Fail at once when nothing listens at the head's address (Ray itself would retry
    for minutes)."""
    host, _, port = address.rpartition(":")
    if address == "auto" or not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ClusterError(
            f"cannot reach the Ray cluster at {address}: {exc.strerror or exc} "
            "(start its head with `ray start --head`, docs/cluster.md)"
        ) from None


def connect_ray(address: str) -> None:
    """Join the Ray cluster at ``address`` as a driver (once per process), with this
    machine's Ray token (:mod:`game_bridge.ray_token`).

    :raises ClusterError: Ray is not installed, nothing answers at ``address``, there is no
        token here, or the cluster takes none or refuses this one.
    """
    try:
        import ray
    except ImportError:
        raise ClusterError(
            "--cluster needs Ray: install it with `./lander setup --cluster`"
        ) from None
    if ray.is_initialized():
        return
    _check_reachable(address)
    try:
        use_token_here()
        if address != "auto":
            check_cluster_token(address)
    except RayTokenError as exc:
        raise ClusterError(str(exc)) from None
    try:
        ray.init(
            address=address,
            logging_level=logging.WARNING,
            log_to_driver=False,
            configure_logging=True,
        )
    except (ConnectionError, ValueError, RuntimeError) as exc:
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        raise ClusterError(f"cannot reach the Ray cluster at {address}: {lines[0]}") from None
    if address == "auto":  # found by Ray: its head's address is known only now
        try:
            check_cluster_token(ray.get_runtime_context().gcs_address)
        except RayTokenError as exc:
            ray.shutdown()
            raise ClusterError(str(exc)) from None


class GameCluster:
    """A connection to a Ray cluster and the placement of one run's game instances.

    :param address: the head's ``HOST:PORT`` (what ``ray start --head`` printed), or ``auto``.
    :param instances_per_node: at most this many instances on each node (None: by CPUs).
    :raises ClusterError: Ray is not installed or the cluster is unreachable.
    """

    def __init__(self, address: str, instances_per_node: int | None = None) -> None:
        connect_ray(address)
        import ray

        self.address = address
        self.instances_per_node = instances_per_node
        self.secret = secrets.token_bytes(SECRET_BYTES)
        self.placements: dict[int, dict[str, Any]] = {}
        self._games: dict[int, RemoteGame] = {}
        self._failed_at: dict[str, float] = {}  # node id -> last instance failure there
        self._planned: list[Node] = []
        self._host_class = ray.remote(GameHost)
        # The trainer's ports: loopback when every node is this machine (nothing needs to
        # reach them from elsewhere), else the address Ray knows this box by.
        this_box = ray.util.get_node_ip_address()
        alone = all(node.address == this_box for node in self.nodes())
        self.listen_host = "127.0.0.1" if alone else this_box
        self._node_addresses: set[str] = set()
        self._nodes_asked_at = -math.inf

    def is_node_address(self, address: str) -> bool:
        """Whether a connection from ``address`` may be a relay of this run: from one of the
        cluster's nodes (asked of Ray again, at most once a second, for an address not
        known yet: a node may have joined), or from loopback when every node is this box."""
        if address in self._node_addresses:
            return True
        if time.monotonic() - self._nodes_asked_at >= 1.0:
            self._nodes_asked_at = time.monotonic()
            self._node_addresses = {node.address for node in self.nodes()}
            if self.listen_host.startswith("127."):
                self._node_addresses.add("127.0.0.1")
        return address in self._node_addresses

    def nodes(self) -> list[Node]:
        """The live nodes with CPUs, in a stable order (the head first), by free CPUs."""
        import ray
        from ray._private import state

        try:
            free = state.available_resources_per_node()
        except Exception:  # an internal API: fall back to each node's total
            free = {}
        listed = []
        for entry in ray.nodes():
            cpus = float(entry.get("Resources", {}).get("CPU", 0.0))
            if not entry.get("Alive") or cpus <= 0:
                continue
            available = float(free.get(entry["NodeID"], {}).get("CPU", cpus))
            head = "node:__internal_head__" in entry.get("Resources", {})
            listed.append((not head, entry["NodeID"], entry["NodeManagerAddress"], available))
        return [
            Node(node_id, address, max(cpus, 0.5)) for _, node_id, address, cpus in sorted(listed)
        ]

    def instance(
        self, index: int, port: int, read_timeout: float, max_frame_bytes: int
    ) -> RelayedInstance:
        """The trainer's side of instance ``index``: a port on the cluster interface."""
        return RelayedInstance(
            index,
            port,
            self.listen_host,
            self.secret,
            self.is_node_address,
            read_timeout=read_timeout,
            max_frame_bytes=max_frame_bytes,
        )

    def _node_for(self, index: int, count: int) -> Node:
        """Where instance ``index`` goes: its planned node at the start of a run; on a
        restart, the least loaded live node where nothing failed lately."""
        nodes = self.nodes()
        if not self._planned:
            self._planned = plan_placement(nodes, count, self.instances_per_node)
            return self._planned[index]
        now = time.monotonic()
        healthy = [n for n in nodes if now - self._failed_at.get(n.id, -_SUSPECT_S) >= _SUSPECT_S]
        candidates = healthy or nodes
        if not candidates:
            raise ClusterError("the cluster has no live node left for the games")
        load = {n.id: 0 for n in candidates}
        for other, where in self.placements.items():
            if other != index and where.get("node") in load:
                load[where["node"]] += 1
        return max(candidates, key=lambda n: (n.cpus / (load[n.id] + 1), -candidates.index(n)))

    def start(self, instance: GameInstance, config: LaunchConfig, output: Path) -> None:
        """Launch instance ``instance.index``'s game on a node, relayed to its port."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        assert isinstance(instance, RelayedInstance), "made by GameCluster.instance"

        previous = self.placements.get(instance.index)
        if previous is not None:
            self._failed_at[previous["node"]] = time.monotonic()
        node = self._node_for(instance.index, config.n_instances)
        # No CPU reserved: placement counts CPUs itself, and a relay mostly waits.
        actor: Any = self._host_class.options(
            num_cpus=0,
            max_concurrency=4,
            max_restarts=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.id, soft=False),
        ).remote()
        args = [a for a in config.arguments(instance.index) if not a.startswith("--port=")]
        started = actor.start.remote(
            _game_spec(config.command),
            args,
            (instance.host, instance.port),
            self.secret,
            config.connect_timeout,
            f"{output.parent.name}-{output.name}",
        )
        remote = RemoteGame(actor, started, actor.wait.remote())
        instance.remote = remote
        instance.process = remote
        instance.output_path = output
        output.parent.mkdir(parents=True, exist_ok=True)
        self._games[instance.index] = remote
        self.placements[instance.index] = {"instance": instance.index, "node": node.id}

    def describe(self, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Where each instance runs (``instance``, ``node``, ``host``, ``pid``), for run.json."""
        for index, remote in self._games.items():
            info = remote.placement(timeout)
            if info is not None:
                self.placements[index] = {"instance": index, **info}
        return [self.placements[i] for i in sorted(self.placements)]


def _game_spec(command: list[str]) -> str:
    """How a node finds the game: a Python module (run with the node's own Python), or the
    binary's path relative to the checkout (each node has its own clone, possibly in
    another folder)."""
    if len(command) == 3 and command[:2] == [sys.executable, "-m"]:
        return PYTHON_MODULE + command[2]
    path = Path(command[0])
    try:
        return str(path.resolve().relative_to(checkout_root()))
    except ValueError:
        return str(path)
