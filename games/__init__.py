"""The bundled games, one folder each, and the registry that is all the rest of lander
knows of them.

Adding a game is one folder (``games/<name>/`` with an ``entry.py`` that declares
``ENTRY``, a :class:`~games.spec.GameEntry`) and one line in :data:`REGISTRY`.
Entries are imported on first use, so a command that names no game loads none.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

from game_bridge.errors import LanderError

if TYPE_CHECKING:
    import gymnasium

    from games.spec import GameEntry

REGISTRY = {
    "lander": "follow a cursor",
    "stroke": "correct a noisy pen (--game-arg reward_mode=delayed scores whole strokes)",
    "duel": "two landers race for one target (sides red and blue: --self-play)",
}
"""The games lander ships, by folder (``games/<name>/entry.py`` declares each), with what
each is in a few words for ``--help``."""
BUNDLED_GAMES = tuple(REGISTRY)
DEFAULT_GAME = BUNDLED_GAMES[0]
"""The game a run plays when it names none."""
GYM_PREFIX = "gym:"
"""``gym:ENV_ID`` names any installed Gymnasium environment as a game (``games/gym/``)."""
PZ_PREFIX = "pz:"
"""``pz:MODULE`` names a PettingZoo game by its module (``games/pz/``)."""
PZ_LIBRARIES = ("pettingzoo", "mpe2")
"""The PettingZoo libraries whose games a name may import by itself; another module is
imported only once its package is named (``--gym-package``): a name may come from a file
made elsewhere."""
EDITOR_GAME = "editor"
"""``--game editor``: no game is launched; the run waits for the one a person starts in the
Godot editor (its ``Sync`` node connects to the trainer's port when the scene plays)."""
GAME_NAMES = f"{'|'.join(BUNDLED_GAMES)}|{GYM_PREFIX}ENV_ID|{PZ_PREFIX}MODULE|{EDITOR_GAME}"
"""What ``--game`` may name, for help and errors."""


class UnknownGame(LanderError, ValueError):
    """A game name that is not in the registry."""


_GYM_ID = re.compile(r"[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)?")
"""A registered Gymnasium id (``CartPole-v1``, ``ALE/Pong-v5``); Gymnasium's
``module:Env`` form, which imports a module, is not one: a name read from a bot or a record
from elsewhere must not import code."""


PZ_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")
"""A PettingZoo game's module path (``pettingzoo.classic.tictactoe_v3``)."""


def _pz_entry(module: str) -> GameEntry:
    """The entry of ``pz:MODULE``, imported only from a PettingZoo library or a package
    the user named (``--gym-package``) in this process."""
    from games.gym.packages import imported_packages

    top = module.split(".")[0]
    named = {name.split(".")[0] for name in imported_packages()}
    if top not in PZ_LIBRARIES and top not in named:
        raise UnknownGame(
            f"--game {PZ_PREFIX}{module}: a game outside PettingZoo's own libraries is imported "
            f"only where its package is named: --gym-package {top}"
        )
    from games.gym.parts import UnsupportedEnv

    try:
        entry: GameEntry = importlib.import_module("games.pz.entry").entry_for(module)
    except UnsupportedEnv as exc:
        raise UnknownGame(str(exc)) from None
    return entry


def is_game_name(name: str) -> bool:
    """True for a bundled game's name, ``gym:ENV_ID`` (whether the id exists is
    :func:`game_entry`'s to say) or the game in the editor."""
    if name == EDITOR_GAME:
        return True
    if name.startswith(GYM_PREFIX):
        return _GYM_ID.fullmatch(name[len(GYM_PREFIX) :]) is not None
    if name.startswith(PZ_PREFIX):
        return PZ_MODULE.fullmatch(name[len(PZ_PREFIX) :]) is not None
    return name in BUNDLED_GAMES


@cache
def game_entry(name: str) -> GameEntry:
    """The registry entry of the game ``name``: a bundled game, or ``gym:ENV_ID``.

    :raises UnknownGame: for a name that is neither, or an environment Gymnasium cannot make.
    """
    if name.startswith(GYM_PREFIX) and is_game_name(name):
        from games.gym.view import UnsupportedEnv

        try:
            entry_for = importlib.import_module("games.gym.entry").entry_for
            gym_entry: GameEntry = entry_for(name[len(GYM_PREFIX) :])
        except UnsupportedEnv as exc:
            raise UnknownGame(str(exc)) from None
        return gym_entry
    if name.startswith(PZ_PREFIX) and is_game_name(name):
        return _pz_entry(name[len(PZ_PREFIX) :])
    if name == EDITOR_GAME:
        raise UnknownGame(
            "the game in the Godot editor is not one lander ships: it is known only through "
            "the protocol (train or evaluate it with --game editor)"
        )
    if not is_game_name(name):
        raise UnknownGame(
            f"the bundled games are {', '.join(BUNDLED_GAMES)} (or {GYM_PREFIX}ENV_ID for a "
            f"Gymnasium environment, {PZ_PREFIX}MODULE for a PettingZoo game), not {name!r}"
        )
    entry: GameEntry = importlib.import_module(f"games.{name}.entry").ENTRY
    return entry


def gym_env_id(name: str) -> str:
    """The gymnasium id of the game ``name``'s in-process environment, registered
    (importing the game's gym module registers it)."""
    entry = game_entry(name)
    if entry.gym_id is not None:
        return entry.gym_id
    return str(importlib.import_module(entry.gym_module).ENV_ID)


def gym_env_factory(
    name: str, game_args: dict[str, str], action_repeat: int | None = None
) -> Callable[[], gymnasium.Env[Any, Any]]:
    """What makes one in-process environment of the bundled game ``name`` with these
    settings (a run's ``--in-process`` envs, ``lander serve``'s sessions)."""
    import gymnasium

    entry = game_entry(name)
    if entry.env_factory is not None:
        factory: Callable[[], gymnasium.Env[Any, Any]] = entry.env_factory(game_args, action_repeat)
        return factory
    env_id = gym_env_id(name)
    kwargs = entry.in_process_kwargs(game_args, action_repeat)
    return lambda: gymnasium.make(env_id, **kwargs)


def launch_settings(name: str) -> dict[str, Any]:
    """How the bridge starts the bundled game ``name`` (``LaunchConfig(**these, ...)``):
    ``python -m`` its module with this interpreter, forked from a server of its
    ``fork_main`` where it has one."""
    entry = game_entry(name)
    return {
        "command": [sys.executable, "-m", entry.module, *entry.launch_args],
        "fork_main": entry.fork_main,
    }
