"""Git operations of a run, through GitPython: pull before training, commit only
the run's own files, push without ever forcing, and tell what is not pushed.

A failed push never loses anything: the commit stays local, ``lander status``
shows it as not pushed, and ``lander push`` sends it later.
"""

from __future__ import annotations

import fnmatch
import math
import os
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import git

from cli.common.console import how
from cli.results.git_failures import commit_failure, git_lines, unfinished_operation
from game_bridge.errors import LanderError
from game_bridge.orphans import die_with_this_process
from training.config import ConfigError
from training.runs.run_paths import RunPaths

DEFAULT_NETWORK_TIMEOUT_S = 120.0
MAX_NETWORK_TIMEOUT_S = 86_400.0


def network_timeout_s() -> float:
    """Seconds after which a pull or push is killed: a remote that accepts the connection
    and never answers must not hold a run (and the trainer lock) forever.
    ``LANDER_GIT_TIMEOUT`` changes it; it cannot turn the limit off.

    :raises ConfigError: a value that is not a number of seconds from 1 to a day.
    """
    text = os.environ.get("LANDER_GIT_TIMEOUT")
    if text is None or not text.strip():
        return DEFAULT_NETWORK_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 1 <= value <= MAX_NETWORK_TIMEOUT_S:  # nan fails both comparisons
        raise ConfigError(
            f"LANDER_GIT_TIMEOUT must be seconds from 1 to {MAX_NETWORK_TIMEOUT_S:,.0f}, got {text!r}"
        )
    return value


PUSH_DEADLINE_S = 180.0
"""How long a push keeps retrying after rejections (another machine pushed first)."""
EXCLUDE_MARK = "# lander --no-git: "


class GitSyncError(LanderError):
    """A git step that stops the run flow (a pull conflict)."""


def open_repo(root: Path) -> git.Repo | None:
    """The checkout's repository, or None when it is not a git work tree.

    Git never prompts (no terminal in tmux or CI to answer it): a remote that wants
    credentials fails at once with git's own message.
    """
    try:
        repo = git.Repo(root, search_parent_directories=False)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    repo.git.update_environment(GIT_TERMINAL_PROMPT="0")
    return repo


def current_commit(root: Path) -> str | None:
    """The checkout's HEAD commit, or None outside a repository or before the first commit."""
    repo = open_repo(root)
    if repo is None:
        return None
    try:
        return repo.head.commit.hexsha
    except ValueError:
        return None


def _network_git(repo: git.Repo, *args: str) -> str:
    """Run a git command that talks to the remote: killed after :func:`network_timeout_s`,
    in a session of its own so that the terminal's Ctrl-C (what ``lander stop`` sends)
    reaches lander, which decides whether the push goes on, and killed by the kernel if
    lander dies first (a hung push never outlives the run that started it)."""
    return str(
        repo.git.execute(
            ["git", *args],
            kill_after_timeout=network_timeout_s(),
            start_new_session=True,
            preexec_fn=die_with_this_process(),
        )
    )


def _upstream(repo: git.Repo) -> git.RemoteReference | None:
    try:
        return repo.active_branch.tracking_branch()
    except TypeError:  # detached HEAD
        return None


def _first_line(error: git.GitCommandError) -> str:
    """git's first line that says what failed, with the server's own words where it gave
    some."""
    lines = git_lines(error)
    useful = [
        line
        for line in lines
        if line.startswith(("error", "fatal", "!", "CONFLICT", "hint: Updates"))
    ]
    first = (useful or lines or ["git failed"])[0]
    # The server's own words (a hook, a protected branch) say why it refused.
    server = [line[7:].strip() for line in lines if line.startswith("remote:") and line[7:].strip()]
    return first + (f" (the server says: {'; '.join(server[:2])[:200]})" if server else "")


def _why(error: git.GitCommandError, started: float) -> str:
    """Git's own first line, or that the remote did not answer in time (git was killed)."""
    limit = network_timeout_s()
    if time.monotonic() - started >= limit - 0.5:
        return f"the remote did not answer within {limit:g} s"
    return _first_line(error)


