"""A CNN's pixels normalized by their running statistics (``--normalize-pixels``,
training/ppo/camera_policy.py ``PixelNormalization``): refitted after each rollout, saved
with the policy, and carried by the bot file's and the ONNX file's normalization."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

from games.gym import atari
from games.gym.view import make_view
from training.ppo.camera_policy import (
    PIXEL_CLIP,
    PIXEL_EPSILON,
    CameraExtractor,
    PixelNormalization,
    camera_policy_kwargs,
)

atari.register_ale()


def test_the_running_statistics_are_every_frame_seen_and_still_pixels_go_to_zero() -> None:
    """Three rollouts of frames where one pixel never changes and one flickers: the mean is
    every frame's (beside Sample Factory's prior of one frame of mean 0), the spread near
    theirs, the still pixel reads near 0 and a flicker of the other stands out but within the
    clip."""
    rng = np.random.default_rng(0)
    rollouts = []
    for _ in range(3):
        frames = np.full((300, 1, 2, 2), 40, np.uint8)
        frames[:, 0, 0, 1] = rng.integers(0, 256, 300)
        frames[:, 0, 1, 1] = np.where(rng.random(300) < 0.02, 200, 10)
        rollouts.append(frames)
    pixels = PixelNormalization((1, 2, 2))
    for frames in rollouts:
        pixels.refit(frames)
    seen = np.concatenate(rollouts).astype(np.float64)
    np.testing.assert_allclose(pixels.mean.numpy(), seen.sum(0) / (len(seen) + 1), rtol=1e-6)
    np.testing.assert_allclose(pixels.scale.numpy()[0, 0, 1], seen[:, 0, 0, 1].std(), rtol=0.01)
    # A still pixel's spread is the prior's frame alone (mean 0, spread 255), fading as
    # frames are seen: (255^2 + 40^2 n / (n + 1)) / (n + 1).
    n = len(seen)
    prior = (255.0**2 + 40.0**2 * n / (n + 1)) / (n + 1)
    np.testing.assert_allclose(
        pixels.scale.numpy()[0, 0, 0], np.sqrt(prior + PIXEL_EPSILON), rtol=1e-3
    )
    frame = torch.tensor([[[[40.0, 128.0], [40.0, 200.0]]]])
    out = pixels(frame).numpy()[0, 0]
    assert abs(out[0, 0]) < 0.01 * PIXEL_CLIP
    assert 1.0 < out[1, 1] <= PIXEL_CLIP
    expected = np.clip((frame.numpy() - pixels.mean.numpy()) / pixels.scale.numpy(), -5, 5)
    np.testing.assert_allclose(pixels(frame).numpy(), expected, rtol=1e-6, atol=1e-6)


def test_only_a_cnn_reading_one_camera_alone_normalizes_its_pixels() -> None:
    """A dictionary of keys, or the centroid encoder, is refused the normalization."""
    frame = spaces.Box(0, 255, (4, 84, 84), np.uint8)
    assert CameraExtractor(frame, "narrow", 4, pixel_norm=True).pixels is not None
    assert CameraExtractor(frame, "narrow", 4).pixels is None
    with pytest.raises(ValueError, match="one camera alone"):
        CameraExtractor(frame, "centroids", 4, pixel_norm=True)
    keyed = spaces.Dict({"frame": frame, "speed": spaces.Box(-1, 1, (2,), np.float32)})
    with pytest.raises(ValueError, match="one camera alone"):
        CameraExtractor(keyed, "narrow", 4, pixel_norm=True)


def test_a_trained_policy_keeps_its_statistics_and_exports_them_with_parity(
    tmp_path: Path,
) -> None:
    """Breakout's frames through a few rollouts of a narrow CNN with normalized pixels: the
    statistics are the frames' (not the starting 0 and 255), a saved policy loads with
    them, and the bot file (its normalization: the statistics, clipped at 5) and the ONNX
    file choose the model's actions."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    from training.bots.export import export_policy
    from training.ppo.lean_ppo import LeanPPO

    env = DummyVecEnv([lambda: make_view("BreakoutNoFrameskip-v4", {}) for _ in range(2)])
    model = LeanPPO(
        "CnnPolicy", env, n_steps=64, batch_size=64, n_epochs=2, seed=0, device="cpu",
        policy_kwargs=camera_policy_kwargs("narrow", 4, 64, normalize_pixels=True),
    )  # fmt: skip
    model.learn(384)
    pixels = model.policy.features_extractor.pixels
    assert isinstance(pixels, PixelNormalization)
    assert int(pixels.seen.item()) == 1 + 384
    mean = pixels.mean.numpy()
    assert 0 < mean.max() < 255 and pixels.scale.min() < 255  # Breakout's walls are lit
    model.save(tmp_path / "brk.zip")
    loaded = LeanPPO.load(tmp_path / "brk.zip", device="cpu")
    reloaded = loaded.policy.features_extractor.pixels
    np.testing.assert_array_equal(reloaded.mean.numpy(), mean)
    # The loaded factors are the trained statistics', not the prior's (the forward keeps them).
    frames = torch.randint(0, 256, (3, *pixels.seen_mean.shape)).float()
    np.testing.assert_allclose(reloaded(frames).numpy(), pixels(frames).numpy(), rtol=1e-6)
    result = export_policy(model, None, "brk", tmp_path / "brk.json", tmp_path / "brk.onnx")
    env.close()
    assert result.bot_parity.agreement == 1.0 and result.onnx_parity.agreement == 1.0
    normalization = json.loads((tmp_path / "brk.json").read_text())["observation"]["normalization"]
    assert normalization["clip"] == PIXEL_CLIP
    np.testing.assert_allclose(normalization["mean"], mean.reshape(-1), rtol=1e-6)


def test_the_setting_builds_the_normalization_for_a_lone_camera_only() -> None:
    """``normalize_pixels`` gives Breakout's narrow CNN the normalization; the same setting
    with the centroid encoder builds a policy without it (the setting is a CNN's)."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    from training.config import TrainConfig
    from training.session.model_builder import make_ppo_model

    env = DummyVecEnv([lambda: make_view("BreakoutNoFrameskip-v4", {})])
    for encoder, built in (("narrow", True), ("centroids", False)):
        config = TrainConfig(
            camera_encoder=encoder, normalize_pixels=True, n_steps=16, device="cpu"
        )
        model = make_ppo_model(config, env, None, None)
        extractor = model.policy.features_extractor
        assert (extractor.pixels is not None) == built, encoder
        assert not model.policy.normalize_images or encoder == "centroids"
    env.close()
