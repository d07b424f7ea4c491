"""A camera policy's numpy update (training/ppo/camera_update.py) against SB3's own
``PPO.train``: the same rollout of uint8 frames and the same permutations must leave the
same weights (the encoder's convolution among them), Adam moments and logged statistics,
for one camera key and for a camera beside a vector key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
import torch
from stable_baselines3.common.vec_env import DummyVecEnv

from tests.test_lean_ppo import _resume_fixture
from tests.test_lean_update import _NoCallback, _update_both_ways, same_update
from training.ppo.camera_policy import camera_policy_kwargs
from training.ppo.camera_update import (
    camera_update_fits,
)
from training.ppo.lean_ppo import LeanPPO
from training.ppo.lean_update import lean_update_fits

FRAME = (3, 13, 18)
"""Channels, height, width: odd sizes, so the pool drops a row as torch's does."""
CNN_FRAME = (3, 36, 40)
"""The smallest frames the Nature CNN's three convolutions take, near enough."""


class _Frames(gymnasium.Env[Any, Any]):
    """Random sparse frames (a few lit pixels a channel, as a game's sprites) and random
    rewards, episodes ending now and then; with ``vector``, a vector key beside them."""

    def __init__(self, discrete: bool, vector: bool, frame: tuple[int, ...] = FRAME) -> None:
        camera = gymnasium.spaces.Box(0, 255, frame, np.uint8)
        self.observation_space: gymnasium.spaces.Space[Any] = (
            gymnasium.spaces.Dict(
                {"camera_2d": camera, "obs": gymnasium.spaces.Box(-1, 1, (4,), np.float32)}
            )
            if vector
            else camera
        )
        self.action_space = (
            gymnasium.spaces.Discrete(3)
            if discrete
            else gymnasium.spaces.Box(-1, 1, (2,), np.float32)
        )
        self.vector = vector
        self.rng = np.random.default_rng(0)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        return self._obs(), {}

    def _obs(self) -> Any:
        frame = np.zeros(FRAME, np.uint8)
        lit = self.rng.random(FRAME) < 0.08
        frame[lit] = self.rng.integers(1, 256, int(lit.sum()))
        if not self.vector:
            return frame
        return {"camera_2d": frame, "obs": self.rng.uniform(-1, 1, 4).astype(np.float32)}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        reward = float(self.rng.normal(1.0, 2.0))
        return self._obs(), reward, bool(self.rng.random() < 0.05), False, {}


def _camera_model(discrete: bool, vector: bool, **settings: Any) -> LeanPPO:
    env = DummyVecEnv([lambda: _Frames(discrete, vector) for _ in range(4)])
    model = LeanPPO(
        "MultiInputPolicy" if vector else "CnnPolicy",
        env,
        n_steps=32,
        batch_size=32,
        n_epochs=3,
        learning_rate=3e-3,
        seed=0,
        device="cpu",
        policy_kwargs=camera_policy_kwargs("centroids", 1, 256),
        **settings,
    )
    model.numpy_camera = True
    model.learn(256)  # moments and weights away from their start; a fresh rollout follows
    model.collect_rollouts(model.env, _NoCallback(), model.rollout_buffer, model.n_steps)
    return model


SETTINGS = {
    "defaults": {},
    "entropy bonus and value clipping": {"ent_coef": 0.05, "clip_range_vf": 0.1},
    "tight clip": {"clip_range": 0.02},
}


@pytest.mark.parametrize("vector", [False, True], ids=["camera", "camera+vector"])
@pytest.mark.parametrize("discrete", [False, True], ids=["box", "discrete"])
@pytest.mark.parametrize("settings", list(SETTINGS.values()), ids=list(SETTINGS))
def test_the_camera_update_is_sb3s_update(
    vector: bool, discrete: bool, settings: dict[str, Any]
) -> None:
    model = _camera_model(discrete, vector, **settings)
    assert camera_update_fits(model) and lean_update_fits(model, False, camera=True)
    conv = next(n for n in model.policy.state_dict() if "encoders" in n and n.endswith("weight"))
    before = model.policy.state_dict()[conv].clone()
    both = _update_both_ways(model)
    assert not torch.equal(both[3][conv], before)  # the encoder learns, so it is compared
    same_update(*both)


class _Sweep(gymnasium.Env[Any, Any]):
    """A dot sweeping across the frame, one pixel a step, cut by a time limit at t = 5
    (reward 1 a step); with ``vector``, the step count as a vector key beside it."""

    def __init__(self, discrete: bool, vector: bool, frame: tuple[int, ...] = FRAME) -> None:
        self.inner = _Frames(discrete, vector, frame)
        self.frame = frame
        self.observation_space = self.inner.observation_space
        self.action_space = self.inner.action_space
        self.vector = vector
        self.t = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(self.t), {}

    def _obs(self, t: int) -> Any:
        frame = np.zeros(self.frame, np.uint8)
        frame[t % 3, 2 + t, 3 + 2 * t] = 200
        frame[(t + 1) % 3, 10 - t, 4] = 90
        if not self.vector:
            return frame
        return {"camera_2d": frame, "obs": np.full(4, t / 5, np.float32)}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self.t += 1
        return self._obs(self.t), 1.0, False, self.t >= 5, {}


