"""The trainer side of the Godot RL Agents wire protocol, and the bundled game.

Nothing here knows about PPO, tmux or git. The bundled game's in-process
gymnasium environment registers itself as ``Lander-v0`` when
:mod:`game_bridge.lander_game.gym_env` is imported; the package itself imports
no gymnasium, so a game process starts without it.
"""

from __future__ import annotations

LANDER_ENV_ID = "Lander-v0"
STROKE_ENV_ID = "Stroke-v0"
