"""`lander tune` measures a grid of settings with short real runs and recommends one."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.conftest import REPO_ROOT


def _tune(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LANDER_HOME": str(tmp_path), "COLUMNS": "200"}
    return subprocess.run(
        [str(REPO_ROOT / ".venv" / "bin" / "lander"), "tune", *args],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_tune_measures_each_setting_and_recommends_the_fastest(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    result = _tune(
        tmp_path, "--seconds", "3", "--n-parallel", "1,2", "--agents", "2",
        "--port", str(port_block(2)),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("n_parallel=")]
    assert len(rows) == 2 and all(line.endswith(" fps") for line in rows)
    fps = [float(line.rsplit(":", 1)[1].replace(",", "").split()[0]) for line in rows]
    fastest = max(range(2), key=lambda i: fps[i])
    assert (
        f"Use: ./lander start RUN --n-parallel {fastest + 1} --agents-per-instance 2"
        in result.stdout
    )
    assert not (tmp_path / "checkpoints").exists(), "tune keeps nothing"


def test_tune_for_time_races_to_a_reward_and_recommends_the_quickest(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    # A low target that the bundled game's random start already passes within a
    # rollout or two, so the race is short; one rollout length against another.
    result = _tune(
        tmp_path, "--objective", "time", "--reward", "30", "--seconds", "60",
        "--n-parallel", "2", "--agents", "4", "--n-steps", "32,64", "--port", str(port_block(2)),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    times = [
        (int(match[1]), float(match[2]))
        for match in re.finditer(
            r"n_steps=(\d+) batch=default: reward 30 in ([\d.]+) s", result.stdout
        )
    ]
    assert [n for n, _ in times] == [32, 64], result.stdout
    recommended = re.search(
        r"fastest: reward 30 in ([\d.]+) s\. Use: \./lander start RUN --n-parallel 2 "
        r"--agents-per-instance 4 --n-steps (\d+)",
        result.stdout,
    )
    assert recommended, result.stdout
    # The quickest as printed (two races may round to the same tenth: either is right).
    quickest = min(seconds for _, seconds in times)
    assert float(recommended[1]) == quickest
    assert (int(recommended[2]), quickest) in times
    assert not (tmp_path / "checkpoints").exists(), "tune keeps nothing"


def test_tune_for_time_on_an_own_game_needs_a_reward(tmp_path: Path) -> None:
    result = _tune(tmp_path, "--objective", "time", "--game-bin", "/bin/true")
    assert result.returncode != 0
    assert "needs --reward" in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
