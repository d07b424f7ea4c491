"""Git operations of a run, through GitPython: the commit a run trains on, and
later pull, commit and push of its results."""

from __future__ import annotations

from pathlib import Path

import git


def current_commit(root: Path) -> str | None:
    """The checkout's HEAD commit, or None outside a repository or before the first commit."""
    try:
        return git.Repo(root, search_parent_directories=False).head.commit.hexsha
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return None
