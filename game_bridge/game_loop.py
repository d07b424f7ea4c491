"""The game's side of the protocol, shared by the bundled games: their arguments, the
channel to the trainer (a TCP connection, or standard input and output) and the loop
that answers the trainer's messages.

Like the games themselves it needs only the standard library, numpy and
:mod:`game_bridge.protocol`, so a bundled game could be shipped alone.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from typing import Any, BinaryIO, Protocol

from game_bridge import protocol

CONNECT_TIMEOUT_S = 30.0
TRANSPORTS = ("tcp", "stdio")


def read_arguments(argv: list[str]) -> dict[str, str]:
    """The ``--key=value`` launch arguments (PROTOCOL.md); others are ignored, as Godot does."""
    values: dict[str, str] = {}
    for arg in argv:
        if arg.startswith("--") and "=" in arg:
            key, value = arg[2:].split("=", 1)
            values[key] = value
    return values


class StepPacer:
    """Holds each step to its share of wall time, as an engine at ``speedup`` would.

    :param step_seconds: wall seconds a step takes (0: as fast as possible).
    """

    def __init__(self, step_seconds: float) -> None:
        self.step_seconds = step_seconds
        self._next_step_at = 0.0

    @classmethod
    def for_game(cls, action_repeat: int, ticks_per_second: int, speedup: float) -> StepPacer:
        """The pacer of a game at ``ticks_per_second`` x ``speedup`` (0: unpaced)."""
        return cls(action_repeat / (ticks_per_second * speedup) if speedup > 0 else 0.0)

    def wait(self) -> None:
        """Sleep until this step's turn."""
        if not self.step_seconds:
            return
        now = time.monotonic()
        if self._next_step_at > now:
            time.sleep(self._next_step_at - now)
            now = self._next_step_at
        self._next_step_at = max(now, self._next_step_at) + self.step_seconds


class Channel(Protocol):
    """Messages to and from the trainer, whatever carries them."""

    binary_capable: bool
    """Whether lander's binary step frames can travel here (not on a line-based channel)."""

    def body(self) -> bytes:
        """The next message's raw body; :class:`protocol.FrameError` ``"eof"`` at the end."""
        ...

    def send(self, message: dict[str, Any]) -> None:
        """Write one JSON message."""
        ...

    def send_frame(self, frame: bytes) -> None:
        """Write an already encoded message (a binary step reply)."""
        ...

    def close(self) -> None:
        """Let go of the connection."""
        ...


class SocketChannel:
    """The wire protocol's framing over the TCP connection the game opened to the trainer."""

    binary_capable = True

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._reader = protocol.FrameReader(sock.recv)

    def body(self) -> bytes:
        return self._reader.body()

    def send(self, message: dict[str, Any]) -> None:
        protocol.send_message(self.sock, message)

    def send_frame(self, frame: bytes) -> None:
        protocol.send_bytes(self.sock, frame)

    def close(self) -> None:
        self.sock.close()


class StdioChannel:
    """One JSON message per line: the trainer's on standard input, the game's on standard
    output.

    The real standard output is kept for messages and file descriptor 1 is pointed at
    standard error, so a stray ``print`` lands in the game's log instead of the protocol.
    """

    binary_capable = False

    def __init__(self) -> None:
        sys.stdout.flush()
        self._out: BinaryIO = os.fdopen(os.dup(1), "wb", buffering=0)
        os.dup2(2, 1)
        self._reader = protocol.LineReader(lambda size: os.read(0, size))

    def body(self) -> bytes:
        return self._reader.body()

    def send(self, message: dict[str, Any]) -> None:
        self._out.write(protocol.encode_line(message))

    def send_frame(self, frame: bytes) -> None:
        raise protocol.FrameError("bad_binary", "binary frames do not travel on stdio")

    def close(self) -> None:
        self._out.close()


def connect(port: int) -> SocketChannel:
    """Connect to the trainer on 127.0.0.1, retrying for :data:`CONNECT_TIMEOUT_S`.

    :raises OSError: when the trainer cannot be reached in that time.
    """
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5.0)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return SocketChannel(sock)


def open_channel(values: dict[str, str], default_port: int = protocol.DEFAULT_PORT) -> Channel:
    """The channel the launch arguments ask for: ``--transport=stdio``, else TCP to ``--port``.

    :raises ValueError: an unknown transport.
    :raises OSError: the trainer's port cannot be reached.
    """
    transport = values.get("transport", "tcp")
    if transport not in TRANSPORTS:
        raise ValueError(f"--transport must be tcp or stdio, got {transport!r}")
    if transport == "stdio":
        return StdioChannel()
    return connect(int(values.get("port", default_port)))


class ServedGame(Protocol):
    """What the loop asks of a game: one reply per message type."""

    fast: bool

    def env_info(self) -> dict[str, Any]: ...

    def reset(self) -> dict[str, Any]: ...

    def step(self, message: dict[str, Any]) -> dict[str, Any]: ...

    def step_binary(self, body: bytes) -> bytes: ...

    def call(self, message: dict[str, Any]) -> dict[str, Any]: ...


def serve(game: ServedGame, channel: Channel, name: str, encoding: str | None = None) -> None:
    """Answer the trainer until it sends ``close`` or goes away.

    :param name: the game's name in its complaints (on standard error).
    :param encoding: the binary encoding (one of ``protocol.ENCODINGS``) the game can
        answer in when the trainer offers it; None: JSON only.
    """

    def complain(text: str) -> None:
        print(f"{name}: {text}", file=sys.stderr, flush=True)

    while True:
        try:
            body = channel.body()
            if game.fast and protocol.is_binary(body):
                channel.send_frame(game.step_binary(body))
                continue
            message = protocol.decode_body(body)
        except protocol.FrameError as exc:
            if exc.kind != "eof":
                complain(f"bad frame from the trainer: {exc}")
            return  # the trainer is gone (or broken): quit, so no game outlives it
        except OSError:
            return
        kind = message.get("type")
        if kind == "close":
            return
        if kind == "handshake":
            offered = message.get("lander_encodings")
            game.fast = (
                encoding is not None
                and channel.binary_capable
                and isinstance(offered, list)
                and encoding in offered
            )
            if str(message.get("major_version")) != protocol.MAJOR_VERSION:
                complain(f"unsupported protocol major version {message.get('major_version')!r}")
                return
            continue
        try:
            if kind == "env_info":
                reply = game.env_info()
            elif kind == "reset":
                reply = game.reset()
            elif kind == "action":
                reply = game.step(message)
            elif kind == "call":
                reply = game.call(message)
            else:
                complain(f"ignoring message of unknown type {kind!r}")
                continue
        except (KeyError, TypeError, ValueError) as exc:
            complain(f"bad {kind} message from the trainer: {exc}")
            return
        try:
            channel.send(reply)
        except OSError:
            return


def run_game(
    game: ServedGame, values: dict[str, str], name: str, encoding: str | None = None
) -> int:
    """Open the channel the arguments ask for and serve ``game`` on it: a game's ``main``."""
    try:
        channel = open_channel(values)
    except ValueError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(
            f"{name}: cannot reach the trainer on 127.0.0.1:{values.get('port')}: {exc}",
            file=sys.stderr,
        )
        return 1
    try:
        serve(game, channel, name, encoding)
    finally:
        channel.close()
    return 0
