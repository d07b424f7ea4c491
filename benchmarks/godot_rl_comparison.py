"""lander's bridge against the godot-rl 0.8.2 package on the same game binary.

(c) VecEnv steps per second through our GameVecEnv (JSON, and with the opt-in
binary encoding ``--fast-wire``) and through godot-rl's own StableBaselinesGodotEnv,
for several instance x agent counts, alternating so all see the same machine. Both
launch the binary; for the bundled game, lander's default start is measured too: its
instances forked from one server (shared memory pages keep the two cores' caches warm
across games, so each step costs the games less). (e) time to
start 8 instances (connected and described by env_info): godot-rl one after another,
lander all at once, and lander's default for the bundled game (instances forked from a
server that imported the game once; the server's own start is counted).

godot-rl pins gymnasium 1.0 and SB3 2.4, so it lives in its own virtual
environment; ``--setup`` makes it (``.venv-godotrl``, git-ignored):

    .venv/bin/python benchmarks/godot_rl_comparison.py --setup
    .venv/bin/python benchmarks/godot_rl_comparison.py [--seconds 3] [--repeats 2] [--binary PATH]

The game binary is ``build/lander_game.x86_64`` (``./lander setup`` writes it) unless
``--binary`` names another (``examples/godot_lander/lander.x86_64`` for the Godot game).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from measure import free_base_port
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
GODOT_RL_VENV = ROOT / ".venv-godotrl"
BINARY = ROOT / "build" / "lander_game.x86_64"
SETTINGS = [(1, 64), (2, 32), (4, 16), (8, 8), (4, 4)]
LAUNCHED = {
    "theirs": "godot-rl 0.8.2",
    "ours": "lander",
    "ours-fast": "lander --fast-wire",
}
FORKED = {  # the bundled game's instances forked from one server, as lander starts them
    "ours-forked": "lander, forked",
    "ours-forked-fast": "lander --fast-wire, forked",
}
console = Console()

MEASURE = r"""
import contextlib, io, json, os, sys, time
import numpy as np

def game_pids():  # this process's children: the games, whichever side launched them
    return [pid for task in os.listdir("/proc/self/task")
            for pid in open(f"/proc/self/task/{task}/children").read().split()]

def cpu_seconds(pids):
    ticks = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime + stime
    return ticks / os.sysconf("SC_CLK_TCK")

binary, side, n, k, port, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
fast = side.endswith("-fast")
forked = "-forked" in side  # the bundled game as lander starts it by default
if side == "theirs":
    from godot_rl.wrappers.stable_baselines_wrapper import StableBaselinesGodotEnv
else:
    from game_bridge.launcher import LaunchConfig
    from game_bridge.vec_env import GameVecEnv
with contextlib.redirect_stdout(io.StringIO()):  # godot-rl prints per connection
    started = time.perf_counter()
    if side == "theirs":
        env = StableBaselinesGodotEnv(env_path=binary, n_parallel=n, port=port, agents=k)
    else:
        command = {} if forked else {"command": [binary]}
        env = GameVecEnv(LaunchConfig(**command, n_instances=n, base_port=port, game_args={"agents": str(k)}, fast_wire=fast))
    start = time.perf_counter() - started
    sps = trainer_us = games_us = 0.0
    if seconds > 0:
        env.reset()
        actions = np.random.default_rng(0).uniform(-1, 1, (256, env.num_envs, 2)).astype(np.float32)
        for i in range(20):
            env.step(actions[i])
        pids = game_pids()
        games_cpu, trainer_cpu = cpu_seconds(pids), time.process_time()
        steps, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            env.step(actions[steps % 256])
            steps += 1
        sps = steps * env.num_envs / (time.perf_counter() - started)
        agent_steps = steps * env.num_envs
        trainer_us = (time.process_time() - trainer_cpu) / agent_steps * 1e6
        games_us = (cpu_seconds(pids) - games_cpu) / agent_steps * 1e6
    env.close()
