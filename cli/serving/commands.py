"""Commands that serve something on the network: ``serve`` (a bundled game as an OpenEnv
server) and ``dashboard`` (TensorBoard over this checkout's logs)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from cli.common import train_flags as flags
from cli.common.console import console
from cli.common.options import TbHost, TbPort
from cli.common.paths import project_root
from games import BUNDLED_GAMES, DEFAULT_GAME


def serve(
    game: Annotated[
        str, typer.Argument(metavar="|".join(BUNDLED_GAMES), help="The bundled game to serve.")
    ] = DEFAULT_GAME,
    port: Annotated[int, typer.Option(help="TCP port of the server.")] = 8000,
    host: Annotated[
        str, typer.Option(help="The address to serve on (0.0.0.0 for the LAN or a container).")
    ] = "127.0.0.1",
    max_sessions: Annotated[
        int, typer.Option(help="Sessions (environments) at once; one more is refused.")
    ] = 8,
    game_arg: Annotated[
        list[str] | None,
        typer.Option("--game-arg", metavar="KEY=VALUE", help="A setting of the game."),
    ] = None,
) -> None:
    """Serve a bundled game as an OpenEnv environment (WebSocket sessions at /ws, /schema,
    /health), for OpenEnv's clients and `lander train --game-url` (docs/openenv.md)."""
    from cli.serving.game_server import serve_game

    serve_game(game, flags.parse_game_args(game_arg), host, port, max_sessions)


def dashboard(
    host: TbHost = None,
    port: TbPort = None,
    stop_it: Annotated[
        bool,
        typer.Option("--stop", help="Stop this checkout's TensorBoard that `start` left in tmux."),
    ] = False,
) -> None:
    """Serve TensorBoard over logs/ in the foreground (every run's curves); if this
    checkout's dashboard already runs, print its address instead."""
    from cli.serving.dashboard import choose_dashboard, stop_dashboard

    if stop_it:
        stop_dashboard(project_root())
        return
    choice = choose_dashboard(project_root(), host, port)
    console.print(f"dashboard: {choice.url}  ({choice.note}; {choice.reach})")
    if choice.command is not None:
        os.execv(choice.command[0], choice.command)
