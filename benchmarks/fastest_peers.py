"""Games that see against the fastest peers: lander's defaults beside RL Zoo's tuned PPO,
CleanRL's ``ppo_atari_envpool`` and Sample Factory's APPO, at equal wall time on this
machine, scored on the same window of whole games on every side.

For each game, each seed, the sides run one after the other (the order turns by one
every seed), each for ``--minutes`` of wall clock, each with its own defaults on the CPU:

- **lander**: ``lander train --game gym:ENV`` with nothing else set (``--settings`` for a
  candidate), through ``skill_runner.py``, which writes every whole game's score;
- **zoo**: ``python -m rl_zoo3.train --algo ppo --env ENV`` in ``.venv-zoo`` (its tuned
  ``atari:`` entry; ``pictures.py --setup`` makes it), run by ``any_game.run_zoo``; its
  ``Monitor`` files, which sit on the raw game under its ``AtariWrapper``, give every
  whole game;
- **cleanrl**: CleanRL's ``ppo_atari_envpool.py`` (``--env-id GAME-v5``, EnvPool 1.2.5)
  in ``.venv-cleanrl``;
- **sf**: Sample Factory 2.1.1's ``sf_examples.atari.train_atari`` (``--env atari_game
  --device cpu``) in ``.venv-sf``.

The last two run under ``peer_runner.py``, which writes every whole game as the emulator
ends it (every life lost, or the time limit: CleanRL's own log leaves out a game cut by
EnvPool's 27,000-step limit). A side's reward at a mark is the mean raw score of its last
W games that ended before the mark, W being the same on every side and seed of a game at
that mark: ``--window`` (100), or fewer where a side had ended fewer games by then. The
table gives per game and mark each side's median over seeds, W, and the samples each side
had played by the mark.

    .venv/bin/python benchmarks/fastest_peers.py --setup     # .venv-cleanrl, .venv-sf
    # no route to GitHub: --cleanrl-repo PATH (any clone of vwxyzjn/cleanrl holding the commit)
    .venv/bin/python benchmarks/fastest_peers.py --envs QbertNoFrameskip-v4 --minutes 20 \\
        --marks 5,10,20 --out qbert.json
    .venv/bin/python benchmarks/fastest_peers.py --table qbert.json pong.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from any_game import ROOT, ZOO_PYTHON, Curve, run_lander, run_zoo
from rich.console import Console
from rich.table import Table

from games.gym.atari import register_ale

HERE = Path(__file__).resolve().parent
CLEANRL_PYTHON = ROOT / ".venv-cleanrl" / "bin" / "python"
CLEANRL_SCRIPT = ROOT / ".venv-cleanrl" / "ppo_atari_envpool.py"
CLEANRL_COMMIT = "fe8d8a03c41a7ef5b523e2e354bd01c363e786bb"
"""The CleanRL commit whose ``cleanrl/ppo_atari_envpool.py`` is measured (2026-04-20)."""
SF_PYTHON = ROOT / ".venv-sf" / "bin" / "python"
ZOO_BUDGET = 10_000_000
"""Every peer's own budget for Atari (their schedules decay over it); time ends a run."""
SIDES = ("lander", "zoo", "cleanrl", "sf")
ATARI_5 = (
    "BattleZoneNoFrameskip-v4",
    "DoubleDunkNoFrameskip-v4",
    "NameThisGameNoFrameskip-v4",
    "PhoenixNoFrameskip-v4",
    "QbertNoFrameskip-v4",
)
SUITE = ("BreakoutNoFrameskip-v4", "SpaceInvadersNoFrameskip-v4", "PongNoFrameskip-v4")
STOP_GRACE_S = 10.0
Record = dict[str, dict[str, Any]]
"""A ``--out`` file: each game's marks, settings and every side's runs."""
console = Console(width=150)


