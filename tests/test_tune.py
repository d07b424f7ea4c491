"""`lander tune` measures a grid of settings with short real runs and recommends one."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.conftest import REPO_ROOT


def test_tune_measures_each_setting_and_recommends_the_fastest(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    env = {**os.environ, "LANDER_HOME": str(tmp_path)}
    result = subprocess.run(
        [str(REPO_ROOT / ".venv" / "bin" / "lander"), "tune", "--seconds", "3", "--n-parallel", "1,2",
         "--agents", "2", "--port", str(port_block(2))],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line for line in result.stdout.splitlines() if "speedup=game default:" in line]
    assert len(rows) == 2 and all(line.endswith(" fps") for line in rows)
    fps = [float(line.rsplit(":", 1)[1].replace(",", "").split()[0]) for line in rows]
    fastest = max(range(2), key=lambda i: fps[i])
    assert (
        f"Use: ./lander start RUN --n-parallel {fastest + 1} --agents-per-instance 2"
        in result.stdout
    )
    assert not (tmp_path / "checkpoints").exists(), "tune keeps nothing"
