"""(d) PPO end-to-end steps per second through the bridge against ``--in-process``.

Both train the bundled game with the same ``num_envs`` and the same PPO settings
(``lander train``'s defaults), alternating, each for ``--timesteps`` steps; the
ratio is bridge / in-process.

    .venv/bin/python benchmarks/ppo_fps.py [--timesteps 150000] [--repeats 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console

from training.trainer import TrainRequest, train

console = Console()


def fps(in_process: bool, timesteps: int, port: int) -> float:
    """Session-average training fps of one short run."""
    with tempfile.TemporaryDirectory() as root:
        started = time.monotonic()
        outcome = train(
            TrainRequest(
                Path(root), "fps", {"timesteps": timesteps, "in_process": in_process, "port": port}
            ),
            Console(quiet=True),
        )
        elapsed = time.monotonic() - started
    return outcome.record.total_timesteps / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--timesteps", type=int, default=150_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--port", type=int, default=27008)
    args = parser.parse_args()
    bridge, in_process = [], []
    for _ in range(args.repeats):
        in_process.append(fps(True, args.timesteps, args.port))
        bridge.append(fps(False, args.timesteps, args.port))
        console.print(f"in-process {in_process[-1]:,.0f} fps, bridge {bridge[-1]:,.0f} fps")
    b, i = statistics.median(bridge), statistics.median(in_process)
    console.print(
        f"(d) PPO fps: bridge {b:,.0f}, in-process {i:,.0f}, bridge / in-process = {b / i:.2f}"
    )


if __name__ == "__main__":
    main()
