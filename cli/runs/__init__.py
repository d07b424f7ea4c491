"""Runs: ``train``, ``sweep``, ``next``, ``curriculum``, ``tune`` (training_commands.py) and
``start``, ``resume``, ``stop``, ``status``, ``prune``, ``clean``, ``attach``
(session_commands.py), over the flows that string training, git and tmux together."""
