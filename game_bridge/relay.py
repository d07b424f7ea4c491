"""The node side of a game instance on a cluster: the game, and a byte relay to the trainer.

A game connects to 127.0.0.1 on its own machine (the Godot plugin cannot do
otherwise), so a game on another node cannot reach the trainer directly. A
:class:`GameHost` runs on the game's node (as a Ray actor, :mod:`game_bridge.cluster`):
it listens on that node's loopback, launches the game against it, accepts the
game, dials the trainer, proves it belongs to the run with the run's secret, and
then copies bytes both ways without reading them. The trainer's stepping code
cannot tell a relayed instance from a local one.

Nothing here imports Ray: the actor's node id is asked of Ray only where it runs.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from game_bridge.orphans import die_with_this_process

PREAMBLE = b"lander-relay/1 "
"""What a relay writes first on its connection to the trainer, before the run's secret."""
SECRET_BYTES = 32
PYTHON_MODULE = "python -m "
"""Prefix of a game a relay launches with this node's own Python (``python -m games.lander``)."""

_POLL_S = 0.1


class RelayError(RuntimeError):
    """The game could not be launched or connected on this node (the message says why)."""


def checkout_root() -> Path:
    """The repository this node's lander was installed from (each node has a clone)."""
    return Path(__file__).resolve().parents[1]


def node_game_command(game: str) -> list[str]:
    """The command that starts ``game`` on this node.

    :param game: :data:`PYTHON_MODULE` and a module (run with this node's Python), a
        path relative to the checkout (the same file in this node's clone) or an absolute path.
    :raises RelayError: when the file is missing or not executable here.
    """
    if game.startswith(PYTHON_MODULE):
        return [sys.executable, "-m", game.removeprefix(PYTHON_MODULE)]
    path = Path(game) if Path(game).is_absolute() else checkout_root() / game
    if not path.is_file() or not os.access(path, os.X_OK):
        raise RelayError(
            f"game binary {str(path)!r} is missing or not executable on {socket.gethostname()} "
            "(run ./lander setup there)"
        )
    return [str(path)]


