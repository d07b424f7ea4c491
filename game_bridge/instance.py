"""One game instance as the trainer sees it: a listening TCP port, the game
process launched against it, and the framed connection once the game connects.

Reads never block past a deadline and never spin: each waits on the socket in
short slices, checking between slices whether the process is still alive.
"""

from __future__ import annotations

import contextlib
import errno
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any

from game_bridge import protocol
from game_bridge.errors import (
    FrameTooLarge,
    InstanceDied,
    InstanceTimeout,
    Interrupted,
    LaunchError,
    PortInUse,
    ProtocolViolation,
)
from game_bridge.forked_games import ForkServerError, GameProcess, fork_server
from game_bridge.orphans import die_with_this_process
from game_bridge.peer_check import connected_by

POLL_SLICE_S = 0.25
"""How often a waiting read checks whether the game process is still alive."""

_stop_waiting = threading.Event()


def interrupt_waits() -> None:
    """Make every wait for a game end within one poll slice with :class:`Interrupted` (the
    trainer calls it from its signal handler: a stop must not wait out a hung game)."""
    _stop_waiting.set()


def waits_interrupted() -> bool:
    """True once :func:`interrupt_waits` was called (until :func:`allow_waits`)."""
    return _stop_waiting.is_set()


def allow_waits() -> None:
    """Let waits run to their deadline again (a new training session)."""
    _stop_waiting.clear()


OUTPUT_TAIL_BYTES = 2000


