"""Time to a good bot: ``lander train`` against godot-rl 0.8.2's SB3 example, same game.

Wall time from launch (the interpreter's start, imports and the games' start-up all
count) to two marks:

- a training reward: ``rollout/ep_rew_mean`` (last 100 episodes) first at or above ``--reward``;
- a skill: the deterministic policy's evaluated normalized score (random policy 0,
  reference controller 1) first at or above ``--score``.

Each side trains in its own process (``skill_runner.py``) for ``--seconds`` and saves a
policy snapshot about every second of its clock; the snapshots are evaluated after the
run, so evaluating never slows the side being timed. The bundled game is evaluated on
its in-process physics (identical to the game's), the Godot game through the bridge with
its baselines measured on the same Godot game. Sides alternate within each round (the
order flips every round) and the table gives medians and the spread over ``--rounds``.

    .venv/bin/python benchmarks/godot_rl_comparison.py --setup      # once: .venv-godotrl
    .venv/bin/python benchmarks/time_to_skill.py [--games bundled,godot] [--rounds 3] [--seconds 45]
    .venv/bin/python benchmarks/time_to_skill.py --sides lander \\
        --candidate '{"n_steps": 64, "batch_size": 256}'            # lander against other settings
    .venv/bin/python benchmarks/time_to_skill.py --busy 2 ...       # beside two niced CPU hogs

godot-rl's side is its example's set-up: the same game binary with the same instances and
agents, ``speedup`` as given, PPO with the example's hyperparameters (see skill_runner.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from measure import busy_neighbours, free_base_port
from rich.console import Console
from rich.table import Table

from game_bridge.frame_stack import FrameStack, StackedPolicy
from game_bridge.launcher import LaunchConfig
from game_bridge.vec_env import GameVecEnv
from games.lander.controllers import random_actions, reference_actions
from games.lander.scoring import LanderSettings
from training.evaluation.scoring import (
    Policy,
    evaluate_in_process,
    evaluate_through_bridge,
    model_policy,
)
from training.ppo.inference import load_for_inference

ROOT = Path(__file__).resolve().parent.parent
RUNNER = Path(__file__).resolve().parent / "skill_runner.py"
GODOT_RL_PYTHON = ROOT / ".venv-godotrl" / "bin" / "python"
GAMES = {
    "bundled": ROOT / "build" / "lander_game.x86_64",
    "godot": ROOT / "examples" / "godot_lander" / "lander.x86_64",
}
console = Console(width=150)


@dataclass
class RunResult:
    """What one timed run reached, in clock seconds from launch."""

    side: str
    to_reward: float | None
    to_score: float | None
    final_reward: float | None
    final_steps: int
    steps_at_reward: int | None
    cores_collect: float | None
    cores_update: float | None
    update_share: float
    scores: list[tuple[float, float]] = field(default_factory=list)
    first_step: float | None = None
    """lander's own start-up clock: seconds from the process's start to its first step."""


def _snapshot_policy(path: Path, side: str, stacked: int = 1) -> Policy:
    """The deterministic policy of a snapshot (godot-rl's takes a dict observation; one
    trained on its last ``stacked`` observations keeps them, as training stacked them)."""
    if side == "godot-rl":
        from stable_baselines3 import PPO

        model = PPO.load(str(path), device="cpu")

        def act(obs: np.ndarray) -> np.ndarray:
            actions, _ = model.predict({"obs": obs}, deterministic=True)
            return np.asarray(actions)

        return act
    model, normalizer = load_for_inference(path)
    if stacked > 1:
        return StackedPolicy(model_policy(model, normalizer), FrameStack(stacked))
    return model_policy(model, normalizer)


ScoreOf = Callable[[Policy, bool, bool], float]
"""What a side's snapshots are scored by: a policy, on pixels, on glimpses."""


class Scorer:
    """Normalized score of a policy on one game (random 0, reference controller 1)."""

    def __init__(self, game: str, episodes: int, difficulty: int, speedup: float) -> None:
        self.game, self.episodes, self.speedup = game, episodes, speedup
        self.settings = LanderSettings(difficulty=difficulty)
        self.game_args = {"agents": "8", "difficulty": str(difficulty)}
        if game == "godot":
            rng = np.random.default_rng(0)
            self.random = self._godot_mean(lambda o: random_actions(rng, len(o), False))
            self.reference = self._godot_mean(reference_actions)
            console.print(
                f"Godot game baselines: random {self.random:.1f}, reference {self.reference:.1f}"
            )

    def _godot_mean(self, policy: Policy) -> float:
        env = GameVecEnv(
            LaunchConfig(
                command=[str(GAMES["godot"])],
                n_instances=2,
                base_port=free_base_port(2),
                speedup=self.speedup,
                seed=777,
                game_args=self.game_args,
            )
        )
        try:
            return evaluate_through_bridge(policy, env, self.episodes).mean_reward
        finally:
            env.close()

    def __call__(self, policy: Policy, pixels: bool = False, glimpse: bool = False) -> float:
        """:param pixels: the policy sees the bundled lander's camera (its baselines don't).
        :param glimpse: the policy sees the target briefly (``observation=glimpse``)."""
        if self.game == "godot":
            mean = self._godot_mean(policy)
            return (mean - self.random) / (self.reference - self.random)
        settings = replace(self.settings, pixels=pixels, glimpse=glimpse)
        score = evaluate_in_process(policy, self.episodes, settings=settings).normalized_score
        assert score is not None
        return score


