"""A CNN's values learning returns over their running spread (``--normalize-returns``,
training/ppo/action_heads.py ``ReturnScale``): refitted after each rollout, the update's value
loss the normalized one, the head answering in returns, saved with the policy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from games.gym import atari
from games.gym.view import make_view
from training.ppo.action_heads import (
    RETURN_CLIP,
    RETURN_EPSILON,
    ReturnNormalizedCnnPolicy,
    ReturnScale,
)
from training.ppo.camera_policy import camera_policy_kwargs

atari.register_ale()


def test_the_statistics_are_every_return_seen_and_far_returns_are_clipped() -> None:
    """Two rollouts of returns: the mean and variance are theirs beside Sample Factory's
    prior (one return of mean 0, variance 1), the head answers ``head * spread + mean``, and
    a return more than five spreads out comes back at five."""
    rng = np.random.default_rng(0)
    first = rng.normal(3.0, 2.0, 500).astype(np.float32)
    second = rng.normal(5.0, 1.0, 500).astype(np.float32)
    second[0] = 1000.0
    head = ReturnScale(nn.Linear(4, 1))
    np.testing.assert_array_equal(head.refit(first), first)  # nothing that far yet
    clipped = head.refit(second)
    seen = np.concatenate([first, second]).astype(np.float64)
    prior = np.concatenate([seen, [0.0]])
    assert float(head.seen) == 1 + len(seen)
    np.testing.assert_allclose(float(head.seen_mean), prior.mean(), rtol=1e-6)
    # Chan's update with the prior's variance of 1 counted once (population variances).
    np.testing.assert_allclose(float(head.seen_var), prior.var(), rtol=0.01)
    spread = np.sqrt(float(head.seen_var) + RETURN_EPSILON)
    assert clipped[0] == np.float32(float(head.seen_mean) + RETURN_CLIP * spread)
    np.testing.assert_array_equal(clipped[1:], second[1:])
    latent = torch.randn(3, 4)
    expected = head.head(latent) * spread + float(head.seen_mean)
    np.testing.assert_allclose(head(latent).detach(), expected.detach(), rtol=1e-5)


def test_the_raw_loss_over_the_variance_is_the_normalized_loss_and_its_gradient() -> None:
    """What the update minimizes with its weight over the variance (SB3's ``(R - v)^2`` of
    the head's answer in returns) is Sample Factory's ``((R - mean) / spread - head)^2``, in
    value and in the head's gradient."""
    head = ReturnScale(nn.Linear(4, 1))
    head.refit(np.random.default_rng(1).normal(20.0, 7.0, 300).astype(np.float32))
    returns, latent = torch.randn(16) * 7 + 20, torch.randn(16, 4)
    raw = ((returns - head(latent).flatten()) ** 2).mean() / head.scale() ** 2
    (raw_grad,) = torch.autograd.grad(raw, head.head.weight)
    targets = (returns - float(head.seen_mean)) / head.scale()
    normalized = ((targets - head.head(latent).flatten()) ** 2).mean()
    (normalized_grad,) = torch.autograd.grad(normalized, head.head.weight)
    np.testing.assert_allclose(raw.item(), normalized.item(), rtol=1e-5)
    np.testing.assert_allclose(raw_grad, normalized_grad, rtol=1e-4, atol=1e-6)


def test_a_trained_cnn_learns_normalized_returns_and_keeps_them(tmp_path: Path) -> None:
    """Breakout's narrow CNN through three rollouts with the setting's policy: the statistics
    count every return, every minibatch of the update ran with the normalized loss's weight
    (the configured one over the variance of the moment) and the configured one came back, a
    saved policy loads with its statistics and values, and the export (which never reads
    values) keeps its parity."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    from training.bots.export import export_policy
    from training.ppo.lean_ppo import LeanPPO

    env = DummyVecEnv([lambda: make_view("BreakoutNoFrameskip-v4", {}) for _ in range(2)])
    model = LeanPPO(
        ReturnNormalizedCnnPolicy, env, n_steps=64, batch_size=64, n_epochs=2, seed=0,
        device="cpu", policy_kwargs=camera_policy_kwargs("narrow", 4, 64),
    )  # fmt: skip
    head = model.policy.value_net
    assert isinstance(head, ReturnScale)
    weights: list[tuple[float, float]] = []  # (the weight in use, the variance's spread)
    evaluate = model.policy.evaluate_actions

    def watched(obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, ...]:
        weights.append((model.vf_coef, head.scale()))
        return evaluate(obs, actions)  # type: ignore[no-any-return]

    model.policy.evaluate_actions = watched  # type: ignore[method-assign]
    model.learn(384)
    assert float(head.seen) == 1 + 3 * 128
    assert len(weights) == 3 * 2 * 2  # rollouts x epochs x minibatches
    for used, spread in weights:
        assert used == 0.5 / spread**2
    assert model.vf_coef == 0.5
    model.policy.evaluate_actions = evaluate  # type: ignore[method-assign]
    obs = torch.as_tensor(env.reset())
    values = model.policy.predict_values(obs).detach()
    model.save(tmp_path / "brk.zip")
    loaded = LeanPPO.load(tmp_path / "brk.zip", device="cpu")
    assert isinstance(loaded.policy, ReturnNormalizedCnnPolicy)
    assert float(loaded.policy.value_net.seen_var) == float(head.seen_var)
    np.testing.assert_allclose(loaded.policy.predict_values(obs).detach(), values, rtol=1e-6)
    result = export_policy(model, None, "brk", tmp_path / "brk.json", tmp_path / "brk.onnx")
    env.close()
    assert result.bot_parity.agreement == 1.0 and result.onnx_parity.agreement == 1.0


def test_the_setting_builds_it_for_a_cnn_reading_a_lone_camera_only() -> None:
    """``normalize_returns`` gives Breakout's narrow CNN the policy; with the centroid encoder
    the setting builds SB3's own (the setting is a CNN's), and with SB3's own loop too (it
    never refits the statistics, so the head would stand still at its prior)."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    from training.config import TrainConfig
    from training.session.model_builder import make_ppo_model

    env = DummyVecEnv([lambda: make_view("BreakoutNoFrameskip-v4", {})])
    for encoder, collector, built in (
        ("narrow", "lean", True),
        ("centroids", "lean", False),
        ("narrow", "sb3", False),
    ):
        config = TrainConfig(
            camera_encoder=encoder,
            collector=collector,
            normalize_returns=True,
            n_steps=16,
            device="cpu",
        )
        model = make_ppo_model(config, env, None, None)
        assert isinstance(model.policy.value_net, ReturnScale) == built, (encoder, collector)
    env.close()
