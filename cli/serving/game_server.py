"""``lander serve GAME``: a bundled game as an OpenEnv environment server, so OpenEnv's
clients (and a Hugging Face Space, docs/openenv.md) can play and train it.

The server itself knows no game (:mod:`game_bridge.openenv_server`); here a bundled
game's in-process gymnasium environment is made, one per session, with the game's
arguments checked as a run's are.
"""

from __future__ import annotations

import asyncio
import errno
import signal
from collections.abc import Coroutine
from typing import Any

from cli.common.command_classes import note_sigterm, terminating
from cli.common.console import console, fail
from cli.common.endings import Terminated
from game_bridge.local_names import who_can_reach
from game_bridge.openenv_server import OpenEnvServer, ServeError
from games import BUNDLED_GAMES, gym_env_factory
from training.config import ConfigError, check_bundled_game_args


def check_address(host: str, port: int, what: str = "--port") -> None:
    """One red line for an address no server should take: a port outside 1-65535, or an
    empty host (which would serve on every interface without a word)."""
    if not 1 <= port <= 65535:
        fail(f"{what} must be from 1 to 65535, got {port}")
    if not host.strip():
        fail("--host must name an address: 127.0.0.1 for this machine, 0.0.0.0 for the LAN")


def game_factory(game: str, game_args: dict[str, str]) -> Any:
    """What makes one environment of the bundled ``game`` with ``game_args``.

    :raises ConfigError: an unknown game or argument.
    """
    if game not in BUNDLED_GAMES:
        raise ConfigError(f"GAME must be one of {', '.join(BUNDLED_GAMES)}, got {game!r}")
    check_bundled_game_args(game, game_args)
    return gym_env_factory(game, game_args)


def serve_game(
    game: str, game_args: dict[str, str], host: str, port: int, max_sessions: int
) -> None:
    """Serve until Ctrl-C; every user mistake is one red line."""
    if not 1 <= max_sessions <= 1024:
        fail(f"--max-sessions must be from 1 to 1024, got {max_sessions}")
    check_address(host, port)
    try:
        server = OpenEnvServer(
            game_factory(game, game_args),
            game,
            max_sessions,
            log=lambda line: console.print(line, markup=False, highlight=False),
        )
    except (ConfigError, ServeError) as exc:
        fail(str(exc))

    def ready() -> None:
        console.print(
            f"serving {game} as an OpenEnv environment at http://{host}:{port} "
            f"(sessions at ws://{host}:{port}/ws, up to {max_sessions}; {who_can_reach(host)}); "
            "Ctrl-C stops"
        )

    try:
        asyncio.run(_until_terminated(server.serve(host, port, ready)))
    except KeyboardInterrupt:
        console.print("stopped")
    except OSError as exc:
        taken = exc.errno == errno.EADDRINUSE
        fail(f"cannot serve on {host}:{port}: " + ("the port is in use" if taken else str(exc)))


async def _until_terminated(serving: Coroutine[Any, Any, None]) -> None:
    """Run ``serving`` until SIGTERM, which the loop takes: raised where it lands (a
    session's step), it would end that session's task and leave the server running."""
    task = asyncio.ensure_future(serving)

    def terminate() -> None:
        note_sigterm(signal.SIGTERM)
        task.cancel()

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, terminate)
    try:
        await task
    except asyncio.CancelledError:
        if not terminating():
            raise  # Ctrl-C: asyncio.run turns it back into KeyboardInterrupt
        raise Terminated from None
