"""The stdio transport's cost: environment steps per second of the same game over
stdio (JSON lines on each game's stdin/stdout) and over loopback TCP (length-prefixed
JSON frames), side by side in one run.

For each bundled game (stroke, lander) and each N instances x K agents (1 x 16 and
4 x 4), the two transports alternate ``--repeats`` times, ``--seconds`` each, on fresh
game processes launched the same way (no fork server); the table shows the medians
and stdio / TCP.

    .venv/bin/python benchmarks/transports.py [--seconds 3] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics

from measure import bridge_steps_per_second
from rich.console import Console
from rich.table import Table

from games import launch_settings

console = Console()
SETTINGS = [(1, 16), (4, 4)]
GAMES = ["stroke", "lander"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    table = Table(title="env steps per second: stdio against TCP, same game, same run")
    for column in ("game", "instances x agents", "TCP", "stdio", "stdio / TCP"):
        table.add_column(column, justify="right")
    for game in GAMES:
        for n_instances, agents in SETTINGS:
            measured: dict[str, list[float]] = {"tcp": [], "stdio": []}
            for _ in range(args.repeats):
                for transport in ("tcp", "stdio"):
                    measured[transport].append(
                        bridge_steps_per_second(
                            n_instances,
                            agents,
                            args.seconds,
                            command=launch_settings(game)["command"],
                            transport=transport,
                        )
                    )
            tcp, stdio = (statistics.median(measured[t]) for t in ("tcp", "stdio"))
            console.print(
                f"{game} {n_instances}x{agents}: tcp {measured['tcp']}, stdio {measured['stdio']}"
            )
            table.add_row(
                game,
                f"{n_instances} x {agents}",
                f"{tcp:,.0f}",
                f"{stdio:,.0f}",
                f"{stdio / tcp:.2f}",
            )
    console.print(table)


if __name__ == "__main__":
    main()
