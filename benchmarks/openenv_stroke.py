"""The stroke game trained through its own OpenEnv server (``lander serve stroke``,
``lander train --game-url``) against the same game over stdio (its own transport),
the same PPO settings and ``--envs`` environments each (as many sessions; 4 instances
of envs/4 agents), for each of ``--seeds``, then every final model scored on the
in-process game (random 0, reference filter 1).

    .venv/bin/python benchmarks/openenv_stroke.py [--timesteps 150000] [--envs 32] [--seeds 0,1]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from openenv_transport import _serve
from rich.console import Console

from training.evaluation.scoring import evaluate_in_process, game_settings, model_policy
from training.ppo.inference import load_for_inference

console = Console()
LANDER = Path(sys.executable).parent / "lander"


def train(home: Path, run: str, *flags: str) -> float:
    started = time.monotonic()
    done = subprocess.run(
        [str(LANDER), "train", run, *flags, "--no-git"],
        cwd=home,
        capture_output=True,
        text=True,
        env={"LANDER_HOME": str(home), "PATH": "/usr/bin:/bin"},
    )
    if done.returncode != 0:
        raise SystemExit(f"{run} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return time.monotonic() - started


def score(home: Path, run: str, episodes: int) -> float:
    model, normalizer = load_for_inference(home / "checkpoints" / run / "final.zip")
    result = evaluate_in_process(
        model_policy(model, normalizer), episodes, 5000, game_settings("stroke", {})
    )
    assert result.normalized_score is not None
    return result.normalized_score


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--timesteps", type=int, default=150_000)
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--envs", type=int, default=32)
    parser.add_argument("--seeds", default="0,1")
    args = parser.parse_args()
    steps, envs = str(args.timesteps), args.envs
    with tempfile.TemporaryDirectory(prefix="openenv-stroke-") as scratch:
        home = Path(scratch)
        server, url = _serve("stroke", envs + 1)
        try:
            for seed in args.seeds.split(","):
                common = ("--timesteps", steps, "--seed", seed)
                stdio_s = train(home, f"stdio{seed}", "--game", "stroke", "--n-parallel", "4",
                                "--agents-per-instance", str(envs // 4), *common)  # fmt: skip
                openenv_s = train(home, f"openenv{seed}", "--game-url", url, "--n-parallel",
                                  str(envs), *common)  # fmt: skip
                for run, seconds in ((f"stdio{seed}", stdio_s), (f"openenv{seed}", openenv_s)):
                    console.print(
                        f"stroke, seed {seed}, over {run.rstrip('0123456789')}: normalized score "
                        f"{score(home, run, args.episodes):.3f} after {args.timesteps:,} steps "
                        f"of {envs} envs, {seconds:.0f} s"
                    )
        finally:
            server.terminate()
            server.wait(timeout=10)


if __name__ == "__main__":
    main()
