"""A camera bot against a coordinate bot on the same game, and today's camera path against
the one before it, side by side.

A bundled game seen several ways (``--game lander``, 36 x 48 x 3 frames, or ``--game
stroke``, its 32 x 32 x 3 scope), each side trained for its time with lander's defaults
for that mode (sides alternate within each seed, the order flipping every seed; medians
over ``--seeds``):

- ``coordinates``: the game's numbers;
- ``camera``: its camera (``--game-arg observation=pixels``) as lander trains it: the
  centroid encoder whitened after every rollout (training/ppo/camera_policy.py), numpy
  rollouts and update (training/ppo/camera_update.py), frames kept as bytes;
- ``camera-torch``: the same, SB3's rollouts and update (``LeanPPO.numpy_camera`` off);
- ``camera-sb3``: the camera through SB3's own PPO (``--collector sb3``): its rollouts and
  update, and no whitening refit: the path before (on the lander at its learning rate
  then, 0.001).

Each side's snapshots are scored (normalized: random 0, the reference controller 1; a
camera side on the same frames it trained on) for the time and the samples to
``--score``, with its steps a second and the update's share of its time.

    .venv/bin/python benchmarks/camera.py [--game lander] [--sides coordinates,camera,camera-sb3] [--seeds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from memory import median_reached, spread
from time_to_skill import Scorer, first_skilled, train_side

from games.spec import Policy
from games.stroke.scoring import StrokeSettings
from training.evaluation.scoring import evaluate_in_process

console = Console(width=150)
PIXELS = {"observation": "pixels"}
SIDES: dict[str, dict[str, object]] = {
    "coordinates": {},
    "camera": {"game_args": PIXELS},
    "camera-torch": {"game_args": PIXELS, "numpy_camera": False},
    "camera-sb3": {"game_args": PIXELS, "collector": "sb3"},
}


class StrokeScorer:
    """The stroke game's normalized score of a policy (random moves 0, the reference filter
    1), a camera policy shown the scope of the same strokes."""

    def __init__(self, episodes: int) -> None:
        self.episodes = episodes

    def __call__(self, policy: Policy, pixels: bool = False, glimpse: bool = False) -> float:
        settings = StrokeSettings(pixels=pixels)
        score = evaluate_in_process(policy, self.episodes, settings=settings).normalized_score
        assert score is not None
        return score


@dataclass
class Outcome:
    """One side's run: when and after how many samples it first scored the mark, its speed
    and its update's share of the time."""

    to_score: float | None
    samples: int | None
    steps_per_s: float
    update_share: float
    best: float


def _run(
    settings: dict[str, object],
    seconds: float,
    args: argparse.Namespace,
    scorer: Scorer | StrokeScorer,
    scratch: Path,
) -> Outcome:
    run_args = argparse.Namespace(
        **{**vars(args), "seconds": seconds, "candidate": [json.dumps(settings)]}
    )
    trained = train_side("candidate1", "bundled", run_args, scorer, scratch)
    to_score, curve = first_skilled(trained.snapshots, trained.score, args.score)
    rollouts = [e for e in trained.lines if e["kind"] == "rollout"]
    samples = (
        next((e["steps"] for e in rollouts if e["t"] >= to_score), rollouts[-1]["steps"])
        if to_score is not None
        else None
    )
    last = rollouts[-1]
    wall = last["wall_collect"] + last["wall_update"]
    return Outcome(
        to_score,
        samples,
        last["steps"] / last["t"],
        last["wall_update"] / wall if wall else 0.0,
        max(score for _, score in curve),
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--game", choices=("lander", "stroke"), default="lander")
    parser.add_argument("--sides", default="coordinates,camera,camera-sb3")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=240.0, help="time per camera run")
    parser.add_argument(
        "--coordinate-seconds", type=float, default=30.0, help="time per coordinate run"
    )
    parser.add_argument("--score", type=float, default=0.8, help="normalized score mark")
    parser.add_argument("--episodes", type=int, default=64, help="episodes per evaluation")
    parser.add_argument("--snapshot-every", type=float, default=3.0)
    parser.add_argument("--n-parallel", type=int, default=4)
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--speedup", type=float, default=1000.0)
    parser.add_argument("--busy", type=int, default=0)
    args = parser.parse_args()
    args.reward, args.difficulty, args.curves = 200.0, 1, False
    chosen = args.sides.split(",")
    scorer: Scorer | StrokeScorer = (
        StrokeScorer(args.episodes)
        if args.game == "stroke"
        else Scorer("bundled", args.episodes, 1, args.speedup)
    )
    game: dict[str, object] = {"game": "stroke"} if args.game == "stroke" else {}
    before = {} if args.game == "stroke" else {"learning_rate": 0.001}  # the lander's then
    results: dict[str, list[Outcome]] = {side: [] for side in chosen}
    with tempfile.TemporaryDirectory(prefix="camera-bench-") as scratch:
        for seed in range(args.seeds):
            for side in chosen if seed % 2 == 0 else chosen[::-1]:
                seconds = args.coordinate_seconds if side == "coordinates" else args.seconds
                settings = {**SIDES[side], **game, "seed": seed}
                if side == "camera-sb3":
                    settings.update(before)
                outcome = _run(settings, seconds, args, scorer, Path(scratch))
                results[side].append(outcome)
                console.print(
                    f"seed {seed} {side}: {args.score:g} at {outcome.to_score} s after "
                    f"{outcome.samples} samples, best {outcome.best:.2f}, "
                    f"{outcome.steps_per_s:,.0f} steps/s, update share {outcome.update_share:.2f}"
                )
    table = Table(title=f"the {args.game} game, median (min-max) of {args.seeds} seeds")
    for column in (
        "side",
        f"to score {args.score:g} (s)",
        "samples to it",
        "steps/s",
        "update share",
    ):
        table.add_column(column, justify="right")
    for side, runs in results.items():
        table.add_row(
            side,
            spread([r.to_score for r in runs], "{:.1f}"),
            spread([float(r.samples) if r.samples else None for r in runs], "{:,.0f}"),
            f"{statistics.median(r.steps_per_s for r in runs):,.0f}",
            f"{statistics.median(r.update_share for r in runs):.2f}",
        )
    console.print(table)
    coordinates = median_reached([r.to_score for r in results.get("coordinates", [])])
    for side in ("camera", "camera-torch", "camera-sb3"):
        mine = median_reached([r.to_score for r in results.get(side, [])])
        if coordinates and mine:
            console.print(
                f"  {side} / coordinates, time to {args.score:g}: {mine / coordinates:.1f}x"
            )


if __name__ == "__main__":
    main()
