"""Games on a Ray cluster against the same games launched here, measured in one run.

Starts a Ray cluster of two nodes on this machine (``tests/ray_cluster.py``: ``ray
start`` with --node-ip-address=127.0.0.1 and a private temp dir), then, alternating
the paths ``--repeats`` times, measures 4 instances x 8 agents:

- stepping with random actions (JSON, the Godot wire, and lander's ``--fast-wire``):
  ``local`` (games launched here, as without --cluster), ``relay`` (lander's cluster
  path: each game on a node behind a byte relay, the step loop unchanged) and
  ``node call`` (the alternative design: one Ray actor per node steps that node's
  games, one remote call per node per step);
- PPO training fps (lander's trainer, default settings): local against ``--cluster``.

It prints steps/s, the time of one VecEnv step, what each path adds to it, and the
ratios to local. Both nodes share this machine's two cores with the trainer, so the
relay's and Ray's own CPU is counted against the cluster paths.

    .venv/bin/python benchmarks/cluster.py [--seconds 5] [--repeats 2] [--timesteps 60000]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from measure import bridge_steps_per_second, free_base_port
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from game_bridge.cluster import GameCluster
from game_bridge.launcher import LaunchConfig
from game_bridge.vec_env import GameVecEnv
from games import launch_settings
from tests.ray_cluster import LocalRayCluster
from training.session.trainer import TrainRequest, train

console = Console()
INSTANCES, AGENTS = 4, 8


class NodeStepper:
    """The alternative design: a Ray actor on a node steps that node's games (a
    GameVecEnv there) and returns the batch, one call per node per step."""

    def __init__(self, n_instances: int, port: int, seed: int, fast_wire: bool) -> None:
        self.env = GameVecEnv(
            LaunchConfig(
                **launch_settings("lander"),
                n_instances=n_instances,
                base_port=port,
                seed=seed,
                game_args={"agents": str(AGENTS)},
                fast_wire=fast_wire,
            )
        )

    def reset(self) -> Any:
        return self.env.reset()

    def step(self, actions: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray, list[Any]]:
        return self.env.step(actions)

    def close(self) -> None:
        self.env.close()


def relay_or_local(cluster: GameCluster | None, fast_wire: bool, seconds: float) -> float:
    """Seconds per VecEnv step of 4 x 8 through the bridge, local or relayed."""
    rate = bridge_steps_per_second(INSTANCES, AGENTS, seconds, fast_wire=fast_wire, cluster=cluster)
    return INSTANCES * AGENTS / rate


def node_calls(node_ids: list[str], fast_wire: bool, seconds: float) -> float:
    """Seconds per step of 4 x 8 as one remote call per node per step."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    per_node = INSTANCES // len(node_ids)
    actor_class: Any = ray.remote(NodeStepper)
    steppers = [
        actor_class.options(
            num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
        ).remote(per_node, free_base_port(per_node, 33000 + 100 * i), i * per_node, fast_wire)
        for i, node in enumerate(node_ids)
    ]
    try:
        ray.get([s.reset.remote() for s in steppers])
        rng = np.random.default_rng(0)
        actions = rng.uniform(-1, 1, (256, INSTANCES * AGENTS, 2)).astype(np.float32)
        chunk = per_node * AGENTS

        def step(batch: np.ndarray) -> None:
            replies = ray.get(
                [s.step.remote(batch[i * chunk : (i + 1) * chunk]) for i, s in enumerate(steppers)]
            )
            np.concatenate([reply[0] for reply in replies])

        for warm in range(20):
            step(actions[warm])
        steps, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            step(actions[steps % 256])
            steps += 1
        return (time.perf_counter() - started) / steps
    finally:
        ray.get([s.close.remote() for s in steppers])
        for stepper in steppers:
            ray.kill(stepper)


def training_fps(address: str | None, timesteps: int) -> float:
    """Session-average fps of one short training run of 4 x 8 (default settings)."""
    with tempfile.TemporaryDirectory() as root:
        overrides: dict[str, Any] = {
            "timesteps": timesteps,
            "n_parallel": INSTANCES,
            "agents_per_instance": AGENTS,
            "port": free_base_port(INSTANCES, 35000),
            "cluster": address,
        }
        started = time.monotonic()
        outcome = train(TrainRequest(Path(root), "fps", overrides), Console(quiet=True))
        if outcome.status != "finished":
            raise SystemExit(f"training failed: {outcome.error}")
        return outcome.record.total_timesteps / (time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="stepping time per path")
    parser.add_argument("--repeats", type=int, default=2, help="alternations of the paths")
    parser.add_argument("--timesteps", type=int, default=60_000, help="steps per training run")
    args = parser.parse_args()
    local_cluster = LocalRayCluster().start()
    try:
        local_cluster.add_node()
        import ray

        cluster = GameCluster(local_cluster.address)
        logging.getLogger("ray").setLevel(logging.ERROR)
        node_ids = [node.id for node in cluster.nodes()]
        console.print(f"Ray {ray.__version__}, {len(node_ids)} nodes on this machine")
        times: dict[str, list[float]] = {}
        for _ in range(args.repeats):
            for wire, fast in (("JSON", False), ("fast wire", True)):
                for path in ("local", "relay", "node call"):
                    if path == "node call":
                        step = node_calls(node_ids, fast, args.seconds)
                    else:
                        step = relay_or_local(
                            cluster if path == "relay" else None, fast, args.seconds
                        )
                    times.setdefault(f"{wire}|{path}", []).append(step)
        fps: dict[str, list[float]] = {}
        for _ in range(args.repeats):
            for path, address in (("local", None), ("cluster", local_cluster.address)):
                fps.setdefault(path, []).append(training_fps(address, args.timesteps))
    finally:
        local_cluster.stop()

    table = Table(title=f"{INSTANCES} instances x {AGENTS} agents, random actions")
    for column in ("wire", "path", "steps/s", "ms per step", "added ms", "ratio to local"):
        table.add_column(column, justify="left" if column in ("wire", "path") else "right")
    for wire in ("JSON", "fast wire"):
        local = statistics.median(times[f"{wire}|local"])
        for path in ("local", "relay", "node call"):
            step = statistics.median(times[f"{wire}|{path}"])
            table.add_row(
                wire,
                path,
                f"{INSTANCES * AGENTS / step:,.0f}",
                f"{step * 1000:.3f}",
                f"{(step - local) * 1000:+.3f}",
                f"{local / step:.2f}",
            )
    console.print(table)
    local_fps, cluster_fps = statistics.median(fps["local"]), statistics.median(fps["cluster"])
    console.print(
        f"PPO training fps ({args.timesteps:,} steps, median of {args.repeats}): "
        f"local {local_fps:,.0f}, cluster {cluster_fps:,.0f}, "
        f"ratio {cluster_fps / local_fps:.2f} (goal >= 0.7)"
    )


if __name__ == "__main__":
    main()
