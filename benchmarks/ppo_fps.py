"""(d) PPO end-to-end steps per second through the bridge against ``--in-process``.

Both train the bundled game with the same ``num_envs`` and the same PPO settings
(``lander train``'s defaults), alternating, each for ``--timesteps`` steps; the
ratio is bridge / in-process (and the bridge with ``--fast-wire`` beside it).

    .venv/bin/python benchmarks/ppo_fps.py [--timesteps 150000] [--repeats 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console

from training.session.trainer import TrainRequest, train

console = Console()


def fps(in_process: bool, timesteps: int, port: int, fast_wire: bool = False) -> float:
    """Session-average training fps of one short run."""
    with tempfile.TemporaryDirectory() as root:
        started = time.monotonic()
        outcome = train(
            TrainRequest(
                Path(root),
                "fps",
                {
                    "timesteps": timesteps,
                    "in_process": in_process,
                    "port": port,
                    "fast_wire": fast_wire,
                },
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
    bridge, in_process, fast = [], [], []
    for _ in range(args.repeats):
        in_process.append(fps(True, args.timesteps, args.port))
        bridge.append(fps(False, args.timesteps, args.port))
        fast.append(fps(False, args.timesteps, args.port, fast_wire=True))
        console.print(
            f"in-process {in_process[-1]:,.0f} fps, bridge {bridge[-1]:,.0f} fps, "
            f"bridge --fast-wire {fast[-1]:,.0f} fps"
        )
    b, i, f = statistics.median(bridge), statistics.median(in_process), statistics.median(fast)
    console.print(
        f"(d) PPO fps: bridge {b:,.0f}, in-process {i:,.0f}, bridge / in-process = {b / i:.2f}; "
        f"with --fast-wire {f:,.0f} ({f / i:.2f})"
    )


if __name__ == "__main__":
    main()
