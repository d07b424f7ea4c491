"""Where things live in a lander checkout, and the run-name rule.

Every path a command touches is derived here from the checkout root, so a run
name typed by a user is validated once before it reaches a path, tmux or git.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

RUN_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
GAME_BINARY_NAME = "lander_game.x86_64"


class InvalidRunName(ValueError):
    """A run name that could escape its folder or confuse tmux and git."""


def validate_run_name(name: str) -> str:
    """Return ``name`` if it is a safe run name, else raise :class:`InvalidRunName`.

    Allowed: letters, digits, ``-``, ``_``, ``.``; 1 to 64 characters; not starting
    with ``.`` or ``-`` and never ``..``.
    """
    if not RUN_NAME_PATTERN.fullmatch(name) or ".." in name:
        shown = name if len(name) <= 40 else name[:40] + "..."
        raise InvalidRunName(
            f"invalid run name {shown!r}: use 1-64 letters, digits, '-', '_' or '.', "
            "not starting with '.' or '-'"
        )
    return name


def project_root() -> Path:
    """The checkout lander works in: ``LANDER_HOME`` if set, else this source tree."""
    override = os.environ.get("LANDER_HOME")
    if override:
        return Path(override).resolve()
    return Path(__file__).resolve().parent.parent


def build_dir(root: Path) -> Path:
    """Where setup writes the game binary (git-ignored)."""
    return root / "build"


def game_binary_path(root: Path) -> Path:
    """The bundled game's executable, written by ``lander setup``."""
    return build_dir(root) / GAME_BINARY_NAME
