"""Files from elsewhere that are not regular files (issue 46, findings 2 and 6), and two
writers of one file (finding 7): a run.json that is a folder, a FIFO or a link to
``/dev/zero`` is one damaged row of ``status``; a bot, a demo file, an evaluation log or a
settings file that is one is a one-line refusal or skipped, never a hang or a
``MemoryError``; two exports of one bot at once never share a temporary file.

Every CLI test drives the installed command in a subprocess over a real checkout, each
within a deadline (a FIFO read the old way waits forever: the deadline is the failure).
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

from game_bridge.file_input import FileTooLarge, NotRegularFile, read_bounded
from tests.conftest import find_free_port_block, lander
from tests.test_files_from_elsewhere import one_line_error
from training.runs.run_record import write_bytes_atomic

OLD_LAYOUT = Path(__file__).resolve().parent / "fixtures" / "old_layout"
DEADLINE = 120


def _odd(path: Path, kind: str) -> Path:
    """Make ``path`` a folder, a FIFO or a link to /dev/zero."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    return path


KINDS = ("folder", "fifo", "zero")


def test_the_reader_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    """The one reader: a folder, a FIFO (at once, no writer needed), a device behind a link
    and a file over its cap are each an OSError saying what the path is; a regular file
    is read whole."""
    for kind, said in (("folder", "a folder"), ("fifo", "a FIFO"), ("zero", "a device")):
        with pytest.raises(NotRegularFile, match=said):
            read_bounded(_odd(tmp_path / kind, kind), 1024)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(FileTooLarge, match="2,048 bytes"):
        read_bounded(big, 1024)
    assert read_bounded(big, 4096) == b"x" * 2048


def test_one_odd_run_folder_hides_no_other_run(tmp_path: Path) -> None:
    """Finding 2: runs whose run.json is a folder, a FIFO or a link to /dev/zero are one
    damaged row each; the good run and its champion are shown, and status ends 0."""
    shutil.copytree(OLD_LAYOUT, tmp_path, dirs_exist_ok=True)
    for kind in KINDS:
        _odd(tmp_path / "checkpoints" / f"odd-{kind}" / "run.json", kind)
    shown = lander(tmp_path, "status", timeout=DEADLINE, env={"COLUMNS": "250"})
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "Traceback" not in shown.stdout + shown.stderr
    for kind, said in (("folder", "a folder"), ("fifo", "a FIFO"), ("zero", "a device")):
        row = next(line for line in shown.stdout.splitlines() if f"odd-{kind}" in line)
        assert "damaged record" in row
        assert said in shown.stdout
    assert "champion on lander: old1" in shown.stdout


@pytest.mark.parametrize("kind", KINDS)
def test_an_evaluation_log_that_is_no_file_is_skipped(tmp_path: Path, kind: str) -> None:
    """Finding 6: a committed evaluations.jsonl that is a link to /dev/zero, a FIFO or a
    folder costs status nothing but its records (the other run's champion stays)."""
    shutil.copytree(OLD_LAYOUT, tmp_path, dirs_exist_ok=True)
    _odd(tmp_path / "checkpoints" / "old1" / "evaluations.jsonl", kind)
    shown = lander(tmp_path, "status", timeout=DEADLINE, env={"COLUMNS": "250"})
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "champion on stroke: strk" in shown.stdout


@pytest.mark.parametrize("kind", KINDS)
def test_a_bot_that_is_no_file_is_one_line(tmp_path: Path, kind: str) -> None:
    """Finding 6: ``eval`` and ``play`` of a bot that is a link to /dev/zero, a FIFO or a
    folder are one line naming what it is."""
    said = {"folder": "a folder", "fifo": "a FIFO", "zero": "a device"}[kind]
    bot = _odd(tmp_path / "bots" / "odd.json", kind)
    for command in (["eval", str(bot), "--episodes", "1"], ["play", str(bot), "--seconds", "1"]):
        one_line_error(lander(tmp_path, *command, timeout=DEADLINE), said)


@pytest.mark.parametrize("kind", KINDS)
def test_a_demo_or_settings_file_that_is_no_file_is_one_line(tmp_path: Path, kind: str) -> None:
    """Finding 6: ``train --demos`` and ``train --config`` of a link to /dev/zero, a FIFO or
    a folder are one line before any game starts."""
    said = {"folder": "a folder", "fifo": "a FIFO", "zero": "a device"}[kind]
    odd = _odd(tmp_path / "odd.json", kind)
    one_line_error(lander(tmp_path, "train", "r1", "--demos", str(odd), timeout=DEADLINE), said)
    settings = _odd(tmp_path / "odd.toml", kind)
    one_line_error(
        lander(tmp_path, "train", "r1", "--config", str(settings), timeout=DEADLINE), said
    )