def pull(root: Path) -> str:
    """Pull with rebase when the branch tracks a remote; say what happened.

    Uncommitted edits of tracked files are stashed first and put back after. When
    they conflict with what the pull brought, nothing is left half-merged: the branch
    goes back to where it was, the edits are put back in place, and
    :class:`GitSyncError` names the files. A conflicting rebase is aborted the same
    way; an unreachable remote only gives a warning.
    """
    repo = open_repo(root)
    if repo is None:
        return "not a git repository: results stay in this folder"
    if _upstream(repo) is None:
        return "no upstream branch: nothing to pull"
    before = repo.head.commit.hexsha if repo.head.is_valid() else None
    stashed = before is not None and repo.is_dirty(untracked_files=False)
    if stashed:
        repo.git.stash("push", "-m", "lander: uncommitted edits, kept over a pull")
    started = time.monotonic()
    try:
        _network_git(repo, "pull", "--rebase")
    except git.GitCommandError as exc:
        git_dir = Path(repo.git_dir)
        conflict = (git_dir / "rebase-merge").exists() or (git_dir / "rebase-apply").exists()
        if conflict:
            repo.git.rebase("--abort")
        if stashed:
            repo.git.stash("pop", "--index")
        if conflict:
            raise GitSyncError(
                "git pull --rebase hit a conflict; nothing was changed. Resolve it by hand "
                "(git pull --rebase), then start the run again"
            ) from None
        # An unreachable remote must not keep a long run from starting: train on
        # the local state; the push at the end says whether the remote was reached.
        return f"could not pull ({_why(exc, started)}); training on the local state"
    if stashed:
        _put_edits_back(repo, before)
    return "pulled"


def _put_edits_back(repo: git.Repo, before: str | None) -> None:
    """Apply the stashed edits over the pulled commits; on a conflict, go back to
    ``before`` (where the edits apply cleanly) and raise :class:`GitSyncError`."""
    try:
        repo.git.stash("pop", "--index")
        return
    except git.GitCommandError:
        pass
    try:
        repo.git.stash("pop")  # without the index: a conflict only in staged state
        return
    except git.GitCommandError:
        conflicted = repo.git.diff("--name-only", "--diff-filter=U").split()
    # The stash is kept when its pop fails; the work tree holds conflict markers.
    repo.git.reset("--hard", before)
    repo.git.stash("pop", "--index")
    files = ", ".join(conflicted) or "your edited files"
    raise GitSyncError(
        f"the pull brings changes to {files} that conflict with your uncommitted edits; "
        "the checkout is as it was, your edits in place. Commit or discard them, then start again"
    )


def run_paths_to_stage(paths: RunPaths) -> list[str]:
    """The only paths a run's commit may touch: its checkpoints (with its evaluation
    records), logs and bots. Nothing shared by several runs, so commits of different
    runs on different machines never touch the same file."""
    candidates = [paths.checkpoints, paths.logs, paths.bot_json, paths.bot_onnx]
    for side in paths.other_sides():  # a game whose sides have their own models
        candidates += [paths.side_bot_json(side), paths.side_bot_onnx(side)]
    return [str(path.relative_to(paths.root)) for path in candidates]


def tracked(root: Path, pathspecs: list[str]) -> set[str] | None:
    """The files git tracks under ``pathspecs`` (relative paths), or None outside a repository."""
    repo = open_repo(root)
    if repo is None:
        return None
    return set(repo.git.ls_files("--", *pathspecs).splitlines()) if pathspecs else set()


def _exclude_file(repo: git.Repo) -> Path:
    return Path(repo.git_dir) / "info" / "exclude"


def _exclude_lines(name: str) -> list[str]:
    """Patterns for a run's files (``name`` may end in ``*``: every trial of a sweep)."""
    mark = f"{EXCLUDE_MARK}{name}"
    return [
        mark,
        f"/checkpoints/{name}/",
        f"/logs/{name}/",
        f"/bots/{name}.json",
        f"/bots/{name}.onnx",
    ]


