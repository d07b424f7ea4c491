"""Git LFS for the files that make a repository heavy: checkpoints and bots.

Every run commits its checkpoints; in plain git every rotated checkpoint stays in the
history, and every fresh clone downloads all of them. With ``lander setup --lfs`` the
repository's ``.gitattributes`` sends those files to Git LFS: history holds small
pointers, and a clone downloads only the files of the commit it checks out. A clone
whose repository uses LFS gets it set up by a plain ``lander setup`` too.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from cli.results.git_sync import open_repo
from game_bridge.errors import LanderError
from game_bridge.file_input import read_bounded

ATTRIBUTES = ".gitattributes"
LFS_PATTERNS = (
    "checkpoints/**/*.zip",
    "checkpoints/**/*.pkl",
    "bots/*.json",
    "bots/*.onnx",
)
"""What goes to LFS: model zips (rotating, final, snapshots), their normalisation
statistics, and exported bots. Records, logs and run.json stay plain text in git."""
LFS_RULE = "filter=lfs diff=lfs merge=lfs -text"


class LfsError(LanderError):
    """git-lfs is missing or refused a command (the message says which)."""


def attribute_lines() -> list[str]:
    """The ``.gitattributes`` lines of :data:`LFS_PATTERNS`."""
    return [f"{pattern} {LFS_RULE}" for pattern in LFS_PATTERNS]


MAX_ATTRIBUTES_BYTES = 2**20
"""A ``.gitattributes`` larger than this is not read (lander's lines are a few)."""


def uses_lfs(root: Path) -> bool:
    """True when the checkout's ``.gitattributes`` sends lander's files to LFS."""
    try:
        text = read_bounded(root / ATTRIBUTES, MAX_ATTRIBUTES_BYTES).decode(errors="replace")
    except OSError:  # none, or not a regular file (a link to /dev/zero from a clone)
        return False
    return any(line.strip() in text.splitlines() for line in attribute_lines())


def write_attributes(root: Path) -> bool:
    """Add the missing LFS lines to ``.gitattributes`` (keeping the user's own); return
    True when the file changed."""
    path = root / ATTRIBUTES
    existing = read_bounded(path, MAX_ATTRIBUTES_BYTES).decode() if path.exists() else ""
    lines = existing.splitlines()
    missing = [line for line in attribute_lines() if line not in lines]
    if not missing:
        return False
    head = existing if not existing or existing.endswith("\n") else existing + "\n"
    path.write_text(
        head + "# lander: checkpoints and bots in Git LFS\n" + "\n".join(missing) + "\n"
    )
    return True


def _lfs(root: Path, *args: str, timeout: float = 600) -> str:
    try:
        done = subprocess.run(
            ["git", "lfs", *args], cwd=root, capture_output=True, text=True,
            timeout=timeout, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        raise LfsError(f"git lfs {args[0]} failed: {exc}") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise LfsError(f"git lfs {args[0]} failed: {tail[0]}")
    return done.stdout


def enable_lfs(root: Path) -> str:
    """Install git-lfs's filters and hooks in this clone only (``git lfs install
    --local``) and fetch the LFS files the checkout holds as pointers; return what was
    done, in one line.

    :raises LfsError: not a git checkout, git-lfs missing, or a git-lfs command failed.
    """
    if open_repo(root) is None:
        raise LfsError(f"{root} is not a git checkout")
    if shutil.which("git-lfs") is None:
        raise LfsError("git-lfs is missing: sudo apt-get install git-lfs")
    _lfs(root, "install", "--local")
    _lfs(root, "pull")
    version = _lfs(root, "version").strip().split()[0]
    return f"{version}: this clone keeps checkpoints and bots in Git LFS"
