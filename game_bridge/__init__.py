"""The trainer side of the Godot RL Agents wire protocol, and the bundled game.

Importing this package registers the bundled game's physics with gymnasium as
``Lander-v0``. Nothing here knows about PPO, tmux or git.
"""

from __future__ import annotations

import gymnasium

LANDER_ENV_ID = "Lander-v0"

if LANDER_ENV_ID not in gymnasium.registry:
    gymnasium.register(id=LANDER_ENV_ID, entry_point="game_bridge.lander_game.gym_env:LanderEnv")