def first_skilled(
    snapshots: list[tuple[float, Path]], score: Callable[[Path], float], target: float
) -> tuple[float | None, list[tuple[float, float]]]:
    """The clock of the first snapshot scoring ``target`` or more.

    Looks at every third snapshot first, then at the ones between the last miss and the
    first hit, so a long run costs a third of the evaluations.
    """
    scored: dict[int, float] = {}

    def at(i: int) -> float:
        if i not in scored:
            scored[i] = score(snapshots[i][1])
        return scored[i]

    stride = 3
    hit = next((i for i in range(0, len(snapshots), stride) if at(i) >= target), None)
    if hit is not None:
        hit = next(i for i in range(max(0, hit - stride + 1), hit + 1) if at(i) >= target)
    curve = [(snapshots[i][0], scored[i]) for i in sorted(scored)]
    return (snapshots[hit][0] if hit is not None else None), curve


@dataclass
class Trained:
    """One timed run's events and snapshots, and how its policies are scored."""

    side: str
    lines: list[dict[str, Any]]
    snapshots: list[tuple[float, Path]]
    score: Callable[[Path], float]
    """The normalized score of a snapshot (on the observations the side trained on)."""


def train_side(
    side: str, game: str, args: argparse.Namespace, scorer: ScoreOf, scratch: Path
) -> Trained:
    """Launch one timed run of ``side`` (``godot-rl``, ``lander`` or ``candidateN``, whose
    settings are ``args.candidate[N - 1]``) and read what it reported."""
    python = GODOT_RL_PYTHON if side == "godot-rl" else Path(sys.executable)
    folder = Path(tempfile.mkdtemp(prefix=f"{side}-", dir=scratch))
    events = folder / "events.jsonl"
    settings = args.candidate[int(side[9:]) - 1] if side.startswith("candidate") else "{}"
    binary = GAMES[game]
    game_args = json.loads(settings).get("game_args") or {}
    if args.difficulty != 1:
        game_args = {**game_args, "difficulty": str(args.difficulty)}
        settings = json.dumps({**json.loads(settings), "game_args": game_args})
    # a camera candidate is scored on frames, a glimpse one on glimpses
    pixels = game_args.get("observation") == "pixels"
    glimpse = game_args.get("observation") == "glimpse"
    stacked = int(json.loads(settings).get("stack_coordinates", 1))
    command = [
        str(python),
        str(RUNNER),
        "--side",
        "godot-rl" if side == "godot-rl" else "lander",
        "--seconds",
        str(args.seconds),
        "--events",
        str(events),
        "--snapshots",
        str(folder / "snapshots"),
        "--snapshot-every",
        str(getattr(args, "snapshot_every", 1.0)),
        "--n-parallel",
        str(args.n_parallel),
        "--agents",
        str(args.agents),
        "--speedup",
        str(args.speedup),
        "--port",
        str(free_base_port(args.n_parallel, 33000)),
        "--settings",
        settings,
    ]
    # lander's default start of the bundled game forks it; godot-rl launches the binary.
    if side == "godot-rl" or game == "godot":
        command += ["--binary", str(binary)]
    if side == "godot-rl" and args.difficulty != 1:
        command += ["--difficulty", str(args.difficulty)]
    command += ["--launched", repr(time.time())]
    with busy_neighbours(args.busy):
        completed = subprocess.run(
            command, capture_output=True, text=True, timeout=args.seconds + 300, cwd=ROOT
        )
    if completed.returncode != 0:
        raise SystemExit(f"{side} failed:\n{completed.stderr[-3000:]}")
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    snapshots = [(e["t"], Path(e["path"])) for e in lines if e["kind"] == "snapshot"]
    return Trained(
        side,
        lines,
        snapshots,
        lambda path: scorer(_snapshot_policy(path, side, stacked), pixels, glimpse),
    )


def run_side(
    side: str, game: str, args: argparse.Namespace, scorer: ScoreOf, scratch: Path
) -> RunResult:
    """Launch one timed run, then evaluate its snapshots."""
    trained = train_side(side, game, args, scorer, scratch)
    lines = trained.lines
    rollouts = [e for e in lines if e["kind"] == "rollout"]
    hit = next((e for e in rollouts if (e["reward"] or -1e9) >= args.reward), None)
    to_score, curve = first_skilled(trained.snapshots, trained.score, args.score)
    last = rollouts[-1]
    wall = last["wall_collect"] + last["wall_update"]
    startup: dict[str, float] = next((e["marks"] for e in lines if e["kind"] == "startup"), {})
    return RunResult(
        side,
        hit["t"] if hit else None,
        to_score,
        last["reward"],
        last["steps"],
        hit["steps"] if hit else None,
        last["cores_collect"],
        last["cores_update"],
        last["wall_update"] / wall if wall else 0.0,
        curve,
        startup.get("first step"),
    )


