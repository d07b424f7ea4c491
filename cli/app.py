"""The ``lander`` Typer app: one function per command, its typed parameters its flags."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.console import console, fail
from cli.paths import project_root
from game_bridge.protocol import DEFAULT_PORT

app = typer.Typer(
    name="lander",
    help="Training operations for reinforcement learning on games: set up a machine, "
    "train PPO against headless game instances over TCP, export the bot, carry results with git.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Training operations for reinforcement learning on games.

    A day with lander: `lander setup`, `lander train run01` (or `lander start run01` in tmux),
    `lander status`, and on another machine `git pull && lander play bots/run01.json`.
    """


@app.command()
def setup(
    game_bin: Annotated[
        Path | None,
        typer.Option(
            help="A game executable that speaks the Godot RL Agents protocol "
            "(default: the bundled lander game, written to build/).",
            envvar="LANDER_GAME_BIN",
        ),
    ] = None,
    port: Annotated[
        int, typer.Option(help="TCP port for the smoke test's game instance.")
    ] = DEFAULT_PORT,
) -> None:
    """Check and fix this machine: Python, the game binary, a headless smoke test. Safe to re-run."""
    from cli.setup import run_setup

    results = run_setup(project_root(), game_bin, port)
    failed = [result.name for result in results if not result.ok]
    if failed:
        fail(f"setup incomplete: {', '.join(failed)} failed (see above)")
    console.print("[green]setup complete[/]")


def main() -> None:
    """Console-script entry point."""
    app()
