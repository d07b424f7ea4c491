"""git's own failures at a run's end and at ``lander push``, made for real in a checkout with
a bare remote: a stale ``index.lock``, a detached HEAD, a merge in progress, no user identity,
a push the remote refuses, and a full disk under ``.git`` (a tmpfs in a private mount
namespace). Each is one line naming the cause, its file and the command that finishes the
job; the run's files stay whole, ``status`` shows the run as not pushed, and once the fault
is mended ``lander push RUN`` delivers it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import (
    GIT_IDENTITY,
    LANDER,
    SMALL,
    git,
    lander,
    private_mounts,
    train_small,
)


def _line_with(output: str, needle: str) -> str:
    """The one line of ``output`` that holds ``needle`` (the failure's line)."""
    lines = [line for line in output.splitlines() if needle in line]
    assert len(lines) == 1, output[-3000:]
    return lines[0]


def _status_of(work: Path, run: str) -> str:
    done = lander(work, "status", env={"COLUMNS": "250"})
    assert done.returncode == 0, done.stderr
    return _line_with(done.stdout, f"│ {run} ")


def _pushed(work: Path, remote: Path, run: str) -> None:
    """``lander push RUN`` delivers the run once the fault is mended."""
    done = lander(work, "push", run)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pushed to origin/main" in done.stdout
    assert f"checkpoints/{run}/final.zip" in git(remote, "ls-tree", "-r", "--name-only", "main")


def test_a_stale_index_lock_at_a_runs_end_is_one_line_and_push_finishes_the_job(
    checkout: tuple[Path, Path], port_block: Callable[[int], int]
) -> None:
    """A git killed earlier left ``.git/index.lock``: the run trains, exports and keeps its
    files; its end says which file blocks git and ``lander push RUN``, without git's stray
    quote; status shows it uncommitted; with the lock gone, push delivers it."""
    work, remote = checkout
    lock = work / ".git" / "index.lock"
    lock.write_text("")
    done = lander(
        work, "train", "locked", "--timesteps", "1024", "--port", str(port_block(2)), *SMALL,
        timeout=300,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    line = _line_with(output, "index.lock")
    assert f"{lock} exists" in line and "lander push locked" in line, line
    assert "manually to continue.'" not in output and "Traceback" not in output
    assert lock.exists(), "the user's lock file is theirs to remove"
    for path in ("checkpoints/locked/final.zip", "bots/locked.json", "bots/locked.onnx"):
        assert (work / path).is_file(), path
    assert "uncommitted" in _status_of(work, "locked")
    lock.unlink()
    _pushed(work, remote, "locked")


def test_git_faults_at_push_name_the_cause_and_the_file_and_leave_the_run_whole(
    checkout: tuple[Path, Path], tmp_path: Path
) -> None:
    """A detached HEAD, a merge in progress, no user identity and a push the remote refuses:
    each ``lander push RUN`` fails in one line with the cause, the file and the command;
    the run's files are untouched; after each is mended the next fault is made, and at the
    end the run is pushed."""
    work, remote = checkout
    train_small(work, "faulty")
    final = (work / "checkpoints" / "faulty" / "final.zip").read_bytes()

    def failed_push(*needles: str, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            [str(LANDER), "push", "faulty"], capture_output=True, text=True, timeout=120,
            env=env or {**os.environ, **GIT_IDENTITY, "LANDER_HOME": str(work)},
            stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip
        output = done.stdout + done.stderr
        assert done.returncode == 1, output
        assert "Traceback" not in output
        line = _line_with(output, "error:")
        for needle in (*needles, "lander push faulty"):
            assert needle in line, (needle, line)
        assert (work / "checkpoints" / "faulty" / "final.zip").read_bytes() == final
        return line

    git(work, "checkout", "-q", "--detach")
    failed_push("HEAD is detached", str(work / ".git" / "HEAD"))
    assert "uncommitted" in _status_of(work, "faulty")
    git(work, "checkout", "-q", "main")

    git(work, "checkout", "-q", "-b", "other")
    (work / "notes.txt").write_text("changed on another branch\n")
    git(work, "commit", "-q", "-am", "other")
    git(work, "checkout", "-q", "main")
    (work / "notes.txt").write_text("changed here\n")
    git(work, "commit", "-q", "-am", "here")
    with pytest.raises(subprocess.CalledProcessError):
        git(work, "merge", "-q", "other")  # a conflict: the merge waits for the user
    failed_push("a merge is in progress", str(work / ".git" / "MERGE_HEAD"))
    git(work, "merge", "--abort")

    home = tmp_path / "empty-home"
    home.mkdir()
    git(work, "config", "user.useConfigOnly", "true")  # no name guessed from the machine
    bare_env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")} | {
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "LANDER_HOME": str(work),
    }
    failed_push("no user identity", str(work / ".git" / "config"), env=bare_env)
    assert "uncommitted" in _status_of(work, "faulty")

    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'refused by the server' >&2\nexit 1\n")
    hook.chmod(0o755)
    line = failed_push("push failed", "refused by the server")
    assert "stays local" in line
    assert "not pushed" in _status_of(work, "faulty")
    hook.unlink()
    _pushed(work, remote, "faulty")


FULL_GIT_DIR = """
work="$1"; copy="$2"; shift 2
cp -a "$work/.git" "$copy"
mount -t tmpfs -o size=1m tmpfs "$work/.git" || exit 97
cp -a "$copy/." "$work/.git/"
free=$(df -k --output=avail "$work/.git" | tail -n 1)
dd if=/dev/zero of="$work/.git/filler" bs=1k count=$((free - 32)) 2>/dev/null
exec "$@"
"""
"""Runs a command with the checkout's ``.git`` on a 1 MB tmpfs with 32 KB left (room for
git's small files, none for a checkpoint), in a private mount namespace: the mount ends with
the command, the real ``.git`` untouched."""


def test_a_full_disk_under_git_is_one_line_and_the_run_stays_whole(
    checkout: tuple[Path, Path], tmp_path: Path
) -> None:
    """``.git`` on a disk with no space left: the commit fails in one line that says so and
    names the folder; the run's files are whole; with space again, push delivers it."""
    if not private_mounts():
        pytest.skip("this machine allows no private tmpfs mount (unshare -rm)")
    work, remote = checkout
    train_small(work, "full")
    final = (work / "checkpoints" / "full" / "final.zip").read_bytes()
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", FULL_GIT_DIR, "sh", str(work), str(tmp_path / "copy"),
         str(LANDER), "push", "full"],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
        env={**os.environ, **GIT_IDENTITY, "LANDER_HOME": str(work)},
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    line = _line_with(output, "error:")
    assert f"no space left on the disk that holds {work / '.git'}" in line, line
    assert "lander push full" in line and "Traceback" not in output
    assert (work / "checkpoints" / "full" / "final.zip").read_bytes() == final
    # The real .git never saw the failed attempt: the run is as --no-git left it.
    assert "kept out (--no-git)" in _status_of(work, "full")
    _pushed(work, remote, "full")
