"""Where a run's start-up goes: the phases from launch to the first step of ``lander train``.

Each round runs the installed CLI as a user does (``lander train RUN --no-git``, a
fresh interpreter, a throwaway checkout of its own) for one rollout and reads the
start-up line the trainer writes to ``logs/RUN/train.log`` (``--verbose`` prints it
too), whose times count from the process's own start:

- ``interpreter and command``: Python, the CLI and its arguments, the trainer lock;
- ``run planned, games started``: the run's plan and its folders, the games' processes
  started (not yet connected: they boot while the next phase runs);
- ``training stack imported``: torch, Stable-Baselines3 and lander's training modules;
- ``games connected``: every instance accepted, handshaken, its spaces read;
- ``model built``: PPO and its optimizer;
- ``first step``: the first environment step inside ``learn``.

The table gives each phase's median and range over ``--rounds`` rounds, since launch and
as the phase's own share.

    .venv/bin/python benchmarks/startup_phases.py [--rounds 5] [--n-parallel 4] [--agents 8]
    .venv/bin/python benchmarks/startup_phases.py --game-bin examples/godot_lander/lander.x86_64
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

from measure import free_base_port
from rich.console import Console
from rich.table import Table

from training.session.session_start import SUMMARY_START, read_summary

ROOT = Path(__file__).resolve().parent.parent
LANDER = ROOT / ".venv" / "bin" / "lander"


def one_round(args: argparse.Namespace) -> dict[str, float]:
    """The phases of one ``lander train``, seconds since its process started."""
    port = free_base_port(args.n_parallel)
    with tempfile.TemporaryDirectory(prefix="startup-") as home:
        command = [
            str(LANDER), "train", "boot", "--no-git", "--timesteps", "1",
            "--n-parallel", str(args.n_parallel), "--agents-per-instance", str(args.agents),
            "--port", str(port),
        ]  # fmt: skip
        if args.game_bin:
            command += ["--game-bin", str(Path(args.game_bin).resolve())]
        subprocess.run(
            command,
            env={**os.environ, "LANDER_HOME": home},
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        )
        log = (Path(home) / "logs" / "boot" / "train.log").read_text()
    return read_summary(next(text for text in log.splitlines() if SUMMARY_START in text))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n-parallel", type=int, default=4)
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--game-bin", default=None, help="a game executable (default: bundled)")
    args = parser.parse_args()
    rounds = [one_round(args) for _ in range(args.rounds)]
    game = Path(args.game_bin).name if args.game_bin else "lander (bundled)"
    table = Table(
        title=f"start-up of lander train, {game}, {args.n_parallel} instances x {args.agents} "
        f"agents, {args.rounds} fresh processes"
    )
    for column in ("phase", "since launch (median)", "range", "the phase itself (median)"):
        table.add_column(column, justify="left" if column == "phase" else "right")
    previous = [0.0] * len(rounds)
    for phase in rounds[0]:
        at = [marks[phase] for marks in rounds]
        own = [now - before for now, before in zip(at, previous, strict=True)]
        table.add_row(
            phase,
            f"{statistics.median(at):.2f} s",
            f"{min(at):.2f}-{max(at):.2f}",
            f"{statistics.median(own):.2f} s",
        )
        previous = at
    Console().print(table)


if __name__ == "__main__":
    main()