def keep_out_of_git(root: Path, name: str) -> None:
    """Hide a ``--no-git`` run's files from git in this checkout only (``.git/info/exclude``,
    never committed): ``git status`` stays quiet, and ``git add -A`` or another run's
    commit cannot carry them. ``lander push RUN`` lifts it. ``name`` may end in ``*``."""
    repo = open_repo(root)
    if repo is None:
        return
    path = _exclude_file(repo)
    existing = path.read_text().splitlines() if path.exists() else []
    if f"{EXCLUDE_MARK}{name}" in existing:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([*existing, *_exclude_lines(name)]) + "\n")


def kept_out_names(root: Path) -> list[str]:
    """Every name :func:`keep_out_of_git` holds for (a run, or a pattern like a sweep's
    ``NAME-t*``); none outside a repository. Read once for many runs (``lander status``)."""
    repo = open_repo(root)
    return _kept_out_names_of(repo) if repo is not None else []


def _kept_out_names_of(repo: git.Repo) -> list[str]:
    path = _exclude_file(repo)
    lines = path.read_text().splitlines() if path.exists() else []
    return [line[len(EXCLUDE_MARK) :] for line in lines if line.startswith(EXCLUDE_MARK)]


def kept_out_of_git(root: Path, run: str, names: list[str] | None = None) -> bool:
    """True when :func:`keep_out_of_git` holds for ``run`` (by its name, or a pattern that
    matches it); ``names`` is :func:`kept_out_names` when the caller has read it."""
    names = kept_out_names(root) if names is None else names
    return any(fnmatch.fnmatchcase(run, name) for name in names)


def let_into_git(root: Path, name: str) -> bool:
    """Lift :func:`keep_out_of_git` for ``name``; True when it was kept out."""
    repo = open_repo(root)
    if repo is None:
        return False
    path = _exclude_file(repo)
    if not path.exists():
        return False
    lines = path.read_text().splitlines()
    block = _exclude_lines(name)
    if block[0] not in lines:
        return False
    start = lines.index(block[0])
    kept = lines[:start] + lines[start + len(block) :]
    path.write_text("\n".join(kept) + ("\n" if kept else ""))
    return True


def _existing_or_tracked(repo: git.Repo, paths: list[str]) -> list[str]:
    root = Path(repo.working_tree_dir or ".")
    tracked = set(repo.git.ls_files("--", *paths).splitlines()) if paths else set()
    return [
        p
        for p in paths
        if (root / p).exists() or any(t == p or t.startswith(p + "/") for t in tracked)
    ]


class CommitFailed(GitSyncError):
    """A commit git refused or could not make; the message names the cause and its file
    (:mod:`cli.results.git_failures`), and the paths are left as they were."""


def commit_paths(root: Path, paths: list[str], message: str) -> str | None:
    """Commit the current state of ``paths`` only (additions, changes and deletions).

    Nothing else the user has staged or changed is touched: the commit is made
    with an explicit pathspec, so other staged files stay staged. Nothing is committed
    on a detached HEAD or in the middle of a merge, rebase or cherry-pick.

    :return: the new commit's sha, or None when there was nothing to commit.
    :raises CommitFailed: one line that names the cause and the file.
    """
    repo = open_repo(root)
    if repo is None:
        return None
    present = _existing_or_tracked(repo, paths)
    if not present:
        return None
    unfinished = unfinished_operation(repo)
    if unfinished is not None:
        raise CommitFailed(unfinished)
    try:
        repo.git.add("-A", "--", *present)
        has_head = repo.head.is_valid()
        changed = repo.git.diff("--cached", "--name-only", "--", *present) if has_head else "yes"
        if not changed.strip():
            return None
        repo.git.commit("-m", message, "--", *present)
    except git.GitCommandError as exc:
        raise CommitFailed(commit_failure(repo, exc)) from None
    return repo.head.commit.hexsha


@dataclass(frozen=True)
class PushResult:
    """What a push did.

    :param pushed: True when the remote now has the commits.
    :param message: one line for the user.
    """

    pushed: bool
    message: str


REMOTE_MOVED = (
    "fetch first",
    "non-fast-forward",
    "but expected",
    "cannot lock ref",
    "failed to update ref",
    "incorrect old value",
)
"""What git says when the remote's branch moved under a push: pulling and pushing again fixes it."""


