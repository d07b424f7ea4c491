"""git's own failures at a commit or a push, each made one line that names the cause, the
file it is about, and the command that finishes the job once the user has mended it: a
stale ``index.lock``, a full disk under ``.git``, a detached HEAD, a merge or rebase in
progress, no user identity. git's last line alone (``remove the file manually to
continue.'``) names none of them."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import git

_LOCK = re.compile(r"Unable to create '([^']+\.lock)': File exists")
_NO_SPACE = ("No space left on device", "insufficient space", "Disk quota exceeded")
_NO_IDENTITY = (
    "Please tell me who you are",
    "Author identity unknown",
    "Committer identity unknown",
    "empty ident name",
    "unable to auto-detect email address",
    "no email was given",
    "no name was given",
)
_MERGING = ("partial commit during a merge", "You have not concluded your merge")


def git_dir(repo: git.Repo) -> Path:
    """The checkout's ``.git`` folder (a worktree's own)."""
    return Path(repo.git_dir)


def unfinished_operation(repo: git.Repo) -> str | None:
    """Why a commit of a run's paths would fail or land where no branch keeps it: a
    detached HEAD, a merge, rebase or cherry-pick in progress; None when there is none.

    :param repo: the checkout.
    """
    folder = git_dir(repo)
    if (folder / "MERGE_HEAD").exists():
        return _merge_in_progress(folder)
    if (folder / "rebase-merge").exists() or (folder / "rebase-apply").exists():
        return (
            f"a rebase is in progress in this checkout ({folder / 'rebase-merge'}): finish it "
            "(git rebase --continue) or abort it (git rebase --abort)"
        )
    if (folder / "CHERRY_PICK_HEAD").exists():
        return (
            f"a cherry-pick is in progress ({folder / 'CHERRY_PICK_HEAD'}): finish it "
            "(git cherry-pick --continue) or abort it (git cherry-pick --abort)"
        )
    if repo.head.is_detached:
        return (
            f"HEAD is detached ({folder / 'HEAD'} names a commit, no branch): a commit there "
            "is kept by no branch; check out the branch the runs go to (git switch main)"
        )
    return None


def _merge_in_progress(folder: Path) -> str:
    return (
        f"a merge is in progress in this checkout ({folder / 'MERGE_HEAD'}): finish it "
        "(git commit) or abort it (git merge --abort)"
    )


def _identity(folder: Path) -> str:
    return (
        f"git has no user identity for this checkout (none in {folder / 'config'} or "
        '~/.gitconfig): set one (git config user.name "NAME"; git config user.email EMAIL)'
    )


def _no_space(folder: Path) -> str:
    return f"no space left on the disk that holds {folder}: free some"


_CAUSES: list[tuple[Callable[[str], bool], Callable[[Path], str]]] = [
    (lambda text: any(sign in text for sign in _NO_SPACE), _no_space),
    (lambda text: any(sign in text for sign in _NO_IDENTITY), _identity),
    (lambda text: any(sign in text for sign in _MERGING), _merge_in_progress),
]


def commit_failure(repo: git.Repo, error: git.GitCommandError) -> str:
    """The cause of a failed ``git add`` or ``git commit`` in one clause, naming the file.

    :param repo: the checkout the commit was made in.
    :param error: what GitPython raised, git's output in it.
    """
    text = f"{error.stderr or ''}\n{error.stdout or ''}"
    folder = git_dir(repo)
    lock = _LOCK.search(text)
    if lock:
        return (
            f"{lock.group(1)} exists: another git is running in this checkout, or one was "
            f"killed and left it; if no git runs, remove it (rm {lock.group(1)})"
        )
    for matches, cause in _CAUSES:
        if matches(text):
            return cause(folder)
    return last_words(error)


def git_lines(error: git.GitCommandError) -> list[str]:
    """git's own output lines of a failure, cleaned of GitPython's quoting (``stderr:
    '...'``), blank ones dropped."""
    text = (error.stderr or error.stdout or str(error)).replace("stderr: ", "")
    lines = [line.strip().strip("'").strip() for line in text.splitlines()]
    return [line for line in lines if line]


def last_words(error: git.GitCommandError) -> str:
    """git's own message of a failure we do not know: its ``error:`` / ``fatal:`` lines
    joined, or its last line."""
    lines = git_lines(error)
    useful = [line for line in lines if line.startswith(("error", "fatal"))]
    return "; ".join(useful) if useful else (lines[-1] if lines else "git failed")
