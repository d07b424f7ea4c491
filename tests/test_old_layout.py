"""Runs and bots that the previous layout wrote (``tests/fixtures/old_layout``: games inside
``game_bridge/``, ``run.json``'s untyped ``extra`` with its own ``git`` key) still show,
publish as they were told, evaluate, play and resume with today's lander."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import SMALL, TESTS_DIR, find_free_port_block, git, lander

FIXTURE = TESTS_DIR / "fixtures" / "old_layout"


def _install_old_runs(work: Path) -> None:
    """The old checkout's runs, in ``work``, as the checkout that trained them."""
    for folder in ("checkpoints", "logs", "bots"):
        shutil.copytree(FIXTURE / folder, work / folder, dirs_exist_ok=True)
    (work / ".lander").mkdir(exist_ok=True)
    shutil.copy(FIXTURE / "checkout-id", work / ".lander" / "checkout-id")


def test_old_runs_show_stay_out_of_git_evaluate_play_and_resume(
    checkout: tuple[Path, Path], tmp_path: Path
) -> None:
    work, remote = checkout
    _install_old_runs(work)
    status = lander(work, "status", timeout=120)
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
    rows = {line.split("│")[1].strip(): line for line in status.stdout.splitlines() if "│" in line}
    assert "finished" in rows["old1"] and "1,024" in rows["old1"], status.stdout
    assert "damaged" not in rows["strk"] and "83.8" not in rows["strk"]

    # Their records said git: false (no exclude file came with them): still kept out.
    pushed = lander(work, "push", timeout=120)
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert "kept out of git (--no-git): old1, strk" in pushed.stdout, pushed.stdout
    assert "checkpoints/old1" not in git(remote, "ls-tree", "-r", "--name-only", "main")

    scored = lander(work, "eval", str(work / "bots" / "strk.json"), "--episodes", "4", timeout=120)
    assert scored.returncode == 0 and "normalized_score=" in scored.stdout, scored.stderr
    for bot in ("old1", "strk"):
        picture = tmp_path / f"{bot}.png"
        played = lander(work, "play", str(work / "bots" / f"{bot}.json"), "--seconds", "2", "--record",
                        str(picture), timeout=120)  # fmt: skip
        assert played.returncode == 0 and picture.stat().st_size > 0, played.stderr

    for run in ("old1", "strk"):
        resumed = lander(work, "train", run, "--resume", run, "--timesteps", "512", "--port",
                         str(find_free_port_block(2)), *SMALL, timeout=300)  # fmt: skip
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert "resuming from" in resumed.stdout and "git: pushed" not in resumed.stdout
        record = json.loads((work / "checkpoints" / run / "run.json").read_text())
        assert record["total_timesteps"] >= 1536 and len(record["sessions"]) == 2
        assert record["config"]["net_width"] == 16, "the network keeps its shape"
        assert "git" not in record["extra"] and record["extra"]["last_fps"] > 0
    assert json.loads((work / "bots" / "strk.json").read_text())["trained_with"]["game"] == "stroke"
    assert "checkpoints/old1" not in git(remote, "ls-tree", "-r", "--name-only", "main")
