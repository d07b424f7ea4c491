"""What several commands share: the run-name argument, the dashboard's and page's
options, ``--game`` and the checks a command makes before any work (one red line each)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from cli.common.console import fail
from games import EDITOR_GAME, GAME_NAMES, game_entry, is_game_name

DEFAULT_PAGE_PORT = 6010
"""Where a game's live page is served first (``play --web``, ``start``); a taken port moves on."""


def game_option(help_text: str) -> Any:
    """The ``--game`` option of a command that plays a bundled game."""
    return typer.Option(metavar=GAME_NAMES, help=help_text, show_default=False)


def check_game(game: str | None) -> None:
    """One red line for a ``--game`` that is no game lander knows (None: not given)."""
    if game is not None and not is_game_name(game):
        fail(f"--game must be one of {GAME_NAMES}, got {game!r}")


GymPackages = Annotated[
    list[str] | None,
    typer.Option(
        "--gym-package",
        metavar="PACKAGE",
        help="A package that registers the game's Gymnasium ids when imported (repeatable: "
        "--gym-package minigrid); a bot file imports nothing by itself.",
    ),
]


def use_gym_packages(names: list[str] | None) -> None:
    """Import the packages a user named, so the ids they register exist (one red line for
    one that is not installed or fails)."""
    if not names:
        return
    from games.gym.packages import GymPackageError, import_packages

    try:
        import_packages(names)
    except GymPackageError as exc:
        fail(str(exc))


RunName = Annotated[
    str,
    typer.Argument(metavar="RUN", help="Run name: letters, digits, '-', '_', '.' (at most 64)."),
]


def with_config_file(config: Path | None, settings: dict[str, Any]) -> dict[str, Any]:
    """A settings file's values under the options given (options win)."""
    from training.config import load_config_file

    return {**(load_config_file(config) if config is not None else {}), **settings}


TbHost = Annotated[
    str | None,
    typer.Option(
        help="Address TensorBoard listens on (0.0.0.0: the whole LAN). "
        "Default: the last one used in this checkout, else 0.0.0.0."
    ),
]


TbPort = Annotated[
    int | None,
    typer.Option(
        help="TensorBoard port. Default: the last one used in this checkout, else 6006; "
        "a taken port moves to the next free one."
    ),
]


WebPort = Annotated[
    int | None,
    typer.Option(
        help="The live page's port. Default: the last one used in this checkout, else "
        f"{DEFAULT_PAGE_PORT}; a taken port moves to the next free one."
    ),
]


def valid_run(name: str) -> str:
    """``name`` if it is a valid run name (else :class:`InvalidRunName`, one red line)."""
    from training.runs.run_paths import validate_run_name

    return validate_run_name(name)


def has_page(game: str, game_args: dict[str, str]) -> bool:
    """True when the game has a web page a run's live bot of these ``--game-arg`` settings
    can be watched on (none for the game in the editor: it is known only by its protocol)."""
    if game == EDITOR_GAME:
        return False
    entry = game_entry(game)
    return bool(entry.web_files) and entry.page_plays(game_args)
