"""A game instance over the stdio transport: the game process's standard input and
output carry the protocol's messages, one JSON text a line; its standard error goes
to its log.

Everything but the carrier is :class:`~game_bridge.instance.GameInstance`'s: the same
deadlines, fault names, interruption and restarts. Reads and writes wait on the pipes
in the same short slices, checking between slices whether the process still lives.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import time
from pathlib import Path
from typing import IO, Any

from game_bridge import protocol
from game_bridge.errors import InstanceDied, LaunchError
from game_bridge.instance import POLL_SLICE_S, GameInstance

_SLICE_MS = int(POLL_SLICE_S * 1000)


class StdioInstance(GameInstance):
    """A game process spoken to through its standard input and output.

    :param index: 0-based instance number (used in every error message).
    :param read_timeout: seconds a reply may take before :class:`InstanceTimeout`.
    :param max_line_bytes: the longest line accepted from the game.
    """

    _END_OF_STREAM = "the game closed its standard output"

    def __init__(
        self,
        index: int,
        read_timeout: float = 30.0,
        max_line_bytes: int = protocol.DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        super().__init__(index, 0, "", read_timeout, max_line_bytes)
        self._to_game: int | None = None  # the write end of the game's stdin
        self._from_game: int | None = None  # the read end of its stdout
        self._readable = select.poll()
        self._writable = select.poll()

    def _open_listener(self, host: str, port: int) -> None:
        return None  # nothing to connect to: the pipes exist from the start

    def _make_reader(self, max_bytes: int) -> protocol.FrameReader:
        """Lines, not frames."""
        return protocol.LineReader(self._recv, max_bytes)

    def _streams(self, log: IO[bytes]) -> tuple[Any, Any, Any]:
        """Pipes on the game's stdin and stdout; its stderr to its log."""
        return subprocess.PIPE, subprocess.PIPE, log

    def _adopt(self, process: subprocess.Popen[bytes]) -> None:
        """Keep the process and take its pipes as raw, non-blocking descriptors: no Python
        buffering between the game and the deadlines (the file objects are let go, so
        nothing closes the descriptors twice)."""
        assert process.stdin is not None and process.stdout is not None
        self._to_game = os.dup(process.stdin.fileno())
        self._from_game = os.dup(process.stdout.fileno())
        process.stdin.close()
        process.stdout.close()
        process.stdin = process.stdout = None
        for fd in (self._to_game, self._from_game):
            os.set_blocking(fd, False)
        self._readable.register(self._from_game, select.POLLIN)
        self._writable.register(self._to_game, select.POLLOUT)
        self.process = process

    def start_forked(self, main_module: str, argv: list[str], output_path: Path) -> None:
        """Never: the fork server hands its games no pipes."""
        raise LaunchError(self.index, "a stdio game is launched, not forked")

    @property
    def connected(self) -> bool:
        """True once the game process runs with its pipes."""
        return self._from_game is not None

    def try_accept(self) -> bool:
        """Nothing to accept: connected as soon as started."""
        return self.connected

    def encode(self, message: dict[str, Any]) -> bytes:
        """One message as a JSON line."""
        return protocol.encode_line(message)

    def send_bytes(self, data: bytes) -> None:
        """Write one encoded line to the game's standard input within the deadline."""
        if self._to_game is None:
            raise InstanceDied(self.index, "not started")
        deadline = time.monotonic() + self.read_timeout
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._to_game, view) :]
                continue
            except BlockingIOError:
                pass
            except BrokenPipeError:
                raise self._died("the game closed its standard input") from None
            except OSError as exc:
                raise self._died(f"writing to the game failed ({exc.strerror or exc})") from None
            self._check_send_wait(deadline)
            self._writable.poll(_SLICE_MS)

    def _recv(self, size: int) -> bytes:
        """One read for the line reader: waits in slices until data, the end of the game's
        output (b""), a dead process or the reply's deadline."""
        assert self._from_game is not None
        while True:
            self._check_deadline()
            try:
                return os.read(self._from_game, size)
            except BlockingIOError:
                pass
            except OSError as exc:
                raise self._died(f"reading from the game failed ({exc.strerror or exc})") from None
            self._check_interrupt()
            if self.exit_code() is not None:
                # A last read: the game may have written its reply and then exited.
                with contextlib.suppress(BlockingIOError):
                    data = os.read(self._from_game, size)
                    if data:
                        return data
                raise self._died("the game exited")
            self._readable.poll(_SLICE_MS)

    def _say_goodbye(self) -> None:
        """Send ``close`` as a line and close both pipes (the game then sees end of input)."""
        if self._to_game is not None:
            with contextlib.suppress(OSError):
                os.write(self._to_game, protocol.encode_line({"type": "close"}))
            self._writable.unregister(self._to_game)
            os.close(self._to_game)
            self._to_game = None
        if self._from_game is not None:
            self._readable.unregister(self._from_game)
            os.close(self._from_game)
            self._from_game = None
