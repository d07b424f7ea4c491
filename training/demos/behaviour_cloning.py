"""Behaviour cloning: the policy learns the demonstrated actions before PPO starts.

The loss is the policy's negative log-likelihood of each demonstrated action (for
choices, their cross-entropy), with the action std held where the run starts it: a
clone free to shrink its std would stop PPO from exploring around it. A tenth of the
episodes (at least one when there are two) are held out; the weights of the epoch
with the lowest held-out loss are kept, and cloning stops once that loss has not fallen
for a few epochs or after :data:`MAX_UPDATES` steps, so extra epochs neither overfit a few
demos nor cost seconds on many.
When the demos carry rewards (lander's own layout) the value net is warmed on their
discounted returns too: PPO's first advantages then come from a critic that knows what
the demonstrated play is worth, where a random critic would push the clone away from it.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecNormalize

from training.demos.files import DemoEpisode, Demos
from training.ppo.lean_adam import LeanAdam

CLONE_LEARNING_RATE = 1e-3
CLONE_BATCH = 256
HELD_OUT_SHARE = 0.1
PATIENCE = 5
"""Epochs without a lower held-out loss after which cloning stops (``--bc-epochs`` is
the most it runs): many demos converge in a few epochs, a few demos need many."""
MAX_UPDATES = 600
"""Gradient steps cloning takes at most, whatever ``--bc-epochs`` says: 60 epochs of 10
demonstrated episodes, 12 of 50 (measured: more buys little score and costs seconds)."""
IMPROVEMENT = 1e-3
"""A held-out loss lower by less than this share of the best is no improvement."""


@dataclass(frozen=True)
class CloneReport:
    """What the cloning did, for the console and run.json.

    :param epochs: epochs trained (fewer than asked once the held-out loss stopped falling).
    :param best_epoch: the epoch whose weights were kept (1-based).
    :param train_loss: the kept epoch's negative log-likelihood of the training actions.
    :param held_out_loss: the same on the held-out episodes (None with a single episode).
    :param held_out_episodes: episodes held out.
    :param value_warmed: the value net was fitted to the demos' returns.
    :param samples: demonstrated steps.
    :param seconds: wall time of the cloning.
    """

    epochs: int
    best_epoch: int
    train_loss: float
    held_out_loss: float | None
    held_out_episodes: int
    value_warmed: bool
    samples: int
    seconds: float

    def line(self) -> str:
        held = "-" if self.held_out_loss is None else f"{self.held_out_loss:.3f}"
        critic = ", value net warmed on their returns" if self.value_warmed else ""
        return (
            f"behaviour cloning: {self.samples:,} demonstrated steps, {self.epochs} epoch(s) in "
            f"{self.seconds:.1f} s, kept epoch {self.best_epoch} (loss {self.train_loss:.3f}, "
            f"held-out {held} on {self.held_out_episodes} episode(s)){critic}"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _returns(episode: DemoEpisode, gamma: float) -> np.ndarray:
    """Discounted returns from each step to the episode's end."""
    assert episode.rewards is not None
    out = np.zeros(episode.steps, dtype=np.float32)
    running = 0.0
    for step in range(episode.steps - 1, -1, -1):
        running = float(episode.rewards[step]) + gamma * running
        out[step] = running
    return out


def _split(episodes: list[DemoEpisode], seed: int) -> tuple[list[DemoEpisode], list[DemoEpisode]]:
    """Training and held-out episodes (a tenth, at least one when there are two or more)."""
    if len(episodes) < 2:
        return episodes, []
    order = np.random.default_rng(seed).permutation(len(episodes))
    held = max(1, round(len(episodes) * HELD_OUT_SHARE))
    return [episodes[i] for i in order[held:]], [episodes[i] for i in order[:held]]


class _Batch:
    """Observations (normalised as the run will see them), actions and returns as tensors."""

    def __init__(
        self,
        episodes: list[DemoEpisode],
        discrete: bool,
        gamma: float,
        warm: bool,
        normalizer: VecNormalize | None,
    ) -> None:
        obs = np.concatenate([episode.observations for episode in episodes])
        if normalizer is not None and normalizer.norm_obs:
            normalized = normalizer.normalize_obs(obs)
            assert isinstance(normalized, np.ndarray)  # one vector per step (check_demos)
            obs = normalized
        actions = np.concatenate([episode.actions for episode in episodes])
        self.obs = torch.as_tensor(obs, dtype=torch.float32)
        self.actions = (
            torch.as_tensor(actions.reshape(-1), dtype=torch.long)
            if discrete
            else torch.as_tensor(actions, dtype=torch.float32)
        )
        self.returns = (
            torch.as_tensor(np.concatenate([_returns(e, gamma) for e in episodes]))
            if warm
            else None
        )

    def __len__(self) -> int:
        return len(self.obs)


