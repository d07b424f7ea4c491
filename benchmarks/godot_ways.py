"""When a training build pays: the Godot example project (examples/godot_lander) run from
source against from the pack lander exports of it, side by side in one run.

For each number of instances, rounds alternate the two ways (which goes first alternates
too) and measure:

1. start-up: from launching N instances to all of them connected with their env_info (what
   a run, a restart and an evaluation wait for);
2. env steps per second with random actions (N instances x 8 agents, --speedup 1000).

The engine is the one lander finds (GODOT_BIN, PATH: Debian's godot3-server here).
``--scripts N`` grows the project by N GDScript files of 60 functions each, preloaded by
an autoload at start (a game's code base, which a source launch compiles from text in every
instance and a build carries compiled).

    .venv/bin/python benchmarks/godot_ways.py [--instances 1,4,8] [--rounds 5] [--seconds 3] [--scripts 0]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from measure import bridge_steps_per_second, free_base_port
from rich.console import Console
from rich.table import Table

from game_bridge.godot_engine import find_engine
from game_bridge.godot_project import ensure_imported, export_build, read_project
from game_bridge.launcher import LaunchConfig, close_instances, launch_instances

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "godot_lander"
AGENTS = 8
console = Console()


def start_up_seconds(command: list[str], instances: int) -> float:
    """Seconds from launching ``instances`` games to all of them connected, env_info read."""
    config = LaunchConfig(
        command=command,
        n_instances=instances,
        base_port=free_base_port(instances),
        game_args={"agents": str(AGENTS)},
    )
    started = time.perf_counter()
    launched, _ = launch_instances(config)
    seconds = time.perf_counter() - started
    close_instances(launched)
    return seconds


def grow_project(project: Path, scripts: int) -> None:
    """Add ``scripts`` GDScript files to ``project``, preloaded by an autoload at start."""
    bulk = project / "bulk"
    bulk.mkdir()
    body = "extends Reference\n" + "".join(
        f"func f{j}(x):\n\tvar y = x * {j} + 1\n\tif y > {j}:\n\t\ty -= 1\n\treturn y\n"
        for j in range(60)
    )
    for i in range(scripts):
        (bulk / f"s{i}.gd").write_text(body)
    preloads = "".join(f'const S{i} = preload("res://bulk/s{i}.gd")\n' for i in range(scripts))
    (bulk / "all.gd").write_text("extends Node\n" + preloads)
    with open(project / "project.godot", "a") as settings:
        settings.write('\n[autoload]\n\nBulk="*res://bulk/all.gd"\n')


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--instances", default="1,4,8")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--scripts", type=int, default=0)
    args = parser.parse_args()
    counts = [int(n) for n in args.instances.split(",")]
    with tempfile.TemporaryDirectory(prefix="godot-ways-") as folder:
        copy = Path(folder) / "godot_lander"
        shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns(".import", "lander.x86_64"))
        if args.scripts:
            grow_project(copy, args.scripts)
        project = read_project(copy)
        engine = find_engine(project.version)
        if engine is None:
            raise SystemExit("no Godot engine: apt-get install godot3-server, or set GODOT_BIN")
        _, state = ensure_imported(engine, project)
        build = export_build(engine, project, "training", Path(folder) / "build", state)
        ways = {
            "source": engine.run_project(project.path, None, []),
            "build": build.command(engine, []),
        }
        console.print(
            f"Godot {engine.version} ({engine.path}); the {build.kind} exported in "
            f"{build.seconds:.1f} s; {args.rounds} rounds, {AGENTS} agents an instance; "
            f"{args.scripts} scripts added"
        )
        table = Table(title="from source against from the build (medians)")
        for column in ("instances", "start-up source", "start-up build", "ratio",
                       "steps/s source", "steps/s build", "ratio"):  # fmt: skip
            table.add_column(column, justify="right")
        for count in counts:
            starts: dict[str, list[float]] = {way: [] for way in ways}
            speeds: dict[str, list[float]] = {way: [] for way in ways}
            for round_ in range(args.rounds):
                order = list(ways) if round_ % 2 == 0 else list(reversed(ways))
                for way in order:
                    starts[way].append(start_up_seconds(ways[way], count))
                    speeds[way].append(
                        bridge_steps_per_second(
                            count, AGENTS, args.seconds, command=ways[way], speedup=1000
                        )
                    )
            start = {way: statistics.median(values) for way, values in starts.items()}
            speed = {way: statistics.median(values) for way, values in speeds.items()}
            table.add_row(
                str(count),
                f"{start['source']:.2f} s",
                f"{start['build']:.2f} s",
                f"{start['source'] / start['build']:.2f}x",
                f"{speed['source']:,.0f}",
                f"{speed['build']:,.0f}",
                f"{speed['build'] / speed['source']:.2f}x",
            )
        console.print(table)


if __name__ == "__main__":
    main()
