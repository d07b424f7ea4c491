"""Policies with memory (``--memory N``): the GRU computed the same by the trainer's torch,
its numpy rollouts, the bot file's runner and the ONNX file; states reset where episodes
start and only there; bot files with a memory bounded before they play."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

from game_bridge.bot_runner import BotFormatError, BotRunner
from game_bridge.frame_stack import start_episodes
from game_bridge.memory import GruWeights, RecurrentPlayer
from games.lander.gym_env import LanderEnv
from training.config import ConfigError, TrainConfig, check_config
from training.ppo.lean_ppo import LeanPPO
from training.ppo.recurrent_policy import RecurrentActorCritic, RecurrentPolicyError
from training.ppo.recurrent_update import _Sequences, sequence_length


def _model(n_envs: int = 4, memory: int = 8, critic_memory: bool = False, **kwargs: Any) -> LeanPPO:
    env = make_vec_env(lambda: LanderEnv(observation="glimpse"), n_envs=n_envs, seed=3)
    return LeanPPO(
        RecurrentActorCritic,
        env,
        n_steps=16,
        batch_size=32,
        n_epochs=2,
        policy_kwargs={
            "memory": memory,
            "critic_memory": critic_memory,
            "net_arch": {"pi": [16], "vf": [16]},
        },
        seed=0,
        **kwargs,
    )


class _Quiet(BaseCallback):
    def _on_step(self) -> bool:
        return True


def _rollouts(model: LeanPPO, count: int, until: Any = None) -> None:
    """``count`` rollouts from a reset, or fewer once ``until(buffer)`` holds."""
    model._setup_learn(10**6, None)
    callback = _Quiet()
    callback.init_callback(model)
    for _ in range(count):
        assert model.collect_rollouts(model.env, callback, model.rollout_buffer, model.n_steps)
        if until is not None and until(model.rollout_buffer):
            return


def test_numpy_gru_is_torchs_gru_cell() -> None:
    torch.manual_seed(0)
    cell = torch.nn.GRUCell(5, 7)
    x, h = torch.randn(11, 5), torch.randn(11, 7)
    weights = GruWeights(
        *(p.detach().numpy() for p in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh))
    )
    expected = cell(x, h).detach().numpy()
    assert np.abs(weights.step(x.numpy(), h.numpy()) - expected).max() < 1e-6
    assert weights.units == 7


@pytest.mark.parametrize("critic_memory", [False, True], ids=["shared", "critic's own"])
def test_the_update_replays_each_sequence_as_the_rollout_played_it(critic_memory: bool) -> None:
    """Stored states and episode starts make the update's forward the rollout's: the same
    log-probabilities and values, however the rollout is cut into sequences (the critic
    reading the actor's state, or its own)."""
    model = _model(critic_memory=critic_memory)
    buffer = model.rollout_buffer

    def restarted(stored: Any) -> bool:  # an episode starts mid-rollout (the lander's end)
        return bool(stored.episode_starts[1:].sum() > 0)

    _rollouts(model, 30, until=restarted)
    assert restarted(buffer)
    policy = model.policy
    assert isinstance(policy, RecurrentActorCritic)
    assert buffer.hidden.shape[2] == (16 if critic_memory else 8)
    for length in (16, 4):
        data = _Sequences(buffer, length, torch.device("cpu"))
        with torch.no_grad():
            inputs, _ = policy.unroll(data.obs, data.starts, data.hidden[:, :8])
            critic_inputs = inputs
            if critic_memory:
                critic_inputs, _ = policy.unroll(
                    data.obs, data.starts, data.hidden[:, 8:], critic=True
                )
            latent_pi = policy.mlp_extractor.forward_actor(inputs.flatten(0, 1))
            latent_vf = policy.mlp_extractor.forward_critic(critic_inputs.flatten(0, 1))
            values = policy.value_net(latent_vf).flatten()
            head = policy.action_net(latent_pi)
        z = (data.actions.flatten(0, 1) - head) * torch.exp(-policy.log_std)
        log_prob = (-0.5 * z.square() - policy.log_std - 0.5 * np.log(2 * np.pi)).sum(dim=1)
        assert (values - data.values.flatten()).abs().max() < 1e-5
        assert (log_prob - data.log_probs.flatten()).abs().max() < 1e-4


def test_an_episode_start_zeroes_only_that_agents_state() -> None:
    model = _model(n_envs=4)
    _rollouts(model, 1)
    hidden = model._last_hidden
    assert hidden is not None and np.abs(hidden).min() > 0
    buffer = model.rollout_buffer
    starts = buffer.episode_starts.astype(bool)
    assert starts[0].all(), "a rollout after reset starts every episode"
    # What each step saw: the stored state, zeroed where the step starts an episode.
    seen = buffer.hidden * (1 - buffer.episode_starts)[:, :, None]
    assert np.all(seen[0] == 0)
    assert np.all(np.abs(seen[1:]).max(axis=2) > 0)


def test_sequences_cover_a_rollout_when_agents_are_fewer_than_minibatches() -> None:
    assert sequence_length(64, 32, 4) == 64
    assert sequence_length(64, 2, 4) == 32
    assert sequence_length(64, 1, 8) == 8
    assert sequence_length(6, 1, 8) == 3, "halved only while whole"


def test_training_changes_every_part_and_the_update_logs_what_ppo_logs() -> None:
    model = _model()
    before = copy.deepcopy(model.policy.state_dict())
    model.learn(128)
    after = model.policy.state_dict()
    for name in ("memory_cell.weight_ih", "memory_cell.weight_hh", "action_net.weight"):
        assert not torch.equal(before[name], after[name]), name
    logged = model.logger.name_to_value
    for key in ("train/approx_kl", "train/value_loss", "train/clip_fraction", "train/std"):
        assert key in logged


def test_each_memory_learns_from_its_own_loss() -> None:
    """The actor's GRU learns from the policy's loss, the critic's own from the value's:
    with the value loss weighted 0 the critic's memory stays as it was; with its weight
    it moves, and the actor's memory moves either way."""
    for vf_coef, critic_moves in ((0.0, False), (0.5, True)):
        model = _model(critic_memory=True, vf_coef=vf_coef)
        before = copy.deepcopy(model.policy.state_dict())
        model.learn(128)
        after = model.policy.state_dict()
        assert not torch.equal(before["memory_cell.weight_hh"], after["memory_cell.weight_hh"])
        moved = not torch.equal(before["critic_cell.weight_hh"], after["critic_cell.weight_hh"])
        assert moved == critic_moves, vf_coef


def test_a_saved_policy_with_memory_loads_as_itself(tmp_path: Path) -> None:
    model = _model()
    model.learn(64)
    model.save(tmp_path / "m.zip")
    loaded = LeanPPO.load(tmp_path / "m.zip", device="cpu")
    assert isinstance(loaded.policy, RecurrentActorCritic) and loaded.policy.memory == 8
    for name, value in model.policy.state_dict().items():
        assert torch.equal(value, loaded.policy.state_dict()[name])
    with pytest.raises(RecurrentPolicyError, match="state"):
        loaded.predict(np.zeros((1, 7), dtype=np.float32))


def test_a_player_keeps_each_agents_state_and_forgets_it_at_its_episodes_start() -> None:
    calls: list[np.ndarray] = []

    def act(obs: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        calls.append(state.copy())
        return obs, state + obs[:, :1]

    player = RecurrentPlayer(act, 2)
    player(np.ones((3, 1)))
    player(np.ones((3, 1)))
    start_episodes(player, np.array([False, True, False]))
    player(np.ones((3, 1)))
    assert calls[0].tolist() == [[0, 0]] * 3
    assert calls[2][:, 0].tolist() == [2, 0, 2]
    start_episodes(player)
    player(np.ones((3, 1)))
    assert calls[3].tolist() == [[0, 0]] * 3


def _memory_bot(units: int = 3, width: int = 2) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    return {
        "format": "lander-bot",
        "version": 2,
        "observation": {"size": width},
        "action": {"type": "continuous", "size": 1},
        "memory": {
            "kind": "gru",
            "units": units,
            "weight_ih": rng.normal(size=(3 * units, width)).tolist(),
            "weight_hh": rng.normal(size=(3 * units, units)).tolist(),
            "bias_ih": rng.normal(size=3 * units).tolist(),
            "bias_hh": rng.normal(size=3 * units).tolist(),
        },
        "layers": [
            {
                "weights": rng.normal(size=(1, width + units)).tolist(),
                "biases": [0.0],
                "activation": "tanh",
            }
        ],
    }


def test_a_bot_with_memory_plays_from_its_state() -> None:
    bot = BotRunner(_memory_bot())
    player = bot.policy()
    obs = np.array([[0.5, -0.5], [0.5, -0.5]])
    first = player(obs)
    second = player(obs)
    assert np.allclose(first, bot.act(obs)), "the first step is from an empty state"
    assert not np.allclose(first, second), "the same observation, another state"
    start_episodes(player, np.array([True, False]))
    third = player(obs)
    assert np.allclose(third[0], first[0]) and np.allclose(third[1], player_after(bot, obs, 3)[1])


def player_after(bot: BotRunner, obs: np.ndarray, steps: int) -> np.ndarray:
    """A fresh player's actions at its ``steps``-th step of the same observation."""
    player = bot.policy()
    for _ in range(steps - 1):
        player(obs)
    return np.asarray(player(obs))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s.update(version=1), "version 1 with a memory"),
        (lambda s: s.pop("memory"), "version 2 without a memory"),
        (lambda s: s["memory"].update(kind="lstm"), "of kind 'lstm'"),
        (lambda s: s["memory"].update(weight_hh=[[0.0] * 3] * 8), "weight_hh of shape"),
        (lambda s: s["memory"].update(bias_ih=[0.0] * 10), "bias_ih of shape"),
        (lambda s: s["memory"].update(weight_ih=[[1.0, None]] * 9), "garbles|not finite"),
        (lambda s: s["memory"].update(weight_ih=[[1.0, float("inf")]] * 9), "not finite"),
        (lambda s: s["memory"].update(weight_hh=[], bias_ih=[]), "from 1 to 4,096 units"),
        (lambda s: s.update(memory=[1, 2]), "garbles"),
        (lambda s: s["layers"][0].update(weights=[[0.0] * 2]), "do not take an input of width 5"),
    ],
)
def test_a_bot_file_with_a_bad_memory_is_one_line(
    tmp_path: Path, change: Any, message: str
) -> None:
    spec = _memory_bot()
    change(spec)
    path = tmp_path / "bot.json"
    path.write_text(json.dumps(spec))
    with pytest.raises(BotFormatError, match=message) as raised:
        BotRunner.from_file(path)
    assert "\n" not in str(raised.value)


