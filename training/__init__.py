"""PPO training on game instances: configuration, checkpoints, resume, export and
evaluation. Knows nothing of tmux or git; depends only on ``game_bridge``."""
