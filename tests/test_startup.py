"""A run's start-up: the games start before torch loads, and every phase is reported
from the process's own start (``--verbose``, and always in train.log)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.conftest import REPO_ROOT, lander
from training.session.session_start import SUMMARY_START, read_summary


def test_verbose_run_reports_its_start_up_phases_in_order(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    port = port_block(2)
    result = lander(
        tmp_path, "train", "boot", "--no-git", "--verbose", "--timesteps", "1024",
        "--n-parallel", "2", "--agents-per-instance", "2", "--n-steps", "256",
        "--port", str(port), timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    said = [line for line in result.stdout.splitlines() if "start-up" in line]
    assert said, result.stdout
    logged = [
        line
        for line in (tmp_path / "logs" / "boot" / "train.log").read_text().splitlines()
        if SUMMARY_START in line
    ]
    assert len(logged) == 1
    phases = read_summary(logged[0])
    assert list(phases) == [
        "interpreter and command",
        "run planned, games started",
        "training stack imported",
        "games connected",
        "model built",
        "first step",
    ], phases
    times = list(phases.values())
    assert times == sorted(times) and times[0] > 0 and times[-1] < 120


def test_the_games_start_before_torch_is_imported(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    """In a fresh interpreter, as ``lander train`` does: the plan is made and the games
    started with no torch in the process; they connect once the trainer takes them,
    and games never taken are closed."""
    port = port_block(4)
    script = f"""
import sys
from pathlib import Path
from rich.console import Console
from training.session.planning import TrainRequest
from training.session.session_start import begin_session
request = TrainRequest(Path({str(tmp_path)!r}), "early", {{"n_parallel": 2, "port": {port}}})
start = begin_session(request, Console(quiet=True))
print("torch loaded" if "torch" in sys.modules else "no torch")
instances, infos = start.games.take()
print(len(instances), infos[0].n_agents)
from game_bridge.launcher import close_instances
close_instances(instances)
other = begin_session(TrainRequest(Path({str(tmp_path)!r}), "never", {{"port": {port + 2}, "n_parallel": 2}}), Console(quiet=True))
untaken = [i for i in other.games._instances]
other.games.close()
print("closed" if all(i.process.poll() is not None for i in untaken) else "open")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["no", "torch", "2", "8", "closed"], done.stdout
