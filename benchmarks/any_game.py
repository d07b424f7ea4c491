"""Time to a good bot on games nobody tuned lander for: lander's defaults against RL Zoo's
own trainer with its tuned settings, on Gymnasium's classics.

For each environment, each seed, the two sides alternate (the order flips every seed):

- **zoo**: ``python -m rl_zoo3.train --algo ppo --env ENV --seed S`` in a virtual
  environment of its own (``.venv-zoo``: ``--setup`` makes it), with the hand-tuned
  settings of its ``hyperparams/ppo.yml`` and its budget ``n_timesteps``; its periodic
  evaluation is off (``--eval-freq -1``), which only makes it faster;
- **lander**: ``lander train --game gym:ENV`` with nothing else set (the defaults a user
  gets: 4 game instances of 4 copies over TCP), for at most the zoo's budget.

Both log ``rollout/ep_rew_mean`` (the mean of the last 100 training episodes); lander's
side reports it at every rollout's end with the clock since launch, the zoo's is read
from its TensorBoard events (wall time since launch). The target of an environment is
the lower of its ``reward_threshold`` (solved) and 90% of the best training reward the
zoo's runs reached in this benchmark (for a negative best, 10% below it). The table gives,
per environment, the median over seeds of each side's time and samples to the target (a
run that never got there counts as never) and zoo / lander (0 where lander never did).

    .venv/bin/python benchmarks/any_game.py --setup          # once: .venv-zoo (RL Zoo 2.9)
    .venv/bin/python benchmarks/any_game.py                  # the whole suite, 3 seeds
    .venv/bin/python benchmarks/any_game.py --envs CartPole-v1,Pendulum-v1 --seeds 1
    .venv/bin/python benchmarks/any_game.py --settings '{"normalize_rewards": false}'  # a candidate
    .venv/bin/python benchmarks/any_game.py --table a.json b.json  # --out files, merged
    .venv/bin/python benchmarks/any_game.py --envs MiniGrid-DoorKey-5x5-v0 --gym-packages minigrid
    .venv/bin/python benchmarks/any_game.py --envs BipedalWalker-v3 --sides zoo --out z.json
        # a long environment's sides apart (each on a quiet box), merged by --table
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import gymnasium
from measure import free_base_port
from rich.console import Console
from rich.table import Table

from games.gym.packages import import_packages

ROOT = Path(__file__).resolve().parent.parent
RUNNER = Path(__file__).resolve().parent / "skill_runner.py"
ZOO_PYTHON = ROOT / ".venv-zoo" / "bin" / "python"
SUITE = (
    "CartPole-v1",
    "Acrobot-v1",
    "Pendulum-v1",
    "LunarLander-v3",
    "LunarLanderContinuous-v3",
    "BipedalWalker-v3",
)
ONE_SEED = frozenset({"BipedalWalker-v3"})
"""Environments whose budget (5M steps) allows one seed per side."""
console = Console(width=150)


@dataclass
class Curve:
    """One side's run: (seconds since launch, steps, training reward) at each report,
    (seconds, score) of every whole game where the side writes them, and each of those
    games' length in steps where it does (lander's: a game cut by the step limit, a rally
    that never ended, tells itself from a close loss)."""

    side: str
    seed: int
    points: list[tuple[float, int, float]]
    budget_s: float
    games: list[tuple[float, float]] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)

    def best(self) -> float | None:
        return max((r for _, _, r in self.points), default=None)

    def reached(self, target: float) -> tuple[float | None, int | None]:
        """Seconds and samples to the first report at or above ``target``."""
        for t, steps, reward in self.points:
            if reward >= target:
                return t, steps
        return None, None


def zoo_settings(env: str) -> dict[str, object]:
    """The zoo's tuned entry for ``env`` (its ``hyperparams/ppo.yml``)."""
    import yaml

    found = subprocess.run(
        [str(ZOO_PYTHON), "-c", "import rl_zoo3, os; print(os.path.dirname(rl_zoo3.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    table = yaml.load((Path(found) / "hyperparams" / "ppo.yml").read_text(), Loader=yaml.Loader)
    return dict(table[env])


def run_zoo(env: str, seed: int, budget: int, cap_s: float, packages: Sequence[str] = ()) -> Curve:
    """RL Zoo's own trainer on ``env`` with its tuned settings (``--gym-packages``: the
    packages that register the id, as the zoo imports them); every whole game from its
    ``Monitor`` files, which sit under its wrappers (an Atari game's raw score)."""
    with tempfile.TemporaryDirectory(prefix="zoo-") as folder:
        logs = Path(folder)
        launched = time.time()
        command = [
            str(ZOO_PYTHON), "-m", "rl_zoo3.train", "--algo", "ppo", "--env", env,
            "--seed", str(seed), "--eval-freq", "-1", "--tensorboard-log", str(logs / "tb"),
            "--log-folder", str(logs / "zoo"), "-n", str(budget), "--verbose", "0",
            *(["--gym-packages", *packages] if packages else []),
        ]  # fmt: skip
        try:
            subprocess.run(command, capture_output=True, timeout=cap_s, check=True)
        except subprocess.TimeoutExpired:
            console.print(f"  zoo {env} seed {seed}: stopped at the {cap_s:.0f} s cap")
        except subprocess.CalledProcessError as exc:
            raise SystemExit(f"rl_zoo3 failed on {env}:\n{exc.stderr.decode()[-2000:]}") from None
        points = _tensorboard_curve(logs / "tb", launched)
        games = monitor_games(logs / "zoo", launched)
    return Curve("zoo", seed, points, time.time() - launched, games)


def monitor_games(folder: Path, launched: float) -> list[tuple[float, float]]:
    """Every game in SB3 ``Monitor`` files (a JSON header with ``t_start``, then ``r,l,t``
    rows, ``t`` counted from ``t_start``), by the time it ended."""
    games: list[tuple[float, float]] = []
    for path in folder.rglob("*monitor.csv"):
        lines = path.read_text().splitlines()
        start = json.loads(lines[0].lstrip("#"))["t_start"]
        for row in lines[2:]:
            score, _, t = row.split(",")[:3]
            games.append((start + float(t) - launched, float(score)))
    return sorted(games)


def _tensorboard_curve(folder: Path, launched: float) -> list[tuple[float, int, float]]:
    """``rollout/ep_rew_mean`` of every event file under ``folder``, by wall time."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    points: list[tuple[float, int, float]] = []
    for events in folder.rglob("events.out.tfevents.*"):
        accumulator = EventAccumulator(str(events), size_guidance={"scalars": 0})
        accumulator.Reload()
        if "rollout/ep_rew_mean" in accumulator.Tags()["scalars"]:
            points += [
                (e.wall_time - launched, int(e.step), float(e.value))
                for e in accumulator.Scalars("rollout/ep_rew_mean")
            ]
    return sorted(points)


def run_lander(
    env: str, seed: int, budget: int, cap_s: float, settings: dict[str, object]
) -> Curve:
    """``lander train --game gym:ENV`` with its defaults (and ``settings``)."""
    with tempfile.TemporaryDirectory(prefix="lander-any-") as folder:
        events = Path(folder) / "events.jsonl"
        launched = time.time()
        chosen = {"game": f"gym:{env}", "seed": seed, **settings}
        # The target is never above the solved score: a run that reached it is done.
        threshold = gymnasium.spec(env).reward_threshold
        stop = [] if threshold is None else ["--stop-reward", str(threshold)]
        command = [
            sys.executable, str(RUNNER), "--side", "lander", "--launched", str(launched),
            "--seconds", str(cap_s), "--steps", str(budget), "--events", str(events),
            "--snapshots", str(Path(folder) / "snapshots"), "--snapshot-every", "1e9",
            "--port", str(free_base_port(8)), "--settings", json.dumps(chosen), *stop,
        ]  # fmt: skip
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"lander failed on {env}:\n{done.stderr[-2000:]}")
        rows = [json.loads(line) for line in events.read_text().splitlines()]
    points = [
        (r["t"], int(r["steps"]), float(r["reward"]))
        for r in rows
        if r["kind"] == "rollout" and r["reward"] is not None
    ]
    ended = [r for r in rows if r["kind"] == "game"]
    games = [(r["t"], float(r["score"])) for r in ended]
    lengths = [int(r["length"]) for r in ended]
    return Curve("lander", seed, points, time.time() - launched, games, lengths)


def target_of(env: str, zoo_runs: list[Curve]) -> float:
    """The lower of the environment's solved score and 90% of the zoo's best."""
    bests = [b for b in (run.best() for run in zoo_runs) if b is not None]
    if not bests:
        raise SystemExit(f"the zoo logged no training reward on {env}")
    best = max(bests)
    ninety = best - 0.1 * abs(best)
    threshold = gymnasium.spec(env).reward_threshold
    return ninety if threshold is None else min(float(threshold), ninety)


def summarise(runs: list[Curve], target: float) -> tuple[float, float, int]:
    """Median seconds and samples to ``target`` over the runs (a run that never got there
    counts as never: infinity), and how many got there."""
    times, samples = [], []
    for run in runs:
        seconds, steps = run.reached(target)
        times.append(seconds if seconds is not None else math.inf)
        samples.append(steps if steps is not None else math.inf)
    hits = sum(math.isfinite(t) for t in times)
    return statistics.median(times), statistics.median(samples), hits


def merged(records: list[dict[str, dict[str, object]]]) -> dict[str, dict[str, object]]:
    """Several runs' records as one (more seeds of the same environments): each side's runs
    joined, the target recomputed from every zoo run."""
    result: dict[str, dict[str, object]] = {}
    for record in records:
        for env, entry in record.items():
            joined = result.setdefault(
                env, {"budget": entry["budget"], "runs": {"zoo": [], "lander": []}}
            )
            for side, curves in entry["runs"].items():  # type: ignore[attr-defined]
                joined["runs"][side].extend(curves)  # type: ignore[index]
    for env, entry in result.items():
        zoo = [Curve(**run) for run in entry["runs"]["zoo"]]  # type: ignore[index]
        entry["target"] = target_of(env, zoo)
    return result


def _shown(value: float, unit: str = "") -> str:
    return f"{value:,.0f}{unit}" if math.isfinite(value) else "never"


def print_table(record: dict[str, dict[str, object]]) -> None:
    """The table of a benchmark's record (:func:`main` writes it with ``--out``): per
    environment, each side's median time and samples to the target and zoo / lander (0
    where lander never got there, infinite where only lander did)."""
    table = Table(
        title="Time to the target training reward: lander's defaults against RL Zoo's tuned PPO"
    )
    for column in (
        "environment", "target", "zoo budget", "zoo s (hits)", "lander s (hits)",
        "zoo / lander", "zoo samples", "lander samples", "zoo best", "lander best",
    ):  # fmt: skip
        table.add_column(column, justify="right")
    ratios: list[float] = []
    for env, entry in record.items():
        target = float(entry["target"])  # type: ignore[arg-type]
        runs = {
            side: [Curve(**run) for run in curves]
            for side, curves in entry["runs"].items()  # type: ignore[attr-defined]
        }
        zoo_s, zoo_n, zoo_hits = summarise(runs["zoo"], target)
        lander_s, lander_n, lander_hits = summarise(runs["lander"], target)
        ratio = zoo_s / lander_s if math.isfinite(lander_s) else 0.0
        ratios.append(ratio)
        bests = {side: max((r.best() or -math.inf) for r in runs[side]) for side in runs}
        seeds = len(runs["zoo"])
        table.add_row(
            env, f"{target:.1f}", f"{entry['budget']:,}",
            f"{_shown(zoo_s)} ({zoo_hits}/{seeds})", f"{_shown(lander_s)} ({lander_hits}/{seeds})",
            f"{ratio:.2f}", _shown(zoo_n), _shown(lander_n),
            f"{bests['zoo']:.1f}", f"{bests['lander']:.1f}",
        )  # fmt: skip
    console.print(table)
    console.print(
        f"zoo / lander over the suite: median {statistics.median(ratios):.2f}, "
        f"lowest {min(ratios):.2f}"
    )


def setup() -> None:
    """Make ``.venv-zoo``: RL Zoo 2.9 with the CPU torch on this disk and Box2D."""
    python = ZOO_PYTHON
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(python.parent.parent)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "torch>=2.3,<2.14"], check=True)
    # tensorboard: the zoo logs rollout/ep_rew_mean there, which is what is read back.
    # ale-py and OpenCV: the zoo's Atari side (benchmarks/pictures.py); minigrid: its
    # MiniGrid entries (--gym-packages minigrid).
    subprocess.run(
        [*pip, "rl_zoo3>=2.9,<2.10", "gymnasium[box2d]>=1.0,<2", "tensorboard>=2.15,<3",
         "ale-py>=0.9,<1", "opencv-python-headless>=4.8,<5", "minigrid>=3,<4"],
        check=True,
    )  # fmt: skip
    console.print(f"RL Zoo installed in {python.parent.parent}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup", action="store_true", help="make .venv-zoo and stop")
    parser.add_argument("--envs", default=",".join(SUITE), help="comma-separated Gymnasium ids")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per side (1 for BipedalWalker)")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds from this one on")
    parser.add_argument("--cap", type=float, default=1800.0, help="seconds a run may take at most")
    parser.add_argument(
        "--settings", default="{}", help="lander: JSON of settings over its defaults"
    )
    parser.add_argument(
        "--sides",
        default="zoo,lander",
        help="which sides to run (a long environment's sides may run apart, merged by --table)",
    )
    parser.add_argument(
        "--gym-packages",
        default="",
        help="comma-separated packages that register the ids (minigrid): both sides import them",
    )
    parser.add_argument("--out", type=Path, default=None, help="write every curve here (JSON)")
    parser.add_argument(
        "--table",
        type=Path,
        nargs="+",
        default=None,
        help="print the table of --out files (merged)",
    )
    args = parser.parse_args()
    if args.setup:
        setup()
        return
    if args.table is not None:
        print_table(merged([json.loads(path.read_text()) for path in args.table]))
        return
    if not ZOO_PYTHON.exists():
        raise SystemExit("no .venv-zoo: run benchmarks/any_game.py --setup first")
    settings = json.loads(args.settings)
    packages = [name for name in args.gym_packages.split(",") if name]
    if packages:  # gymnasium.spec() of their ids here, and lander's --gym-package
        import_packages(packages)
        settings = {"gym_packages": packages, **settings}
    sides = args.sides.split(",")
    if not sides or set(sides) - {"zoo", "lander"}:
        raise SystemExit(f"--sides takes zoo, lander or both, not {args.sides!r}")
    record: dict[str, dict[str, object]] = {}
    for env in args.envs.split(","):
        budget = int(float(zoo_settings(env)["n_timesteps"]))  # type: ignore[arg-type]
        seeds = 1 if env in ONE_SEED else args.seeds
        runs: dict[str, list[Curve]] = {"zoo": [], "lander": []}
        for seed in range(args.first_seed, args.first_seed + seeds):
            order = ("zoo", "lander") if seed % 2 == 0 else ("lander", "zoo")
            for side in (side for side in order if side in sides):
                run = (
                    run_zoo(env, seed, budget, args.cap, packages)
                    if side == "zoo"
                    else run_lander(env, seed, budget, args.cap, settings)
                )
                runs[side].append(run)
                console.print(
                    f"  {env} seed {seed} {side}: best {run.best()} in {run.budget_s:.0f} s, "
                    f"{run.points[-1][1] if run.points else 0:,} steps"
                )
        record[env] = {
            "target": target_of(env, runs["zoo"]) if runs["zoo"] else None,
            "budget": budget,
            "runs": {side: [run.__dict__ for run in curves] for side, curves in runs.items()},
        }
        if args.out is not None:  # after every environment: a long run keeps what it has
            args.out.write_text(json.dumps(record))
        if len(sides) == 2:
            print_table(record)


if __name__ == "__main__":
    main()
