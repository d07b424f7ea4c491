"""PPO for a policy with memory (``--memory N``): its rollout, each agent's state carried
from step to step, and its update over whole sequences.

sb3-contrib's ``RecurrentPPO`` is the reference: an episode's start resets the state, a
minibatch is whole sequences replayed from the state the rollout stored at their first
step. Here a sequence is one agent's stretch of a rollout (its whole rollout unless there
are fewer agents than minibatches; then halves, quarters, ...), and an episode that starts
inside it resets the state where it starts (a mask, as CleanRL's LSTM PPO does), so no
sequence is padded. Truncated episodes (a time limit, a game restarted mid-episode) are
bootstrapped from the value of their last observation seen with the state they reached,
and the next step of that agent alone starts from zeros.

The rollout plays in numpy over the policy's own weights (``game_bridge/memory.py``'s GRU,
``numpy_policy``'s MLPs), as the feed-forward rollout does. The update unrolls the GRU and
backpropagates through time in numpy too (:class:`GruPass`: torch's per-op cost is most of a
step at these sizes), the MLPs and SB3's losses and logs in torch's autograd.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.vec_env import VecEnv
from torch.nn import functional as F

from training.ppo.action_heads import evaluate_actions
from training.ppo.lean_update import Minibatch, record_update
from training.ppo.numpy_policy import NumpyActor
from training.ppo.recurrent_policy import RecurrentActorCritic
from training.ppo.rollout_steps import StepDone, store_step, truncated


class RecurrentRolloutBuffer(RolloutBuffer):
    """SB3's rollout buffer with each step's state before it (``hidden``: the state the
    agent carried into the step, before an episode's start zeroes it).

    :param memory: the state's width; the rest as ``RolloutBuffer``'s.
    """

    def __init__(self, *args: Any, memory: int, **kwargs: Any) -> None:
        self.memory = memory  # read by reset(), inside super().__init__
        super().__init__(*args, **kwargs)

    def reset(self) -> None:
        super().reset()
        self.hidden = np.zeros((self.buffer_size, self.n_envs, self.memory), dtype=np.float32)


def recurrent_buffer(model: PPO, memory: int) -> RecurrentRolloutBuffer:
    """A buffer for ``model``'s rollouts, its states ``memory`` wide."""
    return RecurrentRolloutBuffer(
        model.n_steps,
        model.observation_space,
        model.action_space,
        device=model.device,
        gamma=model.gamma,
        gae_lambda=model.gae_lambda,
        n_envs=model.n_envs,
        memory=memory,
    )


class RecurrentActor:
    """Acts for the rollout: the GRU's step, then the MLPs over the observation beside the
    new state, in numpy over the policy's weights (read at every call: the update
    changes them in place).

    :param policy: the recurrent policy.
    :param space: its action space.
    """

    def __init__(self, policy: RecurrentActorCritic, space: spaces.Space[Any]) -> None:
        self.grus = [policy.gru_weights()]
        if policy.critic_memory:
            self.grus.append(policy.gru_weights(critic=True))
        self.units = policy.memory
        self.heads = NumpyActor(policy, space)

    def state_after(self, obs: np.ndarray, hidden: np.ndarray) -> np.ndarray:
        """The state after seeing ``obs`` from ``hidden`` (the actor's, then the critic's
        where it has its own)."""
        x = np.asarray(obs, dtype=np.float32)
        units = self.units
        return np.concatenate(
            [
                gru.step(x, hidden[:, i * units : (i + 1) * units])
                for i, gru in enumerate(self.grus)
            ],
            axis=1,
        ).astype(np.float32)

    def _inputs(self, obs: np.ndarray, after: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The actor's and the critic's MLP inputs: the observation beside each one's state."""
        actor = np.concatenate([obs, after[:, : self.units]], axis=1)
        critic = np.concatenate([obs, after[:, -self.units :]], axis=1)
        return actor, critic

    def act(
        self, obs: np.ndarray, hidden: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Sampled actions, values, log-probabilities and the states after ``obs``."""
        after = self.state_after(obs, hidden)
        actions, values, log_probs = self.heads.act(*self._inputs(obs, after))
        return actions, values, log_probs, after

    def values(self, obs: np.ndarray, hidden: np.ndarray) -> np.ndarray:
        """The critic's estimate of ``obs`` seen from ``hidden``."""
        return self.heads.values(self._inputs(obs, self.state_after(obs, hidden))[1])


@dataclass
class RecurrentPlayed:
    """Where a rollout left the games: their observations, which start episodes, each
    agent's state, the values to bootstrap the rollout's end, and whether it is whole."""

    obs: np.ndarray
    dones: np.ndarray
    hidden: np.ndarray
    last_values: np.ndarray
    whole: bool


def play_recurrent(
    model: PPO,
    env: VecEnv,
    storage: RecurrentRolloutBuffer,
    n_steps: int,
    step_done: StepDone,
    hidden: np.ndarray | None,
) -> RecurrentPlayed:
    """Step every env ``n_steps`` times from where ``model`` left the games, each agent's
    state from ``hidden`` (None or another width: zeros), writing each step in place."""
    assert model._last_obs is not None and model._last_episode_starts is not None
    policy = model.policy
    assert isinstance(policy, RecurrentActorCritic)
    storage.reset()
    space = model.action_space
    low, high = (space.low, space.high) if isinstance(space, spaces.Box) else (None, None)
    actor = RecurrentActor(policy, space)
    obs: Any = model._last_obs
    starts: np.ndarray = model._last_episode_starts
    if hidden is None or hidden.shape != (env.num_envs, policy.state_width):
        hidden = np.zeros((env.num_envs, policy.state_width), dtype=np.float32)
    for _ in range(n_steps):
        seen = hidden * (1.0 - starts.astype(np.float32))[:, None]
        actions, values, log_probs, after = actor.act(obs, seen)
        new_obs: Any
        new_obs, rewards, dones, infos = env.step(
            np.clip(actions, low, high) if low is not None else actions
        )
        if not step_done(rewards, dones, infos):
            return RecurrentPlayed(new_obs, dones, after, np.zeros(0), whole=False)
        cut, last = truncated(dones, infos)
        if cut:  # bootstrapped from the value of where they were cut, seen with their state
            rewards[cut] += model.gamma * actor.values(last, after[cut])
        position = store_step(storage, obs, actions, rewards, starts, values, log_probs)
        storage.hidden[position] = hidden
        obs, starts, hidden = new_obs, dones, after
    seen = hidden * (1.0 - starts.astype(np.float32))[:, None]
    return RecurrentPlayed(obs, starts, hidden, actor.values(obs, seen), whole=True)


def sequence_length(steps: int, envs: int, minibatches: int) -> int:
    """How long the update's sequences are: each agent's whole rollout, halved (while it
    stays whole steps) until there are at least ``minibatches`` sequences."""
    length = steps
    while envs * (steps // length) < minibatches and length % 2 == 0:
        length //= 2
    return length


def recurrent_train(model: PPO, adapt: Callable[[float], None] | None = None) -> None:
    """``PPO.train`` for one rollout of a recurrent policy, minibatches of whole sequences.

    :param model: whose ``rollout_buffer`` (a :class:`RecurrentRolloutBuffer`) was just
        filled and its returns computed.
    :param adapt: called with each minibatch's KL before its step (LeanPPO's adaptive
        step size), or None.
    """
    policy = model.policy
    buffer = model.rollout_buffer
    assert isinstance(policy, RecurrentActorCritic) and isinstance(buffer, RecurrentRolloutBuffer)
    policy.set_training_mode(True)
    model._update_learning_rate(policy.optimizer)
    progress = model._current_progress_remaining
    clip_range = float(model.clip_range(progress))  # type: ignore[operator]
    clip_range_vf = (
        float(model.clip_range_vf(progress))  # type: ignore[operator]
        if model.clip_range_vf is not None
        else None
    )
    steps, envs = buffer.buffer_size, buffer.n_envs
    count = max(1, round(steps * envs / model.batch_size))
    length = sequence_length(steps, envs, count)
    data = _Sequences(buffer, length, policy.device)
    per_batch = max(1, data.count // count)
    done: list[Minibatch] = []
    epoch_kls: list[float] = []
    stopped = False
    for _ in range(model.n_epochs):
        epoch_kls = []
        order = torch.randperm(data.count)
        for start in range(0, data.count, per_batch):
            chosen = order[start : start + per_batch]
            result, loss, grus = _minibatch(model, data, chosen, clip_range, clip_range_vf)
            done.append(result)
            epoch_kls.append(result.approx_kl)
            if model.target_kl is not None and result.approx_kl > 1.5 * model.target_kl:
                stopped = True
                break
            if adapt is not None:
                adapt(result.approx_kl)
            policy.optimizer.zero_grad()
            loss.backward()
            for gru in grus:
                gru.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), model.max_grad_norm)
            policy.optimizer.step()
        model._n_updates += 1
        if stopped:
            break
    record_update(model, done, epoch_kls, clip_range, clip_range_vf)


class _Sequences:
    """A rollout cut into sequences of ``length`` steps (``[sequences, length, ...]``
    tensors), each with the state stored at its first step."""

    def __init__(self, buffer: RecurrentRolloutBuffer, length: int, device: torch.device) -> None:
        steps, envs = buffer.buffer_size, buffer.n_envs
        self.length = length
        self.count = envs * (steps // length)

        def cut(values: np.ndarray) -> torch.Tensor:
            by_agent = np.asarray(values).swapaxes(0, 1)  # [envs, steps, ...]
            shaped = by_agent.reshape(self.count, length, *by_agent.shape[2:])
            return torch.as_tensor(np.ascontiguousarray(shaped), device=device).float()

        self.obs = cut(buffer.observations)
        self.actions = cut(buffer.actions)
        self.starts = cut(buffer.episode_starts)
        self.values = cut(buffer.values)
        self.log_probs = cut(buffer.log_probs)
        self.advantages = cut(buffer.advantages)
        self.returns = cut(buffer.returns)
        first = buffer.hidden[::length].swapaxes(0, 1)  # [envs, steps // length, memory]
        self.hidden = torch.as_tensor(
            np.ascontiguousarray(first.reshape(self.count, -1)), device=device
        )


class GruPass:
    """The GRU unrolled along sequences in numpy, and its gradient by backpropagation
    through time: the update's recurrent part without torch's per-op cost, which at these
    sizes (a few sequences of 64 units) is most of a step's time (docs/performance.md,
    "Bots that remember"). The MLPs above it stay torch's autograd; the gradient at the
    states comes back here (:meth:`backward`). The arithmetic is
    ``RecurrentActorCritic.unroll``'s (tests/test_memory.py compares the gradients).

    :param cell: the GRU unrolled (its weights read now): the policy's ``memory_cell`` or
        its critic's.
    :param obs: ``[sequences, steps, inputs]``.
    :param starts: ``[sequences, steps]``, 1 where the state is zeroed before the step.
    :param hidden: ``[sequences, units]``, the state before the first step.
    """

    def __init__(
        self, cell: torch.nn.GRUCell, obs: np.ndarray, starts: np.ndarray, hidden: np.ndarray
    ) -> None:
        self.cell = cell
        self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh = (
            p.detach().cpu().numpy()
            for p in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)
        )
        count, length, _ = obs.shape
        units = self.weight_hh.shape[1]
        self.obs, self.keep = obs, 1.0 - starts
        gates_in = obs @ self.weight_ih.T + self.bias_ih  # every step's at once
        shape = (count, length, units)
        self.before = np.empty(shape, np.float32)  # each step's state after the reset mask
        self.reset, self.update, self.new = (np.empty(shape, np.float32) for _ in range(3))
        self.kept_new = np.empty(shape, np.float32)  # the new gate's hidden part
        self.states = np.empty(shape, np.float32)
        h: np.ndarray = hidden.astype(np.float32)
        for step in range(length):
            h = h * self.keep[:, step, None]
            self.before[:, step] = h
            gates_h = h @ self.weight_hh.T + self.bias_hh
            given = gates_in[:, step]
            reset = _sigmoid(given[:, :units] + gates_h[:, :units])
            update = _sigmoid(given[:, units : 2 * units] + gates_h[:, units : 2 * units])
            kept_new = gates_h[:, 2 * units :]
            new = np.tanh(given[:, 2 * units :] + reset * kept_new)
            h = new + update * (h - new)
            self.reset[:, step], self.update[:, step], self.new[:, step] = reset, update, new
            self.kept_new[:, step] = kept_new
            self.states[:, step] = h
        self.tensor = torch.from_numpy(self.states).to(cell.weight_hh.device).requires_grad_(True)
        """The states as torch sees them: the MLPs' input, its gradient read by :meth:`backward`."""

    def backward(self) -> None:
        """Set the GRU's parameter gradients from the loss's gradient at every state (after
        the loss's own ``backward``)."""
        assert self.tensor.grad is not None
        grad_states = self.tensor.grad.cpu().numpy()
        count, length, units = self.states.shape
        grad_gates_in = np.empty((count, length, 3 * units), np.float32)
        grad_weight_hh = np.zeros_like(self.weight_hh)
        grad_bias_hh = np.zeros_like(self.bias_hh)
        carried = np.zeros((count, units), np.float32)
        for step in range(length - 1, -1, -1):
            grad_h = grad_states[:, step] + carried
            reset, update, new = self.reset[:, step], self.update[:, step], self.new[:, step]
            before = self.before[:, step]
            grad_new = grad_h * (1.0 - update) * (1.0 - new * new)
            grad_update = grad_h * (before - new) * update * (1.0 - update)
            grad_reset = grad_new * self.kept_new[:, step] * reset * (1.0 - reset)
            grad_gates_h = np.concatenate([grad_reset, grad_update, grad_new * reset], axis=1)
            grad_gates_in[:, step] = np.concatenate([grad_reset, grad_update, grad_new], axis=1)
            grad_weight_hh += grad_gates_h.T @ before
            grad_bias_hh += grad_gates_h.sum(axis=0)
            carried = (grad_h * update + grad_gates_h @ self.weight_hh) * self.keep[:, step, None]
        flat_grads = grad_gates_in.reshape(-1, 3 * units)
        grad_weight_ih = flat_grads.T @ self.obs.reshape(count * length, -1)
        cell = self.cell
        for parameter, grad in (
            (cell.weight_ih, grad_weight_ih),
            (cell.weight_hh, grad_weight_hh),
            (cell.bias_ih, flat_grads.sum(axis=0)),
            (cell.bias_hh, grad_bias_hh),
        ):
            parameter.grad = torch.as_tensor(grad, device=parameter.device)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _minibatch(
    model: PPO,
    data: _Sequences,
    chosen: torch.Tensor,
    clip_range: float,
    clip_range_vf: float | None,
) -> tuple[Minibatch, torch.Tensor, list[GruPass]]:
    """SB3's PPO loss over the chosen sequences (every step of each, flattened), and the
    GRUs' passes to backpropagate it through."""
    policy = model.policy
    assert isinstance(policy, RecurrentActorCritic)
    obs = data.obs[chosen]
    seen, starts = obs.cpu().numpy(), data.starts[chosen].cpu().numpy()
    hidden, units = data.hidden[chosen].cpu().numpy(), policy.memory
    gru = GruPass(policy.memory_cell, seen, starts, hidden[:, :units])
    grus = [gru]
    inputs = torch.cat([obs, gru.tensor], dim=2).flatten(0, 1)
    if policy.critic_memory:  # the critic's own memory, trained by the value loss
        critic_gru = GruPass(policy.critic_cell, seen, starts, hidden[:, units:])
        grus.append(critic_gru)
        critic_inputs = torch.cat([obs, critic_gru.tensor], dim=2).flatten(0, 1)
    else:
        # The critic reads the actor's state, but its loss does not train the GRU
        # (RecurrentPPO's shared_lstm): on the glimpse lander 0.8 came at 25-29 s on three
        # seeds, where the value's gradient through the memory took 73-190 s.
        critic_inputs = torch.cat([obs, gru.tensor.detach()], dim=2).flatten(0, 1)
    actions = data.actions[chosen].flatten(0, 1)
    values, log_prob, entropy = evaluate_actions(
        policy, model.action_space, inputs, actions, critic_inputs
    )
    values = values.flatten()
    advantages = data.advantages[chosen].flatten()
    if model.normalize_advantage and len(advantages) > 1:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    log_ratio = log_prob - data.log_probs[chosen].flatten()
    ratio = torch.exp(log_ratio)
    policy_loss = -torch.min(
        advantages * ratio, advantages * torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
    ).mean()
    old_values = data.values[chosen].flatten()
    predicted = (
        values
        if clip_range_vf is None
        else old_values + torch.clamp(values - old_values, -clip_range_vf, clip_range_vf)
    )
    value_loss = F.mse_loss(data.returns[chosen].flatten(), predicted)
    entropy_loss = -torch.mean(entropy)
    loss = policy_loss + model.ent_coef * entropy_loss + model.vf_coef * value_loss
    with torch.no_grad():
        approx_kl = float(torch.mean((ratio - 1) - log_ratio))
        clip_fraction = float(torch.mean((torch.abs(ratio - 1) > clip_range).float()))
    result = Minibatch(
        policy_loss.item(),
        value_loss.item(),
        entropy_loss.item(),
        clip_fraction,
        approx_kl,
        stop=False,
    )
    return result, loss, grus
