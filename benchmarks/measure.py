"""What several benchmarks measure the same way: a free block of loopback ports,
random-action VecEnv steps per second through the bridge, and commands run in the
temporary git checkouts they build."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from game_bridge.cluster import GameCluster
from game_bridge.launcher import LaunchConfig
from game_bridge.vec_env import GameVecEnv
from games import launch_settings

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@lander.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@lander.invalid",
}
"""Who commits in a benchmark's temporary checkouts (the machine may have no identity)."""


def run_checked(cwd: Path, *command: str, env: dict[str, str] | None = None) -> str:
    """Run ``command`` in ``cwd`` with :data:`GIT_IDENTITY`; its output, or the end of the
    benchmark with what it printed when it fails."""
    done = subprocess.run(
        list(command), cwd=cwd, env={**os.environ, **GIT_IDENTITY, **(env or {})},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_base_port(count: int, start: int = 31000) -> int:
    """The first base port from ``start`` whose ``count`` loopback ports are free."""
    base = start
    while True:
        try:
            for port in range(base, base + count):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port))
            return base
        except OSError:
            base += count


def bridge_steps_per_second(
    n_instances: int,
    agents: int,
    seconds: float,
    command: list[str] | None = None,
    speedup: float | None = None,
    fast_wire: bool = False,
    cluster: GameCluster | None = None,
    transport: str = "tcp",
) -> float:
    """Env steps per second of GameVecEnv over real game processes (random actions),
    launched here or, with ``cluster``, on its nodes behind relays; over TCP or stdio."""
    env = GameVecEnv(
        LaunchConfig(
            **({"command": command} if command else launch_settings("lander")),
            n_instances=n_instances,
            base_port=free_base_port(n_instances),
            speedup=speedup,
            game_args={"agents": str(agents)},
            fast_wire=fast_wire,
            cluster=cluster,
            transport=transport,
        )
    )
    try:
        steps, wall = timed_steps(env, warmed_up(env), seconds)
        return steps * env.num_envs / wall
    finally:
        env.close()


def warmed_up(env: GameVecEnv) -> np.ndarray:
    """Reset ``env`` and take 20 random steps; return the random action batches to step with."""
    env.reset()
    actions = np.random.default_rng(0).uniform(-1, 1, (256, env.num_envs, 2)).astype(np.float32)
    for i in range(20):
        env.step(actions[i])
    return actions


def timed_steps(env: GameVecEnv, actions: np.ndarray, seconds: float) -> tuple[int, float]:
    """Step ``env`` with ``actions`` in turn for ``seconds``: (VecEnv steps, wall seconds)."""
    steps = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        env.step(actions[steps % len(actions)])
        steps += 1
    return steps, time.perf_counter() - started


@contextlib.contextmanager
def busy_neighbours(count: int, niceness: int = 10) -> Iterator[None]:
    """``count`` CPU-bound processes at ``niceness`` for the duration: the other work of a
    training box (TensorBoard, an editor, a second run) that a trainer shares its cores
    with."""
    spinners = [
        subprocess.Popen(["nice", "-n", str(niceness), sys.executable, "-c", "while True: pass"])
        for _ in range(count)
    ]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
