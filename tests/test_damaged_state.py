"""A checkout in a bad state stays usable: a pull that conflicts with the user's edits
stops with the edits in place, a damaged run record is one row of status (and its run
resumes from its checkpoints), and status asks git the same few questions however many
runs there are.

Real parts: a checkout with a bare remote and a second clone, real run records and
checkpoints from a real training run, the real CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import (
    GIT_IDENTITY,
    LANDER,
    SMALL,
    background_trainer,
    find_free_port_block,
    git,
    lander,
    train_small,
    wait_until,
)


def test_a_pull_that_conflicts_with_an_uncommitted_edit_stops_with_the_edit_in_place(
    checkout: tuple[Path, Path], tmp_path: Path
) -> None:
    """Finding 4: no conflict markers, no edit left only in the stash, no training."""
    work, remote = checkout
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(remote), str(other))
    shared = Path("checkpoints") / "r0" / "run.json"
    (other / shared).parent.mkdir(parents=True)
    (other / shared).write_text('{\n  "note": "first"\n}\n')
    git(other, "add", "-A")
    git(other, "commit", "-q", "-m", "r0")
    git(other, "push", "-q")
    git(work, "pull", "-q")
    (other / shared).write_text('{\n  "note": "from the other machine"\n}\n')
    git(other, "commit", "-q", "-am", "r0 changed there")
    git(other, "push", "-q")
    edit = '{\n  "note": "my own edit"\n}\n'
    (work / shared).write_text(edit)
    (work / "notes.txt").write_text("another edit, of a file the pull does not touch\n")
    head = git(work, "rev-parse", "HEAD")

    result = lander(work, "train", "next1", "--timesteps", "512", *SMALL, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in output, output
    assert "conflict with your uncommitted edits" in output and str(shared) in output, output
    assert (work / shared).read_text() == edit
    assert "another edit" in (work / "notes.txt").read_text()
    assert git(work, "rev-parse", "HEAD") == head, "the checkout is as it was"
    assert git(work, "stash", "list") == "", "the edit is in place, not only in the stash"
    assert not (work / "checkpoints" / "next1").exists(), "nothing trained"

    git(work, "checkout", "--", str(shared))
    clean = lander(work, "status", timeout=60)
    assert clean.returncode == 0
    pulled = lander(work, "train", "next1", "--timesteps", "512", "--port",
                    str(find_free_port_block(2)), *SMALL, timeout=240)  # fmt: skip
    assert pulled.returncode == 0 and "git: pulled" in pulled.stdout, pulled.stdout
    assert "another edit" in (work / "notes.txt").read_text(), "the other edit came back"


DAMAGE: dict[str, dict[str, Any]] = {
    "steps-text": {"total_timesteps": "many"},
    "status-number": {"status": 7},
    "sessions-text": {"sessions": "x"},
    "extra-list": {"extra": []},
    "checkpoint-list": {"last_checkpoint": ["final.zip"]},
    "updated-null": {"updated_at": None},
    "fps-text": {"extra": {"last_fps": "fast"}},
    "health-text": {"extra": {"health": "bad", "restarts": "many"}},
    "elo-text": {"extra": {"self_play": {"ratings": {"learner": "high"}, "rounds": 3}}},
}


def test_damaged_records_are_one_row_each_and_their_runs_resume_from_checkpoints(
    tmp_path: Path,
) -> None:
    """Finding 5: six (and more) wrong-typed fields, ``updated_at: null`` and a truncated
    run.json each show as one row; the sound run shows as usual; ``next`` and a resume
    of the truncated run work, and its damaged record is kept, not lost."""
    port = str(find_free_port_block(2))
    train_small(tmp_path, "good")
    good = tmp_path / "checkpoints" / "good"
    sound = json.loads((good / "run.json").read_text())
    for name, change in DAMAGE.items():
        folder = tmp_path / "checkpoints" / name
        shutil.copytree(good, folder)
        (folder / "run.json").write_text(json.dumps({**sound, "run": name, **change}))
    truncated = tmp_path / "checkpoints" / "cut"
    shutil.copytree(good, truncated)
    text = (good / "run.json").read_text()
    (truncated / "run.json").write_text(text[: len(text) // 2])

    status = lander(tmp_path, "status", timeout=120)
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
    rows = {line.split("│")[1].strip(): line for line in status.stdout.splitlines() if "│" in line}
    for name in [*DAMAGE, "cut"]:
        assert name in rows and "damaged record" in rows[name], (name, status.stdout)
    assert "finished" in rows["good"] and f"{sound['total_timesteps']:,}" in rows["good"]

    after = lander(tmp_path, "next", "--timesteps", "512", "--port", port, timeout=240)
    assert after.returncode == 0, after.stdout + after.stderr
    line = next(line for line in after.stdout.splitlines() if line.startswith("next run: "))
    name, parent = line.removeprefix("next run: ").split(", resumed from ")
    assert parent in ("good", "fps-text", "health-text"), "only a readable record is continued"
    assert (
        json.loads((tmp_path / "checkpoints" / name / "run.json").read_text())["parent"] == parent
    )
    resumed = lander(tmp_path, "train", "cut", "--resume", "cut", "--no-git", "--timesteps", "512",
                     "--port", port, timeout=240)  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resuming from its checkpoint with the default settings" in resumed.stdout
    assert json.loads((truncated / "run.json").read_text())["status"] == "finished"
    kept = list((tmp_path / ".lander" / "damaged").glob("cut-*.json"))
    assert kept and kept[0].read_text() == text[: len(text) // 2]


def _git_calls_of_status(work: Path, trace: Path) -> int:
    trace.unlink(missing_ok=True)
    env = {**os.environ, **GIT_IDENTITY, "LANDER_HOME": str(work), "GIT_TRACE": str(trace)}
    result = subprocess.run(
        [str(LANDER), "status"], env=env, capture_output=True, text=True, timeout=120,
        check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return sum("trace: built-in: git" in line for line in trace.read_text().splitlines())


def _add_runs(work: Path, names: list[str]) -> None:
    for name in names:
        folder = work / "checkpoints" / name
        folder.mkdir(parents=True)
        record = {"run": name, "config": {}, "status": "finished", "total_timesteps": 100,
                  "sessions": [{"checkout": "box-1", "host": "box"}]}  # fmt: skip
        (folder / "run.json").write_text(json.dumps(record))
        (work / "bots" / f"{name}.json").write_text("{}")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", f"{len(names)} runs")


def test_status_asks_git_the_same_questions_for_many_runs_as_for_few(
    checkout: tuple[Path, Path], tmp_path: Path
) -> None:
    """Finding 10: what made status with 500 runs take 10 s was three git processes per run;
    now their number does not grow with the runs (``benchmarks/status_many_runs.py`` times it)."""
    work, _ = checkout
    _add_runs(work, [f"few{i}" for i in range(3)])
    few = _git_calls_of_status(work, tmp_path / "trace")
    _add_runs(work, [f"many{i}" for i in range(60)])
    git(work, "push", "-q")
    (work / "checkpoints" / "many7" / "note.txt").write_text("uncommitted\n")
    many = _git_calls_of_status(work, tmp_path / "trace")
    assert many == few, f"{few} git calls for 3 runs, {many} for 63"
    newest = lander(work, "status", timeout=120)
    assert "and 23 older run(s): lander status --all" in newest.stdout.replace("\n", " ")
    status = lander(work, "status", "--all", timeout=120)
    rows = {line.split("│")[1].strip(): line for line in status.stdout.splitlines() if "│" in line}
    assert len(rows) == 63, "every run"
    assert "uncommitted" in rows["many7"] and "pushed" in rows["many8"]


def test_a_logs_folder_removed_mid_run_is_made_again_and_the_run_goes_on(tmp_path: Path) -> None:
    """Finding 9: a run does not die for its log; TensorBoard and train.log write again."""
    trainer = background_trainer(tmp_path, "tidy", "--no-git", "--timesteps", "12288")
    logs = tmp_path / "logs" / "tidy"
    try:
        wait_until(lambda: list(logs.glob("events.out.tfevents.*")), 120, "the first events")
        # Moved away whole, then removed: the run may write a file into it between an
        # rmtree's listing and its last rmdir (which then fails), as under a busy suite.
        removed = tmp_path / "removed-logs"
        logs.rename(removed)
        shutil.rmtree(removed, ignore_errors=True)  # the run may still write into it
        output, _ = trainer.communicate(timeout=240)
    finally:
        if trainer.poll() is None:
            trainer.kill()
    assert trainer.returncode == 0, output
    assert "Traceback" not in output and "finished at" in output, output
    assert list(logs.glob("events.out.tfevents.*")), "TensorBoard writes again"
    assert "finished at" in (logs / "train.log").read_text()
