"""SB3's PPO with a lean rollout loop and its update in numpy; checkpoints and resume stay SB3's.

SB3's ``collect_rollouts`` spends more Python per vectorised step than the forward pass
costs: a distribution object per step, a loop over every env for infos and another for
truncations (each truncated episode its own forward pass), copies into the rollout
buffer. :class:`LeanPPO` replaces that loop (as sb3-contrib's MaskablePPO does) for the
policies lander builds (a flat Box observation or camera keys, Box or Discrete actions, no
gSDE):

- one forward for all envs: features, both heads, then the Gaussian's sample and
  log-probability from the noise itself (no ``torch.distributions`` object), in numpy
  over the policy's own weights where ``training/ppo/numpy_policy.py`` writes the policy out
  (50 against 175 us a step for 32 envs here), else in torch (``rollout_steps.py``);
- a camera policy the same way: the centroid encoder in numpy too
  (``camera_update.CameraActor``), a CNN (``small``, ``narrow``, ``nature``) by its own
  torch layers, its frames handed over channels last while still bytes, and its games
  stepped in two halves where the run's wrappers allow (``rollout_steps.play_in_halves``):
  one half's forward pass while the other half's games step;
- the rollout buffer's arrays written in place;
- truncated episodes bootstrapped in one batched value pass, their indices found in
  numpy; the episode statistics read only from the envs that finished.

A policy with memory (``--memory``) takes its own rollout and update
(``training/ppo/recurrent_update.py``: each agent's state carried, sequences replayed).

Callbacks see what SB3's loop gives them: ``on_step`` after every vectorised step,
``self.locals`` with ``new_obs``, ``rewards``, ``dones`` and ``infos``. Any other policy
takes SB3's own loop. :meth:`LeanPPO.train` is SB3's update, computed by
``training/ppo/lean_update.py`` for those policies (the same minibatches and arithmetic,
a third of the time) and by SB3 for any other. The class saves plain PPO zips (``PPO.load`` reads them, and
:meth:`LeanPPO.load` reads any PPO zip), and builds its policy with
:class:`~training.ppo.lean_adam.LeanAdam` in place of ``torch.optim.Adam`` without putting
that in the saved ``policy_kwargs``.
"""

from __future__ import annotations

import copy
import functools
import math
import threading
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.policies import (
    ActorCriticCnnPolicy,
    ActorCriticPolicy,
    MultiInputActorCriticPolicy,
)
from stable_baselines3.common.torch_layers import FlattenExtractor
from stable_baselines3.common.vec_env import VecEnv

from training.ppo.action_heads import (
    ReturnNormalizedCnnPolicy,
    evaluate_actions,
    normalized_value_loss,
    refit_returns,
)
from training.ppo.camera_policy import (
    CameraExtractor,
    CentroidEncoder,
    refit_pixels,
    refit_whitening,
    sees_images,
)
from training.ppo.camera_update import (
    CameraDictRolloutBuffer,
    CameraRolloutBuffer,
    camera_buffer,
    camera_update_fits,
)
from training.ppo.lean_adam import LeanAdam
from training.ppo.lean_update import lean_train, lean_update_fits
from training.ppo.numpy_policy import numpy_fits
from training.ppo.recurrent_policy import RecurrentActorCritic, is_recurrent
from training.ppo.recurrent_update import (
    RecurrentPlayed,
    RecurrentRolloutBuffer,
    play_recurrent,
    recurrent_buffer,
    recurrent_train,
)
from training.ppo.rollout_steps import (
    Actor,
    Halves,
    Played,
    StepDone,
    make_actor,
    play_in_halves,
    store_bootstrapped,
)

MIN_ADAPTIVE_LR, MAX_ADAPTIVE_LR = 1e-5, 1e-2
"""The bounds of the adaptive step size (rsl_rl's)."""


