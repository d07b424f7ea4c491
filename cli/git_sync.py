"""Git operations of a run, through GitPython: pull before training, commit only
the run's own files, push without ever forcing, and tell what is not pushed.

A failed push never loses anything: the commit stays local, ``lander status``
shows it as not pushed, and ``lander push`` sends it later.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import git

from training.eval_history import CHAMPION_BOT, HISTORY_NAME
from training.run_paths import RunPaths


class GitSyncError(Exception):
    """A git step that stops the run flow (a pull conflict)."""


def open_repo(root: Path) -> git.Repo | None:
    """The checkout's repository, or None when it is not a git work tree."""
    try:
        return git.Repo(root, search_parent_directories=False)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None


def current_commit(root: Path) -> str | None:
    """The checkout's HEAD commit, or None outside a repository or before the first commit."""
    repo = open_repo(root)
    if repo is None:
        return None
    try:
        return repo.head.commit.hexsha
    except ValueError:
        return None


def _upstream(repo: git.Repo) -> git.RemoteReference | None:
    try:
        return repo.active_branch.tracking_branch()
    except TypeError:  # detached HEAD
        return None


def _first_line(error: git.GitCommandError) -> str:
    text = (
        (error.stderr or error.stdout or str(error)).strip().replace("stderr: ", "").strip("' \n")
    )
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    useful = [
        line
        for line in lines
        if line.startswith(("error", "fatal", "!", "CONFLICT", "hint: Updates"))
    ]
    return (useful or lines or ["git failed"])[0]


def pull(root: Path) -> str:
    """Pull with rebase when the branch tracks a remote; say what happened.

    Local changes are stashed and put back (``--autostash``). A conflict aborts the
    rebase, so the checkout is as it was, and raises :class:`GitSyncError`; an
    unreachable remote only gives a warning.
    """
    repo = open_repo(root)
    if repo is None:
        return "not a git repository: results stay in this folder"
    if _upstream(repo) is None:
        return "no upstream branch: nothing to pull"
    try:
        repo.git.pull("--rebase", "--autostash")
    except git.GitCommandError as exc:
        if (Path(repo.git_dir) / "rebase-merge").exists() or (
            Path(repo.git_dir) / "rebase-apply"
        ).exists():
            repo.git.rebase("--abort")
            raise GitSyncError(
                "git pull --rebase hit a conflict; nothing was changed. Resolve it by hand "
                "(git pull --rebase), then start the run again"
            ) from None
        # An unreachable remote must not keep a long run from starting: train on
        # the local state; the push at the end says whether the remote was reached.
        return f"could not pull ({_first_line(exc)}); training on the local state"
    return "pulled"


def run_paths_to_stage(root: Path, run: str) -> list[str]:
    """The only paths a run's commit may touch: its checkpoints, logs and bots,
    the champion bot and the evaluation history."""
    paths = RunPaths(root, run)
    candidates = [
        paths.checkpoints,
        paths.logs,
        paths.bot_json,
        paths.bot_onnx,
        root / "bots" / CHAMPION_BOT,
        root / "logs" / HISTORY_NAME,
    ]
    return [str(path.relative_to(root)) for path in candidates]


def _existing_or_tracked(repo: git.Repo, paths: list[str]) -> list[str]:
    root = Path(repo.working_tree_dir or ".")
    tracked = set(repo.git.ls_files("--", *paths).splitlines()) if paths else set()
    return [
        p
        for p in paths
        if (root / p).exists() or any(t == p or t.startswith(p + "/") for t in tracked)
    ]


def commit_paths(root: Path, paths: list[str], message: str) -> str | None:
    """Commit the current state of ``paths`` only (additions, changes and deletions).

    Nothing else the user has staged or changed is touched: the commit is made
    with an explicit pathspec, so other staged files stay staged.

    :return: the new commit's sha, or None when there was nothing to commit.
    """
    repo = open_repo(root)
    if repo is None:
        return None
    present = _existing_or_tracked(repo, paths)
    if not present:
        return None
    repo.git.add("-A", "--", *present)
    has_head = repo.head.is_valid()
    changed = repo.git.diff("--cached", "--name-only", "--", *present) if has_head else "yes"
    if not changed.strip():
        return None
    repo.git.commit("-m", message, "--", *present)
    return repo.head.commit.hexsha


def commit_run(root: Path, run: str, message: str) -> str | None:
    """Commit a run's files (see :func:`run_paths_to_stage`)."""
    return commit_paths(root, run_paths_to_stage(root, run), message)


@dataclass(frozen=True)
class PushResult:
    """What a push did.

    :param pushed: True when the remote now has the commits.
    :param message: one line for the user.
    """

    pushed: bool
    message: str


def push(root: Path) -> PushResult:
    """Push the current branch; on a rejection (the remote moved) pull with rebase and
    try once more. Never forces. A failure keeps the commits local."""
    repo = open_repo(root)
    if repo is None:
        return PushResult(False, "not a git repository")
    try:
        branch = repo.active_branch
    except TypeError:
        return PushResult(False, "detached HEAD: not pushing")
    if not repo.remotes:
        return PushResult(False, "no git remote: the commit stays local")
    upstream = _upstream(repo)
    remote = upstream.remote_name if upstream is not None else repo.remotes[0].name
    arguments = [remote, f"HEAD:{upstream.remote_head if upstream else branch.name}"]
    if upstream is None:
        arguments.insert(0, "--set-upstream")
    for attempt in (1, 2):
        try:
            repo.git.push(*arguments)
            return PushResult(True, f"pushed to {remote}/{arguments[-1].split(':', 1)[1]}")
        except git.GitCommandError as exc:
            reason = _first_line(exc)
            rejected = (
                "rejected" in str(exc)
                or "fetch first" in str(exc)
                or "non-fast-forward" in str(exc)
            )
            if attempt == 1 and rejected:
                try:
                    pull(root)
                    continue
                except GitSyncError as pull_error:
                    return PushResult(
                        False,
                        f"push rejected and pull failed ({pull_error}); the commit stays local",
                    )
            return PushResult(
                False, f"push failed ({reason}); the commit stays local: run `lander push` later"
            )
    return PushResult(False, "push failed; the commit stays local")


def run_push_state(root: Path, run: str) -> str:
    """``pushed``, ``not pushed``, ``uncommitted``, ``local only`` (no remote) or ``no git``."""
    repo = open_repo(root)
    if repo is None or not repo.head.is_valid():
        return "no git"
    paths = _existing_or_tracked(repo, run_paths_to_stage(root, run)[:4])
    if not paths:
        return "uncommitted"
    if repo.git.status("--porcelain", "--", *paths).strip():
        return "uncommitted"
    last = repo.git.log("-1", "--format=%H", "--", *paths).strip()
    if not last:
        return "uncommitted"
    upstream = _upstream(repo)
    if upstream is None:
        return "local only"
    try:
        repo.git.merge_base("--is-ancestor", last, upstream.name)
    except git.GitCommandError:
        return "not pushed"
    return "pushed"