def _median(values: list[float | None], fmt: str = "{:.1f}") -> str:
    """Median and spread; a run that missed the mark counts as beyond every other."""
    reached = sorted(v for v in values if v is not None)
    missed = len(values) - len(reached)
    if len(reached) <= len(values) // 2:
        return f"not reached ({missed}/{len(values)} missed)"
    ordered = reached + [float("inf")] * missed
    median = statistics.median(ordered)
    spread = f"{fmt.format(reached[0])}-" + ("miss" if missed else fmt.format(reached[-1]))
    return f"{fmt.format(median)} ({spread})"


def _plain_median(values: list[float | None]) -> float | None:
    reached = [v for v in values if v is not None]
    return statistics.median(reached) if len(reached) > len(values) // 2 else None


def report(game: str, results: dict[str, list[RunResult]], args: argparse.Namespace) -> None:
    """One table per game: medians and spread per side, and ratios to the first side."""
    table = Table(
        title=f"{game} game, {args.n_parallel} x {args.agents}, difficulty {args.difficulty}: "
        f"seconds from launch, median (min-max) of {args.rounds}"
    )
    for column in (
        "side",
        "first step",
        f"to reward {args.reward:g}",
        f"to score {args.score:g}",
        "steps at reward",
        f"reward at {args.seconds:g} s",
        f"steps in {args.seconds:g} s",
        "cores collect / update",
        "update share",
    ):
        table.add_column(column, justify="right")
    for side, runs in results.items():
        starts = [r.first_step for r in runs]
        table.add_row(
            side,
            _median(starts, "{:.2f}") if any(v is not None for v in starts) else "-",
            _median([r.to_reward for r in runs]),
            _median([r.to_score for r in runs]),
            _median([r.steps_at_reward for r in runs], "{:,.0f}"),
            _median([r.final_reward for r in runs]),
            _median([float(r.final_steps) for r in runs], "{:,.0f}"),
            f"{statistics.median(r.cores_collect or 0 for r in runs):.2f} / "
            f"{statistics.median(r.cores_update or 0 for r in runs):.2f}",
            f"{statistics.median(r.update_share for r in runs):.2f}",
        )
    console.print(table)
    sides = list(results)
    for other in sides[1:]:
        for mark, key in (("reward", "to_reward"), ("score", "to_score")):
            mine = _plain_median([getattr(r, key) for r in results[other]])
            base = _plain_median([getattr(r, key) for r in results[sides[0]]])
            if mine and base:
                console.print(f"  {other} / {sides[0]}, time to {mark}: {mine / base:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--games", default="bundled,godot", help="bundled, godot or both")
    parser.add_argument("--sides", default="godot-rl,lander", help="godot-rl and/or lander")
    parser.add_argument(
        "--candidate",
        action="append",
        default=[],
        help="JSON of lander settings to try (repeat for several: sides candidate1, candidate2, ...)",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=45.0, help="training time per run")
    parser.add_argument("--reward", type=float, default=200.0, help="training reward mark")
    parser.add_argument("--score", type=float, default=0.9, help="normalized score mark")
    parser.add_argument("--episodes", type=int, default=64, help="episodes per evaluation")
    parser.add_argument("--n-parallel", type=int, default=4)
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--speedup", type=float, default=1000.0)
    parser.add_argument("--difficulty", type=int, default=1)
    parser.add_argument("--curves", action="store_true", help="print each run's scores")
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        help="CPU-bound processes (nice 10) running beside each side while it trains",
    )
    args = parser.parse_args()
    sides = [s for s in args.sides.split(",") if s] + [
        f"candidate{i + 1}" for i in range(len(args.candidate))
    ]
    if "godot-rl" in sides and not GODOT_RL_PYTHON.exists():
        sys.exit("godot-rl is not installed: run benchmarks/godot_rl_comparison.py --setup")
    for game in args.games.split(","):
        if not GAMES[game].exists():
            sys.exit(f"{GAMES[game]} is missing (./lander setup writes the bundled game)")
        scorer = Scorer(game, args.episodes, args.difficulty, args.speedup)
        results: dict[str, list[RunResult]] = {side: [] for side in sides}
        with tempfile.TemporaryDirectory(prefix="time-to-skill-") as scratch:
            for round_ in range(args.rounds):
                for side in sides if round_ % 2 == 0 else sides[::-1]:
                    result = run_side(side, game, args, scorer, Path(scratch))
                    results[side].append(result)
                    console.print(
                        f"{game} round {round_ + 1} {side}: reward {args.reward:g} at "
                        f"{result.to_reward}, score {args.score:g} at {result.to_score}, "
                        f"{result.final_steps:,} steps, reward {result.final_reward}"
                    )
                    if args.curves:
                        console.print(
                            "   " + ", ".join(f"{t:.0f}s:{s:.2f}" for t, s in result.scores)
                        )
        report(game, results, args)


if __name__ == "__main__":
    main()
