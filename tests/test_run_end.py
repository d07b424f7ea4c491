"""The end of a run (export, evaluation, commit, push) is done in full or said to be
skipped, never cut short in silence: a Ctrl-C once training has ended lets the end
finish, a second one skips the rest in one line that says how to finish it, and a
hung push dies with lander instead of staying behind.

Real parts: a trainer with its games, a git remote whose push hangs (git's ``ext::``
transport runs a script that sleeps when asked to receive a push).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import background_trainer, git, wait_until


def _hanging_push_remote(work: Path, remote: Path) -> Path:
    """Point ``origin`` at ``remote`` through a helper that serves fetches and hangs pushes."""
    helper = work.parent / "hang-push.sh"
    helper.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = git-receive-pack ]; then sleep 599.25; exit 1; fi\n'
        f'exec "$1" {remote}\n'
    )
    helper.chmod(0o755)
    git(work, "config", "protocol.ext.allow", "always")
    git(work, "remote", "set-url", "origin", f"ext::{helper} %S")
    return helper


def _pids_running(*markers: str) -> list[int]:
    """Processes whose command line holds every marker."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes()
            if all(marker.encode() in text for marker in markers):
                pids.append(int(cmdline.parent.name))
        except OSError:
            continue
    return [pid for pid in pids if pid != os.getpid()]


class _Output:
    """A trainer's merged output, read as it comes."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.text = ""
        assert process.stdout is not None
        self._thread = threading.Thread(target=self._read, args=(process.stdout,), daemon=True)
        self._thread.start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.text += line


def _push_hanging(
    work: Path, remote: Path, run: str, timeout_s: str
) -> tuple[subprocess.Popen[str], _Output]:
    """A trainer of ``run`` whose end's push hangs, returned once the push has started."""
    helper = _hanging_push_remote(work, remote)
    process = background_trainer(work, run, "--timesteps", "1024", LANDER_GIT_TIMEOUT=timeout_s)
    output = _Output(process)
    wait_until(lambda: _pids_running(str(helper), "git-receive-pack") or process.poll() is not None,
               240, "the push to start")  # fmt: skip
    assert process.poll() is None, output.text
    return process, output


def test_one_ctrl_c_after_training_lets_the_end_finish(checkout: tuple[Path, Path]) -> None:
    """What ``lander stop`` sends, landing while the push runs: the push is not cut, the
    run's end completes (here the hung push gives up at its deadline) and exits 0."""
    work, remote = checkout
    process, output = _push_hanging(work, remote, "once", "20")
    try:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    wait_until(lambda: "git:" in output.text.split("finishing")[-1], 10, "the last lines")
    assert process.returncode == 0, output.text
    assert "training has ended; finishing the run's commit and push" in output.text
    assert "push failed (the remote did not answer within 20 s)" in output.text, output.text
    assert (work / "bots" / "once.json").is_file()
    assert "once:" in git(work, "log", "-1", "--format=%s"), "the commit is kept"


def test_a_second_ctrl_c_skips_the_end_says_how_to_finish_and_leaves_no_push_behind(
    checkout: tuple[Path, Path],
) -> None:
    work, remote = checkout
    process, output = _push_hanging(work, remote, "twice", "300")
    helper = work.parent / "hang-push.sh"
    try:
        process.send_signal(signal.SIGINT)
        wait_until(lambda: "finishing the run's" in output.text, 30, "the first Ctrl-C's line")
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    wait_until(lambda: "Finish with" in output.text, 10, "the skipped line")
    assert process.returncode == 130, output.text
    assert "skipped the run's commit and push" in output.text
    assert "lander push twice" in output.text and "Traceback" not in output.text
    gone = lambda: not _pids_running(str(helper)) and not _pids_running("599.25")  # noqa: E731
    wait_until(gone, 10, "the hung push to be gone")
    assert (work / "bots" / "twice.json").is_file(), "the export had finished"


def test_stop_fails_when_the_run_ended_without_its_bot(
    checkout: tuple[Path, Path], tmux_socket: str
) -> None:
    """Finding 7: ``stop`` printed ✗ lines and exited 0; now a missing result is an error."""
    from tests.conftest import lander, start_small

    work, _ = checkout
    start_small(work, "nobot", tmux_socket, "--timesteps", "10000000")
    log = work / "logs" / "nobot" / "train.log"
    wait_until(lambda: log.exists() and "steps=" in log.read_text(), 180, "nobot to train")
    shutil.rmtree(work / "bots")
    (work / "bots").write_text("a file where the bots folder was: no bot can be written\n")
    stopped = lander(work, "stop", "nobot", "--timeout", "180", socket=tmux_socket)
    assert stopped.returncode == 1, stopped.stdout + stopped.stderr
    assert "✓ final checkpoint" in stopped.stdout and "✗ bot bots/nobot.json" in stopped.stdout
    assert "stopped without all of its results" in stopped.stderr


@pytest.mark.parametrize(("sent", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signals_through_the_very_end_give_their_exit_code_and_no_traceback(
    tmp_path: Path, sent: signal.Signals, code: int
) -> None:
    """Issue 46, finding 1: signals every few milliseconds from training's end until the
    process is gone (through the export, the evaluation, the interpreter's exit and torch's
    finalizers): the exit code says which signal came (143, or 130 for Ctrl-C), and no
    traceback or 'Exception ignored' is printed; a SIGTERM is never lost."""
    process = background_trainer(tmp_path, "storm", "--timesteps", "1024", "--no-git")
    output = _Output(process)
    try:
        wait_until(lambda: "run storm finished" in output.text or process.poll() is not None,
                   240, "training to end")  # fmt: skip
        assert process.poll() is None, output.text
        deadline = time.monotonic() + 120
        while process.poll() is None and time.monotonic() < deadline:
            process.send_signal(sent)
            time.sleep(0.005)
        process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
    output._thread.join(10)
    assert process.returncode == code, output.text
    assert "Traceback" not in output.text and "Exception ignored" not in output.text, output.text
