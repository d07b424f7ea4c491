"""Games that see: lander's defaults against RL Zoo's own trainer with its tuned settings
for pictures (its ``atari:`` entry, its ``CarRacing-v3`` entry), at equal wall time.

For each game, each seed, the two sides alternate (the order flips every seed), each for
``--minutes`` of wall clock on this machine:

- **zoo**: ``python -m rl_zoo3.train --algo ppo --env ENV --seed S`` in ``.venv-zoo``
  (``--setup`` makes it, with ale-py and OpenCV, as ``benchmarks/any_game.py --setup``): SB3's ``AtariWrapper`` with 4 frames stacked, the Nature CNN, 8 envs x 128
  steps, 4 epochs, a learning rate of 2.5e-4 and a clip of 0.1 both decaying over its
  10M-step budget; its periodic evaluation off (only faster);
- **lander**: ``lander train --game gym:ENV`` with nothing else set (or ``--settings``).

Both sides' training rewards are whole games' raw scores (the zoo's ``Monitor`` sits under
its ``AtariWrapper``; lander logs the game's own score), ``rollout/ep_rew_mean`` over the
last 100 games. The table gives per game the median over seeds of each side's reward at
each of ``--marks`` minutes (the last report before the mark), and of the time each side
took to the zoo's median reward at its last mark (a run that never got there counts as
never), and zoo / lander of those times.

    .venv/bin/python benchmarks/pictures.py --setup
    .venv/bin/python benchmarks/pictures.py                      # the suite, 40 minutes a side
    .venv/bin/python benchmarks/pictures.py --envs BreakoutNoFrameskip-v4 --minutes 10 \\
        --marks 5,10 --seeds 1 --out breakout.json
    .venv/bin/python benchmarks/pictures.py --table breakout.json pong.json
    .venv/bin/python benchmarks/pictures.py --table a.json b.json --samples 400000,800000

``--samples`` reads the files at equal samples instead: each run's reward at each count,
and its samples a second. A lander run is the same run at equal samples whatever else the
machine did meanwhile, so runs made side by side, or beside other load, compare there
(their seconds do not).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

from any_game import ZOO_PYTHON, Curve, run_lander, run_zoo, setup
from rich.console import Console
from rich.table import Table

from games.gym.atari import register_ale

SUITE = (
    "PongNoFrameskip-v4",
    "BreakoutNoFrameskip-v4",
    "SpaceInvadersNoFrameskip-v4",
    "CarRacing-v3",
)
ZOO_BUDGET = 10_000_000
"""The zoo's own ``n_timesteps`` for Atari (its schedules decay over it); time ends a run."""
console = Console(width=150)


def reward_at(run: Curve, seconds: float) -> float | None:
    """The run's training reward at its last report before ``seconds`` (None before any)."""
    before = [reward for t, _, reward in run.points if t <= seconds]
    return before[-1] if before else None


def median_or_none(values: list[float | None]) -> float | None:
    """The median of the values a run reported (None where none did)."""
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def reward_at_samples(run: Curve, samples: int) -> float | None:
    """The run's training reward at its last report at or before ``samples`` (None before
    any, or where the run ended before ``samples``)."""
    if not run.points or run.points[-1][1] < samples:
        return None
    before = [reward for _, steps, reward in run.points if steps <= samples]
    return before[-1] if before else None


def time_to(runs: list[Curve], target: float) -> float:
    """Median seconds to the first report at or above ``target`` (never: infinity)."""
    times = []
    for run in runs:
        seconds, _ = run.reached(target)
        times.append(seconds if seconds is not None else math.inf)
    return statistics.median(times)


def print_table(record: dict[str, dict[str, object]]) -> None:
    """Per game: each side's median reward at each mark, and the times to the zoo's reward at
    the last mark."""
    marks = sorted({int(m) for entry in record.values() for m in entry["marks"]})  # type: ignore[attr-defined]
    table = Table(title="Training reward (whole games, raw) at equal wall time: lander vs RL Zoo")
    columns = ["game", "seeds"]
    for minutes in marks:
        columns += [f"zoo {minutes} min", f"lander {minutes} min"]
    columns += ["target", "zoo s", "lander s", "zoo / lander"]
    for column in columns:
        table.add_column(column, justify="right")
    ratios = []
    for env, entry in record.items():
        runs = {
            side: [Curve(**run) for run in curves]
            for side, curves in entry["runs"].items()  # type: ignore[attr-defined]
        }
        row = [env, str(max(len(runs["zoo"]), len(runs["lander"])))]
        for minutes in marks:
            for side in ("zoo", "lander"):
                value = median_or_none([reward_at(run, minutes * 60.0) for run in runs[side]])
                row.append("-" if value is None else f"{value:.1f}")
        last = max(int(m) for m in entry["marks"])  # type: ignore[attr-defined]
        target = median_or_none([reward_at(run, last * 60.0) for run in runs["zoo"]])
        if target is None or not runs["lander"]:
            row += ["-", "-", "-", "-"]
        else:
            zoo_s, lander_s = time_to(runs["zoo"], target), time_to(runs["lander"], target)
            ratio = zoo_s / lander_s if math.isfinite(lander_s) else 0.0
            ratios.append(ratio)
            row += [
                f"{target:.1f}",
                f"{zoo_s:,.0f}" if math.isfinite(zoo_s) else "never",
                f"{lander_s:,.0f}" if math.isfinite(lander_s) else "never",
                f"{ratio:.2f}",
            ]
        table.add_row(*row)
    console.print(table)
    if ratios:
        console.print(
            f"zoo / lander in time to the zoo's last-mark reward: median "
            f"{statistics.median(ratios):.2f}, lowest {min(ratios):.2f}"
        )


