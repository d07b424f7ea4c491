"""The Godot lander (examples/godot_lander, run headless by godot3-server)
through the bridge: its speed beside the bundled Python game, and how far PPO
gets on it.

1. env steps per second for N instances x K agents, Godot and the bundled game
   measured alternately in one run, and their ratio;
2. PPO with ``lander train``'s defaults for ``--timesteps`` steps on the Godot
   game, then an evaluation through the bridge of the trained policy, the
   reference controller and the random policy on the same Godot game, so the
   score is normalized on Godot's own physics (random 0, reference 1).

    .venv/bin/python benchmarks/godot_lander.py [--timesteps 300000] [--speedup 1000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from measure import bridge_steps_per_second
from rich.console import Console
from rich.table import Table

from game_bridge.launcher import LaunchConfig
from game_bridge.vec_env import GameVecEnv
from games.lander.controllers import random_actions, reference_actions
from training.evaluation.scoring import Policy, evaluate_through_bridge, model_policy
from training.ppo.inference import load_for_inference
from training.session.trainer import TrainRequest, train

ROOT = Path(__file__).resolve().parent.parent
GODOT_GAME = ROOT / "examples" / "godot_lander" / "lander.x86_64"
console = Console()


def evaluate(policy: Policy, episodes: int, speedup: float, port: int) -> float:
    """Mean episode return of ``policy`` on the Godot game (2 instances x 8 agents)."""
    env = GameVecEnv(
        LaunchConfig(command=[str(GODOT_GAME)], n_instances=2, base_port=port, speedup=speedup, seed=777,
                     game_args={"agents": "8"})
    )  # fmt: skip
    try:
        return evaluate_through_bridge(policy, env, episodes).mean_reward
    finally:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--timesteps", type=int, default=300_000)
    parser.add_argument("--speedup", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--port", type=int, default=35008)
    args = parser.parse_args()

    table = Table(title="env steps/s through the bridge")
    for column in ("instances x agents", "bundled game", "Godot game", "Godot / bundled"):
        table.add_column(column, justify="right")
    for n, k in ((2, 2), (4, 8), (2, 32)):
        bundled = bridge_steps_per_second(n, k, args.seconds)
        godot = bridge_steps_per_second(n, k, args.seconds, [str(GODOT_GAME)], args.speedup)
        table.add_row(f"{n} x {k}", f"{bundled:,.0f}", f"{godot:,.0f}", f"{godot / bundled:.2f}")
    console.print(table)

    started = time.monotonic()
    with tempfile.TemporaryDirectory() as root:
        overrides = {
            "timesteps": args.timesteps,
            "game_bin": str(GODOT_GAME),
            "speedup": args.speedup,
            "port": args.port,
        }
        outcome = train(TrainRequest(Path(root), "godot", overrides), Console(quiet=True))
        model, normalizer = load_for_inference(Path(root) / "checkpoints" / "godot" / "final.zip")
    seconds = time.monotonic() - started
    rng = np.random.default_rng(0)
    trained = evaluate(model_policy(model, normalizer), args.episodes, args.speedup, args.port)
    reference = evaluate(reference_actions, args.episodes, args.speedup, args.port)
    random = evaluate(
        lambda obs: random_actions(rng, len(obs), False), args.episodes, args.speedup, args.port
    )
    console.print(
        f"PPO on the Godot game: {outcome.record.total_timesteps:,} steps in {seconds:.0f} s "
        f"({outcome.record.total_timesteps / seconds:,.0f} fps); evaluation through the bridge "
        f"({args.episodes} episodes): trained {trained:.1f}, reference {reference:.1f}, random {random:.1f}, "
        f"normalized {(trained - random) / (reference - random):.3f}"
    )


if __name__ == "__main__":
    main()
