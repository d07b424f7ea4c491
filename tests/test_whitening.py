"""The camera encoder's whitening (training/ppo/camera_policy.py, ``refit_whitening``):
refitted after each rollout, it leaves what the policy does as it was, whitens the
rollout's centroids, is saved with the policy, and old policies keep their encoders
without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tests.test_camera_update import _as_tensors, sweep_model
from tests.test_lean_update import _NoCallback
from training.ppo.camera_policy import (
    FLOOR,
    CameraExtractor,
    CentroidEncoder,
    refit_whitening,
    whitened,
)
from training.ppo.lean_ppo import LeanPPO


def _model(vector: bool, **extractor: Any) -> LeanPPO:
    return sweep_model(False, vector, envs=4, **extractor)


def _outputs(model: LeanPPO, obs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        distribution = model.policy.get_distribution(obs).distribution
        return distribution.mean.clone(), model.policy.predict_values(obs).clone()


@pytest.mark.parametrize("vector", [False, True], ids=["camera", "camera+vector"])
def test_a_refit_keeps_the_policy_and_whitens_the_rollouts_centroids(vector: bool) -> None:
    model = _model(vector)
    model.learn(40)  # weights away from their start
    buffer = model.rollout_buffer
    model._collect(model.env, _NoCallback(), buffer, 10)  # a rollout, not yet refitted
    [(key, start, encoder, whitening)] = whitened(model.policy)
    assert int(whitening.refits) >= 1 and not torch.equal(whitening.matrix, torch.eye(24))
    obs = _as_tensors(buffer.observations, 40)
    before = _outputs(model, obs)
    refit_whitening(model.policy, buffer)
    after = _outputs(model, obs)
    for old, new in zip(before, after, strict=True):
        torch.testing.assert_close(new, old, rtol=1e-4, atol=1e-5)

    frames = obs[key] if vector else obs
    with torch.no_grad():
        raw = encoder.centroids(frames.float() / 255).double()
        seen = encoder(frames.float() / 255).double()
    # Each direction of the running covariance comes out with a spread of about
    # variance / (variance + FLOOR): one for the large ones, less for tiny ones.
    values, vectors = torch.linalg.eigh(whitening.seen_covariance)
    spread = (vectors.T @ torch.cov((seen - seen.mean(0)).T) @ vectors).diagonal()
    large = values > 100 * FLOOR
    assert large.sum() >= 2
    expected = values / (values + FLOOR)
    # the running statistics include earlier rollouts, so the last one is whitened about
    torch.testing.assert_close(spread[large], expected[large], rtol=0.5, atol=0.0)
    assert start == (4 if vector and next(iter(obs)) == "obs" else 0)  # its columns
    assert not torch.allclose(raw, seen)


def test_the_whitening_is_saved_with_the_policy_and_old_policies_have_none(
    tmp_path: Path,
) -> None:
    model = _model(False)
    model.learn(80)
    [(_, _, _, whitening)] = whitened(model.policy)
    model.save(tmp_path / "whitened.zip")
    loaded = LeanPPO.load(tmp_path / "whitened.zip", env=model.env, device="cpu")
    [(_, _, _, again)] = whitened(loaded.policy)
    for name in ("matrix", "mean", "seen_mean", "seen_covariance", "refits"):
        assert torch.equal(getattr(again, name), getattr(whitening, name)), name

    old = _model(False, whiten=False)
    extractor = old.policy.features_extractor
    assert isinstance(extractor, CameraExtractor)
    assert isinstance(extractor.encoders[0], CentroidEncoder)
    assert extractor.encoders[0].whitening is None and whitened(old.policy) == []
    old.learn(40)
    weights = {k: v.clone() for k, v in old.policy.state_dict().items()}
    refit_whitening(old.policy, old.rollout_buffer)
    assert all(torch.equal(v, old.policy.state_dict()[k]) for k, v in weights.items())
    assert not any("whitening" in k or k.endswith(".matrix") for k in weights)
    np.testing.assert_equal(len(extractor.encoders[0]), 4)
