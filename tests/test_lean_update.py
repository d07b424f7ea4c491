"""The numpy PPO update (training/ppo/lean_update.py) against SB3's own ``PPO.train``: the
same rollout and the same permutations must leave the same weights, Adam moments and
logged statistics, for every option PPO's loss has."""

from __future__ import annotations

import copy
from typing import Any

import gymnasium
import numpy as np
import pytest
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv

from training.ppo.lean_adam import LeanAdam
from training.ppo.lean_ppo import LeanPPO
from training.ppo.lean_update import lean_update_fits


class _Noisy(gymnasium.Env[np.ndarray, Any]):
    """Random observations and rewards, episodes ending now and then: a rollout with
    spread in its advantages, ratios and values, whatever the policy does."""

    def __init__(self, discrete: bool) -> None:
        self.observation_space = gymnasium.spaces.Box(-1, 1, (5,), np.float32)
        self.action_space = (
            gymnasium.spaces.Discrete(4)
            if discrete
            else gymnasium.spaces.Box(-1, 1, (2,), np.float32)
        )
        self.rng = np.random.default_rng(0)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        return self._obs(), {}

    def _obs(self) -> np.ndarray:
        return self.rng.uniform(-1, 1, 5).astype(np.float32)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        reward = float(self.rng.normal(1.0, 2.0))
        return self._obs(), reward, bool(self.rng.random() < 0.05), False, {}


def _model(discrete: bool, **settings: Any) -> LeanPPO:
    env = DummyVecEnv([lambda: _Noisy(discrete) for _ in range(4)])
    model = LeanPPO(
        "MlpPolicy",
        env,
        n_steps=32,
        batch_size=32,
        n_epochs=4,
        learning_rate=3e-3,
        seed=0,
        device="cpu",
        **settings,
    )
    model.learn(256)  # moments and weights away from their start; a fresh rollout follows
    model.collect_rollouts(model.env, _NoCallback(), model.rollout_buffer, model.n_steps)
    return model


class _NoCallback:
    """What collect_rollouts asks of a callback."""

    def on_rollout_start(self) -> None: ...
    def on_rollout_end(self) -> None: ...
    def update_locals(self, _: dict) -> None: ...
    def on_step(self) -> bool:
        return True


def _update_both_ways(model: LeanPPO) -> tuple[dict, dict, dict, dict, dict, dict]:
    """The model after lean_train and after SB3's PPO.train, from the same state and the
    same numpy seed: (weights, Adam state, logged values) each; SB3's update must have
    moved the weights, or the comparison would compare nothing."""
    weights = copy.deepcopy(model.policy.state_dict())
    moments = copy.deepcopy(model.policy.optimizer.state_dict())
    updates = model._n_updates
    results = []
    for update in (LeanPPO.train, PPO.train):
        model.policy.load_state_dict(weights)
        model.policy.optimizer.load_state_dict(copy.deepcopy(moments))
        model._n_updates = updates
        np.random.seed(7)
        update(model)
        results += [
            copy.deepcopy(model.policy.state_dict()),
            copy.deepcopy(model.policy.optimizer.state_dict()),
            dict(model.logger.name_to_value),
        ]
    assert any(not torch.equal(weights[k], v) for k, v in results[3].items())
    return tuple(results)  # type: ignore[return-value]


SETTINGS = {
    "defaults": {},
    "entropy bonus": {"ent_coef": 0.05},
    "value clipping": {"clip_range_vf": 0.1},
    "raw advantages": {"normalize_advantage": False},
    "tight clip and weight decay": {
        "clip_range": 0.02,
        "policy_kwargs": {"optimizer_kwargs": {"weight_decay": 1e-3, "eps": 1e-5}},
    },
    "relu": {"policy_kwargs": {"activation_fn": torch.nn.ReLU, "net_arch": [16, 8]}},
}


@pytest.mark.parametrize("discrete", [False, True], ids=["box", "discrete"])
@pytest.mark.parametrize("settings", list(SETTINGS.values()), ids=list(SETTINGS))
def test_the_numpy_update_is_sb3s_update(discrete: bool, settings: dict[str, Any]) -> None:
    model = _model(discrete, **settings)
    assert lean_update_fits(model, model.lean_rollouts())
    same_update(*_update_both_ways(model))


def same_update(
    ours: dict[str, Any],
    our_moments: dict[str, Any],
    our_log: dict[str, Any],
    theirs: dict[str, Any],
    their_moments: dict[str, Any],
    their_log: dict[str, Any],
) -> None:
    """The two updates' weights, Adam moments and logged numbers agree (float32 rounding)."""
    for name, reference in theirs.items():
        torch.testing.assert_close(ours[name], reference, rtol=1e-4, atol=2e-6, msg=name)
    for index, entry in their_moments["state"].items():
        mine = our_moments["state"][index]
        assert float(mine["step"]) == float(entry["step"])
        torch.testing.assert_close(mine["exp_avg"], entry["exp_avg"], rtol=1e-4, atol=1e-7)
        torch.testing.assert_close(mine["exp_avg_sq"], entry["exp_avg_sq"], rtol=1e-3, atol=1e-9)
    _same_log(our_log, their_log)


