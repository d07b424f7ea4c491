"""Two clones on one machine, one tmux server: each controls only its own runs, and a
checkout's trainer lock holds while its trainer lives, whatever happens to its files.

Real parts: two clones of one bare remote, a private tmux server, real trainers.
"""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import libtmux

from cli.machine.tmux_sessions import session_name, window_alive
from tests.conftest import (
    SMALL,
    background_trainer,
    git,
    lander,
    start_small,
    trainer_pids,
    wait_until,
)


def test_a_second_clone_neither_sees_nor_stops_the_first_ones_run(
    checkout: tuple[Path, Path], tmux_socket: str, tmp_path: Path
) -> None:
    """Finding 2: ``col.x`` trains in clone A. In clone B, ``stop col.x`` and ``start col.x``'s
    attach do not reach it; in A, ``stop col_x`` (a run that never existed, which tmux once
    mapped to the same session) fails and leaves col.x training."""
    work, remote = checkout
    second = tmp_path / "second"
    git(tmp_path, "clone", "-q", str(remote), str(second))
    start_small(work, "col.x", tmux_socket, "--timesteps", "10000000")
    log = work / "logs" / "col.x" / "train.log"
    wait_until(lambda: log.exists() and "steps=" in log.read_text(), 180, "col.x to train in A")
    trainer = trainer_pids("col.x")[0]
    tmux = libtmux.Server(socket_name=tmux_socket)
    assert session_name(work, "col.x") != session_name(second, "col.x")
    assert session_name(work, "col.x") != session_name(work, "col_x")

    from_b = lander(second, "stop", "col.x", socket=tmux_socket)
    assert from_b.returncode == 1 and "does not exist" in from_b.stderr, from_b.stdout
    status_b = lander(second, "status", socket=tmux_socket)
    assert status_b.returncode == 0 and "col.x" not in status_b.stdout
    clean_b = lander(second, "clean", socket=tmux_socket)
    assert clean_b.returncode == 0
    never = lander(work, "stop", "col_x", socket=tmux_socket)
    assert never.returncode == 1 and "does not exist" in never.stderr, never.stdout
    assert trainer_pids("col.x") == [trainer], "another clone's command reached col.x"
    session = tmux.sessions.get(session_name=session_name(work, "col.x"))
    assert window_alive(session, "train")

    stopped = lander(work, "stop", "col.x", "--timeout", "180", socket=tmux_socket)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert trainer_pids("col.x") == []


def test_the_lock_holds_while_its_trainer_lives_even_when_its_files_go(
    checkout: tuple[Path, Path],
) -> None:
    """Finding 6 and the extras: ``git clean -fdX`` mid-run (it removes the old lock file and
    ``.lander/``) lets no second trainer in and status still says running; after the run,
    the checkout still owns it (an in-place resume works) under the same identity."""
    work, _ = checkout
    trainer = background_trainer(work, "held", "--timesteps", "10000000", "--no-git")
    record = work / "checkpoints" / "held" / "run.json"
    identity = work / ".lander" / "checkout-id"
    try:
        log = work / "logs" / "held" / "train.log"
        wait_until(lambda: log.exists() and "steps=" in log.read_text(), 180, "the first rollout")
        first_id = identity.read_text().strip()
        git(work, "clean", "-q", "-fdX", "--", ".lander")
        (work / ".lander-trainer.lock").unlink(missing_ok=True)  # where the lock once lived
        assert not identity.exists()
        second = lander(work, "train", "intruder", "--no-git", "--timesteps", "512", *SMALL)
        assert second.returncode == 1 and "'held' is training" in second.stderr, second.stdout
        assert not (work / "checkpoints" / "intruder").exists()
        status = lander(work, "status")
        held_row = next(line for line in status.stdout.splitlines() if "held" in line)
        assert "running" in held_row and "crashed" not in held_row, status.stdout
    finally:
        trainer.send_signal(signal.SIGINT)
        output, _ = trainer.communicate(timeout=240)
    assert trainer.returncode == 0, output
    assert json.loads(record.read_text())["status"] == "interrupted"
    shutil.rmtree(work / ".lander", ignore_errors=True)  # lost again, with the run ended
    resumed = lander(
        work, "train", "held", "--resume", "held", "--no-git", "--timesteps", "512", timeout=240
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert identity.read_text().strip() == first_id, "the checkout took back its identity"
