"""Where the checkout and its build outputs are (run files: ``training.runs.run_paths``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

GAME_SETTINGS_NAME = "game.json"
"""In ``build/``: the game ``lander setup --game-bin`` remembered for this checkout."""


def project_root() -> Path:
    """The checkout lander works in: ``LANDER_HOME`` if set, else this source tree."""
    override = os.environ.get("LANDER_HOME")
    if override:
        return Path(override).resolve()
    return Path(__file__).resolve().parents[2]


def build_dir(root: Path) -> Path:
    """Where setup writes the game binary (git-ignored)."""
    return root / "build"


def game_binary_path(root: Path) -> Path:
    """The default game's executable, written by ``lander setup`` (its entry names it)."""
    from games import DEFAULT_GAME, game_entry

    return build_dir(root) / (game_entry(DEFAULT_GAME).build_name or f"{DEFAULT_GAME}.x86_64")


def remembered_game_bin(root: Path) -> str | None:
    """The game binary ``lander setup --game-bin`` remembered for this checkout, if any."""
    path = build_dir(root) / GAME_SETTINGS_NAME
    try:
        value = json.loads(path.read_text()).get("game_bin")
    except (OSError, json.JSONDecodeError, AttributeError):
        return None
    return str(value) if value else None