def test_two_writers_of_one_file_never_share_a_temporary(tmp_path: Path) -> None:
    """Finding 7: writers of one file at once (two ``export --tiers`` of one bot) each use a
    temporary of their own: none fails, and the file is one writer's bytes whole."""
    target = tmp_path / "bots" / "sp-easy.json"
    payloads = [bytes([65 + i]) * 200_000 for i in range(8)]
    failures: list[BaseException] = []

    def write(payload: bytes) -> None:
        try:
            for _ in range(40):
                write_bytes_atomic(target, payload)
        except BaseException as exc:  # every failure is the finding
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(payload,)) for payload in payloads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
    assert not failures, failures[:3]
    assert target.read_bytes() in payloads
    assert not list(target.parent.glob("*.tmp"))


def test_a_bots_file_ends_a_run_with_its_checkpoint_and_one_line(tmp_path: Path) -> None:
    """Finding 2: a run whose checkout has a file named ``bots`` trains, saves final.zip and
    says in one line what to move; exit 0 (the run itself finished), no traceback."""
    (tmp_path / "bots").write_text("not a folder")
    done = lander(
        tmp_path, "train", "r1", "--no-git", "--timesteps", "256", "--n-parallel", "1",
        "--agents-per-instance", "4", "--port", str(find_free_port_block(1)), timeout=240,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "Traceback" not in output
    assert (tmp_path / "checkpoints" / "r1" / "final.zip").is_file()
    skipped = [line for line in output.splitlines() if "export skipped" in line]
    assert len(skipped) == 1 and "is a file, not a folder: move it aside" in skipped[0], output
    assert (tmp_path / "bots").read_text() == "not a folder"


def test_a_gitattributes_that_is_no_file_costs_nothing(tmp_path: Path) -> None:
    """Finding 6: a committed .gitattributes that is a link to /dev/zero (read to know
    whether checkpoints go to LFS) is taken as no LFS, not read until memory runs out."""
    from cli.results.lfs import uses_lfs

    _odd(tmp_path / ".gitattributes", "zero")
    assert uses_lfs(tmp_path) is False
    _odd(tmp_path / ".gitattributes", "fifo")
    assert uses_lfs(tmp_path) is False


_PEAK_PROBE = """
import sys
from pathlib import Path
from training.demos.files import load_demos

def peak():  # this process's own high-water mark (ru_maxrss keeps the forking parent's)
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) * 1024

before = peak()
demos = load_demos(Path(sys.argv[1]))
print(demos.steps, peak() - before)
"""


@pytest.mark.parametrize("layout", ["plugin", "lander"])
def test_a_large_demo_file_is_read_in_about_twice_its_size(tmp_path: Path, layout: str) -> None:
    """Finding 6: a 300 MB demo file peaked at 2.4 GB (every number a Python float in a
    Python list before any array was made). Read an episode at a time, a 40 MB file of
    either layout raises the reader's peak by less than 3 times its size (the bytes and the
    text, then the arrays: 2.0 measured); read whole it took 8.5 times."""
    import json
    import subprocess
    import sys

    import numpy as np

    rng = np.random.default_rng(0)
    steps, size = 1000, 20
    # Numbers as a game prints them (a few digits each): what makes Python's floats costly.
    observations = np.round(rng.uniform(-10, 10, (steps + 1, size)), 3).tolist()
    actions = np.round(rng.uniform(-1, 1, (steps, 2)), 3).tolist()
    if layout == "plugin":
        one = json.dumps([observations, actions])
        head, tail = "[", "]"
    else:
        one = json.dumps({"observations": observations[:-1], "actions": actions, "rewards": None})
        head = '{"format": "lander-demos", "version": 1, "game": "lander", "episodes": ['
        tail = "]}"
    copies = 40 * 2**20 // len(one) + 1
    path = tmp_path / "big.json"
    path.write_text(head + ",".join([one] * copies) + tail)
    probe = subprocess.run(
        [sys.executable, "-c", _PEAK_PROBE, str(path)],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert probe.returncode == 0, probe.stderr
    loaded, peak = (int(value) for value in probe.stdout.split())
    assert loaded == copies * steps
    assert peak < 3 * path.stat().st_size, (peak, path.stat().st_size)
