"""Results and git: ``push`` (commands.py), and what every command that publishes uses: the
checkout's git (commit, pull, push, kept-out runs), publishing, committed records, Git LFS."""