print(json.dumps({"start": start, "sps": sps, "trainer_us": trainer_us, "games_us": games_us}))
"""


def measure(side: str, n: int, k: int, seconds: float, binary: Path = BINARY) -> dict[str, float]:
    """Run one measurement in the right interpreter; return start seconds and steps/s."""
    python = GODOT_RL_VENV / "bin" / "python" if side == "theirs" else Path(sys.executable)
    port = free_base_port(n)
    args = [str(python), "-c", MEASURE, str(binary), side, str(n), str(k), str(port), str(seconds)]
    output = subprocess.run(args, capture_output=True, text=True, check=True, timeout=600).stdout
    return json.loads(output.strip().splitlines()[-1])


def setup() -> None:
    """Make the godot-rl environment (its own pins, the CPU torch on this disk)."""
    subprocess.run([sys.executable, "-m", "venv", str(GODOT_RL_VENV)], check=True)
    pip = [str(GODOT_RL_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "torch==2.13.0", "godot-rl==0.8.2"], check=True)


def _report_start(binary: Path, repeats: int) -> None:
    """(e): median start time of 8 instances x 8 agents per side, alternating sides."""
    sides = ["theirs", "ours"] + (["ours-forked"] if binary == BINARY.resolve() else [])
    starts: dict[str, list[float]] = {side: [] for side in sides}
    for _ in range(repeats + 1):
        for side in sides:
            starts[side].append(measure(side, 8, 8, 0, binary)["start"])
    start = {side: statistics.median(values) for side, values in starts.items()}
    console.print(
        f"(e) start 8 instances x 8 agents of {binary.name}: "
        f"godot-rl {start['theirs']:.2f} s (one after another), "
        f"lander {start['ours']:.2f} s (all at once): {start['theirs'] / start['ours']:.2f}x"
    )
    if "ours-forked" in start:
        console.print(
            f"    the bundled game as lander starts it (forked from one server): "
            f"{start['ours-forked']:.2f} s: {start['theirs'] / start['ours-forked']:.2f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--setup", action="store_true", help="create .venv-godotrl and exit")
    parser.add_argument("--seconds", type=float, default=3.0, help="stepping time per measurement")
    parser.add_argument("--repeats", type=int, default=2, help="alternating measurements per side")
    parser.add_argument("--binary", type=Path, default=BINARY, help="the game executable to drive")
    parser.add_argument("--start-only", action="store_true", help="measure (e) only")
    args = parser.parse_args()
    if args.setup:
        setup()
        return
    if not (GODOT_RL_VENV / "bin" / "python").exists():
        sys.exit("godot-rl is not installed: run this script with --setup first")
    binary = args.binary.resolve()
    if not binary.exists():
        sys.exit(f"{binary} is missing (./lander setup writes build/lander_game.x86_64)")
    if args.start_only:
        _report_start(binary, args.repeats)
        return
    sides = dict(LAUNCHED)
    if binary == BINARY.resolve():  # the bundled game: also as lander starts it by default
        sides.update(FORKED)
    table = Table(title=f"(c) steps/s through the bridge: {binary.name}, and ratio to godot-rl")
    table.add_column("instances x agents", justify="right")
    for title in sides.values():
        table.add_column(title, justify="right")
    # Where the CPU goes on the JSON path, per agent-step: what the games cost is the
    # same on both sides, so it bounds the ratio any trainer could reach on these cores.
    table.add_column("CPU us per agent-step: trainer (godot-rl / lander); games", justify="right")
    for n, k in SETTINGS:
        runs: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
        for _ in range(args.repeats):
            for side in sides:
                runs[side].append(measure(side, n, k, args.seconds, binary))

        def median(side: str, key: str, runs: dict[str, list[dict[str, float]]] = runs) -> float:
            return statistics.median(run[key] for run in runs[side])

        theirs = median("theirs", "sps")
        cells = [f"{theirs:,.0f}"] + [
            f"{median(side, 'sps'):,.0f} ({median(side, 'sps') / theirs:.2f})"
            for side in sides
            if side != "theirs"
        ]
        cpu = (
            f"{median('theirs', 'trainer_us'):.1f} / {median('ours', 'trainer_us'):.1f}; "
            f"{median('ours', 'games_us'):.1f}"
        )
        table.add_row(f"{n} x {k}", *cells, cpu)
    console.print(table)
    _report_start(binary, args.repeats)


if __name__ == "__main__":
    main()
