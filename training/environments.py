"""Building the vectorized environment a run trains on, from its configuration.

Through the bridge (N game processes over TCP or stdio) by default, or in-process on
``Lander-v0`` or ``Stroke-v0`` with the same ``num_envs`` (``--in-process``), wrapped the same way
either way so PPO and its logs cannot tell the difference.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecMonitor, VecNormalize

from game_bridge import LANDER_ENV_ID, STROKE_ENV_ID
from game_bridge.lander_game import gym_env  # noqa: F401  (registers Lander-v0)
from game_bridge.launcher import LaunchConfig, game_command
from game_bridge.stroke_game import gym_env as _stroke_env  # noqa: F401  (registers Stroke-v0)
from game_bridge.vec_env import GameVecEnv
from training.config import TrainConfig


def launch_config(config: TrainConfig, output_dir: Path | None = None) -> LaunchConfig:
    """The bridge's launch settings for a run's configuration."""
    game_args = {"agents": str(config.agents_per_instance), **config.game_args}
    cluster = None
    if config.cluster is not None:
        from game_bridge.cluster import GameCluster  # Ray: only when a cluster is asked for

        cluster = GameCluster(config.cluster, config.instances_per_node)
    return LaunchConfig(
        cluster=cluster,
        command=game_command(config.game_bin, config.game),
        transport=config.game_transport,
        n_instances=config.n_parallel,
        base_port=config.port,
        seed=config.seed,
        speedup=config.speedup,
        action_repeat=config.action_repeat,
        game_args=game_args,
        read_timeout=config.read_timeout,
        output_dir=output_dir,
        fast_wire=config.fast_wire,
    )


def _in_process_env(config: TrainConfig) -> VecEnv:
    kwargs: dict[str, Any] = {}
    if config.game == "stroke":
        env_id = STROKE_ENV_ID
        if "reward_mode" in config.game_args:
            kwargs["reward_mode"] = config.game_args["reward_mode"]
    else:
        env_id = LANDER_ENV_ID
        if "action_type" in config.game_args:
            kwargs["action_type"] = config.game_args["action_type"]
        if "difficulty" in config.game_args:
            kwargs["difficulty"] = int(config.game_args["difficulty"])
        if config.action_repeat is not None:
            kwargs["action_repeat"] = config.action_repeat

    def make() -> Callable[[], gymnasium.Env[Any, Any]]:
        def build() -> gymnasium.Env[Any, Any]:
            return gymnasium.make(env_id, **kwargs)

        return build

    return DummyVecEnv([make() for _ in range(config.num_envs)])


def make_vec_env(config: TrainConfig, games_log_dir: Path | None = None) -> VecEnv:
    """The environment a run trains on: games over TCP or in-process, with episode stats.

    :raises BridgeError: when the games cannot be launched.
    """
    env: VecEnv = (
        _in_process_env(config)
        if config.in_process
        else GameVecEnv(launch_config(config, games_log_dir), config.max_restarts_per_minute)
    )
    env.seed(config.seed)
    return VecMonitor(env)


def game_env_of(env: VecEnv) -> GameVecEnv | None:
    """The GameVecEnv under any wrappers, or None for in-process training."""
    current: Any = env
    while current is not None:
        if isinstance(current, GameVecEnv):
            return current
        current = getattr(current, "venv", None)
    return None


def wrap_normalization(
    env: VecEnv, config: TrainConfig, saved: Path | None
) -> tuple[VecEnv, VecNormalize | None]:
    """Add observation and reward normalisation when configured, restoring saved statistics."""
    if not (config.normalize_observations or config.normalize_rewards):
        return env, None
    if saved is not None and saved.exists():
        normalizer = VecNormalize.load(str(saved), env)
        normalizer.training = True
    else:
        normalizer = VecNormalize(
            env,
            norm_obs=config.normalize_observations,
            norm_reward=config.normalize_rewards,
            gamma=config.gamma,
        )
    return normalizer, normalizer