@dataclass
class Run:
    """One side's run: every whole game (seconds since launch, raw score) and the samples
    it had played (seconds, samples) where it said; lander's games' lengths in steps."""

    side: str
    seed: int
    games: list[tuple[float, float]] = field(default_factory=list)
    samples: list[tuple[float, int]] = field(default_factory=list)
    budget_s: float = 0.0
    lengths: list[int] = field(default_factory=list)


SF_NAMES = {
    "Asteroids": "atari_asteroid",
    "KungFuMaster": "atari_kongfumaster",
    "MontezumaRevenge": "atari_montezuma",
}
"""Sample Factory's Atari names that are not ``atari_`` and the game's name in lower case."""


def game_name(env: str) -> str:
    """``QbertNoFrameskip-v4`` -> ``Qbert``."""
    return env.removesuffix("NoFrameskip-v4")


def sf_name(env: str) -> str:
    """The name Sample Factory's Atari example knows the game by."""
    game = game_name(env)
    return SF_NAMES.get(game, f"atari_{game.lower()}")


def run_for(command: list[str], cap_s: float, cwd: Path, env: dict[str, str]) -> None:
    """Run ``command`` in a process group of its own until it ends or ``cap_s`` passes,
    then stop the whole group (Sample Factory's workers too: SIGTERM, SIGKILL after
    :data:`STOP_GRACE_S`)."""
    with open(cwd / "output.log", "w") as output:
        process = subprocess.Popen(
            command, cwd=cwd, env={**os.environ, **env}, stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            process.wait(timeout=cap_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=STOP_GRACE_S)
            capped = True
        else:
            capped = False
        with contextlib.suppress(ProcessLookupError):  # whatever outlived its parent
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    if not capped and process.returncode != 0:
        tail = (cwd / "output.log").read_text()[-2000:]
        raise SystemExit(f"{command[1]} failed ({process.returncode}):\n{tail}")


def read_games(
    path: Path, launched: float
) -> tuple[list[tuple[float, float]], list[tuple[float, int]]]:
    """``peer_runner.py``'s lines: the games, and the samples all processes had played
    at each game's end (each process's own count, summed)."""
    games: list[tuple[float, float]] = []
    samples: list[tuple[float, int]] = []
    latest: dict[int, int] = {}
    if not path.exists():
        return games, samples
    for line in path.read_text().splitlines():
        row = json.loads(line)
        t = row["t"] - launched
        latest[row["pid"]] = row["steps"]
        games.append((t, row["score"]))
        samples.append((t, sum(latest.values())))
    return games, samples


def run_cleanrl(env: str, seed: int, cap_s: float) -> Run:
    """CleanRL's file with its defaults; EnvPool's ``GAME-v5`` is ``GAMENoFrameskip-v4``
    with the usual preprocessing (no sticky actions: EnvPool's default is 0)."""
    with tempfile.TemporaryDirectory(prefix="cleanrl-") as folder:
        where, launched = Path(folder), time.time()
        command = [
            str(CLEANRL_PYTHON), str(HERE / "peer_runner.py"), "--side", "cleanrl",
            "--games", str(where / "games.jsonl"), "--script", str(CLEANRL_SCRIPT),
            "--env-id", f"{game_name(env)}-v5", "--seed", str(seed),
            "--total-timesteps", str(ZOO_BUDGET),
        ]  # fmt: skip
        run_for(command, cap_s, where, {})
        games, samples = read_games(where / "games.jsonl", launched)
    return Run("cleanrl", seed, games, samples, time.time() - launched)


def run_sample_factory(env: str, seed: int, cap_s: float) -> Run:
    """Sample Factory's Atari example with its defaults, on the CPU (its default is CUDA)."""
    import ale_py

    roms = Path(ale_py.__file__).parent / "roms"  # ale-py 0.8 ships none; these are the same
    with tempfile.TemporaryDirectory(prefix="sf-") as folder:
        where, launched = Path(folder), time.time()
        command = [
            str(SF_PYTHON), str(HERE / "peer_runner.py"), "--side", "sf",
            "--games", str(where / "games.jsonl"), "--env", sf_name(env),
            "--experiment", "peer", "--train_dir", str(where / "train"), "--device", "cpu",
            "--seed", str(seed),
        ]  # fmt: skip
        run_for(command, cap_s, where, {"ALE_PY_ROM_DIR": str(roms)})
        games, samples = read_games(where / "games.jsonl", launched)
    return Run("sf", seed, games, samples, time.time() - launched)


def run_lander_side(env: str, seed: int, cap_s: float, settings: dict[str, object]) -> Run:
    """``lander train`` with its defaults (and ``settings``), its games from its events."""
    return as_run(run_lander(env, seed, ZOO_BUDGET, cap_s, settings))


def run_zoo_side(env: str, seed: int, cap_s: float) -> Run:
    """RL Zoo's tuned ``atari:`` entry, as ``pictures.py`` runs it."""
    return as_run(run_zoo(env, seed, ZOO_BUDGET, cap_s))


def as_run(curve: Curve) -> Run:
    """A run of ``any_game.py``'s: its games, and its samples at each report."""
    samples = [(t, steps) for t, steps, _ in curve.points]
    return Run(curve.side, curve.seed, curve.games, samples, curve.budget_s, curve.lengths)


def mean_of_last(run: Run, seconds: float, window: int) -> float | None:
    """The mean score of the run's last ``window`` games ended by ``seconds`` (None for a
    run that had ended before ``seconds``)."""
    if seconds > run.budget_s:
        return None
    ended = [score for t, score in run.games if t <= seconds]
    return statistics.fmean(ended[-window:]) if ended and window > 0 else None


def error_of_last(run: Run, seconds: float, window: int) -> float | None:
    """The standard error of :func:`mean_of_last` (a game's spread over the root of the
    games): how far one seed's mark may move by which games happened to end in the window."""
    ended = [score for t, score in run.games if t <= seconds][-window:]
    if seconds > run.budget_s or len(ended) < 2:
        return None
    return statistics.stdev(ended) / len(ended) ** 0.5


def samples_by(run: Run, seconds: float) -> int | None:
    """The samples the run had played by ``seconds``, as far as it said (None for a run
    that had ended before ``seconds``)."""
    if seconds > run.budget_s:
        return None
    before = [steps for t, steps in run.samples if t <= seconds]
    return before[-1] if before else None


def ended_by(run: Run, seconds: float) -> int:
    """How many games the run had ended by ``seconds``."""
    return sum(1 for t, _ in run.games if t <= seconds)


def shared_window(runs: list[Run], seconds: float, window: int) -> int:
    """The most games every run still going at ``seconds`` had ended by then, at most
    ``window``."""
    going = [run for run in runs if seconds <= run.budget_s]
    return min([window, *(ended_by(run, seconds) for run in going)])


def print_table(record: Record, window: int) -> None:
    for env, entry in record.items():
        runs = {side: [Run(**r) for r in rs] for side, rs in entry["runs"].items() if rs}
        sides = [side for side in SIDES if side in runs] + sorted(set(runs) - set(SIDES))
        table = Table(
            title=f"{env}: mean raw score of the last W whole games (median over seeds; one seed: "
            "± its standard error)"
        )
        for column in ("minutes", "W", *sides, *(f"{s} samples" for s in sides)):
            table.add_column(column, justify="right")
        for mark in entry["marks"]:
            seconds = float(mark) * 60.0
            shared = shared_window([run for rs in runs.values() for run in rs], seconds, window)
            rewards, counts = [], []
            for side in sides:
                values = [mean_of_last(run, seconds, shared) for run in runs[side]]
                known = [v for v in values if v is not None]
                errors = [error_of_last(run, seconds, shared) for run in runs[side]]
                one = f" ± {errors[0]:.1f}" if len(known) == 1 and errors[0] is not None else ""
                rewards.append(f"{statistics.median(known):.1f}{one}" if known else "-")
                steps = [s for s in (samples_by(run, seconds) for run in runs[side]) if s]
                counts.append(f"{int(statistics.median(steps)):,}" if steps else "-")
            table.add_row(f"{mark:g}", str(shared), *rewards, *counts)
        console.print(table)


def time_at(run: Run, samples: int) -> float | None:
    """When the run had played ``samples`` (its first report at or past them; None where it
    never got there)."""
    return next((t for t, steps in run.samples if steps >= samples), None)


def print_sample_table(record: Record, window: int, at: list[int]) -> None:
    """Each side's score by the games it had ended when it had played each count of samples
    (how fast each learns per sample, whatever its pace), on a window shared as by time."""
    for env, entry in record.items():
        runs = [(side, Run(**r)) for side, rs in entry["runs"].items() for r in rs]
        table = Table(title=f"{env}: mean raw score of the last W whole games at equal samples")
        for column in ("side", "seed", *(f"{n:,}" for n in at)):
            table.add_column(column, justify="right")
        times = {n: [time_at(run, n) for _, run in runs] for n in at}
        shared = {}
        for n in at:
            reached = [
                (run, t) for (_, run), t in zip(runs, times[n], strict=True) if t is not None
            ]
            shared[n] = min([window, *(ended_by(run, t) for run, t in reached)])
        for index, (side, run) in enumerate(runs):
            cells = []
            for n in at:
                t = times[n][index]
                score = mean_of_last(run, t, shared[n]) if t is not None else None
                cells.append(f"{score:.1f} (W {shared[n]})" if score is not None else "-")
            table.add_row(side, str(run.seed), *cells)
        console.print(table)


def side_of(into: dict[str, Any], side: str, runs: list[dict[str, Any]], path: Path) -> str:
    """The column ``runs`` from the record ``path`` join: ``side``'s, unless it already holds
    a run of one of their seeds (the same side run again, at another commit or defaults, is
    not another seed to take a median over: it gets a column named for its file)."""
    held = {run["seed"] for run in into["runs"].get(side, [])}
    clash = any(run["seed"] in held for run in runs)
    return f"{side} ({path.stem})" if clash else side


CLEANRL_REPO = "https://github.com/vwxyzjn/cleanrl"


def setup(cleanrl_repo: str) -> None:
    """Make ``.venv-cleanrl`` and ``.venv-sf`` (the zoo's is ``pictures.py --setup``).
    CleanRL's script comes from ``cleanrl_repo`` at :data:`CLEANRL_COMMIT`: GitHub, or a
    clone on this disk where the machine reaches no further than the package registries."""
    for python, packages in (
        (CLEANRL_PYTHON, ["envpool==1.2.5", "gym==0.26.2", "tyro", "tensorboard", "numpy<2"]),
        (SF_PYTHON, ["sample-factory==2.1.1", "gymnasium==0.29.1", "ale-py==0.8.1",
                     "shimmy[atari]==1.3.0", "numpy<2"]),
    ):  # fmt: skip
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(python.parent.parent)], check=True)
        pip = [str(python), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "torch>=2.3,<2.14", *packages], check=True)
    if not CLEANRL_SCRIPT.exists():
        with tempfile.TemporaryDirectory(prefix="cleanrl-src-") as folder:
            cloned = subprocess.run(
                ["git", "clone", "--quiet", "--no-checkout", cleanrl_repo, folder],
                capture_output=True, text=True,
            )  # fmt: skip
            shown = subprocess.run(
                ["git", "-C", folder, "show", f"{CLEANRL_COMMIT}:cleanrl/ppo_atari_envpool.py"],
                capture_output=True, text=True,
            )  # fmt: skip
        if cloned.returncode != 0 or shown.returncode != 0:
            why = (cloned.stderr or shown.stderr).strip().splitlines()[-1:]
            raise SystemExit(
                f"CleanRL's script not found in {cleanrl_repo} at {CLEANRL_COMMIT[:7]} "
                f"({' '.join(why)}): pass --cleanrl-repo PATH, a clone that holds it"
            )
        CLEANRL_SCRIPT.write_text(shown.stdout)
    console.print("CleanRL and Sample Factory installed beside lander")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup", action="store_true", help="make the peers' environments")
    parser.add_argument(
        "--cleanrl-repo", default=CLEANRL_REPO, help="with --setup: where CleanRL is cloned from"
    )
    parser.add_argument("--envs", default=",".join(ATARI_5 + SUITE), help="Gymnasium Atari ids")
    parser.add_argument("--seeds", type=int, default=1, help="seeds per side")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds from this one on")
    parser.add_argument("--minutes", type=float, default=20.0, help="wall minutes a side")
    parser.add_argument("--marks", default="5,10,20", help="minutes the table reads scores at")
    parser.add_argument("--window", type=int, default=100, help="whole games a score averages")
    parser.add_argument("--settings", default="{}", help="lander: JSON over its defaults")
    parser.add_argument("--sides", default=",".join(SIDES), help="which of " + ", ".join(SIDES))
    parser.add_argument("--out", type=Path, default=None, help="write every run here (JSON)")
    parser.add_argument("--table", type=Path, nargs="+", default=None, help="print --out files")
    parser.add_argument(
        "--samples", default="", help="with --table: scores at these sample counts too"
    )
    args = parser.parse_args()
    if args.setup:
        setup(args.cleanrl_repo)
        return
    if args.table is not None:
        joined: Record = {}
        for path in args.table:
            for env, entry in json.loads(path.read_text()).items():
                into = joined.setdefault(env, {"marks": entry["marks"], "runs": {}})
                for side, runs in entry["runs"].items():
                    if side == "lander" and entry.get("settings"):  # a candidate: its own column
                        side = "lander " + json.dumps(entry["settings"])
                    into["runs"].setdefault(side_of(into, side, runs, path), []).extend(runs)
        print_table(joined, args.window)
        if args.samples:
            at = [int(float(n)) for n in args.samples.split(",")]
            print_sample_table(joined, args.window, at)
        return
    sides = [side for side in args.sides.split(",") if side]
    for side, python in (("zoo", ZOO_PYTHON), ("cleanrl", CLEANRL_PYTHON), ("sf", SF_PYTHON)):
        if side in sides and not python.exists():
            raise SystemExit(f"no {python.parent.parent.name}: run --setup first")
    register_ale()
    settings = json.loads(args.settings)
    cap = args.minutes * 60.0
    record: Record = {}
    for env in args.envs.split(","):
        by_side: dict[str, list[Run]] = {side: [] for side in sides}
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            turn = seed % len(sides)
            for side in sides[turn:] + sides[:turn]:
                if side == "lander":
                    run = run_lander_side(env, seed, cap, settings)
                else:
                    run = {"zoo": run_zoo_side, "cleanrl": run_cleanrl, "sf": run_sample_factory}[
                        side
                    ](env, seed, cap)
                by_side[side].append(run)
                last = run.samples[-1][1] if run.samples else 0
                console.print(
                    f"  {env} seed {seed} {side}: {len(run.games)} games, {last:,} samples "
                    f"in {run.budget_s:.0f} s"
                )
                record[env] = {
                    "marks": [float(m) for m in args.marks.split(",")],
                    "settings": settings,
                    "runs": {s: [r.__dict__ for r in rs] for s, rs in by_side.items()},
                }
                if args.out is not None:  # after every run: a long benchmark keeps what it has
                    args.out.write_text(json.dumps(record))
        print_table({env: record[env]}, args.window)


if __name__ == "__main__":
    main()