def _pump(source: socket.socket, sink: socket.socket, done: threading.Event) -> None:
    """Copy bytes from ``source`` to ``sink`` until either end closes; then close both
    directions, so the other pump (and both peers) see the end at once."""
    try:
        while True:
            data = source.recv(1 << 16)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        done.set()
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _normal_priority() -> None:
    """Undo the niceness Ray gives its workers (15), for this relay and the game it
    launches: a game on a node must not step slower than the same game launched by a
    trainer. Lowering niceness needs the privilege to; without it nothing changes."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, 0)


class GameHost:
    """One game instance on this node and its relay to the trainer.

    Meant to run as a threaded Ray actor: :meth:`wait` blocks until the game ends
    while :meth:`output_tail` and :meth:`stop` stay callable.
    """

    def __init__(self) -> None:
        _normal_priority()
        self._process: subprocess.Popen[bytes] | None = None
        self._launched = threading.Event()
        self._ended = threading.Event()
        self._exit_code: int | None = None
        self._launch_error: str | None = None
        self._log_path: Path | None = None
        self._sockets: list[socket.socket] = []

    def start(
        self,
        game: str,
        args: list[str],
        trainer: tuple[str, int],
        secret: bytes,
        timeout: float,
        log_name: str,
    ) -> dict[str, Any]:
        """Launch the game on this node, accept it, dial the trainer and start relaying.

        :param game: see :func:`node_game_command`.
        :param args: the launch arguments without ``--port`` (added here: a free
            loopback port of this node).
        :param trainer: the trainer's address for this instance.
        :param secret: the run's secret, sent after :data:`PREAMBLE`.
        :param timeout: seconds the game may take to connect, and the trainer to answer.
        :param log_name: the game's console log, in this node's temporary folder.
        :return: where the game runs: ``node`` id, ``host`` name, game ``pid``.
        :raises RelayError: the game did not start or connect, or the trainer was unreachable.
        """
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sockets.append(listener)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(_POLL_S)
        port = listener.getsockname()[1]
        folder = Path(tempfile.gettempdir()) / "lander-cluster-games"
        folder.mkdir(parents=True, exist_ok=True)
        self._log_path = folder / log_name
        try:
            command = [*node_game_command(game), f"--port={port}", *args]
        except RelayError as exc:
            self._fail(str(exc))
            raise
        # The game is started by a thread that lives exactly as long as the game:
        # the kernel's parent-death signal follows the thread that forked, so the game
        # dies with this actor (a lost node) but not when a pool thread ends.
        threading.Thread(target=self._run_game, args=(command,), daemon=True).start()
        self._launched.wait()
        if self._launch_error is not None:
            raise RelayError(self._launch_error)
        game_conn = self._accept_game(listener, time.monotonic() + timeout)
        try:
            trainer_conn = socket.create_connection(trainer, timeout=timeout)
        except OSError as exc:
            self.stop()
            raise RelayError(
                f"cannot reach the trainer at {trainer[0]}:{trainer[1]} from "
                f"{socket.gethostname()}: {exc.strerror or exc} (is its port open?)"
            ) from None
        self._sockets.append(trainer_conn)
        trainer_conn.sendall(PREAMBLE + secret)
        for conn in (game_conn, trainer_conn):
            conn.settimeout(None)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        done = threading.Event()
        for source, sink in ((game_conn, trainer_conn), (trainer_conn, game_conn)):
            threading.Thread(target=_pump, args=(source, sink, done), daemon=True).start()
        threading.Thread(target=self._end_game_after, args=(done,), daemon=True).start()
        import ray  # only here: this module runs without Ray elsewhere

        assert self._process is not None
        return {
            "node": ray.get_runtime_context().get_node_id(),
            "host": socket.gethostname(),
            "pid": self._process.pid,
        }

    def _fail(self, message: str) -> None:
        self._launch_error = message
        self._exit_code = 1
        self._launched.set()
        self._ended.set()

    def _run_game(self, command: list[str]) -> None:
        assert self._log_path is not None
        with self._log_path.open("ab") as log:
            try:
                self._process = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=die_with_this_process(),
                )
            except OSError as exc:
                self._fail(f"cannot start {command[0]!r}: {exc.strerror or exc}")
                return
            self._launched.set()
            self._exit_code = self._process.wait()
            self._ended.set()

    def _accept_game(self, listener: socket.socket, deadline: float) -> socket.socket:
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                if self._ended.is_set():
                    tail = self.output_tail(300).replace("\n", " | ")
                    raise RelayError(
                        f"the game exited with code {self._exit_code} before connecting"
                        + (f"; last output: {tail}" if tail else "")
                    ) from None
                if time.monotonic() > deadline:
                    self.stop()
                    raise RelayError("the game did not connect in time") from None
                continue
            listener.close()
            self._sockets.append(conn)
            return conn

    def _end_game_after(self, relay_done: threading.Event) -> None:
        """Once the relay ends (the trainer closed, or the game did), the game gets a
        moment to quit on its own, then is killed: nothing is left behind on a node."""
        relay_done.wait()
        if not self._ended.wait(timeout=3.0):
            self.stop()

    def wait(self) -> int:
        """Block until the game ends; its exit code."""
        self._ended.wait()
        return self._exit_code if self._exit_code is not None else 1

    def output_tail(self, limit: int = 2000) -> str:
        """The last of what the game printed on this node (or why it did not start)."""
        if self._launch_error is not None:
            return self._launch_error
        if self._log_path is None or not self._log_path.exists():
            return ""
        with self._log_path.open("rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - limit))
            return handle.read().decode("utf-8", "replace").strip()

    def stop(self) -> None:
        """Kill the game and close the relay."""
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
