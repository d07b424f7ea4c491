"""This machine: ``setup`` (commands.py): the virtual environment, torch, the game binary, the
smoke test; and the tmux server that keeps runs alive past an SSH session."""
