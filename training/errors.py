"""Errors of the training package that light commands catch too (a laptop without
torch catches them around a bot's evaluation), so they live apart from the modules
that import torch."""

from __future__ import annotations

from game_bridge.errors import LanderError


class ExportError(LanderError):
    """A policy that cannot be exported, or an export that failed its parity check."""


class GameNotGiven(LanderError):
    """A bot or a run record names a game program that this checkout never chose.

    Bot files and other checkouts' records travel through ``git pull`` and downloads:
    a program lander starts comes from the user's command line (``--game-bin``) or this
    checkout's own settings, never from a file that came from elsewhere.
    """


def program_name(game_bin: str) -> str:
    """The file name of a program path written on any machine (``/`` or ``\\`` between folders)."""
    return game_bin.replace("\\", "/").rsplit("/", 1)[-1]


def game_not_given(what: str, game_bin: str) -> GameNotGiven:
    """The one line for a ``what`` (a bot, a run) trained on the program ``game_bin``."""
    name = program_name(game_bin)
    return GameNotGiven(
        f"{what} was trained on the game {name!r} ({game_bin} on the machine that trained it); "
        f"lander starts only a game you name: add --game-bin PATH/TO/{name}"
    )
