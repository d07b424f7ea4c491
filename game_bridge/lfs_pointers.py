"""Files a clone holds as Git LFS pointers instead of their contents.

A checkout whose repository keeps checkpoints and bots in Git LFS (``lander setup
--lfs``) and a clone without git-lfs get small text pointers where those files
should be. Whoever reads such a file says so in one line, with the fix, instead of
calling it corrupt.
"""

from __future__ import annotations

from pathlib import Path

LFS_POINTER_START = b"version https://git-lfs.github.com/spec/v1"
"""The first line of every Git LFS pointer file (git-lfs's spec)."""
LFS_FIX = "install Git LFS in this clone (./lander setup --lfs), then run git lfs pull"


def is_lfs_pointer(path: Path) -> bool:
    """True when ``path`` is a Git LFS pointer (a file under 1 KB that starts as one)."""
    try:
        if not path.is_file() or path.stat().st_size > 1024:  # a FIFO is never opened
            return False
        with path.open("rb") as handle:
            return handle.read(len(LFS_POINTER_START)) == LFS_POINTER_START
    except OSError:
        return False


def lfs_pointer_message(path: Path, what: str) -> str:
    """``bot 'bots/r.json' is a Git LFS pointer, not the file: <fix>``."""
    return f"{what} {str(path)!r} is a Git LFS pointer, not the file: {LFS_FIX}"
