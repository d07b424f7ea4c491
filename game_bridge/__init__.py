"""The trainer side of the Godot RL Agents wire protocol, and the bundled games.

Nothing here knows about PPO, tmux or git. The bundled game's in-process
gymnasium environment registers itself as ``Lander-v0`` when
:mod:`game_bridge.lander_game.gym_env` is imported; the package itself imports
no gymnasium, so a game process starts without it.
"""

from __future__ import annotations

LANDER_ENV_ID = "Lander-v0"
STROKE_ENV_ID = "Stroke-v0"

BUNDLED_GAMES = ("lander", "stroke")
"""The games lander ships, each the package ``game_bridge.<name>_game``."""
BUNDLED_GAME_ARGS: dict[str, dict[str, tuple[str, ...] | None]] = {
    "lander": {
        "action_type": ("continuous", "discrete"),
        "difficulty": ("0", "1", "2"),
        "agents": None,
    },
    "stroke": {"reward_mode": ("step", "delayed"), "agents": None},
}
"""The ``--game-arg`` keys each bundled game knows, with their values (None: a whole
number of at least 1). A bundled game refuses any other; a ``--game-bin`` game gets every
argument it is given, as the plugin's games ignore what they do not know."""
TRANSPORTS = ("tcp", "stdio")
"""How the trainer and a game exchange messages: length-prefixed frames over TCP, or JSON
lines on the game's standard input and output."""


def own_transport(game: str, game_bin: str | None) -> str:
    """The transport a game speaks unless told otherwise: a ``--game-bin`` and the lander
    TCP (as Godot games do), the stroke game stdio."""
    return "stdio" if game_bin is None and game == "stroke" else "tcp"
