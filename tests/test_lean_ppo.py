"""The lean rollout loop and LeanAdam: the same learning arithmetic as SB3's and torch's,
the same checkpoint files, and no ``torch._dynamo`` on the way to the first step."""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import DummyVecEnv

from training.ppo.lean_adam import LeanAdam, UnsupportedAdamSetting
from training.ppo.lean_ppo import LeanPPO

ROOT = Path(__file__).resolve().parent.parent


def _parameters(seed: int) -> list[torch.nn.Parameter]:
    generator = torch.Generator().manual_seed(seed)
    return [
        torch.nn.Parameter(torch.randn(shape, generator=generator))
        for shape in ((8, 4), (8,), (2, 8), (2,))
    ]


def _steps(optimizer: Any, params: list[torch.nn.Parameter], count: int, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    for _ in range(count):
        for param in params:
            param.grad = torch.randn(param.shape, generator=generator)
        optimizer.step()


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_lean_adam_updates_as_torch_adam_does(weight_decay: float) -> None:
    ours, theirs = _parameters(0), _parameters(0)
    settings = {"lr": 3e-3, "eps": 1e-5, "weight_decay": weight_decay}
    _steps(LeanAdam(ours, **settings), ours, 40, seed=1)
    _steps(torch.optim.Adam(theirs, **settings), theirs, 40, seed=1)
    for mine, reference in zip(ours, theirs, strict=True):
        torch.testing.assert_close(mine, reference, rtol=1e-5, atol=1e-6)


def test_lean_adam_state_moves_to_and_from_torch_adam() -> None:
    """A state written by either optimizer continues in the other exactly."""
    start = _parameters(2)
    torch_adam = torch.optim.Adam(start, lr=1e-3, eps=1e-5)
    _steps(torch_adam, start, 5, seed=3)
    saved = torch_adam.state_dict()

    resumed = [torch.nn.Parameter(p.detach().clone()) for p in start]
    lean = LeanAdam(resumed, lr=1e-3, eps=1e-5)
    lean.load_state_dict(saved)
    _steps(lean, resumed, 5, seed=4)
    _steps(torch_adam, start, 5, seed=4)
    for mine, reference in zip(resumed, start, strict=True):
        torch.testing.assert_close(mine, reference, rtol=1e-5, atol=1e-6)

    written = lean.state_dict()
    assert written["param_groups"][0].keys() == saved["param_groups"][0].keys()
    assert written["state"][0]["step"].dtype == torch.float32
    assert float(written["state"][0]["step"]) == 10.0
    back = [torch.nn.Parameter(p.detach().clone()) for p in resumed]
    torch_again = torch.optim.Adam(back, lr=1e-3, eps=1e-5)
    torch_again.load_state_dict(copy.deepcopy(written))  # as from a file: no shared tensors
    _steps(torch_again, back, 3, seed=5)
    _steps(lean, resumed, 3, seed=5)
    for mine, reference in zip(resumed, back, strict=True):
        torch.testing.assert_close(mine, reference, rtol=1e-5, atol=1e-6)


def test_lean_adam_refuses_what_it_does_not_implement() -> None:
    with pytest.raises(UnsupportedAdamSetting, match="amsgrad"):
        LeanAdam(_parameters(0), amsgrad=True)
    with pytest.raises(ValueError, match="other parameter groups"):
        LeanAdam(_parameters(0)[:2]).load_state_dict(torch.optim.Adam(_parameters(0)).state_dict())


class _Corridor(gymnasium.Env[np.ndarray, Any]):
    """Five steps to a time limit, reward 1 a step: every episode ends truncated."""

    def __init__(self, discrete: bool) -> None:
        self.observation_space = gymnasium.spaces.Box(-10, 10, (3,), np.float32)
        self.action_space = (
            gymnasium.spaces.Discrete(3)
            if discrete
            else gymnasium.spaces.Box(-1, 1, (2,), np.float32)
        )
        self.t = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def _obs(self) -> np.ndarray:
        return np.array([self.t, -self.t, 1.0], dtype=np.float32)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return self._obs(), 1.0, False, self.t >= 5, {}


class _Seen(BaseCallback):
    def __init__(self) -> None:
        super().__init__()
        self.steps = 0
        self.infos_seen = 0

    def _on_step(self) -> bool:
        self.steps += 1
        self.infos_seen += len(self.locals["infos"])
        return True


@pytest.mark.parametrize("discrete", [False, True])
def test_lean_rollouts_hold_what_sb3s_would(discrete: bool) -> None:
    """Values and log-probabilities in the buffer are the policy's own for the actions
    taken, truncated episodes are bootstrapped with the cut observation's value, and
    callbacks see every step with its infos."""
    env = DummyVecEnv([lambda: _Corridor(discrete) for _ in range(3)])
    model = LeanPPO("MlpPolicy", env, n_steps=10, batch_size=15, seed=0, device="cpu")
    assert model.lean_rollouts()
    seen = _Seen()
    model.learn(30, callback=seen)
    assert seen.steps == 10 and seen.infos_seen == 30

    # After learn() the policy has moved past the buffer's numbers: collect afresh.
    buffer = model.rollout_buffer
    model.collect_rollouts(env, seen, buffer, 10)
    obs = torch.as_tensor(buffer.observations.reshape(30, 3))
    actions = torch.as_tensor(buffer.actions.reshape(30, -1))
    with torch.no_grad():
        values, log_prob, _ = model.policy.evaluate_actions(
            obs, actions.flatten() if discrete else actions
        )
    np.testing.assert_allclose(buffer.values.reshape(30), values.flatten().numpy(), rtol=1e-5)
    np.testing.assert_allclose(buffer.log_probs.reshape(30), log_prob.numpy(), rtol=1e-4)

    # Every env is cut at t = 5: reward 1 + gamma * V(the observation at t = 5).
    terminal = torch.tensor([[5.0, -5.0, 1.0]])
    with torch.no_grad():
        bootstrap = float(model.policy.predict_values(terminal)[0, 0])
    cut_rows = np.flatnonzero(buffer.observations[:, 0, 0] == 4.0)
    assert cut_rows.size == 2
    np.testing.assert_allclose(buffer.rewards[cut_rows], 1 + model.gamma * bootstrap, rtol=1e-5)
    other = np.setdiff1d(np.arange(10), cut_rows)
    np.testing.assert_allclose(buffer.rewards[other], 1.0)


def test_lean_ppo_writes_plain_ppo_zips(tmp_path: Path) -> None:
    """A LeanPPO zip is SB3's PPO zip (torch's Adam in it, no lander class named), and a
    PPO zip resumes as LeanPPO with its optimizer moments."""
    env = DummyVecEnv([lambda: _Corridor(False) for _ in range(2)])
    model = LeanPPO("MlpPolicy", env, n_steps=16, batch_size=32, seed=0, device="cpu")
    assert isinstance(model.policy.optimizer, LeanAdam)
    model.learn(64)
    model.save(tmp_path / "lean.zip")
    plain = PPO.load(tmp_path / "lean.zip", device="cpu")
    assert isinstance(plain.policy.optimizer, torch.optim.Adam)
    assert "optimizer_class" not in plain.policy_kwargs
    lean_state = model.policy.optimizer.state_dict()["state"]
    plain_state = plain.policy.optimizer.state_dict()["state"]
    torch.testing.assert_close(plain_state[0]["exp_avg"], lean_state[0]["exp_avg"])

    plain.save(tmp_path / "plain.zip")
    again = LeanPPO.load(tmp_path / "plain.zip", env=env, device="cpu")
    assert isinstance(again.policy.optimizer, LeanAdam)
    torch.testing.assert_close(
        again.policy.optimizer.state_dict()["state"][0]["exp_avg_sq"],
        plain_state[0]["exp_avg_sq"],
    )
    again.learn(32, reset_num_timesteps=False)
    assert again.num_timesteps == 64 + 32


def test_a_run_never_imports_torch_dynamo(tmp_path: Path) -> None:
    """Build, learn, save and load the way ``lander train`` does, in a fresh interpreter:
    ``torch._dynamo`` (a second of start-up) stays out."""
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from training.config import TrainConfig\n"
        "from training.envs.environments import make_vec_env\n"
        "from training.ppo.inference import load_for_inference\n"
        "from training.session.model_builder import make_ppo_model\n"
        "config = TrainConfig(in_process=True, n_parallel=1, agents_per_instance=2, n_steps=32)\n"
        "env = make_vec_env(config)\n"
        "model = make_ppo_model(config, env, None, None)\n"
        "model.learn(128)\n"
        f"model.save({str(tmp_path / 'm.zip')!r})\n"
        f"load_for_inference(Path({str(tmp_path / 'm.zip')!r}))\n"
        "print('dynamo' if 'torch._dynamo' in sys.modules else 'none')\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.strip().splitlines()[-1] == "none"


class _StopAt(BaseCallback):
    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps, self.seen = steps, 0

    def _on_step(self) -> bool:
        self.seen += 1
        return self.seen < self.steps


def test_async_rollouts_play_ahead_with_the_policy_before_the_update(tmp_path: Path) -> None:
    """Each rollout is played by the policy as it was before the update that ran beside
    it: its log-probabilities are that policy's; callbacks see every step once, in
    order; the thread is gone when learn() returns, however it ended."""
    env = DummyVecEnv([lambda: _Corridor(False) for _ in range(2)])
    model = LeanPPO("MlpPolicy", env, n_steps=10, batch_size=20, seed=0, device="cpu")
    model.asynchronous = True
    seen = _Seen()
    before = {k: v.clone() for k, v in model.policy.state_dict().items()}
    model.learn(60, callback=seen)  # three rollouts, two of them played ahead
    assert model.num_timesteps == 60 and seen.steps == 30 and seen.infos_seen == 60
    assert not any(t.name == "rollout-ahead" for t in threading.enumerate())
    assert any(not torch.equal(before[k], v) for k, v in model.policy.state_dict().items())

    assert model._ahead is None
    model.collect_rollouts(env, seen, model.rollout_buffer, 10)  # one more begins ahead
    model.save(tmp_path / "async.zip")  # as a checkpoint callback would, mid-run
    assert model._ahead is not None
    model.finish_ahead()
    plain = PPO.load(tmp_path / "async.zip", device="cpu")
    assert not hasattr(plain, "_playing") and not hasattr(plain, "asynchronous")
    stopping = _StopAt(15)  # a callback that stops in the middle of the second rollout
    model.learn(200, callback=stopping, reset_num_timesteps=False)
    assert stopping.seen == 15
    assert not any(t.name == "rollout-ahead" for t in threading.enumerate())


def test_async_log_probs_are_the_behaviour_policys() -> None:
    env = DummyVecEnv([lambda: _Corridor(False) for _ in range(2)])
    model = LeanPPO("MlpPolicy", env, n_steps=10, batch_size=20, seed=0, device="cpu")
    model.asynchronous = True
    model.learn(40)
    ahead = model._ahead
    assert ahead is None  # learn() stopped the rollout it had begun
    # Play one rollout ahead by hand and check it against the policy that played it.
    seen = _Seen()
    seen.init_callback(model)
    assert model.collect_rollouts(env, seen, model.rollout_buffer, 10)
    behaviour = model._playing
    assert behaviour is not None and model._ahead is not None
    model._ahead.result()
    spare = model._ahead.storage
    obs = torch.as_tensor(spare.observations.reshape(20, 3))
    actions = torch.as_tensor(spare.actions.reshape(20, 2))
    with torch.no_grad():
        _, log_prob, _ = behaviour.evaluate_actions(obs, actions)
    np.testing.assert_allclose(spare.log_probs.reshape(20), log_prob.numpy(), rtol=1e-4)
    model.finish_ahead()


def test_minibatches_fit_every_rollout(recwarn: pytest.WarningsRecorder) -> None:
    """A game with few agents gets whole minibatches and no truncated-minibatch warning."""
    from training.config import TrainConfig
    from training.envs.environments import make_vec_env
    from training.session.model_builder import make_ppo_model

    config = TrainConfig(in_process=True, n_parallel=2, agents_per_instance=2, n_steps=48)
    env = make_vec_env(config)
    model = make_ppo_model(config, env, None, None)
    assert model.batch_size == 48  # 192 samples in 4 minibatches
    assert not [w for w in recwarn if "mini-batch" in str(w.message)]
    config.batch_size = 100
    assert make_ppo_model(config, env, None, None).batch_size == 100  # given: kept
    env.close()


def _resume_fixture(tmp_path: Path, fixture: str, run: str, port: int) -> tuple[PPO, PPO]:
    """A run kept from an earlier main, resumed for 1,024 steps as a branch through real
    games: (the saved model, the resumed one)."""
    from rich.console import Console

    from training.session.trainer import TrainRequest, train

    shutil.copytree(ROOT / "tests" / "fixtures" / fixture, tmp_path, dirs_exist_ok=True)
    saved = PPO.load(tmp_path / "checkpoints" / run / "final.zip", device="cpu")
    outcome = train(
        TrainRequest(tmp_path, "branch", {"timesteps": 1024, "port": port}, resume=run),
        Console(quiet=True),
    )
    assert outcome.status == "finished", outcome.error
    resumed = PPO.load(tmp_path / "checkpoints" / "branch" / "final.zip", device="cpu")
    assert resumed.num_timesteps == saved.num_timesteps + 1024
    steps = resumed.policy.optimizer.state_dict()["state"][0]["step"]
    assert float(steps) > float(saved.policy.optimizer.state_dict()["state"][0]["step"])
    return saved, resumed


def test_a_checkpoint_from_before_lean_ppo_resumes(tmp_path: Path) -> None:
    """A run trained by main before this collector and optimizer (plain PPO, torch's
    Adam, batch_size 512 in its run.json) resumes: its moments load into LeanAdam and
    its step count goes on."""
    saved, resumed = _resume_fixture(tmp_path, "before_lean_ppo", "oldmain", 29640)
    assert isinstance(saved.policy.optimizer, torch.optim.Adam)
    assert resumed.batch_size == 512


def test_a_checkpoint_from_before_the_numpy_update_resumes(tmp_path: Path) -> None:
    """A run trained by main before the numpy update (commit 449c916: LeanAdam with
    eps 1e-8, n-steps 64) resumes through it with its own rollout and its optimizer's
    settings, and its moments go on from where they were."""
    saved, resumed = _resume_fixture(tmp_path, "before_numpy_update", "mainbefore", 29650)
    assert resumed.n_steps == saved.n_steps == 64
    assert resumed.policy.optimizer.param_groups[0]["eps"] == 1e-8


@pytest.mark.parametrize("discrete", [False, True])
def test_the_updates_forward_pass_gives_sb3s_numbers(discrete: bool) -> None:
    """LeanPPO's evaluate_actions (the update's forward pass) matches
    ActorCriticPolicy.evaluate_actions, values, log-probabilities, entropies and
    gradients alike."""
    env = DummyVecEnv([lambda: _Corridor(discrete) for _ in range(2)])
    model = LeanPPO("MlpPolicy", env, n_steps=8, batch_size=16, seed=0, device="cpu")
    policy = model.policy
    obs = torch.randn(32, 3)
    actions = torch.randint(0, 3, (32,)) if discrete else torch.randn(32, 2)
    ours = policy.evaluate_actions(obs, actions)
    theirs = type(policy).evaluate_actions(policy, obs, actions)
    for mine, reference in zip(ours, theirs, strict=True):
        torch.testing.assert_close(mine.flatten(), reference.flatten(), rtol=1e-5, atol=1e-6)
    grads = []
    for values, log_prob, entropy in (ours, theirs):
        policy.zero_grad()
        (values.sum() + log_prob.sum() + entropy.sum()).backward(retain_graph=True)
        grads.append([p.grad.clone() for p in policy.parameters() if p.grad is not None])
    for mine, reference in zip(*grads, strict=True):
        torch.testing.assert_close(mine, reference, rtol=1e-4, atol=1e-6)