def push(root: Path, deadline_s: float = PUSH_DEADLINE_S, finish: str | None = None) -> PushResult:
    """Push the current branch. Rejected because another machine pushed first: pull with
    rebase and try again, after a short random pause, until ``deadline_s``. Runs write
    disjoint files, so the rebase does not conflict. Never forces; a failure keeps the
    commits local, and ``lander status`` shows them as not pushed.

    :param finish: the command that pushes them later (``lander push RUN``), for the message.
    """
    later = finish or how("push")
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
    target = upstream.remote_head if upstream else branch.name
    arguments = [remote, f"HEAD:{target}"]
    if upstream is None:
        arguments.insert(0, "--set-upstream")
    give_up = time.monotonic() + deadline_s
    attempts = 0
    while True:
        attempts += 1
        started = time.monotonic()
        try:
            _network_git(repo, "push", *arguments)
            retried = f" (attempt {attempts})" if attempts > 1 else ""
            return PushResult(True, f"pushed to {remote}/{target}{retried}")
        except git.GitCommandError as exc:
            reason = _why(exc, started)
            # Rejected because another machine pushed first (git says "fetch first" or
            # "non-fast-forward"; a push racing ours at the same moment leaves the remote's
            # ref "at X but expected Y"): pull and retry. A hook or a protected branch that
            # refuses ("[remote rejected] ... hook declined") refuses again: say so at once.
            rejected = any(sign in str(exc) for sign in REMOTE_MOVED)
            if not rejected or time.monotonic() > give_up:
                return PushResult(
                    False,
                    f"push failed ({reason}); the commit stays local: run `{later}` later",
                )
        time.sleep(random.uniform(0.1, 1.0) * min(attempts, 5))
        try:
            pull(root)
        except GitSyncError as pull_error:
            return PushResult(
                False,
                f"push rejected and pull failed ({pull_error}); the commit stays local: "
                f"run `{later}` once the pull is mended",
            )


def _runs_of(names: Iterable[str]) -> set[str]:
    """The runs whose files (:func:`run_paths_to_stage`) these checkout paths are."""
    runs = set()
    for name in names:
        parts = name.split("/")
        if parts[0] in ("checkpoints", "logs") and len(parts) >= 3:
            runs.add(parts[1])
        elif parts[0] == "bots" and len(parts) == 2 and parts[1].endswith((".json", ".onnx")):
            runs.add(parts[1].rsplit(".", 1)[0])
    return runs


class PushStates:
    """Whether each run is pushed, for ``lander status``: git is asked three questions for
    the whole checkout (what it tracks, what is changed, what the remote lacks), not three
    per run, so the table of 500 runs costs what one run does.

    :param root: the checkout.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.repo = open_repo(root)
        self.valid = self.repo is not None and self.repo.head.is_valid()
        self.tracked: set[str] = set()
        self.changed: set[str] = set()
        self.unpushed: set[str] = set()
        self.upstream: git.RemoteReference | None = None
        self.kept_out = _kept_out_names_of(self.repo) if self.repo is not None else []
        """:func:`kept_out_names`, read with the rest."""
        if self.repo is None or not self.valid:
            return
        folders = ["checkpoints", "logs", "bots"]
        self.tracked = _runs_of(self.repo.git.ls_files("-z", "--", *folders).split("\0"))
        status = self.repo.git.status("--porcelain", "-z", "--untracked-files=all", "--", *folders)
        self.changed = _runs_of(entry[3:] for entry in status.split("\0"))
        self.upstream = _upstream(self.repo)
        if self.upstream is not None:
            log = self.repo.git.log(
                "--format=", "--name-only", "-z", f"{self.upstream.name}..HEAD", "--", *folders
            )
            self.unpushed = _runs_of(name.strip("\n") for name in log.split("\0"))

    def __call__(self, run: str, in_git: bool = True) -> str:
        """``pushed``, ``not pushed``, ``uncommitted``, ``local only`` (no remote), ``no git``,
        or ``kept out (--no-git)`` for a run trained with ``--no-git`` (``in_git`` False)."""
        if not self.valid:
            return "no git"
        if not in_git:
            return "kept out (--no-git)"
        if run not in self.tracked or run in self.changed:
            return "uncommitted"
        if self.upstream is None:
            return "local only"
        return "not pushed" if run in self.unpushed else "pushed"
