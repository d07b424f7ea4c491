"""The end of a run (export, evaluation, commit, push) is done in full or said to be
skipped, never cut short in silence: a Ctrl-C once training has ended lets the end
finish, a second one skips the rest in one line that says how to finish it, and a
hung push dies with lander instead of staying behind.

Real parts: a trainer with its games, a git remote whose push hangs (git's ``ext::``
transport runs a script that sleeps when asked to receive a push).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

from tests.conftest import GIT_IDENTITY, SMALL, find_free_port_block, git, wait_until
from tests.test_operations import LANDER


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


def _train(work: Path, run: str, timeout_s: str) -> tuple[subprocess.Popen[str], _Output]:
    env = {**os.environ, **GIT_IDENTITY, "LANDER_HOME": str(work), "LANDER_GIT_TIMEOUT": timeout_s}
    process = subprocess.Popen(
        [str(LANDER), "train", run, "--timesteps", "1024",
         "--port", str(find_free_port_block(2)), *SMALL],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return process, _Output(process)


def test_one_ctrl_c_after_training_lets_the_end_finish(checkout: tuple[Path, Path]) -> None:
    """What ``lander stop`` sends, landing while the push runs: the push is not cut, the
    run's end completes (here the hung push gives up at its deadline) and exits 0."""
    work, remote = checkout
    helper = _hanging_push_remote(work, remote)
    process, output = _train(work, "once", "20")
    try:
        wait_until(lambda: _pids_running(str(helper), "git-receive-pack") or process.poll() is not None,
                   240, "the push to start")  # fmt: skip
        assert process.poll() is None, output.text
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
    helper = _hanging_push_remote(work, remote)
    process, output = _train(work, "twice", "300")
    try:
        wait_until(lambda: _pids_running(str(helper), "git-receive-pack") or process.poll() is not None,
                   240, "the push to start")  # fmt: skip
        assert process.poll() is None, output.text
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
