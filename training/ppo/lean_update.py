"""SB3's PPO update for lander's MLP policies, computed with numpy on the CPU.

On a 2-core machine the update is most of a run's time to a good bot, and most of each
512-sample minibatch's 2.3 ms in ``PPO.train`` is not arithmetic: about 300 small torch
ops with their dispatch and autograd bookkeeping, a dozen tensors made from numpy,
gradient clipping and Adam as loops over every parameter, and ``torch.tanh``, which here
costs ten times numpy's. For the policies lander builds (SB3's ``MlpExtractor`` of linear
layers with tanh or ReLU, a Gaussian or categorical head) the gradient of PPO's loss is
short enough to write out, so :func:`lean_train` does what ``PPO.train`` does,
minibatch for minibatch, in about 60 numpy ops:

- the same minibatches (one permutation of the rollout per epoch from numpy's global
  generator, cut in order, as ``RolloutBuffer.get`` does), the same normalised
  advantages, clipped surrogate, value clipping, entropy and value losses;
- the gradient of that loss by hand (torch's conventions at the edges: ``clamp``
  passes the gradient at its bounds);
- ``clip_grad_norm_`` and ``torch.optim.Adam``'s step on the parameters, gradients and
  moments laid out as one flat array each for the update, every torch parameter a view
  of it, and given storage of their own again when the update ends, so checkpoints and
  LeanAdam's state are exactly what SB3 and torch would hold;
- the statistics SB3 logs, under its names.

``tests/test_lean_update.py`` checks, for both action kinds and with every option, that
a rollout updated here and by ``PPO.train`` ends with the same weights (to float32
rounding), the same Adam moments and the same logged numbers. Anything else (another
policy, a GPU) takes SB3's own update.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.torch_layers import FlattenExtractor
from stable_baselines3.common.utils import explained_variance
from torch import nn

from training.ppo.camera_update import RolloutFeatures, camera_update_fits
from training.ppo.lean_adam import LeanAdam
from training.ppo.numpy_policy import (
    HALF_LOG_2PI,
    Dense,
    backward,
    forward,
    gaussian_log_prob,
    log_softmax,
    numpy_fits,
    policy_stacks,
)


def lean_update_fits(model: PPO, lean_rollouts: bool, camera: bool = False) -> bool:
    """True when :func:`lean_train` computes ``model``'s update exactly: a policy the
    lean rollout loop takes (``lean_rollouts``, LeanPPO's to say) or, with ``camera``, a
    camera policy of lander's centroid encoder (``camera_update_fits``), whose layers numpy
    writes out
    (``numpy_fits``), and LeanAdam with one group whose moments share one step count
    (always so for PPO)."""
    policy = model.policy
    if not ((lean_rollouts or (camera and camera_update_fits(model))) and numpy_fits(policy)):
        return False
    optimizer = policy.optimizer
    if not isinstance(optimizer, LeanAdam) or len(optimizer.param_groups) != 1:
        return False
    params = optimizer.param_groups[0]["params"]
    if {id(p) for p in params} != {id(p) for p in policy.parameters()}:
        return False
    entries = [optimizer.state.get(p) for p in params]
    if all(entry is None for entry in entries):
        return True
    return all(e is not None for e in entries) and len({e["step"] for e in entries if e}) == 1


class FlatParameters:
    """A policy's parameters, gradients and Adam moments as one flat float32 array each
    while the update runs (each torch parameter a view of the first), so clipping and
    Adam are a handful of ops whatever the number of layers.

    :param optimizer: the policy's LeanAdam (:func:`lean_update_fits` holds); its state
        is read here and written back by :meth:`release`.
    """

    def __init__(self, optimizer: LeanAdam) -> None:
        self.optimizer = optimizer
        self.group = optimizer.param_groups[0]
        self.params: list[torch.Tensor] = list(self.group["params"])
        sizes = [p.numel() for p in self.params]
        self.bounds = np.cumsum([0, *sizes]).tolist()
        self.values = self._flat([p.detach() for p in self.params])
        values = torch.from_numpy(self.values)
        for param, start, end in zip(self.params, self.bounds, self.bounds[1:], strict=False):
            param.data = values[start:end].view(param.shape)
        self.grads = np.zeros_like(self.values)
        self._scratch = np.zeros_like(self.values)
        state = optimizer.state
        if self.params[0] in state:
            self.step_count = int(state[self.params[0]]["step"])
            self.exp_avg = self._flat([state[p]["exp_avg"] for p in self.params])
            self.exp_avg_sq = self._flat([state[p]["exp_avg_sq"] for p in self.params])
        else:
            self.step_count = 0
            self.exp_avg = np.zeros_like(self.values)
            self.exp_avg_sq = np.zeros_like(self.values)

    @staticmethod
    def _flat(tensors: list[torch.Tensor]) -> np.ndarray:
        return np.concatenate([t.detach().reshape(-1).numpy() for t in tensors]).astype(np.float32)

    def view(self, flat: np.ndarray, param: torch.Tensor) -> np.ndarray:
        """The part of ``flat`` (values or gradients) that belongs to ``param``."""
        index = next(i for i, p in enumerate(self.params) if p is param)
        return flat[self.bounds[index] : self.bounds[index + 1]].reshape(param.shape)

    def clip_grad_norm(self, max_norm: float) -> None:
        """``torch.nn.utils.clip_grad_norm_`` over every parameter."""
        total = np.float32(math.sqrt(float(np.dot(self.grads, self.grads))))
        self.grads *= min(np.float32(max_norm) / (total + np.float32(1e-6)), np.float32(1.0))

    def adam_step(self) -> None:
        """One step of ``torch.optim.Adam`` (as LeanAdam computes it) on every parameter."""
        group = self.group
        beta1, beta2 = group["betas"]
        grads = self.grads
        if group["weight_decay"] != 0:
            grads = grads + np.float32(group["weight_decay"]) * self.values
        self.step_count += 1
        scratch = self._scratch
        np.subtract(grads, self.exp_avg, out=scratch)
        scratch *= np.float32(1 - beta1)
        self.exp_avg += scratch
        self.exp_avg_sq *= np.float32(beta2)
        np.multiply(grads, grads, out=scratch)
        scratch *= np.float32(1 - beta2)
        self.exp_avg_sq += scratch
        step_size = group["lr"] / (1 - beta1**self.step_count)
        np.sqrt(self.exp_avg_sq, out=scratch)
        scratch /= np.float32(math.sqrt(1 - beta2**self.step_count))
        scratch += np.float32(group["eps"])
        np.divide(self.exp_avg, scratch, out=scratch)
        scratch *= np.float32(-step_size)
        self.values += scratch

    def release(self) -> None:
        """Every parameter its own storage again, and the moments and step count in the
        optimizer's state, as torch's Adam would hold them."""
        state = self.optimizer.state
        for param, start, end in zip(self.params, self.bounds, self.bounds[1:], strict=False):
            param.data = param.data.clone()
            param.grad = None
            state[param] = {
                "step": self.step_count,
                "exp_avg": torch.from_numpy(self.exp_avg[start:end].reshape(param.shape).copy()),
                "exp_avg_sq": torch.from_numpy(
                    self.exp_avg_sq[start:end].reshape(param.shape).copy()
                ),
            }


@dataclass
class _Columns:
    """The rollout as one float32 array (rows in the order ``RolloutBuffer.get`` gives
    them: env-major) and where each field lies in it."""

    data: np.ndarray
    obs: slice
    actions: slice
    old_values: int
    old_log_prob: int
    advantages: int
    returns: int


def _rollout_columns(model: PPO, with_obs: bool) -> _Columns:
    """The rollout's columns; without its observations where a camera policy's features
    are computed apart (``obs`` is then an empty slice)."""
    buffer = model.rollout_buffer
    fields = [
        buffer.observations if with_obs else np.zeros((*buffer.values.shape, 0), np.float32),
        buffer.actions,
        buffer.values,
        buffer.log_probs,
        buffer.advantages,
        buffer.returns,
    ]
    rows = buffer.buffer_size * buffer.n_envs
    columns = [
        array.swapaxes(0, 1).reshape(rows, int(np.prod(array.shape[2:]))) for array in fields
    ]
    widths = np.cumsum([0, *(c.shape[1] for c in columns)]).tolist()
    return _Columns(
        data=np.concatenate(columns, axis=1).astype(np.float32, copy=False),
        obs=slice(widths[0], widths[1]),
        actions=slice(widths[1], widths[2]),
        old_values=widths[2],
        old_log_prob=widths[3],
        advantages=widths[4],
        returns=widths[5],
    )


@dataclass
class Minibatch:
    """One minibatch's losses, read off for the log."""

    policy_loss: float
    value_loss: float
    entropy_loss: float
    clip_fraction: float
    approx_kl: float
    stop: bool
    """The KL passed ``target_kl``'s bound: SB3 stops before this minibatch's step."""


class _Update:
    """The loss and its gradient for one minibatch (see the module)."""

    def __init__(self, model: PPO, flat: FlatParameters) -> None:
        self.model = model

        def dense(linear: nn.Linear, tanh: bool | None) -> Dense:
            return Dense(
                flat.view(flat.values, linear.weight),
                flat.view(flat.values, linear.bias),
                tanh,
                flat.view(flat.grads, linear.weight),
                flat.view(flat.grads, linear.bias),
            )

        self.pi_layers, self.vf_layers = policy_stacks(model.policy, dense)
        self.continuous = isinstance(model.action_space, spaces.Box)
        if self.continuous:
            log_std = model.policy.log_std
            self.log_std = flat.view(flat.values, log_std)
            self.log_std_grad = flat.view(flat.grads, log_std)
        progress = model._current_progress_remaining
        self.clip_range = float(model.clip_range(progress))  # type: ignore[operator]
        self.clip_range_vf = (
            float(model.clip_range_vf(progress))  # type: ignore[operator]
            if model.clip_range_vf is not None
            else None
        )

    input_grad: np.ndarray | None = None
    """With ``need_input``: the last minibatch's gradient at the MLPs' input (both heads')."""

    def minibatch(
        self,
        obs: np.ndarray,
        batch: np.ndarray,
        columns: _Columns,
        stop_kl: float | None,
        need_input: bool = False,
    ) -> Minibatch:
        """Compute the minibatch's loss and add its gradient to the flat gradients.

        :param obs: the MLPs' input for the minibatch's rows (``batch``).
        :param stop_kl: with ``target_kl``, the approximate KL at which SB3 stops before
            this minibatch's step (its losses still logged): then the result says
            ``stop`` and no gradient is added.
        :param need_input: keep the gradient at ``obs`` in :attr:`input_grad`.
        """
        model = self.model
        size = batch.shape[0]
        pi_out = forward(self.pi_layers, obs)
        vf_out = forward(self.vf_layers, obs)
        head, values = pi_out[-1], vf_out[-1][:, 0]
        if self.continuous:
            actions = batch[:, columns.actions]
            inv_std = np.exp(-self.log_std)
            z = (actions - head) * inv_std
            log_prob = gaussian_log_prob(z, self.log_std)
            entropy_loss = -float((0.5 + HALF_LOG_2PI + self.log_std).sum())
        else:
            chosen = batch[:, columns.actions.start].astype(np.int64)
            log_p = log_softmax(head)
            p = np.exp(log_p)
            rows = np.arange(size)
            log_prob = log_p[rows, chosen]
            entropy = -(p * log_p).sum(axis=1)
            entropy_loss = -float(entropy.mean())
        advantages = batch[:, columns.advantages]
        if model.normalize_advantage and size > 1:
            advantages = (advantages - advantages.mean()) / (
                advantages.std(ddof=1) + np.float32(1e-8)
            )
        ratio, approx_kl, policy_loss, grad_log_prob = self._surrogate(
            log_prob, batch[:, columns.old_log_prob], advantages
        )
        value_loss, grad_values = self._value_loss(values, batch, columns)
        result = Minibatch(
            policy_loss=policy_loss,
            value_loss=value_loss,
            entropy_loss=entropy_loss,
            clip_fraction=float(np.mean(np.abs(ratio - 1) > self.clip_range)),
            approx_kl=approx_kl,
            stop=stop_kl is not None and approx_kl > stop_kl,
        )
        if result.stop:
            return result
        ent_coef = model.ent_coef
        if self.continuous:
            grad_head = (grad_log_prob[:, None] * z) * inv_std
            self.log_std_grad += (grad_log_prob[:, None] * (z * z - 1)).sum(axis=0) - ent_coef
        else:
            grad_head = -grad_log_prob[:, None] * p
            grad_head[rows, chosen] += grad_log_prob
            grad_head += (ent_coef / size) * p * (log_p + entropy[:, None])
        pi_grad = backward(
            self.pi_layers, obs, pi_out, grad_head.astype(np.float32, copy=False), need_input
        )
        vf_grad = backward(
            self.vf_layers, obs, vf_out, grad_values.astype(np.float32)[:, None], need_input
        )
        if need_input:
            assert pi_grad is not None and vf_grad is not None
            self.input_grad = pi_grad + vf_grad
        return result

    def _surrogate(
        self, log_prob: np.ndarray, old_log_prob: np.ndarray, advantages: np.ndarray
    ) -> tuple[np.ndarray, float, float, np.ndarray]:
        """PPO's clipped surrogate: (the ratio, the approximate KL, the policy loss, the
        loss's gradient at each row's log-probability)."""
        log_ratio = log_prob - old_log_prob
        ratio = np.exp(log_ratio)
        approx_kl = float(np.mean((ratio - 1) - log_ratio))
        low, high = 1 - self.clip_range, 1 + self.clip_range
        unclipped = advantages * ratio
        clipped = advantages * np.clip(ratio, low, high)
        policy_loss = -float(np.minimum(unclipped, clipped).mean())
        # d min / d ratio: the unclipped term's where it is the smaller, else the clipped
        # one's, which clamp passes only inside its bounds (inclusive, as torch's). A tie
        # is either inside the bounds (both terms' gradients equal) or has advantage 0.
        passes = (unclipped <= clipped) | ((ratio >= low) & (ratio <= high))
        grad_log_prob = -advantages * passes * ratio / np.float32(len(log_prob))
        return ratio, approx_kl, policy_loss, grad_log_prob

    def _value_loss(
        self, values: np.ndarray, batch: np.ndarray, columns: _Columns
    ) -> tuple[float, np.ndarray]:
        """The value loss (clipped around the old values with ``clip_range_vf``) and its
        gradient at each row's value, ``vf_coef`` included."""
        size = len(values)
        returns = batch[:, columns.returns]
        predicted, value_gate = values, None
        if self.clip_range_vf is not None:
            old_values = batch[:, columns.old_values]
            change = values - old_values
            value_gate = np.abs(change) <= self.clip_range_vf
            predicted = old_values + np.clip(change, -self.clip_range_vf, self.clip_range_vf)
        error = predicted - returns
        value_loss = float(np.mean(error * error))
        grad_values = (self.model.vf_coef * 2 / size) * error
        if value_gate is not None:
            grad_values = grad_values * value_gate
        return value_loss, grad_values


def lean_train(model: PPO, adapt: Callable[[float], None] | None = None) -> None:
    """``PPO.train`` for one collected rollout, minibatch for minibatch (see the module).

    :param model: a model :func:`lean_update_fits`, whose ``rollout_buffer`` was just
        filled.
    :param adapt: called with each minibatch's KL before its step (LeanPPO's adaptive
        step size), or None.
    """
    policy = model.policy
    optimizer = policy.optimizer
    assert isinstance(optimizer, LeanAdam)
    policy.set_training_mode(True)
    model._update_learning_rate(optimizer)
    camera = not isinstance(policy.features_extractor, FlattenExtractor)
    columns = _rollout_columns(model, with_obs=not camera)
    flat = FlatParameters(optimizer)
    stop_kl = 1.5 * model.target_kl if model.target_kl is not None else None
    done: list[Minibatch] = []
    epoch_kls: list[float] = []
    try:
        update = _Update(model, flat)
        features = RolloutFeatures(model, flat.view, flat.values, flat.grads) if camera else None
        total = columns.data.shape[0]
        stopped = False
        for epoch in range(model.n_epochs):
            epoch_kls = []
            order = np.random.permutation(total)
            for start in range(0, total, model.batch_size):
                rows = order[start : start + model.batch_size]
                batch = columns.data[rows]
                flat.grads.fill(0)
                obs = batch[:, columns.obs] if features is None else features.forward(rows)
                result = update.minibatch(obs, batch, columns, stop_kl, need_input=camera)
                done.append(result)
                epoch_kls.append(result.approx_kl)
                if result.stop:
                    stopped = True
                    if model.verbose >= 1:
                        print(f"Early stopping at step {epoch} due to reaching max kl")
                    break
                if features is not None:
                    assert update.input_grad is not None
                    features.backward(update.input_grad)
                if adapt is not None:
                    adapt(result.approx_kl)
                flat.clip_grad_norm(model.max_grad_norm)
                flat.adam_step()
            model._n_updates += 1
            if stopped:
                break
    finally:
        flat.release()
    record_update(model, done, epoch_kls, update.clip_range, update.clip_range_vf)


def record_update(
    model: PPO,
    done: list[Minibatch],
    epoch_kls: list[float],
    clip_range: float,
    clip_range_vf: float | None,
) -> None:
    """The statistics ``PPO.train`` logs, under its names."""
    buffer = model.rollout_buffer
    logger = model.logger
    logger.record("train/entropy_loss", np.mean([m.entropy_loss for m in done]))
    logger.record("train/policy_gradient_loss", np.mean([m.policy_loss for m in done]))
    logger.record("train/value_loss", np.mean([m.value_loss for m in done]))
    logger.record("train/approx_kl", np.mean(epoch_kls))
    logger.record("train/clip_fraction", np.mean([m.clip_fraction for m in done]))
    if done:
        last = done[-1]
        logger.record(
            "train/loss",
            last.policy_loss + model.ent_coef * last.entropy_loss + model.vf_coef * last.value_loss,
        )
    logger.record(
        "train/explained_variance",
        explained_variance(buffer.values.flatten(), buffer.returns.flatten()),
    )
    if hasattr(model.policy, "log_std"):
        logger.record("train/std", torch.exp(model.policy.log_std).mean().item())
    logger.record("train/n_updates", model._n_updates, exclude="tensorboard")
    logger.record("train/clip_range", clip_range)
    if clip_range_vf is not None:
        logger.record("train/clip_range_vf", clip_range_vf)
