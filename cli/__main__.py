"""``python -m cli`` runs the lander CLI (how tmux windows start a trainer)."""

from cli.app import main

main()
