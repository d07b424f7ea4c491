"""Commit some paths and push them, saying each step on one line.

The one way lander publishes: a run's files at its end or mid-run, an evaluation
record, a run named to ``lander push``. A failed commit or push never raises: the
files stay where they are and ``lander status`` shows them as not pushed.
"""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape

from cli.common.console import console, how
from cli.results.git_sync import (
    CommitFailed,
    PushResult,
    commit_paths,
    keep_out_of_git,
    kept_out_of_git,
    push,
)
from training.runs.run_paths import RunPaths
from training.runs.run_record import RunRecord


def in_git(
    paths: RunPaths, record: RunRecord | None = None, kept_out: list[str] | None = None
) -> bool:
    """False for a run whose last session was trained with ``--no-git``: what this
    checkout's ``.git/info/exclude`` says, the one place that is said. A record from
    before then that says ``git: false`` is moved there on the way.

    :param record: the run's record, when the caller has read it.
    :param kept_out: :func:`cli.results.git_sync.kept_out_names`, when the caller has read it.
    """
    if kept_out_of_git(paths.root, paths.run, kept_out):
        return False
    try:
        legacy = (record or RunRecord.load(paths.run_json)).extra.legacy_git
    except ValueError:
        return True
    if legacy is False:
        keep_out_of_git(paths.root, paths.run)
        return False
    return True


def publish_files(
    root: Path,
    paths: list[str],
    message: str,
    warn_on_failure: bool = True,
    finish: str | None = None,
) -> PushResult:
    """Commit ``paths`` (nothing else) and push; report both steps (a failure as a yellow
    warning, or not at all when the caller makes it its own error).

    :param finish: the command that finishes the job once a failure is mended (``lander
        push RUN`` for a run's files), named in the failure's line.
    """
    later = finish or how("push")
    try:
        sha = commit_paths(root, paths, message)
    except CommitFailed as exc:
        result = PushResult(
            False, f"not committed: {exc}; the files stay as they are: then run `{later}`"
        )
        if warn_on_failure:
            console.print(f"[yellow]git: {escape(result.message)}[/]", soft_wrap=True)
        return result
    console.print(f"git: committed {sha[:10]} ({message})" if sha else "git: nothing new to commit")
    result = push(root, finish=later)
    if result.pushed:
        console.print(f"[green]git: {escape(result.message)}[/]")
    elif warn_on_failure:
        console.print(f"[yellow]git: {escape(result.message)}[/]", soft_wrap=True)
    return result
