"""What ``lander status`` costs as a checkout's runs pile up: a year of runs is hundreds.

Builds a temporary git checkout with a bare remote, adds committed and pushed run
records (each with a bot and an evaluation record), then times ``lander status`` and
counts the git processes it starts, for a few runs and for many, alternating the two
sizes. Prints the median times, their ratio, and the git processes of each.

    .venv/bin/python benchmarks/status_many_runs.py [--few 5] [--many 500] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from measure import GIT_IDENTITY, run_checked
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
LANDER = ROOT / ".venv" / "bin" / "lander"
console = Console()


def _git(cwd: Path, *args: str) -> None:
    run_checked(cwd, "git", *args)


def make_checkout(folder: Path, runs: int) -> Path:
    """A checkout with ``runs`` committed, pushed runs."""
    folder.mkdir(parents=True)
    remote, work = folder / "remote.git", folder / "work"
    _git(folder, "init", "-q", "--bare", "-b", "main", str(remote))
    _git(folder, "init", "-q", "-b", "main", str(work))
    (work / "bots").mkdir()
    for index in range(runs):
        run = f"run{index:04d}"
        checkpoints = work / "checkpoints" / run
        checkpoints.mkdir(parents=True)
        record = {"run": run, "config": {}, "status": "finished", "total_timesteps": 600_000,
                  "sessions": [{"checkout": "box-1", "host": "box"}],
                  "extra": {"last_fps": 15000.0, "last_reward": 250.0}}  # fmt: skip
        (checkpoints / "run.json").write_text(json.dumps(record))
        evaluation = {"run": run, "bot": f"bots/{run}.json", "game": "lander", "timesteps": 600_000,
                      "results": {"mean_reward": 200.0 + index % 50}, "checkout": "box-1"}  # fmt: skip
        (checkpoints / "evaluations.jsonl").write_text(json.dumps(evaluation) + "\n")
        (work / "bots" / f"{run}.json").write_text("{}")
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", f"{runs} runs")
    _git(work, "remote", "add", "origin", str(remote))
    _git(work, "push", "-q", "-u", "origin", "main")
    return work


def time_status(work: Path, trace: Path) -> tuple[float, int]:
    """Seconds of one ``lander status`` and the git processes it started."""
    trace.unlink(missing_ok=True)
    env = {**os.environ, **GIT_IDENTITY, "LANDER_HOME": str(work), "GIT_TRACE": str(trace)}
    started = time.perf_counter()
    subprocess.run([str(LANDER), "status"], env=env, check=True, capture_output=True,
                   stdin=subprocess.DEVNULL)  # fmt: skip
    elapsed = time.perf_counter() - started
    calls = sum("trace: built-in: git" in line for line in trace.read_text().splitlines())
    return elapsed, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--few", type=int, default=5)
    parser.add_argument("--many", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="lander-status-"))
    try:
        checkouts = {
            size: make_checkout(folder / str(size), size) for size in (args.few, args.many)
        }
        times: dict[int, list[float]] = {size: [] for size in checkouts}
        calls: dict[int, int] = {}
        for _ in range(args.rounds):
            for size, work in checkouts.items():  # alternating: both sizes see the same load
                elapsed, calls[size] = time_status(work, folder / "trace")
                times[size].append(elapsed)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    table = Table(title=f"lander status, median of {args.rounds} rounds, sizes alternating")
    for column in ("runs", "seconds", "git processes"):
        table.add_column(column, justify="right")
    for size in checkouts:
        table.add_row(f"{size:,}", f"{statistics.median(times[size]):.2f}", str(calls[size]))
    console.print(table)
    ratio = statistics.median(times[args.many]) / statistics.median(times[args.few])
    console.print(f"{args.many} runs / {args.few} runs: {ratio:.2f}x the time")


if __name__ == "__main__":
    main()
