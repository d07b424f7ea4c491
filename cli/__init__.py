"""The lander command line: the Typer app and the operations it drives (setup,
tmux sessions, git, TensorBoard). Depends on ``training`` and ``game_bridge``."""
