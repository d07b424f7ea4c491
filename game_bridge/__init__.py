"""The trainer side of the Godot RL Agents wire protocol: carriers, launcher, VecEnv.

Nothing here knows about PPO, tmux or git, nor any game: a game is a command to launch
(and, for a game written in Python, a module to fork). The package itself imports no
gymnasium, so a game process starts without it.
"""

from __future__ import annotations

TRANSPORTS = ("tcp", "stdio", "openenv")
"""How the trainer and a game exchange messages: length-prefixed frames over TCP, or JSON
lines on the game's standard input and output."""