def print_samples(files: list[Path], counts: list[int]) -> None:
    """Every run of the ``--out`` files at equal samples: its reward at each of ``counts``
    ("-" where it ended before) and its samples a second, labelled by file, side, seed and
    the lander settings it ran with."""
    table = Table(title="Training reward (whole games, raw) at equal samples")
    for column in ("file", "game", "side", "seed", "settings"):
        table.add_column(column)
    for count in counts:
        table.add_column(f"{count:,}", justify="right")
    table.add_column("samples/s", justify="right")
    for path in files:
        for env, entry in json.loads(path.read_text()).items():
            settings = json.dumps(entry["settings"]) if "settings" in entry else "?"
            for side, curves in entry["runs"].items():
                for fields in curves:
                    run = Curve(**fields)
                    values = [reward_at_samples(run, count) for count in counts]
                    last_t, last_steps, _ = run.points[-1] if run.points else (0.0, 0, 0.0)
                    table.add_row(
                        path.stem,
                        env,
                        side,
                        str(run.seed),
                        settings if side == "lander" else "-",
                        *("-" if v is None else f"{v:.1f}" for v in values),
                        f"{last_steps / last_t:,.0f}" if last_t else "-",
                    )
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup", action="store_true", help="make .venv-zoo and stop")
    parser.add_argument("--envs", default=",".join(SUITE), help="comma-separated Gymnasium ids")
    parser.add_argument("--seeds", type=int, default=1, help="seeds per side")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds from this one on")
    parser.add_argument("--minutes", type=float, default=40.0, help="wall minutes a side")
    parser.add_argument("--marks", default="10,20,40", help="minutes the table reads rewards at")
    parser.add_argument("--settings", default="{}", help="lander: JSON over its defaults")
    parser.add_argument("--sides", default="zoo,lander", help="zoo, lander or both")
    parser.add_argument("--out", type=Path, default=None, help="write every curve here (JSON)")
    parser.add_argument("--table", type=Path, nargs="+", default=None, help="print --out files")
    parser.add_argument(
        "--samples", default=None, help="with --table: rewards at these sample counts instead"
    )
    args = parser.parse_args()
    if args.setup:
        setup()
        return
    if args.table is not None and args.samples is not None:
        print_samples(args.table, [int(float(c)) for c in args.samples.split(",")])
        return
    if args.table is not None:
        joined: dict[str, dict[str, object]] = {}
        for path in args.table:
            for env, entry in json.loads(path.read_text()).items():
                into = joined.setdefault(
                    env, {"marks": entry["marks"], "runs": {"zoo": [], "lander": []}}
                )
                for side, curves in entry["runs"].items():
                    into["runs"][side].extend(curves)  # type: ignore[index]
        print_table(joined)
        return
    if not ZOO_PYTHON.exists() and "zoo" in args.sides:
        raise SystemExit("no .venv-zoo: run benchmarks/pictures.py --setup first")
    register_ale()
    settings = json.loads(args.settings)
    sides = args.sides.split(",")
    marks = [float(m) for m in args.marks.split(",")]
    cap = args.minutes * 60.0
    record: dict[str, dict[str, object]] = {}
    for env in args.envs.split(","):
        runs: dict[str, list[Curve]] = {"zoo": [], "lander": []}
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            order = ("zoo", "lander") if seed % 2 == 0 else ("lander", "zoo")
            for side in (side for side in order if side in sides):
                run = (
                    run_zoo(env, seed, ZOO_BUDGET, cap)
                    if side == "zoo"
                    else run_lander(env, seed, ZOO_BUDGET, cap, settings)
                )
                runs[side].append(run)
                console.print(
                    f"  {env} seed {seed} {side}: best {run.best()} in {run.budget_s:.0f} s, "
                    f"{run.points[-1][1] if run.points else 0:,} steps"
                )
        record[env] = {
            "marks": marks,
            "settings": settings,
            "runs": {side: [run.__dict__ for run in curves] for side, curves in runs.items()},
        }
        if args.out is not None:  # after every game: a long run keeps what it has
            args.out.write_text(json.dumps(record))
        print_table(record)


if __name__ == "__main__":
    main()
