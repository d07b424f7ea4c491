"""A Python game's fork server: imports the game once, then forks one game per request.

Starting a Python game is mostly Python and numpy importing themselves (about
0.1 s of CPU each time); on a machine with few cores, N fresh processes take about
N / cores times that. The trainer instead starts this server once per game (``python -m
game_bridge.forkserver MODULE``, MODULE having a ``main(argv)`` that runs one game) and
asks it for instances: a fork of an already imported game is ready in a few milliseconds
and shares its memory.

It talks to the trainer over its standard input and output, one JSON object a line:

- in: ``{"argv": ["--port=11008", ...], "output": "/path/game_0.log"}``
- out: ``{"pid": 1234}`` (the forked game) or ``{"error": "..."}``
- out, whenever a game ends: ``{"exited": 1234, "code": 0}`` (``-N`` for signal N, as
  :meth:`subprocess.Popen.poll` reports it)

It quits when its input closes (the trainer is gone). On Linux it is killed when the
trainer dies, and its games when it dies; elsewhere the games quit when their
trainer's connection closes.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import selectors
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any

GameMain = Callable[[list[str]], int]


def _run_game(
    main: GameMain, argv: list[str], output: str, keep_fds: tuple[int, ...], server: int
) -> None:
    """In the forked child: become a game process of its own and never return."""
    code = 1
    try:
        os.setsid()  # like a launched game: a Ctrl-C for the trainer does not reach it
        _die_with_server(server)
        signal.set_wakeup_fd(-1)
        for number in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(number, signal.SIG_DFL)
        for fd in keep_fds:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        log = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)
        os.close(log)
        code = main(argv)
    except BaseException:  # the child must end here whatever happens, never return to the loop
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _die_with_server(server: int) -> None:
    """Linux: this game gets SIGKILL when the server dies, and the server gets it when the
    trainer dies, so no game outlives a trainer killed by any means."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != server:
        os._exit(1)


def _reap(out: Any) -> None:
    """Report every child that has ended since the last call."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _reply(out, {"exited": pid, "code": os.waitstatus_to_exitcode(status)})


def _reply(out: Any, message: dict[str, Any]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


def serve(main: GameMain) -> None:
    """Answer fork requests on stdin until it closes, each fork running ``main(argv)``."""
    requests = sys.stdin.fileno()  # read with os.read: no buffer may hide a request from select
    out = sys.stdout
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd is written
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    selector = selectors.DefaultSelector()
    selector.register(requests, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    pending = b""
    server = os.getpid()
    while True:
        for key, _ in selector.select():
            if key.fileobj == wake_r:
                os.read(wake_r, 4096)
                _reap(out)
                continue
            chunk = os.read(requests, 65536)
            if not chunk:
                return  # the trainer is gone
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                try:
                    request = json.loads(line)
                    argv = [str(arg) for arg in request["argv"]]
                    output = str(request["output"])
                except (ValueError, KeyError, TypeError) as exc:
                    _reply(out, {"error": f"bad request: {exc}"})
                    continue
                out.flush()
                try:
                    pid = os.fork()
                except OSError as exc:
                    _reply(out, {"error": f"cannot fork: {exc.strerror or exc}"})
                    continue
                if pid == 0:
                    _run_game(main, argv, output, (wake_r, wake_w), server)
                _reply(out, {"pid": pid})


if __name__ == "__main__":
    serve(importlib.import_module(sys.argv[1]).main)
