"""Where a run's start-up goes: the phases from launch to the first step, measured in fresh
interpreters (issue 30's start-up figures, before any change to them).

Each round starts a new Python process that does, in order, what ``lander train`` does
before its first step, and stamps the wall clock after each phase (relative to the moment
the parent launched it):

- ``interpreter``: the process is running Python;
- ``torch``: ``import torch``;
- ``sb3``: ``import stable_baselines3`` (PPO and its VecEnv machinery);
- ``lander``: ``import training.trainer`` (the rest of lander's training stack);
- ``games``: the bundled game's instances launched and connected (``--n-parallel`` x
  ``--agents``), on loopback;
- ``model``: PPO built on them (the first optimizer, which imports ``torch._dynamo``);
- ``first step``: the first environment step inside ``learn``.

The table gives each phase's median and range over ``--rounds`` rounds, as time since
launch and as the phase's own share.

    .venv/bin/python benchmarks/startup_phases.py [--rounds 5] [--n-parallel 4] [--agents 8]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from measure import free_base_port
from rich.console import Console
from rich.table import Table

PHASES = ("interpreter", "torch", "sb3", "lander", "games", "model", "first step")

CHILD = r"""
import json, sys, time
launched = float(sys.argv[1])
marks = {"interpreter": time.time() - launched}
import torch
marks["torch"] = time.time() - launched
import stable_baselines3
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
marks["sb3"] = time.time() - launched
import training.trainer
from game_bridge.launcher import LaunchConfig
from game_bridge.vec_env import GameVecEnv
from games import launch_settings
marks["lander"] = time.time() - launched
env = GameVecEnv(LaunchConfig(**launch_settings("lander"), n_instances=int(sys.argv[2]),
                              base_port=int(sys.argv[4]), game_args={"agents": sys.argv[3]}))
marks["games"] = time.time() - launched
model = PPO("MlpPolicy", env, n_steps=64, batch_size=256, verbose=0, device="cpu")
marks["model"] = time.time() - launched

class First(BaseCallback):
    def _on_step(self):
        marks["first step"] = time.time() - launched
        return False

model.learn(total_timesteps=64, callback=First())
env.close()
print(json.dumps(marks))
"""


def one_round(n_parallel: int, agents: int) -> dict[str, float]:
    """The phases of one fresh interpreter, seconds since its launch."""
    port = free_base_port(n_parallel)
    launched = time.time()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, repr(launched), str(n_parallel), str(agents), str(port)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    marks: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n-parallel", type=int, default=4)
    parser.add_argument("--agents", type=int, default=8)
    args = parser.parse_args()
    rounds = [one_round(args.n_parallel, args.agents) for _ in range(args.rounds)]
    table = Table(
        title=f"start-up, {args.n_parallel} lander instances x {args.agents} agents, "
        f"{args.rounds} fresh interpreters"
    )
    for column in ("phase", "since launch (median)", "range", "the phase itself (median)"):
        table.add_column(column, justify="left" if column == "phase" else "right")
    previous = [0.0] * len(rounds)
    for phase in PHASES:
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
