"""Building the vectorized environment a run trains on, from its configuration.

Through the bridge (N game processes over TCP or stdio) by default, or in-process on the
game's own gymnasium environment with the same ``num_envs`` (``--in-process``), wrapped the
same way either way so PPO and its logs cannot tell the difference.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import gymnasium
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecMonitor, VecNormalize

from game_bridge.launcher import LaunchConfig, game_command
from game_bridge.vec_env import GameVecEnv
from games import game_entry, launch_settings
from training.config import ConfigError, TrainConfig


def game_launch(game: str, game_bin: str | Path | None) -> dict[str, Any]:
    """How the bridge starts a run's game: the executable ``game_bin``, or the bundled
    ``game`` (:func:`games.launch_settings`).

    :raises LaunchError: when the executable is missing or not executable.
    """
    return {"command": game_command(game_bin)} if game_bin is not None else launch_settings(game)


def launch_config(config: TrainConfig, output_dir: Path | None = None) -> LaunchConfig:
    """The bridge's launch settings for a run's configuration."""
    game_args = {"agents": str(config.agents_per_instance), **config.game_args}
    cluster = None
    if config.cluster is not None:
        from game_bridge.cluster import GameCluster  # Ray: only when a cluster is asked for

        cluster = GameCluster(config.cluster, config.instances_per_node)
    return LaunchConfig(
        cluster=cluster,
        **game_launch(config.game, config.game_bin),
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


def in_process_env_id(game: str) -> str:
    """The gymnasium id of the bundled ``game``'s in-process environment, registered."""
    return str(importlib.import_module(game_entry(game).gym_module).ENV_ID)


def _in_process_env(config: TrainConfig) -> VecEnv:
    env_id = in_process_env_id(config.game)
    kwargs = game_entry(config.game).in_process_kwargs(config.game_args, config.action_repeat)

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
    if isinstance(env, GameVecEnv) and env.env_info.sides and not config.self_play:
        env.close()
        sides = ", ".join(side.name for side in env.env_info.sides)
        raise ConfigError(
            f"the game's sides ({sides}) declare spaces of their own: train them with "
            "--self-play (a model per side)"
        )
    if config.self_play and isinstance(env, GameVecEnv):
        from training.self_play import SelfPlayEnv

        try:
            env = SelfPlayEnv.over(env)  # the learner's agents only: PPO and its stats see them
            if env.rival_sides and config.opponent is not None:
                raise ConfigError(
                    "--opponent plays one fixed bot for the other sides; this game's sides "
                    "have their own spaces and each trains a model: drop --opponent"
                )
        except BaseException:
            env.close()
            raise
    return VecMonitor(env)


Wrapped = TypeVar("Wrapped", bound=VecEnv)


def wrapped_env(env: VecEnv, kind: type[Wrapped]) -> Wrapped | None:
    """The VecEnv of ``kind`` under any wrappers of ``env`` (or ``env`` itself), or None."""
    current: Any = env
    while current is not None:
        if isinstance(current, kind):
            return current
        current = getattr(current, "venv", None)
    return None


def game_env_of(env: VecEnv) -> GameVecEnv | None:
    """The GameVecEnv under any wrappers, or None for in-process training."""
    return wrapped_env(env, GameVecEnv)


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