def test_memory_refuses_what_it_cannot_take_in_one_line() -> None:
    for settings, flag in (
        ({"self_play": True}, "--self-play"),
        ({"collector": "async"}, "--collector async"),
        ({"collector": "sb3"}, "--collector sb3"),
    ):
        with pytest.raises(ConfigError, match=f"--memory with {flag}"):
            check_config(TrainConfig(memory=16, **settings))
    with pytest.raises(ConfigError, match="at most 4,096"):
        check_config(TrainConfig(memory=5000))


def test_a_game_restarted_mid_episode_resets_only_its_agents_states() -> None:
    """Two real lander processes of two agents each over TCP; one is killed mid-rollout.
    Its agents' episodes end (truncated, bootstrapped) and their next step starts from an
    empty state; the other game's agents carry theirs on."""
    from stable_baselines3.common.vec_env import VecMonitor

    from game_bridge.launcher import LaunchConfig
    from game_bridge.vec_env import GameVecEnv
    from tests.conftest import LANDER_GAME, find_free_port_block

    env = GameVecEnv(
        LaunchConfig(
            **LANDER_GAME,
            n_instances=2,
            base_port=find_free_port_block(2),
            seed=5,
            game_args={"agents": "2", "observation": "glimpse"},
        ),
        max_restarts_per_minute=1,
    )
    killed: list[int] = []

    class KillGameZero(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps == 4 * 10 and not killed:
                process = env.instances[0].process
                assert process is not None
                process.kill()
                killed.append(self.num_timesteps)
            return True

    try:
        model = LeanPPO(
            RecurrentActorCritic,
            VecMonitor(env),
            n_steps=32,
            batch_size=64,
            policy_kwargs={"memory": 8, "net_arch": {"pi": [16], "vf": [16]}},
            seed=0,
        )
        model._setup_learn(10**6, None)
        callback = KillGameZero()
        callback.init_callback(model)
        assert model.collect_rollouts(model.env, callback, model.rollout_buffer, 32)
    finally:
        env.close()
    assert killed and env.restarts, "the killed game was restarted"
    buffer = model.rollout_buffer
    starts = buffer.episode_starts.astype(bool)
    restarted_at = [step for step in range(1, 32) if starts[step, :2].all()]
    assert restarted_at, "game 0's agents start new episodes after the restart"
    step = restarted_at[0]
    assert not starts[step, 2:].any(), "game 1's agents play on"
    carried = buffer.hidden[step]
    assert np.all(np.abs(carried).max(axis=1) > 0), "every agent carried a state into the step"

    def values(state: np.ndarray) -> np.ndarray:
        policy = model.policy
        assert isinstance(policy, RecurrentActorCritic)
        with torch.no_grad():
            obs = torch.as_tensor(buffer.observations[step])[:, None]
            inputs, _ = policy.unroll(obs, torch.zeros(4, 1), torch.as_tensor(state))
            return policy.predict_value_of(inputs[:, 0])

    emptied = carried.copy()
    emptied[:2] = 0.0
    played = buffer.values[step]
    assert np.abs(values(emptied) - played).max() < 1e-5, "game 0's agents played from zeros"
    assert np.abs(values(carried)[:2] - played[:2]).min() > 1e-6, "not from what they carried"
    assert np.abs(buffer.hidden[step + 1, :2]).max() > 0, "and fill their memory again"


def _glimpse_episodes(agents: int, steps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Observations of whole glimpse episodes flown by the reference pilot (which reads the
    whole coordinates), and where each agent's episodes start: ``[steps, agents, 7]``."""
    from games.lander.controllers import reference_actions
    from games.lander.physics import LanderPhysics

    physics = LanderPhysics(n_agents=agents, seed=seed, glimpse=True)
    seen, starts = [], [np.ones(agents, dtype=bool)]
    for _ in range(steps):
        seen.append(physics.observe())
        result = physics.step(reference_actions(physics.coordinates()))
        ended = result.terminated | result.truncated
        physics.reset_agents(ended)
        starts.append(ended)
    return np.stack(seen), np.stack(starts[:-1])


def test_a_run_with_memory_exports_plays_evaluates_and_resumes(
    tmp_path: Path, port_block: Any
) -> None:
    """``lander train --memory`` over real games, then everything a bot goes through: the
    bot file and the ONNX file give the trained policy's actions over whole episodes (each
    keeping its state, reset where an episode starts), and eval, play and the resume
    take the policy with its memory."""
    from tests.conftest import lander
    from training.bots.onnx_export import OnnxPlayer
    from training.evaluation.scoring import model_policy
    from training.ppo.inference import load_for_inference

    flags = ["--game-arg", "observation=glimpse", "--n-parallel", "2",
             "--agents-per-instance", "2", "--n-steps", "64"]  # fmt: skip
    trained = lander(
        tmp_path, "train", "recall", "--no-git", "--memory", "16", "--timesteps", "2048",
        "--port", str(port_block(2)), *flags,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stdout + trained.stderr
    bot_path = tmp_path / "bots" / "recall.json"
    spec = json.loads(bot_path.read_text())
    assert spec["version"] == 2 and spec["memory"]["units"] == 16
    bot = BotRunner.from_file(bot_path)
    model, normalizer = load_for_inference(tmp_path / "checkpoints" / "recall" / "final.zip")
    assert isinstance(model.policy, RecurrentActorCritic)

    episodes, starts = _glimpse_episodes(agents=6, steps=450, seed=11)
    assert starts[1:].any(), "episodes end and start again within the comparison"
    players = [model_policy(model, normalizer), bot.policy()]
    onnx = OnnxPlayer(tmp_path / "bots" / "recall.onnx")
    assert onnx.units == 16
    state = np.zeros((6, 16), dtype=np.float32)
    largest = 0.0
    for obs, started in zip(episodes, starts, strict=True):
        for player in players:
            start_episodes(player, started)
        state[started] = 0.0
        expected = np.asarray(players[0](obs), dtype=np.float64)
        output, state = onnx.step(obs, state)
        for actual in (players[1](obs), bot.read_actions(output)):
            largest = max(largest, float(np.abs(expected - actual).max()))
    assert largest < 1e-5, largest

    recorded = lander(
        tmp_path, "record", "recall", "--episodes", "3", "--out", str(tmp_path / "demos.json"),
        "--port", str(port_block(1)),
    )  # fmt: skip
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert len(json.loads((tmp_path / "demos.json").read_text())["episodes"]) == 3

    evaluated = lander(tmp_path, "eval", "recall", "--episodes", "8")
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    assert "normalized_score=" in evaluated.stdout
    played = lander(tmp_path, "play", "recall", "--seconds", "25")
    assert played.returncode == 0 and "episode(s): mean_reward=" in played.stdout, played

    resumed = lander(
        tmp_path, "train", "recall", "--resume", "recall", "--no-git", "--timesteps", "1024",
        "--port", str(port_block(2)), *flags,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    again, _ = load_for_inference(tmp_path / "checkpoints" / "recall" / "final.zip")
    assert isinstance(again.policy, RecurrentActorCritic) and again.policy.memory == 16
    assert again.num_timesteps >= model.num_timesteps + 1024
    moved = [
        not torch.equal(value, again.policy.state_dict()[name])
        for name, value in model.policy.state_dict().items()
        if name.startswith("memory_cell")
    ]
    assert all(moved), "the resumed session trained the same memory on"
    reshaped = lander(
        tmp_path, "train", "recall", "--resume", "recall", "--no-git", "--memory", "8",
        "--timesteps", "64", "--port", str(port_block(2)), *flags,
    )  # fmt: skip
    said = reshaped.stdout + reshaped.stderr
    assert reshaped.returncode != 0 and "run recall's policy has --memory 16" in said, said
    assert "Traceback" not in said


def test_the_numpy_gradient_through_time_is_torchs() -> None:
    """The update's GRU in numpy (forward and backpropagation through time, resets
    included) against torch's autograd of ``unroll`` on the same sequences."""
    from training.ppo.recurrent_update import GruPass

    torch.manual_seed(1)
    model = _model(memory=5)
    policy = model.policy
    assert isinstance(policy, RecurrentActorCritic)
    obs = torch.randn(3, 9, 7)
    starts = torch.zeros(3, 9)
    starts[0, 4] = starts[2, 0] = 1.0
    hidden = torch.randn(3, 5)
    weights = torch.randn(3, 9, 5)
    states_torch, _ = policy.unroll(obs, starts, hidden)
    (states_torch[:, :, 7:] * weights).sum().backward()
    expected = {name: p.grad.clone() for name, p in policy.memory_cell.named_parameters()}
    policy.memory_cell.zero_grad()
    gru = GruPass(policy.memory_cell, obs.numpy(), starts.numpy(), hidden.numpy())
    assert np.abs(gru.states - states_torch[:, :, 7:].detach().numpy()).max() < 1e-5
    (gru.tensor * weights).sum().backward()
    gru.backward()
    for name, p in policy.memory_cell.named_parameters():
        assert p.grad is not None
        assert torch.allclose(p.grad, expected[name], atol=1e-4, rtol=1e-4), name


@pytest.mark.parametrize("action_type", ["continuous", "discrete"])
def test_a_bot_with_memory_exports_with_its_normalization_and_either_action(
    tmp_path: Path, action_type: str
) -> None:
    """Normalised observations go through the GRU as the trainer saw them, in the bot file
    and the ONNX graph alike; discrete choices come out of the same memory."""
    from stable_baselines3.common.vec_env import VecNormalize

    from training.bots.export import export_policy

    env = VecNormalize(
        make_vec_env(
            lambda: LanderEnv(observation="glimpse", action_type=action_type), n_envs=4, seed=1
        )
    )
    model = LeanPPO(
        RecurrentActorCritic,
        env,
        n_steps=32,
        batch_size=64,
        n_epochs=2,
        policy_kwargs={"memory": 8, "net_arch": {"pi": [16], "vf": [16]}},
        seed=0,
    )
    model.learn(512)
    assert np.abs(env.obs_rms.mean).max() > 0.01, "statistics the bot must carry"
    result = export_policy(model, env, "norm", tmp_path / "norm.json", tmp_path / "norm.onnx")
    assert result.bot_parity.agreement == 1.0 and result.onnx_parity.agreement == 1.0
    spec = json.loads((tmp_path / "norm.json").read_text())
    assert spec["observation"]["normalization"] is not None and spec["memory"]["units"] == 8