def _losses(
    model: PPO, batch: _Batch, index: torch.Tensor | slice
) -> tuple[torch.Tensor, torch.Tensor]:
    """The actions' negative log-likelihood, and the value net's squared error on the
    returns (zero when it is not warmed). Kept apart: the weights are chosen by the first
    alone (returns of hundreds would drown it), while Adam scales each net's step by its
    own gradients, so their sum trains both."""
    values, log_prob, _ = model.policy.evaluate_actions(batch.obs[index], batch.actions[index])
    critic = (
        torch.nn.functional.mse_loss(values.flatten(), batch.returns[index])
        if batch.returns is not None
        else torch.zeros(())
    )
    return -log_prob.mean(), critic


def clone_behaviour(
    model: PPO,
    demos: list[Demos],
    epochs: int,
    seed: int,
    normalizer: VecNormalize | None = None,
) -> CloneReport:
    """Fit the model's policy to the demonstrated actions (see the module's rules).

    :param demos: checked against the run's game (:func:`training.demos.files.check_demos`).
    :param normalizer: the run's observation statistics, started from the demos' own.
    """
    started = time.monotonic()
    episodes = [episode for file in demos for episode in file.episodes]
    if normalizer is not None and normalizer.norm_obs:
        normalizer.obs_rms.update(np.concatenate([episode.observations for episode in episodes]))
    discrete = isinstance(model.action_space, spaces.Discrete)
    warm = all(episode.rewards is not None for episode in episodes) and not (
        normalizer is not None and normalizer.norm_reward  # targets in a scale demos lack
    )
    train_part, held_part = _split(episodes, seed)
    train = _Batch(train_part, discrete, model.gamma, warm, normalizer)
    held = _Batch(held_part, discrete, model.gamma, warm, normalizer) if held_part else None
    policy = model.policy
    log_std = getattr(policy, "log_std", None)
    frozen = [log_std] if isinstance(log_std, torch.nn.Parameter) else []
    for parameter in frozen:
        parameter.requires_grad_(False)
    optimizer = LeanAdam(
        [p for p in policy.parameters() if p.requires_grad], lr=CLONE_LEARNING_RATE
    )
    generator = torch.Generator().manual_seed(seed)
    best: tuple[float, int, float, dict[str, torch.Tensor]] | None = None
    trained = updates = 0
    policy.set_training_mode(True)
    try:
        for epoch in range(1, epochs + 1):
            order = torch.randperm(len(train), generator=generator)
            total = 0.0
            for start in range(0, len(train), CLONE_BATCH):
                index = order[start : start + CLONE_BATCH]
                actor, critic = _losses(model, train, index)
                optimizer.zero_grad()
                (actor + critic).backward()
                optimizer.step()
                total += float(actor.detach()) * len(index)
            with torch.no_grad():
                train_loss = total / len(train)
                judged = float(_losses(model, held, slice(None))[0]) if held else train_loss
            trained = epoch
            updates += -(-len(train) // CLONE_BATCH)
            if best is None or judged < best[0] - IMPROVEMENT * abs(best[0]):
                state = {key: value.clone() for key, value in policy.state_dict().items()}
                best = (judged, epoch, train_loss, state)
            elif held is not None and epoch - best[1] >= PATIENCE:
                break  # the held-out loss stopped falling: more epochs would only overfit
            if updates >= MAX_UPDATES:
                break
    finally:
        for parameter in frozen:
            parameter.requires_grad_(True)
        policy.set_training_mode(False)
    assert best is not None
    policy.load_state_dict(best[3])
    return CloneReport(
        epochs=trained,
        best_epoch=best[1],
        train_loss=best[2],
        held_out_loss=best[0] if held else None,
        held_out_episodes=len(held_part),
        value_warmed=warm,
        samples=sum(episode.steps for episode in episodes),
        seconds=time.monotonic() - started,
    )
