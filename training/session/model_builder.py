"""The PPO model of a session: built new for the game's spaces (its policy class, the camera
encoder, memory, the initial std) or loaded from the resume point, with the collector and the
step-size rules of ``--collector``, ``--adaptive-kl`` and ``--max-std`` set on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.vec_env import VecEnv

from game_bridge.machine_memory import available_memory, in_gb
from training.config import RESUMABLE_SETTINGS, ConfigError, TrainConfig
from training.envs.half_steps import game_halves
from training.ppo.action_heads import MaskedPolicy, ReturnNormalizedCnnPolicy, masks_actions
from training.ppo.camera_policy import (
    camera_policy_kwargs,
    cnn_reads_lone_camera,
    sees_images,
)
from training.ppo.lean_ppo import LeanPPO
from training.ppo.policy_tweaks import reset_action_std
from training.ppo.recurrent_policy import RecurrentActorCritic, memory_of
from training.runs.checkpoints import CheckpointError

ROLLOUT_SHARE = 2
"""A rollout may take half the available memory: the update gathers minibatches and the
normalization copies from the other half."""


def model_device(config: TrainConfig, image_observations: bool) -> str:
    """``auto`` means CUDA only where it pays: small MLPs train faster on the CPU."""
    if config.device != "auto":
        return config.device
    return "cuda" if image_observations and torch.cuda.is_available() else "cpu"


def rollout_size(config: TrainConfig, env: VecEnv) -> tuple[int, int]:
    """What one rollout holds: (values each env stores a step, bytes in all). Observations
    and actions as float32 (as SB3's buffer keeps them), and six more a step: the reward,
    the episode start, the value, the log-probability, the advantage and the return."""
    space = env.observation_space
    parts = space.spaces.values() if isinstance(space, spaces.Dict) else [space]
    observed = sum(int(np.prod(part.shape or (1,))) for part in parts)
    values = observed + int(np.prod(env.action_space.shape or (1,))) + 6
    return values, config.n_steps * env.num_envs * values * 4


def check_rollout_fits(config: TrainConfig, env: VecEnv) -> None:
    """Refuse, with the figures, a rollout this machine's memory cannot hold, before the
    buffer is made (it was a MemoryError, or the kernel's OOM killer, mid-start).

    :raises ConfigError: what it needs, what the machine has, what to lower.
    """
    available = available_memory()
    values, need = rollout_size(config, env)
    if available is None or need <= available // ROLLOUT_SHARE:
        return
    raise ConfigError(
        f"a rollout of {config.n_steps:,} steps x {env.num_envs:,} agents x {values:,} values "
        f"(float32) needs {in_gb(need)}, more than half of the {in_gb(available)} this machine "
        "has available (the update needs the rest): lower --n-steps, --n-parallel or the "
        "agents per instance"
    )


def make_ppo_model(
    config: TrainConfig, env: VecEnv, resume: Path | None, reset_std: float | None
) -> PPO:
    """The session's PPO model for ``env``: new, or loaded from ``resume``.

    :raises ConfigError: a rollout past the machine's memory, or a resume that changes
        ``--memory``.
    :raises CheckpointError: a checkpoint PPO cannot load.
    """
    check_rollout_fits(config, env)
    image = sees_images(env.observation_space)
    device = model_device(config, image)
    # The resumable settings are exactly PPO's hyperparameters, named as PPO names them:
    # a new one declared in training/config/settings.py reaches PPO with no line here.
    ppo_settings = {name: getattr(config, name) for name in RESUMABLE_SETTINGS}
    ppo_settings["batch_size"] = config.minibatch_size(env.num_envs)
    algorithm = PPO if config.collector == "sb3" else LeanPPO
    if resume is None:
        # Running statistics (pixels, returns) are for a CNN reading one camera alone (an
        # Atari game's frames), refitted after each of lander's rollouts (SB3's own loop
        # never refits them); elsewhere off.
        refitted = algorithm is LeanPPO and cnn_reads_lone_camera(
            config.camera_encoder, env.observation_space
        )
        width = [config.net_width] * 2 if config.net_width else []
        policy_kwargs: dict[str, Any] = {"net_arch": {"pi": width, "vf": width}}
        if isinstance(env.action_space, spaces.Box):  # a Gaussian policy: its initial std
            policy_kwargs["log_std_init"] = config.log_std_init
        if image:
            policy_kwargs.update(
                camera_policy_kwargs(
                    config.camera_encoder,
                    config.frame_stack,
                    config.cnn_features,
                    config.normalize_pixels and refitted,
                )
            )
        if config.memory:
            # The critic keeps a memory of its own (RecurrentPPO's default): see
            # docs/performance.md, "Bots that remember".
            policy_kwargs.update(memory=config.memory, critic_memory=True)
        built = algorithm(
            policy_class(
                config,
                env.observation_space,
                image,
                masks_actions(env.observation_space, env.action_space),
                returns_normalized=config.normalize_returns and refitted,
            ),
            env,
            **ppo_settings,
            policy_kwargs=policy_kwargs,
            seed=config.seed,
            device=device,
            verbose=0,
        )
        return with_collector(built, config)
    try:
        model = algorithm.load(str(resume), env=env, device=device, **ppo_settings)
    except (ValueError, KeyError, RuntimeError, OSError, TypeError, AttributeError) as exc:
        # A zip SB3 can open but PPO cannot use (another algorithm's, other spaces).
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise CheckpointError(f"cannot resume from {resume}: {reason}") from None
    kept = memory_of(model.policy)
    if kept != config.memory:
        raise ConfigError(
            f"--memory {config.memory}: {resume} keeps "
            + (f"a memory of {kept} units" if kept else "no memory")
            + " (the network's shape, fixed when a run starts): drop --memory, or start a new run"
        )
    if reset_std is not None:
        reset_action_std(model, reset_std)
    return with_collector(model, config)


def policy_class(
    config: TrainConfig,
    space: spaces.Space[Any],
    image: bool,
    masks: bool = False,
    returns_normalized: bool = False,
) -> str | type[ActorCriticPolicy]:
    """SB3's policy for the observation space, the policy with memory (``--memory``), the
    policy whose moves the game masks (``masks``: it sends ``action_mask``), or a lone
    camera's CNN whose values learn normalized returns (``returns_normalized``:
    ``--normalize-returns`` where lander's loop refits them, as it does the pixels').

    :raises ConfigError: memory for observations it cannot take yet (camera or several keys).
    """
    if config.memory:
        if image or not isinstance(space, spaces.Box) or len(space.shape) != 1:
            raise ConfigError(
                "--memory takes a game of one observation vector for now; this game sends "
                + ("camera frames" if image else "several observation keys")
                + ": train it without --memory"
            )
        return RecurrentActorCritic
    if space.shape is None:
        return MaskedPolicy if masks else "MultiInputPolicy"
    if returns_normalized:
        return ReturnNormalizedCnnPolicy
    return "CnnPolicy" if image else "MlpPolicy"


def with_collector(model: PPO, config: TrainConfig) -> PPO:
    """``--collector async`` makes the lean loop play each rollout ahead of the update,
    ``lean`` its games in halves where they fit (``training/envs/half_steps.py``);
    ``--adaptive-kl`` adapts its step size (from ``--learning-rate``, each session) and
    ``--max-std`` bounds the action std (each session)."""
    if isinstance(model, LeanPPO):
        model.asynchronous = config.collector == "async"
        env = model.get_env()
        model.halves = game_halves(env) if config.collector == "lean" and env is not None else None
        model.desired_kl = config.adaptive_kl or None
        model.adaptive_lr = None
        model.max_std = config.max_std or None
        model.std_regrowth = config.std_regrowth or None
        model.lowest_log_std = None
    return model
