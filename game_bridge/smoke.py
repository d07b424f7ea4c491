"""The headless smoke test: one instance, handshake, reset, 100 steps, close.

Used by ``lander setup`` to prove a game binary speaks the protocol before a
long run depends on it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from game_bridge.launcher import LaunchConfig


@dataclass(frozen=True)
class SmokeResult:
    """What the smoke test saw.

    :param agents: agents the game declared.
    :param steps: steps completed.
    :param seconds: wall time from launch to close.
    :param observation_space: the per-agent observation space, as text.
    :param action_space: the per-agent action space, as text.
    """

    agents: int
    steps: int
    seconds: float
    observation_space: str
    action_space: str


def run_smoke_test(
    command: list[str], port: int, steps: int = 100, timeout: float = 30.0
) -> SmokeResult:
    """Start one instance, reset it and take ``steps`` random steps.

    :raises BridgeError: whatever went wrong, naming the fault.
    """
    # Here, not at the top: the CLI imports this module, and GameVecEnv brings in torch.
    from game_bridge.vec_env import GameVecEnv

    started = time.monotonic()
    env = GameVecEnv(
        LaunchConfig(
            command=command,
            n_instances=1,
            base_port=port,
            connect_timeout=timeout,
            read_timeout=timeout,
        )
    )
    try:
        env.reset()
        env.action_space.seed(0)
        for _ in range(steps):
            env.step(np.stack([env.action_space.sample() for _ in range(env.num_envs)]))
    finally:
        env.close()
    return SmokeResult(
        env.agents_per_instance,
        steps,
        time.monotonic() - started,
        str(env.observation_space),
        str(env.action_space),
    )
