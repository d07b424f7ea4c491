"""Instances of a Python game forked from one server process instead of launched one by one.

A fresh Python game process spends about 0.1 s of CPU importing itself; N of them
on a 2-core machine take N / 2 times that however they are started. The fork server
(:mod:`game_bridge.forkserver`) imports a game's module once and forks each instance
in milliseconds. This module starts one server per game module (once per trainer
process, again if it died) and gives each forked game a handle that behaves like the
:class:`subprocess.Popen` the launcher uses for other games.

Games of other binaries (a Godot export) are always launched as processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any, Protocol

from game_bridge.orphans import die_with_this_process

_SERVER_MODULE = "game_bridge.forkserver"
_REPLY_TIMEOUT_S = 30.0
_WAIT_SLICE_S = 0.25
"""How often a wait for a game's exit checks that the server itself still runs."""
UNKNOWN_EXIT_CODE = 255
"""Reported for a forked game whose server died before it could say how the game ended."""


class ForkServerError(OSError):
    """The fork server could not be started or did not fork a game."""


class GameProcess(Protocol):
    """What the launcher needs of a game's process: a :class:`subprocess.Popen` has it."""

    @property
    def pid(self) -> int:
        """The process id."""

    def poll(self) -> int | None:
        """The exit code, or None while it runs."""

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit code; :class:`subprocess.TimeoutExpired` after ``timeout``."""

    def kill(self) -> None:
        """End it with SIGKILL."""


class ForkServer:
    """One running fork server and what it has said about its games' exits.

    :param main_module: the game's module, whose ``main(argv)`` each fork runs.
    :param python: the interpreter to run it with (this one by default).
    """

    def __init__(self, main_module: str, python: str = sys.executable) -> None:
        environment = dict(os.environ)
        # Games do no linear algebra; a BLAS thread pool in a process that forks is a
        # deadlock waiting to happen, and N games x cores threads crowd a small machine.
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            environment[name] = "1"
        try:
            self._process = subprocess.Popen(
                [python, "-m", _SERVER_MODULE, main_module],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=environment,
                start_new_session=True,  # Ctrl-C reaches the trainer only, as for launched games
                preexec_fn=die_with_this_process(),  # and its games die with it (see forkserver)
            )
        except OSError as exc:
            raise ForkServerError(f"cannot start the game fork server: {exc}") from None
        assert self._process.stdin is not None and self._process.stdout is not None
        self._requests: IO[bytes] = self._process.stdin
        self._replies = self._process.stdout.fileno()
        os.set_blocking(self._replies, False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._replies, selectors.EVENT_READ)
        self._pending = b""
        self._ended = False  # the server's output reached its end: it quit
        self._answers: list[dict[str, Any]] = []
        self.exit_codes: dict[int, int] = {}
        self._lock = threading.Lock()

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self._process.pid

    @property
    def alive(self) -> bool:
        """True while the server process runs."""
        return self._process.poll() is None

    def _read(self, timeout: float) -> bool:
        """Take in whatever the server has written within ``timeout``; False at its end."""
        if not self._selector.select(timeout):
            return True
        try:
            chunk = os.read(self._replies, 65536)
        except BlockingIOError:
            return True
        if not chunk:
            self._ended = True
            return False
        self._pending += chunk
        while b"\n" in self._pending:
            line, self._pending = self._pending.split(b"\n", 1)
            message = json.loads(line)
            if "exited" in message:
                self.exit_codes[int(message["exited"])] = int(message["code"])
            else:
                self._answers.append(message)
        return True

    def collect(self, timeout: float = 0.0) -> None:
        """Take in the exit notices written so far, waiting up to ``timeout`` for the first."""
        if self._ended:  # no more notices will come: a waiting caller polls the pid instead
            time.sleep(timeout)
            return
        with self._lock:
            if self._read(timeout):
                while self._selector.select(0) and self._read(0):
                    pass

    def fork(self, argv: list[str], output: Path) -> ForkedGame:
        """Fork one game with launch arguments ``argv``, its output appended to ``output``.

        :raises ForkServerError: the server is gone or did not fork.
        """
        with self._lock:
            try:
                self._requests.write(
                    json.dumps({"argv": argv, "output": str(output.absolute())}).encode() + b"\n"
                )
                self._requests.flush()
            except OSError as exc:
                raise ForkServerError(f"the game fork server is gone: {exc}") from None
            deadline = time.monotonic() + _REPLY_TIMEOUT_S
            while not self._answers:
                if not self._read(0.5):
                    raise ForkServerError("the game fork server quit")
                if time.monotonic() > deadline:
                    raise ForkServerError("the game fork server did not answer")
            answer = self._answers.pop(0)
        if "pid" not in answer:
            raise ForkServerError(f"the game fork server could not fork: {answer.get('error')}")
        return ForkedGame(self, int(answer["pid"]))

    def close(self) -> None:
        """Stop the server (the games it forked keep running until their trainer closes them)."""
        with contextlib.suppress(OSError):
            self._requests.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=2.0)
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._selector.close()
        if self._process.stdout is not None:
            self._process.stdout.close()


class ForkedGame:
    """A game forked by a :class:`ForkServer`, with the part of Popen's interface games need.

    :param server: the server that forked it (and reports its exit).
    :param pid: its process id.
    """

    def __init__(self, server: ForkServer, pid: int) -> None:
        self.server = server
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code once the server has reported it, else None."""
        if self.returncode is None:
            self.server.collect()
            self.returncode = self.server.exit_codes.get(self.pid)
            if self.returncode is None and not self.server.alive and not _exists(self.pid):
                self.returncode = UNKNOWN_EXIT_CODE
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit code.

        :raises subprocess.TimeoutExpired: still running after ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            left = _WAIT_SLICE_S if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(f"game {self.pid}", timeout or 0.0)
            self.server.collect(min(left, _WAIT_SLICE_S))
        return code

    def kill(self) -> None:
        """SIGKILL the game, unless it has already been reported gone (its pid may be reused)."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


def _exists(pid: int) -> bool:
    """True while ``pid`` runs; a zombie nobody reaps (an orphan in a container) counts as gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel whether the pid exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


_servers: dict[str, ForkServer] = {}
_server_lock = threading.Lock()


def fork_server(main_module: str) -> ForkServer:
    """This process's fork server of the game ``main_module`` (a module whose
    ``main(argv)`` runs one game), started on first use and again if it died."""
    with _server_lock:
        server = _servers.get(main_module)
        if server is None or not server.alive:
            if server is not None:
                server.close()
            server = _servers[main_module] = ForkServer(main_module)
        return server