class LeanPPO(PPO):
    """PPO whose rollouts are collected by :meth:`collect_rollouts` below."""

    def _setup_model(self) -> None:
        """SB3's set-up with LeanAdam as the policy's optimizer, unless one was chosen;
        the saved ``policy_kwargs`` stay as given, so the zip is a plain PPO zip."""
        given = self.policy_kwargs
        if "optimizer_class" not in given:
            # SB3 gives torch's Adam eps=1e-5 when no optimizer_kwargs are set; so must
            # its stand-in, or the update is not SB3's.
            self.policy_kwargs = {
                "optimizer_kwargs": {"eps": 1e-5},
                **given,
                "optimizer_class": LeanAdam,
            }
        try:
            super()._setup_model()
        finally:
            self.policy_kwargs = given
        if isinstance(self.policy, RecurrentActorCritic):
            self.rollout_buffer = recurrent_buffer(self, self.policy.state_width)
        elif sees_images(self.observation_space):
            self.rollout_buffer = camera_buffer(self)  # frames as the bytes they came as
        if self.lean_rollouts():
            # The update's forward pass with the distribution written out: the same
            # numbers as ActorCriticPolicy.evaluate_actions (tests/test_lean_ppo.py) for a
            # sixth less of the update's time; an instance attribute, so the saved
            # policy is SB3's own.
            self.policy.evaluate_actions = functools.partial(  # type: ignore[method-assign]
                evaluate_actions, self.policy, self.action_space
            )

    def train(self) -> None:
        """SB3's update: by :func:`~training.ppo.lean_update.lean_train` (the same arithmetic
        in numpy, in far fewer ops) for the MLP policies lander builds, else by SB3 (the
        adaptive step size then follows the update's mean KL, once per rollout)."""
        log_std = getattr(self.policy, "log_std", None)
        if self.std_regrowth is not None and self.lowest_log_std is None and log_std is not None:
            self.lowest_log_std = log_std.detach().clone()  # the session's start
        if is_recurrent(self.policy):
            recurrent_train(self, self.adapt_learning_rate if self.desired_kl is not None else None)
        elif lean_update_fits(self, self.lean_rollouts(), camera=self.numpy_camera):
            lean_train(self, self.adapt_learning_rate if self.desired_kl is not None else None)
        else:
            with normalized_value_loss(self):  # --normalize-returns: the normalized loss
                super().train()
            if self.desired_kl is not None:
                self.adapt_learning_rate(float(self.logger.name_to_value["train/approx_kl"]))
        self.bound_std()

    # -- the largest action std (--max-std) -------------------------------------------------

    max_std: float | None = None
    """The largest std a Gaussian policy's actions may have (None: no limit)."""
    std_regrowth: float | None = None
    """How far the std may grow back above its lowest this session (None: no limit)."""
    lowest_log_std: torch.Tensor | None = None

    def bound_std(self) -> None:
        """Hold a state-independent ``log_std`` at or under ``log(max_std)`` after an update
        (a projection, as a clipped parameter is): the moments of Adam stay as they are."""
        log_std = getattr(self.policy, "log_std", None)
        if (self.max_std is None and self.std_regrowth is None) or not isinstance(
            log_std, torch.nn.Parameter
        ):
            return
        if getattr(self.policy, "use_sde", False):
            return  # gSDE's log_std is a matrix of exploration weights, not a std
        with torch.no_grad():
            if self.max_std is not None:
                log_std.clamp_(max=math.log(self.max_std))
            if self.std_regrowth is not None and self.lowest_log_std is not None:
                # the lowest so far, from the session's start (taken in train)
                lowest = torch.minimum(self.lowest_log_std, log_std)
                self.lowest_log_std = lowest
                log_std.copy_(torch.minimum(log_std, lowest + math.log(self.std_regrowth)))

    # -- the adaptive step size (--adaptive-kl) ------------------------------------------

    desired_kl: float | None = None
    """The KL an update aims at, each minibatch's step size adapted to it; None: the
    learning rate's own schedule (a constant, as SB3's)."""
    adaptive_lr: float | None = None
    """The step size the KL has led to so far (None: not begun; starts at the learning
    rate, as a resumed session does: a resume is where a user sets a new one)."""

    def adapt_learning_rate(self, kl: float) -> None:
        """rsl_rl's rule: a minibatch whose KL from the rollout's policy is over twice the
        desired one makes the step 1.5 times smaller, one under half makes it 1.5 times
        larger, within [:data:`MIN_ADAPTIVE_LR`, the learning rate] (rsl_rl lets it grow to
        :data:`MAX_ADAPTIVE_LR`: measured here, a step past lander's large one lost more
        than it won)."""
        assert self.desired_kl is not None
        start = self.learning_rate_now()
        lr = self.adaptive_lr if self.adaptive_lr is not None else start
        if kl > 2.0 * self.desired_kl:
            lr = max(lr / 1.5, MIN_ADAPTIVE_LR)
        elif 0.0 < kl < 0.5 * self.desired_kl:
            lr = min(lr * 1.5, start, MAX_ADAPTIVE_LR)
        self.adaptive_lr = lr
        for group in self.policy.optimizer.param_groups:
            group["lr"] = lr

    def learning_rate_now(self) -> float:
        """The learning rate's schedule at this point of the run."""
        return float(self.lr_schedule(self._current_progress_remaining))

    def _update_learning_rate(
        self, optimizers: list[torch.optim.Optimizer] | torch.optim.Optimizer
    ) -> None:
        """SB3's schedule, or the adaptive step size where there is one."""
        if self.desired_kl is None:
            super()._update_learning_rate(optimizers)
            return
        if self.adaptive_lr is None:
            self.adaptive_lr = self.learning_rate_now()
        self.logger.record("train/learning_rate", self.adaptive_lr)
        for optimizer in optimizers if isinstance(optimizers, list) else [optimizers]:
            for group in optimizer.param_groups:
                group["lr"] = self.adaptive_lr

    def lean_rollouts(self) -> bool:
        """True when this model's policy is one the lean loop reproduces exactly."""
        policy = self.policy
        return (
            type(policy) is ActorCriticPolicy
            and isinstance(policy.features_extractor, FlattenExtractor)
            and isinstance(self.observation_space, spaces.Box)
            and len(self.observation_space.shape) == 1
            and isinstance(self.action_space, spaces.Box | spaces.Discrete)
            and not self.use_sde
            and not policy.squash_output
            and type(self.rollout_buffer) is RolloutBuffer
        )

    numpy_camera = True
    """Play and train a camera policy of the centroid encoder in numpy
    (``camera_update.py``; its update equals SB3's: tests/test_camera_update.py). False
    takes SB3's rollouts and update for it (a benchmark's side)."""

    def camera_rollouts(self) -> bool:
        """True when a camera policy's rollouts are played in numpy (``CameraActor``):
        lander's centroid encoder and SB3's MLPs, frames kept as bytes."""
        return (
            self.numpy_camera
            and camera_update_fits(self)
            and numpy_fits(self.policy)
            and type(self.rollout_buffer) in (CameraRolloutBuffer, CameraDictRolloutBuffer)
        )

    lean_cnn = True
    """Play a CNN camera policy's rollouts in the lean loop (off: SB3's, as
    ``benchmarks/cnn_rollouts.py`` compares them)."""

    def cnn_rollouts(self) -> bool:
        """True when a camera policy with a CNN encoder (``small``, ``narrow``, ``nature``:
        what numpy does not write out) is played by the lean loop, its forward pass in torch: SB3's
        loop adds 0.3 ms to each step of 8 envs around the forward pass (a distribution
        object, tensor copies, the buffer's ``add``: 2.00 against 1.70 ms for the small
        CNN; docs/performance.md, "Games that see, twelfth part")."""
        policy = self.policy
        return (
            self.lean_cnn
            and type(policy)
            in (
                ActorCriticPolicy,
                ActorCriticCnnPolicy,
                ReturnNormalizedCnnPolicy,
                MultiInputActorCriticPolicy,
            )
            and isinstance(policy.features_extractor, CameraExtractor)
            and not any(isinstance(m, CentroidEncoder) for m in policy.features_extractor.encoders)
            and policy.share_features_extractor
            and isinstance(self.action_space, spaces.Box | spaces.Discrete)
            and not self.use_sde
            and not policy.squash_output
            and type(self.rollout_buffer) in (CameraRolloutBuffer, CameraDictRolloutBuffer)
        )

    def collect_rollouts(
        self,
        env: VecEnv,
        callback: BaseCallback,
        rollout_buffer: RolloutBuffer,
        n_rollout_steps: int,
    ) -> bool:
        """Fill ``rollout_buffer`` with ``n_rollout_steps`` steps of every env, then refit a
        camera policy's whitening to the rollout's frames (camera_policy.refit_whitening: what
        the policy does stays as it was; the update that follows sees the new features), and
        a CNN's pixel statistics (camera_policy.refit_pixels: the update reads the frames by
        the new ones, as Sample Factory's learner does), and its returns' (action_heads).

        :return: False when a callback stopped training mid-rollout, as in SB3.
        """
        whole = self._collect(env, callback, rollout_buffer, n_rollout_steps)
        if whole:
            refit_whitening(self.policy, rollout_buffer)
            refit_pixels(self.policy, rollout_buffer)
            refit_returns(self.policy, rollout_buffer)
        return whole

    def _collect(
        self,
        env: VecEnv,
        callback: BaseCallback,
        rollout_buffer: RolloutBuffer,
        n_rollout_steps: int,
    ) -> bool:
        recurrent = is_recurrent(self.policy)
        flat = not recurrent and self.lean_rollouts()
        numpy_camera = not recurrent and not flat and self.camera_rollouts()
        if not (recurrent or flat or numpy_camera or self.cnn_rollouts()):
            return super().collect_rollouts(env, callback, rollout_buffer, n_rollout_steps)
        if flat and self.asynchronous:
            return self._collect_ahead(env, callback, rollout_buffer, n_rollout_steps)
        self.policy.set_training_mode(False)
        callback.on_rollout_start()

        def step_done(rewards: np.ndarray, dones: np.ndarray, infos: list[dict[str, Any]]) -> bool:
            return self._count_step(env, callback, rewards, dones, infos)

        played: Played | RecurrentPlayed
        if recurrent:  # a policy with memory (training/ppo/recurrent_update.py)
            assert isinstance(rollout_buffer, RecurrentRolloutBuffer)
            played = play_recurrent(
                self, env, rollout_buffer, n_rollout_steps, step_done, self._last_hidden
            )
            self._last_hidden = played.hidden
        else:
            actor = make_actor(self.policy, self.action_space, numpy_camera)
            halves = self.halves
            if halves is not None and halves.env is env and self.cnn_rollouts():
                assert self._last_obs is not None and self._last_episode_starts is not None
                space = self.action_space
                played = play_in_halves(
                    (self._last_obs, self._last_episode_starts),
                    actor,
                    halves,
                    rollout_buffer,
                    n_rollout_steps,
                    step_done,
                    self.gamma,
                    (space.low, space.high) if isinstance(space, spaces.Box) else None,
                )
            else:
                played = _play(self, actor, env, rollout_buffer, n_rollout_steps, step_done)
        self._last_obs, self._last_episode_starts = played.obs, played.dones
        if not played.whole:
            return False
        self._end_rollout(callback, rollout_buffer, played)
        return True

    _last_hidden: np.ndarray | None = None
    """A recurrent policy's state per env where the last rollout left the games."""

    halves: Halves | None = None
    """The run's games in two halves (``training/envs/half_steps.py``), where a CNN camera
    policy plays them so: its forward pass for one half runs while the other half's games
    step (``--collector lean``; None: one batch)."""

    def _count_step(
        self,
        env: VecEnv,
        callback: BaseCallback,
        rewards: np.ndarray,
        dones: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> bool:
        """What SB3's loop does after each vectorised step: count it, let the callbacks
        see it (``False`` stops), keep the finished episodes' statistics."""
        self.num_timesteps += env.num_envs
        callback.update_locals({"rewards": rewards, "dones": dones, "infos": infos})
        if not callback.on_step():
            return False
        finished = np.flatnonzero(dones)
        if finished.size:
            self._update_info_buffer([infos[i] for i in finished], np.ones(finished.size, bool))
        return True

    def _end_rollout(
        self,
        callback: BaseCallback,
        rollout_buffer: RolloutBuffer,
        played: Played | RecurrentPlayed,
    ) -> None:
        rollout_buffer.compute_returns_and_advantage(
            last_values=torch.as_tensor(played.last_values), dones=played.dones
        )
        callback.on_rollout_end()

    # -- asynchronous: the next rollout collected while the update runs ----------------

    asynchronous = False
    """Collect each rollout while the previous update runs (``--collector async``)."""

    def _collect_ahead(
        self,
        env: VecEnv,
        callback: BaseCallback,
        rollout_buffer: RolloutBuffer,
        n_rollout_steps: int,
    ) -> bool:
        """The rollout collected ahead (during the last update, by a copy of the policy
        from before it; the first one here and now), its steps then shown to the
        callbacks in order; then the next one begins in a thread, played by a copy of
        the policy as it is now, while PPO updates this one."""
        self.policy.set_training_mode(False)
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            ahead = _Ahead(self, self._behaviour(), env, rollout_buffer, n_rollout_steps)
        played = ahead.result()
        self._last_obs, self._last_episode_starts = played.obs, played.dones
        if ahead.storage is not rollout_buffer:
            _copy_rollout(ahead.storage, rollout_buffer)
        callback.on_rollout_start()
        for rewards, dones, infos in played.steps:
            if not self._count_step(env, callback, rewards, dones, infos):
                return False
        if not played.whole:
            return False
        self._end_rollout(callback, rollout_buffer, played)
        spare = self._spare or copy.deepcopy(rollout_buffer)
        self._spare = spare
        self._ahead = _Ahead(self, self._behaviour(), env, spare, n_rollout_steps)
        return True

    _ahead: _Ahead | None = None
    _spare: RolloutBuffer | None = None
    _playing: ActorCriticPolicy | None = None

    def _behaviour(self) -> ActorCriticPolicy:
        """The policy that plays the next rollout ahead: a second policy of the same
        build, given the learning policy's weights as they are now."""
        if self._playing is None:
            kwargs = {**self.policy_kwargs, "optimizer_class": LeanAdam}
            self._playing = self.policy_class(  # type: ignore[assignment]
                self.observation_space, self.action_space, self.lr_schedule, **kwargs
            ).to(self.device)
            assert self._playing is not None
            self._playing.set_training_mode(False)
        self._playing.load_state_dict(self.policy.state_dict())
        return self._playing

    def finish_ahead(self) -> None:
        """Stop the rollout being collected ahead and take up the games where it left
        them (its steps are dropped): at the end of ``learn``, whatever ended it."""
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return
        ahead.stop.set()
        try:
            played = ahead.result()
        except Exception:  # the run is ending already; the games' fault was or will be told
            return
        self._last_obs, self._last_episode_starts = played.obs, played.dones

    def learn(self, *args: Any, **kwargs: Any) -> LeanPPO:
        """SB3's ``learn``; a rollout still being collected ahead stops at its end."""
        try:
            super().learn(*args, **kwargs)
        finally:
            self.finish_ahead()
        return self

    def _excluded_save_params(self) -> list[str]:
        """The rollout played ahead, its buffer, its policy and the mode stay out of the
        zip, which stays a plain PPO zip."""
        return [
            *super()._excluded_save_params(),
            "_ahead",
            "_spare",
            "_playing",
            "_last_hidden",
            "asynchronous",
            "halves",
            "desired_kl",
            "adaptive_lr",
        ]


def _play(
    model: LeanPPO,
    actor: Actor,
    env: VecEnv,
    storage: RolloutBuffer,
    n_steps: int,
    step_done: StepDone,
    stop: threading.Event | None = None,
) -> Played:
    """Step every env ``n_steps`` times with ``actor``, from where ``model`` left the
    games, writing each step into ``storage`` in place; ``step_done`` sees each step
    before its truncated episodes are bootstrapped (as SB3's callbacks do) and may stop
    the rollout, as may ``stop``."""
    assert model._last_obs is not None and model._last_episode_starts is not None
    storage.reset()
    space = model.action_space
    low, high = (space.low, space.high) if isinstance(space, spaces.Box) else (None, None)
    obs: Any = model._last_obs
    starts: np.ndarray = model._last_episode_starts
    for _ in range(n_steps):
        if stop is not None and stop.is_set():
            return Played(obs, starts, np.zeros(0), whole=False)
        acted = actor.act(obs)
        new_obs: Any
        new_obs, rewards, dones, infos = env.step(
            np.clip(acted[0], low, high) if low is not None else acted[0]
        )
        if not step_done(rewards, dones, infos):
            return Played(new_obs, dones, np.zeros(0), whole=False)
        store_bootstrapped(storage, actor, model.gamma, obs, acted, (rewards, dones, infos, starts))
        obs, starts = new_obs, dones
    return Played(obs, starts, actor.values(obs), whole=True)


def _copy_rollout(source: RolloutBuffer, target: RolloutBuffer) -> None:
    target.reset()  # the last update flattened its arrays
    for name in ("observations", "actions", "rewards", "episode_starts", "values", "log_probs"):
        np.copyto(getattr(target, name), getattr(source, name))
    target.pos, target.full = source.pos, source.full


class _Ahead:
    """One rollout played in a thread by a frozen copy of the policy, while the main
    thread updates the policy itself: the games never wait for the update.

    :param model: whose games, settings and start (``_last_obs``) to play from.
    :param policy: the copy that plays (the behaviour policy of this rollout).
    :param env: the games.
    :param storage: the buffer written in place.
    :param n_steps: steps per env.
    """

    def __init__(
        self,
        model: LeanPPO,
        policy: ActorCriticPolicy,
        env: VecEnv,
        storage: RolloutBuffer,
        n_steps: int,
    ) -> None:
        self.storage = storage
        self.stop = threading.Event()
        self._played: Played | None = None
        self._error: BaseException | None = None
        self._steps: list[tuple[np.ndarray, np.ndarray, list[dict[str, Any]]]] = []

        def record(rewards: np.ndarray, dones: np.ndarray, infos: list[dict[str, Any]]) -> bool:
            self._steps.append((rewards.copy(), dones, infos))
            return True

        def run() -> None:
            try:
                actor = make_actor(policy, model.action_space, numpy_camera=False)
                self._played = _play(model, actor, env, storage, n_steps, record, self.stop)
            except BaseException as exc:  # a game fault or Ctrl-C: raised in the main thread
                self._error = exc

        self._thread = threading.Thread(target=run, name="rollout-ahead", daemon=True)
        self._thread.start()

    def result(self) -> Played:
        """The rollout, once played; raises what the thread raised (a game's fault)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._played is not None
        self._played.steps = self._steps
        return self._played
