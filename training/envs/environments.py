"""Building the vectorized environment a run trains on, from its configuration.

Through the bridge (N game processes over TCP or stdio) by default, or in-process on the
game's own gymnasium environment with the same ``num_envs`` (``--in-process``), wrapped the
same way either way so PPO and its logs cannot tell the difference.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env import (
    DummyVecEnv,
    VecEnv,
    VecEnvWrapper,
    VecNormalize,
)
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

from game_bridge.bot_runner import BotFormatError, BotRunner
from game_bridge.frame_stack import FrameStack
from game_bridge.vec_env import GameVecEnv
from games import gym_env_factory
from training.config import ConfigError, TrainConfig
from training.envs.game_launch import EarlyGames, launch_config
from training.envs.game_monitor import GameMonitor
from training.ppo.action_heads import MASK_KEY
from training.ppo.camera_policy import is_camera


def _in_process_env(config: TrainConfig) -> VecEnv:
    build = gym_env_factory(config.game, config.game_args, config.action_repeat)
    return DummyVecEnv([build for _ in range(config.num_envs)])


def make_vec_env(
    config: TrainConfig, games_log_dir: Path | None = None, early: EarlyGames | None = None
) -> VecEnv:
    """The environment a run trains on: games over TCP or in-process, with episode stats.

    :param early: the run's games, their launch begun already (see :class:`EarlyGames`).
    :raises BridgeError: when the games cannot be launched.
    """
    env: VecEnv
    if config.in_process:
        env = _in_process_env(config)
    elif early is not None:
        env = GameVecEnv(early.config, config.max_restarts_per_minute, early.take())
    else:
        env = GameVecEnv(launch_config(config, games_log_dir), config.max_restarts_per_minute)
    env.seed(config.seed)
    if isinstance(env, GameVecEnv) and env.env_info.sides and not config.self_play:
        env.close()
        sides = ", ".join(side.name for side in env.env_info.sides)
        raise ConfigError(
            f"the game's sides ({sides}) declare spaces of their own: train them with "
            "--self-play (a model per side)"
        )
    if config.self_play and isinstance(env, GameVecEnv):
        from training.envs.sides import SelfPlayEnv

        try:
            env = SelfPlayEnv.over(env)  # the learner's agents only: PPO and its stats see them
            if env.rival_sides and config.opponent is not None:
                raise ConfigError(
                    "--opponent plays one fixed bot for the other sides; this game's sides "
                    "have their own spaces and each trains a model: drop --opponent"
                )
            if config.opponent is not None:
                check_opponent_fits(Path(config.opponent), env)
        except BaseException:
            env.close()
            raise
    env = GameMonitor(env)
    if config.frame_stack > 1:
        try:
            env = CameraFrameStack(env, config.frame_stack)
        except ConfigError:
            env.close()
            raise
    return env


class CameraFrameStack(VecEnvWrapper):
    """Each camera key as its last ``frames`` frames, joined along the channel axis, oldest
    first (``--frame-stack``); vector keys pass as they are. A terminal observation is
    stacked after its episode's frames, so the value bootstraps from what the policy saw.

    :raises ConfigError: the game sends no camera key.
    """

    def __init__(self, venv: VecEnv, frames: int) -> None:
        space = venv.observation_space
        parts = dict(space.spaces) if isinstance(space, spaces.Dict) else {"": space}
        cameras = [key for key, part in parts.items() if is_camera(part)]
        if not cameras:
            raise ConfigError(
                "--frame-stack stacks camera frames: this game's observation has no camera "
                "key (a uint8 image, a key named *2d*)"
            )
        for key in cameras:
            parts[key] = _stacked_space(parts[key], frames)
        stacked = spaces.Dict(parts) if isinstance(space, spaces.Dict) else parts[""]
        super().__init__(venv, observation_space=stacked)
        self.stack = FrameStack(frames, cameras if isinstance(space, spaces.Dict) else ())

    def reset(self) -> VecEnvObs:
        self.stack.start()
        return self.stack(self.venv.reset())

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        for index in np.flatnonzero(dones):
            terminal = infos[index].get("terminal_observation")
            if terminal is not None:
                infos[index]["terminal_observation"] = self.stack.with_last(terminal, int(index))
        self.stack.start(dones)
        return self.stack(obs), rewards, dones, infos


def _stacked_space(space: spaces.Space[Any], frames: int) -> spaces.Box:
    """A camera key's Box with ``frames`` times its channels."""
    assert isinstance(space, spaces.Box)
    low = np.concatenate([space.low] * frames)
    high = np.concatenate([space.high] * frames)
    return spaces.Box(low, high, dtype=space.dtype)


Wrapped = TypeVar("Wrapped", bound=VecEnv)


def check_opponent_fits(path: Path, view: VecEnv) -> None:
    """``--opponent``'s bot plays the other sides: its observation and action must be the
    game's, checked while the games open, before any run is written.

    :raises ConfigError: a bot of another game's sizes (or an unreadable bot).
    """
    try:
        bot = BotRunner.from_file(path)
    except BotFormatError as exc:
        raise ConfigError(f"--opponent: {exc}") from None
    if bot.memory is not None:
        raise ConfigError(
            f"--opponent {path}: a bot with memory cannot play the other sides yet; give an "
            "opponent trained without --memory"
        )
    observed = int(np.prod(view.observation_space.shape or (1,)))
    space = view.action_space
    box = isinstance(space, spaces.Box)
    acted = int(np.prod(space.shape or (1,))) if box else bot.action_size
    if bot.obs_size != observed or bot.action_size != acted:
        raise ConfigError(
            f"--opponent {path}: the bot observes {bot.obs_size} values and acts with "
            f"{bot.action_size}; this game's sides observe {observed} and act with {acted}"
        )


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
        vectors = vector_keys(env.observation_space)
        normalizer = VecNormalize(
            env,
            # Camera frames are not running-normalised: the policy scales their bytes
            # to [0, 1] itself, as SB3 does for images.
            norm_obs=config.normalize_observations and vectors != [],
            norm_reward=config.normalize_rewards,
            gamma=config.gamma,
            norm_obs_keys=vectors if isinstance(env.observation_space, spaces.Dict) else None,
        )
    return normalizer, normalizer


def _running_normalised(space: spaces.Space[Any]) -> bool:
    """A vector of numbers (not a camera's bytes, not a discrete choice, which the policy
    one-hot encodes)."""
    return isinstance(space, spaces.Box) and not is_camera(space)


def vector_keys(space: spaces.Space[Any]) -> list[str] | None:
    """The keys of a Dict observation that are vectors (None for a single vector; an empty
    list for a single camera or discrete observation)."""
    if isinstance(space, spaces.Dict):  # the allowed moves stay 0 and 1 (action_heads.py)
        return [
            key
            for key, part in space.spaces.items()
            if _running_normalised(part) and key != MASK_KEY
        ]
    return None if _running_normalised(space) else []