class GameInstance:
    """A game process and its connection.

    :param index: 0-based instance number (used in every error message).
    :param port: TCP port this instance listens on.
    :param host: address to bind; loopback unless the user chose otherwise.
    :param read_timeout: seconds a reply may take before :class:`InstanceTimeout`.
    :param max_frame_bytes: largest frame accepted from the game.
    """

    _END_OF_STREAM = "the game closed the connection"
    """How the end of the game's stream is named in errors."""

    def __init__(
        self,
        index: int,
        port: int,
        host: str = "127.0.0.1",
        read_timeout: float = 30.0,
        max_frame_bytes: int = protocol.DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        self.index = index
        self.port = port
        self.host = host
        self.read_timeout = read_timeout
        self.max_frame_bytes = max_frame_bytes
        self.process: GameProcess | None = None
        self.output_path: Path | None = None
        self._output_file: IO[bytes] | None = None
        self._conn: socket.socket | None = None
        self._reader = self._make_reader(max_frame_bytes)
        self._deadline = 0.0  # of the reply being read
        self.faulted = False
        self.refused = 0  # connections from processes that are not this game
        self.listener = self._open_listener(host, port)

    def _make_reader(self, max_bytes: int) -> protocol.FrameReader:
        """What reads the game's messages off the connection: length-prefixed frames."""
        return protocol.FrameReader(self._recv, max_bytes)

    def _open_listener(self, host: str, port: int) -> socket.socket | None:
        """The port the game will connect to (None for a game that needs none)."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # SO_REUSEADDR lets a restarted trainer reuse a port in TIME_WAIT; it does
        # not let two live listeners share one port on Linux.
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((host, port))
        except OSError as exc:
            listener.close()
            if exc.errno == errno.EADDRINUSE:
                raise PortInUse(
                    self.index, f"port {host}:{port} is already in use by another process"
                ) from None
            raise LaunchError(
                self.index, f"cannot listen on {host}:{port}: {exc.strerror}"
            ) from None
        listener.listen(1)
        listener.setblocking(False)
        return listener

    # -- process ---------------------------------------------------------------

    def start(self, command: list[str], output_path: Path) -> None:
        """Launch the game process, its output going to ``output_path``.

        The game gets its own session, so a Ctrl-C in the trainer's terminal
        reaches only the trainer, which then closes the games in order; and it is
        killed if the trainer dies first (:mod:`game_bridge.orphans`).
        """
        output_path.parent.mkdir(parents=True, exist_ok=True)
        self.output_path = output_path
        # Append: a restarted instance keeps the output of the one it replaces.
        self._output_file = output_path.open("ab")
        stdin, stdout, stderr = self._streams(self._output_file)
        try:
            process = subprocess.Popen(
                command,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
                preexec_fn=die_with_this_process(),
            )
        except OSError as exc:
            self._output_file.close()
            raise LaunchError(
                self.index, f"cannot start {command[0]!r}: {exc.strerror or exc}"
            ) from None
        self._adopt(process)

    def _streams(self, log: IO[bytes]) -> tuple[Any, Any, Any]:
        """The game's stdin, stdout and stderr: nothing to read, both outputs to its log."""
        return subprocess.DEVNULL, log, subprocess.STDOUT

    def _adopt(self, process: subprocess.Popen[bytes]) -> None:
        """Keep the started process."""
        self.process = process

    def start_forked(self, main_module: str, argv: list[str], output_path: Path) -> None:
        """Fork the game ``main_module`` from this trainer's fork server of it (see
        :mod:`game_bridge.forked_games`), its output appended to ``output_path``."""
        output_path.parent.mkdir(parents=True, exist_ok=True)
        self.output_path = output_path
        try:
            self.process = fork_server(main_module).fork(argv, output_path)
        except ForkServerError as exc:
            raise LaunchError(self.index, str(exc)) from None

    def _note(self, line: str) -> None:
        """Add a line of lander's own to the game's log."""
        if self.output_path is None:
            return
        with contextlib.suppress(OSError), self.output_path.open("a") as handle:
            handle.write(line + "\n")

    def output_tail(self, limit: int = OUTPUT_TAIL_BYTES) -> str:
        """The last lines the game printed, for error messages."""
        if self.output_path is None or not self.output_path.exists():
            return ""
        with self.output_path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            return handle.read().decode("utf-8", "replace").strip()

    def exit_code(self) -> int | None:
        """The process's exit code, or None while it runs (or was never started)."""
        return None if self.process is None else self.process.poll()

    def _died(self, what: str) -> InstanceDied:
        if self.process is not None and self.process.poll() is None:
            # The socket closes a moment before the exit status is ready: wait
            # briefly so the error can name the exit code.
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=0.5)
        code = self.exit_code()
        status = f" (exit code {code})" if code is not None else ""
        tail = self.output_tail(300).replace("\n", " | ")
        return InstanceDied(
            self.index, f"{what}{status}" + (f"; last output: {tail}" if tail else "")
        )

    # -- connection ------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """True once the game has connected."""
        return self._conn is not None

    def try_accept(self) -> bool:
        """Accept the game's connection if it is waiting; never blocks.

        A connection from a process that is not this instance's game (nor one it
        started) is closed and noted in the game's log, and the port keeps waiting
        for the real game (:mod:`game_bridge.peer_check`).
        """
        if self.listener is None:
            return self.connected
        try:
            conn, peer = self.listener.accept()
        except BlockingIOError:
            return False
        if not self._admit(conn, peer):
            self._refuse(conn, peer, "it is not this instance's game")
            return False
        self._take(conn)
        return True

    def _refuse(self, conn: socket.socket, peer: tuple[str, int], why: str) -> None:
        """Close a connection that is not this instance's game, noted in the game's log."""
        conn.close()
        self.refused += 1
        self._note(
            f"lander: refused a connection to port {self.port} from {peer[0]}:{peer[1]}: {why}"
        )

    def _take(self, conn: socket.socket) -> None:
        """Make ``conn`` the game's connection."""
        # A blocking socket with kernel-side timeouts (SO_RCVTIMEO/SO_SNDTIMEO):
        # each read is one recv syscall, where Python's settimeout() would add a
        # poll() before every recv and send. A timed-out call raises
        # BlockingIOError, after which the caller checks the process and the deadline.
        conn.setblocking(True)
        slice_timeval = struct.pack("ll", int(POLL_SLICE_S), int((POLL_SLICE_S % 1) * 1_000_000))
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, slice_timeval)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, slice_timeval)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._conn = conn

    def _admit(self, conn: socket.socket, peer: tuple[str, int]) -> bool:
        """Whether a new connection is this instance's game: on this machine, the game's
        process or one it started (a relayed instance asks for the run's secret instead)."""
        return self.process is None or connected_by(conn, self.process.pid) is not False

    def send_bytes(self, data: bytes) -> None:
        """Write an already framed message."""
        if self._conn is None:
            raise InstanceDied(self.index, "not connected")
        deadline = time.monotonic() + self.read_timeout
        view = memoryview(data)
        while view:
            try:
                sent = self._conn.send(view)
            except (BlockingIOError, TimeoutError):
                sent = None  # not ready within the slice: checked below, outside the handler
            except OSError as exc:
                raise self._died(
                    f"the connection broke while sending ({exc.strerror or exc})"
                ) from None
            if sent is None:
                self._check_send_wait(deadline)
                continue
            view = view[sent:]

    def _check_send_wait(self, deadline: float) -> None:
        """Between two tries to send: a stop, a dead game or the deadline end the wait."""
        self._check_interrupt()
        if self.exit_code() is not None:
            raise self._died("the game exited")
        if time.monotonic() > deadline:
            raise InstanceTimeout(self.index, f"could not send for {self.read_timeout:.0f} s")

    def encode(self, message: dict[str, Any]) -> bytes:
        """One message as this instance's transport frames it (a length prefix here)."""
        return protocol.encode_message(message)

    def send(self, message: dict[str, Any]) -> None:
        """Frame and write one message."""
        self.send_bytes(self.encode(message))

    def _check_interrupt(self) -> None:
        if _stop_waiting.is_set():
            raise Interrupted(self.index, "stopped while waiting for the game")

    def _check_deadline(self) -> None:
        """Checked before every read, not only when one times out: a game that trickles a
        byte at a time must not hold a step past its deadline."""
        if time.monotonic() > self._deadline:
            raise InstanceTimeout(
                self.index,
                f"no reply within {self.read_timeout:g} s (the game hangs or is too slow)",
            )

    def _recv(self, size: int) -> bytes:
        """One read for the frame reader: waits in slices until data, the end of the
        stream (b""), a dead process or the reply's deadline."""
        assert self._conn is not None
        while True:
            self._check_deadline()
            try:
                return self._conn.recv(size)
            except (BlockingIOError, TimeoutError):
                self._check_interrupt()
                if self.exit_code() is not None:
                    raise self._died("the game exited") from None
            except OSError as exc:
                raise self._died(f"the connection broke ({exc.strerror or exc})") from None

    def receive(self, expected_type: str | None = None) -> dict[str, Any]:
        """Read one JSON message; see :meth:`_receive`. A fault marks the instance as
        faulted, so :meth:`close` kills it without waiting for a polite exit."""
        try:
            return self._receive(expected_type)
        except BaseException:
            self.faulted = True
            raise

    def receive_body(self) -> bytes:
        """Read one frame's raw body (a binary reply); faults as :meth:`receive`."""
        try:
            return self._receive_body()
        except BaseException:
            self.faulted = True
            raise

    def _receive_body(self) -> bytes:
        if not self.connected:
            raise InstanceDied(self.index, "not connected")
        self._deadline = time.monotonic() + self.read_timeout
        try:
            return self._reader.body()
        except protocol.FrameError as exc:
            if exc.kind == "eof":
                raise self._died(self._END_OF_STREAM) from None
            raise FrameTooLarge(self.index, str(exc)) from None

    def _receive(self, expected_type: str | None = None) -> dict[str, Any]:
        """Read one message, checking its type when ``expected_type`` is given.

        :raises InstanceDied: end of stream or a dead process.
        :raises InstanceTimeout: no complete message within ``read_timeout``.
        :raises FrameTooLarge: a length prefix beyond ``max_frame_bytes``.
        :raises ProtocolViolation: bad JSON or the wrong message type.
        """
        body = self._receive_body()
        try:
            message = protocol.decode_body(body)
        except protocol.FrameError as exc:
            raise ProtocolViolation(self.index, str(exc)) from None
        if expected_type is not None and message.get("type") != expected_type:
            raise ProtocolViolation(
                self.index,
                f"expected a {expected_type!r} message, got type {message.get('type')!r}",
            )
        return message

    # -- shutdown --------------------------------------------------------------

    def _say_goodbye(self) -> None:
        """Send ``close`` if the game can still hear it, and let go of the connection."""
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.sendall(protocol.encode_message({"type": "close"}))
            self._conn.close()
            self._conn = None

    def close(self, grace_s: float = 3.0) -> None:
        """Send ``close``, wait for the process to quit, kill it if it does not.

        A faulted game gets a short grace: it already failed to follow the protocol.
        """
        if self.faulted:
            grace_s = min(grace_s, 0.5)
        self._say_goodbye()
        if self.listener is not None:
            self.listener.close()
        if self.process is not None and self.process.poll() is None:
            try:
                self.process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5.0)
        if self._output_file is not None:
            self._output_file.close()
            self._output_file = None