def _same_log(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    for key in (
        "train/entropy_loss",
        "train/policy_gradient_loss",
        "train/value_loss",
        "train/approx_kl",
        "train/clip_fraction",
        "train/loss",
        "train/explained_variance",
        "train/n_updates",
    ):
        assert ours[key] == pytest.approx(theirs[key], rel=1e-4, abs=1e-6), key


def test_the_update_moves_the_weights_and_agrees_with_sb3_over_many_steps() -> None:
    """Four rollouts learned with the numpy update end where SB3's update ends: small
    float32 differences do not grow into another policy."""
    lean, plain = _model(False), _model(False)
    plain.policy.load_state_dict(lean.policy.state_dict())
    plain.policy.optimizer.load_state_dict(copy.deepcopy(lean.policy.optimizer.state_dict()))
    before = copy.deepcopy(lean.policy.state_dict())
    for _ in range(4):
        np.random.seed(3)
        LeanPPO.train(lean)
        np.random.seed(3)
        PPO.train(plain)
    after, reference = lean.policy.state_dict(), plain.policy.state_dict()
    moved = max(float((after[k] - before[k]).abs().max()) for k in after)
    differs = max(float((after[k] - reference[k]).abs().max()) for k in after)
    assert moved > 1e-2
    assert differs < moved * 1e-3


def test_early_stopping_on_kl_stops_where_sb3_stops() -> None:
    model = _model(False, target_kl=1e-4)
    before = model._n_updates
    ours, _, our_log, theirs, _, their_log = _update_both_ways(model)
    assert their_log["train/n_updates"] - before < model.n_epochs, "SB3 stopped early"
    _same_log(our_log, their_log)
    for name, reference in theirs.items():
        torch.testing.assert_close(ours[name], reference, rtol=1e-4, atol=2e-6, msg=name)


def test_after_the_update_every_tensor_has_its_own_storage() -> None:
    """Checkpoints hold SB3's own tensors: no parameter or moment is left a view of the
    update's flat arrays, no gradient is left behind, and the moments load into torch's
    Adam."""
    model = _model(False)
    LeanPPO.train(model)
    params = list(model.policy.parameters())
    assert all(p.grad is None for p in params)
    assert len({p.untyped_storage().data_ptr() for p in params}) == len(params)
    state = model.policy.optimizer.state_dict()
    torch.optim.Adam(params).load_state_dict(state)
    storages = {
        tensor.untyped_storage().data_ptr()
        for entry in state["state"].values()
        for tensor in (entry["exp_avg"], entry["exp_avg_sq"])
    }
    assert len(storages) == 2 * len(params)


def test_other_policies_take_sb3s_update() -> None:
    """An activation the numpy update does not write out, or torch's own Adam, leaves
    the update to SB3."""
    elu = _model(False, policy_kwargs={"activation_fn": torch.nn.ELU})
    assert not lean_update_fits(elu, elu.lean_rollouts())
    adam = _model(False, policy_kwargs={"optimizer_class": torch.optim.Adam})
    assert not lean_update_fits(adam, adam.lean_rollouts())
    assert isinstance(_model(False).policy.optimizer, LeanAdam)
    before = copy.deepcopy(elu.policy.state_dict())
    elu.train()
    assert any(not torch.equal(before[k], v) for k, v in elu.policy.state_dict().items())


def test_sb3s_adam_epsilon_is_kept() -> None:
    """SB3 gives its policies' Adam eps=1e-5 unless told otherwise; LeanAdam, its stand-in,
    gets the same."""
    assert _model(False).policy.optimizer.param_groups[0]["eps"] == 1e-5
    given = _model(False, policy_kwargs={"optimizer_kwargs": {"eps": 1e-7}})
    assert given.policy.optimizer.param_groups[0]["eps"] == 1e-7


def test_the_adaptive_step_size_follows_each_minibatchs_kl() -> None:
    """rsl_rl's rule: over twice the desired KL the step shrinks 1.5x, under half it grows
    1.5x, within its bounds; the update applies it minibatch by minibatch, the SB3 update
    (another policy) once per rollout, and logs where it is."""
    from training.ppo.lean_ppo import MAX_ADAPTIVE_LR, MIN_ADAPTIVE_LR

    model = _model(discrete=False)
    model.desired_kl = 0.01  # the update's KLs here are far above: its steps shrink
    model.adapt_learning_rate(0.05)
    assert model.adaptive_lr == pytest.approx(3e-3 / 1.5)
    model.adapt_learning_rate(0.05)
    model.adapt_learning_rate(0.001)
    assert model.adaptive_lr == pytest.approx(3e-3 / 1.5)
    model.adapt_learning_rate(0.01)  # within the band: unchanged
    assert model.adaptive_lr == pytest.approx(3e-3 / 1.5)
    assert model.policy.optimizer.param_groups[0]["lr"] == pytest.approx(3e-3 / 1.5)
    for _ in range(40):
        model.adapt_learning_rate(1.0)
    assert model.adaptive_lr == MIN_ADAPTIVE_LR
    for _ in range(40):
        model.adapt_learning_rate(1e-6)
    assert model.adaptive_lr == pytest.approx(3e-3)  # back to the learning rate, not past it
    model.learning_rate = 0.5
    model._setup_lr_schedule()
    for _ in range(40):
        model.adapt_learning_rate(1e-6)
    assert model.adaptive_lr == MAX_ADAPTIVE_LR
    model.learning_rate = 3e-3
    model._setup_lr_schedule()

    for update in (LeanPPO.train, PPO.train):
        model.adaptive_lr = None
        seen: list[float] = []
        step = model.adapt_learning_rate
        model.adapt_learning_rate = lambda kl, step=step, seen=seen: (seen.append(kl), step(kl))[1]  # type: ignore[method-assign]
        try:
            LeanPPO.train(model) if update is LeanPPO.train else _sb3_update(model)
        finally:
            del model.adapt_learning_rate
        expected = model.n_epochs * (model.n_steps * model.n_envs // model.batch_size)
        assert len(seen) == (expected if update is LeanPPO.train else 1)
        assert model.logger.name_to_value["train/learning_rate"] == pytest.approx(3e-3)
        expected = 3e-3
        for kl in seen:  # the rule, replayed over the KLs the update met
            if kl > 0.02:
                expected = max(expected / 1.5, MIN_ADAPTIVE_LR)
            elif 0 < kl < 0.005:
                expected = min(expected * 1.5, 3e-3)
        assert model.adaptive_lr == pytest.approx(expected)


def _sb3_update(model: LeanPPO) -> None:
    """LeanPPO's update by SB3's own path (as for a policy numpy does not write out)."""
    import training.ppo.lean_ppo as lean_ppo

    fits = lean_ppo.lean_update_fits
    lean_ppo.lean_update_fits = lambda _model, _lean, camera=False: False  # type: ignore[assignment]
    try:
        LeanPPO.train(model)
    finally:
        lean_ppo.lean_update_fits = fits


def test_each_session_takes_its_adaptive_kl_and_starts_from_its_learning_rate() -> None:
    """A resume is where a user turns the adaptive step on (a long run that collapses) or
    off, and where it starts again from --learning-rate."""
    from training.config import TrainConfig
    from training.session.model_builder import with_collector

    model = _model(discrete=True)
    model.adaptive_lr = 1e-4
    with_collector(model, TrainConfig(adaptive_kl=0.03))
    assert model.desired_kl == 0.03 and model.adaptive_lr is None
    with_collector(model, TrainConfig())
    assert model.desired_kl == 0.01  # the general default
    with_collector(model, TrainConfig(adaptive_kl=0.0))
    assert model.desired_kl is None  # 0: a constant step (the bundled games' own)


def test_max_std_holds_the_action_std_and_each_session_takes_it() -> None:
    """``--max-std``: with an entropy bonus that pushes the std up, the std of an
    unbounded run grows past 1; with max_std 1 it is held at or under 1 after every update
    (numpy and SB3 updates alike), and a session sets or clears it."""
    from training.config import TrainConfig
    from training.session.model_builder import with_collector

    free = _model(discrete=False, ent_coef=0.5)
    free.learn(2048)
    assert float(free.policy.log_std.detach().exp().max()) > 1.05  # the bonus grows it unbounded
    held = _model(discrete=False, ent_coef=0.5)
    with_collector(held, TrainConfig(max_std=1.0))
    assert held.max_std == 1.0
    held.learn(2048)
    assert float(held.policy.log_std.detach().exp().max()) <= 1.0 + 1e-6
    with_collector(held, TrainConfig(max_std=0.0))
    assert held.max_std is None  # 0: no limit


def test_a_run_recorded_before_max_std_resumes_without_a_limit() -> None:
    """A run.json written before ``--max-std`` existed trained without one: so it resumes."""
    from training.config import TrainConfig, from_dict

    saved = TrainConfig().to_dict()
    del saved["max_std"]
    assert from_dict(saved, "run.json").max_std == 0.0


def test_std_regrowth_lets_the_std_shrink_but_not_grow_back() -> None:
    """``--std-regrowth 1``: an entropy bonus pushing the std up moves it no higher than
    where the session started (the lowest so far), while a bonus pulling it down (a
    negative one) lets it fall; the lowest is kept per session."""
    from training.config import TrainConfig
    from training.session.model_builder import with_collector

    held = _model(discrete=False, ent_coef=0.5)
    with_collector(held, TrainConfig(std_regrowth=1.0, max_std=0.0))
    start = held.policy.log_std.detach().clone()
    held.learn(2048)
    assert bool((held.policy.log_std <= start + 1e-6).all())
    falling = _model(discrete=False, ent_coef=-0.5)
    with_collector(falling, TrainConfig(std_regrowth=1.0, max_std=0.0))
    before = falling.policy.log_std.detach().clone()
    falling.learn(2048)
    assert bool((falling.policy.log_std < before - 0.05).all())
    lowest = falling.lowest_log_std
    assert lowest is not None and bool((falling.policy.log_std <= lowest + 1e-6).all())
    with_collector(falling, TrainConfig(std_regrowth=0.0))
    assert falling.std_regrowth is None and falling.lowest_log_std is None