def _as_tensors(observations: Any, rows: int) -> Any:
    if isinstance(observations, dict):
        return {key: _as_tensors(values, rows) for key, values in observations.items()}
    return torch.as_tensor(observations.reshape(rows, *observations.shape[2:]))


def sweep_model(
    discrete: bool, vector: bool, envs: int, encoder: str = "centroids", **extractor: Any
) -> LeanPPO:
    """A camera model over ``envs`` sweeping dots, rollouts of 10 steps in 2 minibatches;
    ``extractor`` adds to the camera extractor's arguments."""
    kwargs = camera_policy_kwargs(encoder, 1, 64)
    kwargs["features_extractor_kwargs"].update(extractor)
    frame = FRAME if encoder == "centroids" else CNN_FRAME
    return LeanPPO(
        "MultiInputPolicy" if vector else "CnnPolicy",
        DummyVecEnv([lambda: _Sweep(discrete, vector, frame) for _ in range(envs)]),
        n_steps=10,
        batch_size=5 * envs,
        seed=0,
        device="cpu",
        policy_kwargs=kwargs,
    )


@pytest.mark.parametrize("vector", [False, True], ids=["camera", "camera+vector"])
@pytest.mark.parametrize("discrete", [False, True], ids=["box", "discrete"])
@pytest.mark.parametrize("encoder", ["centroids", "small", "nature"])
def test_camera_rollouts_hold_what_sb3s_would(vector: bool, discrete: bool, encoder: str) -> None:
    """Played by the lean loop (the centroids in numpy, a CNN in torch): the frames are
    stored as the bytes the game sent; values and log-probabilities are the torch policy's
    own for the actions taken; a time limit's cut is bootstrapped with the value of the cut
    observation."""
    model = sweep_model(discrete, vector, envs=3, encoder=encoder)
    env = model.env
    if encoder == "centroids":
        assert model.camera_rollouts(), "lander's default"
        model.numpy_camera = False
        assert not model.camera_rollouts(), "SB3's path when asked for"
        model.numpy_camera = True
    else:
        assert model.cnn_rollouts() and not model.camera_rollouts()
    model.learn(30)
    buffer = model.rollout_buffer
    model.collect_rollouts(env, _NoCallback(), buffer, 10)
    frames = buffer.observations["camera_2d"] if vector else buffer.observations
    assert frames.dtype == np.uint8 and frames.max() == 200
    sweep = _Sweep(discrete, vector=False, frame=frames.shape[2:])
    expected = np.stack([sweep._obs(t % 5) for t in range(10)])
    np.testing.assert_array_equal(frames[:, 0], expected)
    obs = _as_tensors(buffer.observations, 30)
    actions = torch.as_tensor(buffer.actions.reshape(30, -1))
    with torch.no_grad():
        values, log_prob, _ = model.policy.evaluate_actions(
            obs, actions.flatten() if discrete else actions
        )
    # atol: the whitening's refit after the rollout keeps the policy to float32 rounding
    close = {"rtol": 1e-4, "atol": 1e-5}
    np.testing.assert_allclose(buffer.values.reshape(30), values.flatten().numpy(), **close)
    np.testing.assert_allclose(buffer.log_probs.reshape(30), log_prob.numpy(), **close)
    cut, _ = model.policy.obs_to_tensor(_Sweep(discrete, vector, frames.shape[2:])._obs(5))
    with torch.no_grad():
        bootstrap = float(model.policy.predict_values(cut)[0, 0])
    cut_rows = np.array([4, 9])
    np.testing.assert_allclose(buffer.rewards[cut_rows], 1 + model.gamma * bootstrap, rtol=1e-5)
    np.testing.assert_allclose(buffer.rewards[[0, 1, 2, 3, 5, 6, 7, 8]], 1.0)


def test_a_camera_checkpoint_from_before_the_numpy_update_resumes(tmp_path: Path) -> None:
    """A camera run trained by main before this change (frames kept as float32) resumes
    through real games with its frames as bytes, its encoder learning on."""
    saved, resumed = _resume_fixture(tmp_path, "before_camera_update", "oldcamera", 29660)
    conv = next(n for n in saved.policy.state_dict() if "encoders" in n and n.endswith("weight"))
    assert not torch.equal(saved.policy.state_dict()[conv], resumed.policy.state_dict()[conv])
