"""Pictures from Gymnasium games: an ALE id gets the field's preprocessing (games/gym/atari.py)
with the game's raw score kept whole for everything lander prints, and any image
observation is a camera key, alone or beside vector keys."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from game_bridge import protocol
from game_bridge.bot_runner import BotRunner
from game_bridge.codecs import ObservationCodec
from game_bridge.launcher import LaunchConfig
from game_bridge.protocol import GAME_OVER, SCORE
from game_bridge.spaces import parse_env_info
from game_bridge.vec_env import GameVecEnv
from games.gym import ale_frames, atari
from games.gym.client import GymGame
from games.gym.view import IMAGE_KEY, GameView, make_view
from tests.conftest import lander, tensorboard_steps
from tests.plugin_decode import PluginInference
from training.config import CAMERA_ENCODERS

atari.register_ale()


class _RawRewards(gymnasium.Wrapper[Any, Any, Any, Any]):
    """Sums the emulator's own rewards under the preprocessing, to check the score against."""

    def __init__(self, env: gymnasium.Env[Any, Any]) -> None:
        super().__init__(env)
        self.total = 0.0
        self.rewards: list[float] = []

    def step(self, action: Any) -> Any:
        result = self.env.step(action)
        self.total += float(result[1])
        self.rewards.append(float(result[1]))
        return result


def test_the_raw_score_survives_life_loss_and_reward_clipping() -> None:
    """SpaceInvaders pays 5 to 30 an alien over three lives: the learner sees each life as an
    episode and every reward as its sign, and the step that ends the game carries the
    emulator's own total."""
    raw = _RawRewards(gymnasium.make("SpaceInvadersNoFrameskip-v4"))
    view = GameView(atari.preprocess(raw))
    view.reset(seed=1)
    rng = np.random.default_rng(1)
    learner_rewards: list[float] = []
    lives_lost = 0
    for _ in range(20_000):
        _, reward, terminated, truncated, info = view.step(int(rng.integers(6)))
        learner_rewards.append(reward)
        if terminated or truncated:
            if SCORE in info:
                break
            assert info[GAME_OVER] is False
            lives_lost += 1
            view.reset()
    else:
        pytest.fail("no game ended in 20,000 steps")
    assert info[GAME_OVER] is True
    assert lives_lost >= 2  # three lives: two lost before the last ends the game
    assert set(learner_rewards) <= {-1.0, 0.0, 1.0}
    assert max(raw.rewards) > 1.0  # the clipping had something to clip
    assert info[SCORE] == raw.total > sum(learner_rewards)


@pytest.mark.parametrize("env_id", ["PongNoFrameskip-v4", "ALE/Pong-v5"])
def test_a_step_is_four_frames_84_by_84_grey_four_stacked(env_id: str) -> None:
    """The NoFrameskip id skips (and max-pools) here; the v5 id, which skips by itself, is not
    skipped twice. Four grey 84 x 84 frames, oldest first: after a reset all four are the
    first frame, and each step shifts the stack by one."""
    view = make_view(env_id, {})
    assert view.observation_space == spaces.Box(0, 255, (4, 84, 84), np.uint8)
    assert view.env_info_spaces()[0] == {IMAGE_KEY: {"size": [4, 84, 84], "space": "box"}}
    first, info = view.reset(seed=0)
    assert first.dtype == np.uint8 and first.shape == (4, 84, 84)
    assert all(np.array_equal(first[0], frame) for frame in first[1:])
    frame_before = info["frame_number"]
    previous = first
    for _ in range(40):
        obs, _, _, _, info = view.step(0)
        assert np.array_equal(obs[:3], previous[1:])
        assert info["frame_number"] - frame_before == 4
        frame_before, previous = info["frame_number"], obs
    assert not np.array_equal(previous[0], previous[3])  # the game moved in 3 steps


@pytest.mark.parametrize(
    ("env_id", "frame_skip"), [("BreakoutNoFrameskip-v4", 4), ("ALE/Pong-v5", 1)]
)
def test_the_emulator_stepped_directly_is_gymnasiums_preprocessing_step_for_step(
    env_id: str, frame_skip: int
) -> None:
    """The same frames, rewards, ends, infos and scores as Gymnasium's ``AtariPreprocessing``
    from the same seed and actions, over lost lives, whole games and no-op starts: Breakout
    skips here and serves with FIRE; Pong-v5 skips by itself, with sticky actions."""
    lean = atari.preprocess(gymnasium.make(env_id), frame_skip)
    layer = lean
    while not isinstance(layer, ale_frames.AleFrames):
        assert isinstance(layer, gymnasium.Wrapper), "preprocess did not step the emulator"
        layer = layer.env
    reference = atari.preprocess(gymnasium.make(env_id), frame_skip, on_the_emulator=False)
    assert lean.observation_space == reference.observation_space
    rng = np.random.default_rng(0)
    seen, ends, scores = 0, 0, 0
    for game in range(2):
        obs, info = lean.reset(seed=game)
        expected_obs, expected_info = reference.reset(seed=game)
        assert np.array_equal(obs, expected_obs) and info == expected_info
        for _ in range(1_500):
            action = int(rng.integers(lean.action_space.n))
            step, expected = lean.step(action), reference.step(action)
            assert np.array_equal(step[0], expected[0]), f"frames differ at step {seen}"
            assert step[1:] == expected[1:], f"step {seen}: {step[1:]} != {expected[1:]}"
            seen += 1
            if step[2] or step[3]:
                ends += 1
                scores += SCORE in step[4]
                obs, info = lean.reset()
                expected_obs, expected_info = reference.reset()
                assert np.array_equal(obs, expected_obs) and info == expected_info
    assert ends >= 1 and (scores >= 1 or frame_skip == 1)  # Breakout ends games in 3,000


def test_a_game_under_a_wrapper_of_its_own_keeps_gymnasiums_preprocessing() -> None:
    """Stepping the emulator directly would skip a wrapper between it and the preprocessing
    (a user's, a time limit), and a stochastic skip is Gymnasium's to draw: those keep
    Gymnasium's wrapper."""
    assert ale_frames.fits(gymnasium.make("BreakoutNoFrameskip-v4"))
    assert not ale_frames.fits(_RawRewards(gymnasium.make("BreakoutNoFrameskip-v4")))
    assert not ale_frames.fits(gymnasium.make("BreakoutNoFrameskip-v4", max_episode_steps=9))
    assert not ale_frames.fits(gymnasium.make("Breakout-v4"))  # a skip of 2 to 4 frames
    with pytest.raises(ValueError, match="fixed skip"):
        ale_frames.AleFrames(gymnasium.make("Breakout-v4"), 4, noop_max=30, screen=84)
    with pytest.raises(ValueError, match="skips frames itself"):  # 4 x 4 frames a step
        ale_frames.AleFrames(gymnasium.make("ALE/Breakout-v5"), 4, noop_max=30, screen=84)


def test_a_game_seen_through_its_ram_is_a_vector_with_the_same_lives_and_score() -> None:
    """``--game-arg obs_type=ram``: the console's 128 bytes as one vector key (no frames to
    shrink or stack), each step 4 frames (the game's last fewer), lives as the learner's episodes and the whole
    game's raw score at its end, as for the screen."""
    view = make_view("BreakoutNoFrameskip-v4", {"obs_type": "ram"})
    assert [(part.is_image, part.space.shape) for part in view.parts] == [(False, (128,))]
    obs, info = view.reset(seed=0)
    assert obs.shape == (128,)
    frame_before, rng, lives_lost = info["frame_number"], np.random.default_rng(0), 0
    for _ in range(5_000):
        obs, _, terminated, truncated, info = view.step(int(rng.integers(4)))
        held = info["frame_number"] - frame_before
        assert (held == 4 or terminated) and obs.shape == (128,)  # the last may end early
        frame_before = info["frame_number"]
        if terminated or truncated:
            if info[GAME_OVER]:
                break
            lives_lost += 1
            frame_before = view.reset()[1]["frame_number"]
    else:
        pytest.fail("no game ended in 5,000 steps")
    assert lives_lost == 4 and info[SCORE] >= 0  # five lives, the raw score of all five
    view.close()


def test_a_game_seen_through_its_ram_logs_whole_games_over_the_binary_wire(
    tmp_path: Path,
) -> None:
    """Breakout's RAM is a vector, so its steps travel in lander's binary encoding: the
    rewards the run logs are still whole games' raw scores, five lives long (the encoding
    carries each finished game's score and each lost life; before it did, the run logged
    every life as a game, about 35 steps long and worth its clipped rewards)."""
    trained = lander(
        tmp_path, "train", "ram", "--game", "gym:BreakoutNoFrameskip-v4", "--game-arg",
        "obs_type=ram", "--timesteps", "6144", "--n-parallel", "2", "--eval-episodes", "2",
        "--no-git", timeout=600,
    )  # fmt: skip
    output = trained.stdout + trained.stderr
    assert trained.returncode == 0, output
    logs = tmp_path / "logs" / "ram"
    lengths = [n for _, n in tensorboard_steps(logs, "rollout/ep_len_mean")]
    rewards = [r for _, r in tensorboard_steps(logs, "rollout/ep_rew_mean")]
    assert lengths and min(lengths) > 100, lengths
    assert all(r >= 0 for r in rewards), rewards


def test_the_binary_wire_carries_a_games_score_and_a_lost_life() -> None:
    """A RAM game's client answers a binary step with SCORED and GOES_ON in its flags and
    the raw score after the terminal observations, as the bridge decodes them."""
    view = make_view("BreakoutNoFrameskip-v4", {"obs_type": "ram"})
    game = GymGame([view], seed=0)
    game.fast = True
    game.reset()
    flags_seen, scores_seen = 0, []
    for _ in range(5_000):
        (frame,) = protocol.encode_binary_actions(np.array([3]), discrete=True)
        reply = game.step_binary(frame[4:])
        _, _, flags, terminal, scores = protocol.decode_binary_step(reply[4:], 1, 128)
        flags_seen |= int(flags[0])
        scores_seen += scores.tolist()
        if scores.size:
            break
    view.close()
    assert flags_seen & protocol.GOES_ON and flags_seen & protocol.SCORED, flags_seen
    assert len(scores_seen) == 1 and scores_seen[0] >= 0 and terminal.shape == (1, 128)


def test_pictures_travel_as_bytes_and_the_run_sees_what_json_would_show(
    port_block: Callable[[int], int],
) -> None:
    """Breakout's frames in lander's binary picture encoding reach the batch as the
    plugin's hex-in-JSON does, byte for byte: observations, rewards, ends, terminal frames,
    lost lives and whole games' scores, over real games on TCP with the same seeds."""
    runs: dict[bool, list[tuple[Any, ...]]] = {}
    for fast_wire in (False, True):
        env = GameVecEnv(
            LaunchConfig(
                command=[sys.executable, "-m", "games.gym", "--env_id=BreakoutNoFrameskip-v4"],
                n_instances=2,
                base_port=port_block(2),
                seed=3,
                game_args={"agents": "2"},
                fast_wire=fast_wire,
            )
        )
        try:
            assert env.binary == fast_wire
            steps: list[tuple[Any, ...]] = [(env.reset(),)]
            rng = np.random.default_rng(0)
            for _ in range(400):
                obs, rewards, dones, infos = env.step(rng.integers(0, 4, 4))
                steps.append((obs, rewards, dones, infos))
        finally:
            env.close()
        runs[fast_wire] = steps
    assert runs[True][0][0].dtype == np.uint8 and runs[True][0][0].shape == (4, 4, 84, 84)
    assert np.array_equal(runs[True][0][0], runs[False][0][0])
    ends = scores = 0
    for binary, json_step in zip(runs[True][1:], runs[False][1:], strict=True):
        obs, rewards, dones, infos = binary
        assert obs.dtype == np.uint8 and np.array_equal(obs, json_step[0])
        assert np.array_equal(rewards, json_step[1]) and np.array_equal(dones, json_step[2])
        for info, expected in zip(infos, json_step[3], strict=True):
            assert info.keys() == expected.keys()
            if "terminal_observation" in info:
                ends += 1
                assert info["terminal_observation"].dtype == np.uint8
                assert np.array_equal(
                    info["terminal_observation"], expected["terminal_observation"]
                )
            assert all(info[key] == expected[key] for key in info if key != "terminal_observation")
            scores += SCORE in info
    assert ends > scores > 0, (ends, scores)  # lives lost, and whole games scored


def test_fire_starts_a_game_that_waits_for_it() -> None:
    """Breakout serves no ball until FIRE: after the reset's FIRE the game is on, so NOOPs
    alone lose the lives one after another."""
    assert atari.needs_fire(gymnasium.make("BreakoutNoFrameskip-v4"))
    view = make_view("BreakoutNoFrameskip-v4", {})
    view.reset(seed=0)
    for _ in range(2_000):
        *_, terminated, truncated, info = view.step(0)
        if terminated or truncated:
            assert info[GAME_OVER] is False  # a life lost on the ball served by FIRE
            return
    pytest.fail("no life lost in 2,000 NOOP steps: the ball was never served")


class _EyeAndSpeed(gymnasium.Env[Any, Any]):
    """A dictionary observation: a 16 x 12 RGB picture and a vector of two."""

    observation_space = spaces.Dict(
        {
            "eye": spaces.Box(0, 255, (12, 16, 3), np.uint8),
            "speed": spaces.Box(-5.0, 5.0, (2,), np.float32),
        }
    )
    action_space = spaces.Discrete(3)

    def _obs(self) -> dict[str, np.ndarray]:
        eye = np.zeros((12, 16, 3), np.uint8)
        eye[self.t % 12, 3, 1] = 200
        return {"eye": eye, "speed": np.array([self.t, -1.5], np.float32)}

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> Any:
        self.t += 1
        return self._obs(), 1.0, self.t >= 3, False, {}


def _on_the_wire(message: dict[str, Any]) -> dict[str, Any]:
    """A message as the other end reads it: framed, encoded, decoded."""
    return protocol.decode_body(protocol.encode_message(message)[4:])


def test_a_dictionary_of_a_picture_and_a_vector_is_camera_and_vector_keys() -> None:
    """Through the gym game's protocol replies and the bridge's own parser: the picture is a
    camera key (``eye_2d``, uint8, channels first), the vector a box key, in the
    environment's order, and the terminal observation of an ended episode decodes too."""
    game = GymGame([GameView(_EyeAndSpeed()), GameView(_EyeAndSpeed())], seed=0)
    info = parse_env_info(_on_the_wire(game.env_info()))
    assert [(e.key, e.is_image) for e in info.observations] == [("eye_2d", True), ("speed", False)]
    space = info.observation_space
    assert isinstance(space, spaces.Dict)
    assert space["eye_2d"] == spaces.Box(0, 255, (3, 12, 16), np.uint8)
    codec = ObservationCodec(info.observations)
    game.reset()
    action = {"type": "action", "action": [{"action": 0}, {"action": 2}]}
    for step in range(1, 4):
        reply = _on_the_wire(game.step(action))
        decoded = codec.decode(reply["obs"], 2, 0)
        if step < 3:
            assert decoded["eye_2d"][0, 1, step, 3] == 200
            np.testing.assert_allclose(decoded["speed"][1], [step, -1.5])
    assert reply["done"] == [True, True]
    terminal = codec.decode_one(reply["info"][0]["terminal_observation"], 0)
    assert terminal["eye_2d"][1, 3, 3] == 200 and terminal["speed"][0] == 3.0


def test_an_atari_run_trains_on_pictures_logs_whole_games_and_exports_an_image_input(
    tmp_path: Path,
) -> None:
    """Breakout through real game processes with no flag: the rewards it logs are whole
    games' raw scores (a random Breakout game scores a few points over its five lives, not
    the one or two of a life), it prints no success rate, and its ONNX file takes the
    stacked frames as one camera input in the plugin's layout."""
    trained = lander(
        tmp_path, "train", "brk", "--game", "gym:BreakoutNoFrameskip-v4", "--timesteps", "6144",
        "--n-parallel", "2", "--eval-episodes", "2", "--no-git", timeout=600,
    )  # fmt: skip
    output = trained.stdout + trained.stderr
    assert trained.returncode == 0, output
    assert "Traceback" not in output and "success_rate" not in output
    rewards = [r for _, r in tensorboard_steps(tmp_path / "logs" / "brk", "rollout/ep_rew_mean")]
    assert rewards, output
    lengths = [n for _, n in tensorboard_steps(tmp_path / "logs" / "brk", "rollout/ep_len_mean")]
    # Whole games: five lives of a served ball last well over a hundred steps.
    assert min(lengths) > 100, lengths
    assert all(r >= 0 and r == r for r in rewards), rewards

    import onnx

    graph = onnx.load(str(tmp_path / "bots" / "brk.onnx")).graph
    dims = {
        i.name: [d.dim_value or d.dim_param for d in i.type.tensor_type.shape.dim]
        for i in graph.input
    }
    assert dims[IMAGE_KEY][1:] == [4 * 84 * 84], dims
    # The plugin feeds the camera's bytes as floats, in the order sent: the bot's choice.
    view = make_view("BreakoutNoFrameskip-v4", {})
    obs = view.reset(seed=3)[0]
    for _ in range(30):
        obs = view.step(1)[0]
    bot = BotRunner.from_file(tmp_path / "bots" / "brk.json")
    plugin = PluginInference(
        tmp_path / "bots" / "brk.onnx", {"action": {"size": 4, "action_type": "discrete"}}
    )
    fed = [float(byte) for byte in obs.tobytes()]
    assert plugin.act({IMAGE_KEY: fed})["action"] == int(bot.act(obs[None])[0])
    evaluated = lander(tmp_path, "eval", "brk", "--episodes", "2")
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    assert "mean_reward=" in evaluated.stdout and "success_rate" not in evaluated.stdout


@pytest.mark.parametrize("encoder", CAMERA_ENCODERS)
def test_every_camera_encoder_exports_with_parity_once_trained(
    tmp_path: Path, encoder: str
) -> None:
    """CarRacing's pictures (continuous actions, so parity is a number, not a vote) through
    a few updates of each encoder, the centroids' whitening refitted after each rollout:
    the bot file and the ONNX file give the model's actions within the vector games'
    tolerance, not a camera's looser one."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    from training.bots.export import export_policy
    from training.bots.parity import CONTINUOUS_TOLERANCE
    from training.ppo.camera_policy import camera_policy_kwargs
    from training.ppo.lean_ppo import LeanPPO

    env = DummyVecEnv([lambda: make_view("CarRacing-v3", {}) for _ in range(2)])
    model = LeanPPO(
        "CnnPolicy", env, n_steps=64, batch_size=64, n_epochs=2, learning_rate=3e-3, seed=0,
        device="cpu", policy_kwargs=camera_policy_kwargs(encoder, 1, 256),
    )  # fmt: skip
    model.learn(384)
    env.close()
    result = export_policy(model, None, "car", tmp_path / "car.json", tmp_path / "car.onnx")
    for parity in (result.bot_parity, result.onnx_parity):
        assert parity.max_abs_diff <= CONTINUOUS_TOLERANCE, parity


@pytest.mark.parametrize("encoder", ["small", "nature"])
def test_a_cnn_encoders_width_is_saved_with_the_policy_and_older_policies_load_at_theirs(
    tmp_path: Path, encoder: str
) -> None:
    """``--cnn-features`` sets how wide a new policy's CNN is, and the saved policy keeps
    it (it loads at its own width whatever the run's setting); a policy saved before the
    width was an argument (its saved arguments lack it) loads at the width it was built with."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    from training.config import TrainConfig
    from training.ppo import camera_policy
    from training.session.model_builder import make_ppo_model

    env = DummyVecEnv([lambda: make_view("BreakoutNoFrameskip-v4", {})])
    config = TrainConfig(camera_encoder=encoder, cnn_features=96, n_steps=16, device="cpu")
    model = make_ppo_model(config, env, None, None)
    assert model.policy.features_extractor.features_dim == 96
    model.save(tmp_path / "new.zip")
    older = dict(model.policy_kwargs)
    older["features_extractor_kwargs"] = {
        k: v for k, v in older["features_extractor_kwargs"].items() if k != "features"
    }
    PPO("CnnPolicy", env, n_steps=16, batch_size=16, device="cpu",
        policy_kwargs=older).save(tmp_path / "old.zip")  # fmt: skip
    assert PPO.load(tmp_path / "new.zip", device="cpu").policy.features_dim == 96
    loaded = PPO.load(tmp_path / "old.zip", device="cpu")
    assert loaded.policy.features_dim == camera_policy.SAVED_FEATURES
    env.close()


@pytest.mark.parametrize("encoder", ["small", "narrow", "nature"])
def test_a_cnn_reads_bytes_as_sb3_reads_scaled_frames_with_the_same_numbers(
    encoder: str,
) -> None:
    """A new CNN takes its frames as bytes, the 1/255 in its first convolution's weights:
    its features and their gradients are those of the same weights over SB3's scaled
    frames (in float64), and its policy leaves images unscaled."""
    import torch

    from training.ppo.camera_policy import ByteConv2d, CameraExtractor, camera_policy_kwargs

    torch.manual_seed(0)
    space = spaces.Box(0, 255, (4, 84, 84), np.uint8)
    scaled = CameraExtractor(space, encoder, frames=4, features=64).double()
    raw = CameraExtractor(space, encoder, frames=4, features=64, byte_frames=True).double()
    raw.load_state_dict(scaled.state_dict())
    assert [type(m) for m in raw.modules()].count(ByteConv2d) == 1
    assert not any(isinstance(m, ByteConv2d) for m in scaled.modules())
    frames = torch.randint(0, 256, (8, 4, 84, 84)).double()
    features, scaled_features = raw(frames), scaled(frames / 255.0)
    torch.testing.assert_close(features, scaled_features)
    grads = torch.autograd.grad(features.square().sum(), list(raw.parameters()))
    scaled_grads = torch.autograd.grad(scaled_features.square().sum(), list(scaled.parameters()))
    for grad, scaled_grad in zip(grads, scaled_grads, strict=True):
        torch.testing.assert_close(grad, scaled_grad)
    kwargs = camera_policy_kwargs(encoder, 4, 64)
    assert kwargs["normalize_images"] is False
    assert kwargs["features_extractor_kwargs"]["byte_frames"] is True
    assert camera_policy_kwargs("centroids", 1, 64)["normalize_images"] is True
    with pytest.raises(ValueError, match="only a CNN"):
        CameraExtractor(space, "centroids", byte_frames=True)


def test_a_cnn_policy_saved_before_byte_frames_still_scales_its_frames_and_exports(
    tmp_path: Path,
) -> None:
    """A CNN policy saved when SB3 scaled its frames (no ``byte_frames`` among its saved
    arguments) loads and plays as it was built, and its bot file scales the bytes by 255
    where a new policy's leaves them: both export with parity."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    from training.bots.export import export_policy
    from training.config import TrainConfig
    from training.session.model_builder import make_ppo_model

    env = DummyVecEnv([lambda: make_view("BreakoutNoFrameskip-v4", {})])
    config = TrainConfig(camera_encoder="small", n_steps=32, device="cpu")
    model = make_ppo_model(config, env, None, None)
    model.learn(64)
    older = dict(model.policy_kwargs)
    older.pop("normalize_images")
    older["features_extractor_kwargs"] = {
        k: v for k, v in older["features_extractor_kwargs"].items() if k != "byte_frames"
    }
    PPO("CnnPolicy", env, n_steps=32, batch_size=32, device="cpu", seed=0,
        policy_kwargs=older).learn(64).save(tmp_path / "old.zip")  # fmt: skip
    env.close()
    loaded = PPO.load(tmp_path / "old.zip", device="cpu")
    assert loaded.policy.normalize_images and not loaded.policy.features_extractor.byte_frames
    for name, policy in (("new", model), ("old", loaded)):
        result = export_policy(
            policy, None, name, tmp_path / f"{name}.json", tmp_path / f"{name}.onnx"
        )
        for parity in (result.bot_parity, result.onnx_parity):
            assert parity.passed(discrete=True), (name, parity)
        spec = json.loads((tmp_path / f"{name}.json").read_text())
        scale = set(spec["observation"]["normalization"]["scale"])
        assert scale == ({255.0} if name == "old" else {1.0}), (name, scale)


@pytest.mark.parametrize("encoder", ["small", "narrow", "nature"])
def test_a_cnn_sees_its_frames_channels_last_with_the_same_numbers(encoder: str) -> None:
    """The extractor hands a CNN its frames channels last (torch's CPU convolutions run
    faster so): its features and their gradients are those of the frames' own layout (in
    float64, where a float32 rounding cannot flip a ReLU one way in one layout only)."""
    import torch

    from training.ppo.camera_policy import CameraExtractor

    torch.manual_seed(0)
    space = spaces.Box(0, 255, (4, 84, 84), np.uint8)
    extractor = CameraExtractor(space, encoder, frames=4, features=64).double()
    frames = torch.rand(8, 4, 84, 84, dtype=torch.float64)
    parameters = list(extractor.parameters())
    laid_out = extractor(frames)
    own = extractor.encoders[0](frames)
    assert extractor.channels_last
    torch.testing.assert_close(laid_out, own)
    grads = torch.autograd.grad(laid_out.square().sum(), parameters)
    own_grads = torch.autograd.grad(own.square().sum(), parameters)
    for grad, own_grad in zip(grads, own_grads, strict=True):
        torch.testing.assert_close(grad, own_grad)


@pytest.mark.parametrize("encoder", ["small", "centroids"])
def test_a_cnns_rollout_hands_the_update_its_frames_channels_last(encoder: str) -> None:
    """A CNN's rollout buffer permutes each minibatch's frames while they are bytes (the
    layout the CNN runs fastest in), the same frames; the centroids' keep theirs."""
    import torch
    from stable_baselines3.common.vec_env import DummyVecEnv

    from training.config import TrainConfig
    from training.session.model_builder import make_ppo_model

    env = DummyVecEnv([lambda: make_view("BreakoutNoFrameskip-v4", {})])
    config = TrainConfig(camera_encoder=encoder, n_steps=16, device="cpu")
    model = make_ppo_model(config, env, None, None)
    assert model.cnn_rollouts() == (encoder == "small")  # the lean loop plays a CNN's
    model.learn(16)
    env.close()
    buffer = model.rollout_buffer
    frames = buffer._get_samples(np.arange(8)).observations
    assert frames.dtype == torch.uint8
    assert frames.is_contiguous(memory_format=torch.channels_last) == (encoder == "small")
    assert torch.equal(frames, torch.as_tensor(buffer.observations[:8]))


@pytest.mark.parametrize("channels_last", [True, False])
@pytest.mark.parametrize("keyed", [False, True])
def test_a_camera_buffer_hands_each_minibatch_its_own_frames(
    channels_last: bool, keyed: bool
) -> None:
    """Each minibatch's frames are the rows its actions came with, in SB3's env-major order,
    whether the buffer lays its frames out channels last for a CNN or not (a frame's row
    told by its action, the row's number)."""
    import torch
    from stable_baselines3.common.buffers import RolloutBuffer

    from training.ppo.camera_update import CameraDictRolloutBuffer, CameraRolloutBuffer

    steps, envs = 6, 3
    image = spaces.Box(0, 255, (4, 84, 84), np.uint8)
    space = spaces.Dict({IMAGE_KEY: image, "v": spaces.Box(-1, 1, (2,))}) if keyed else image
    action_space = spaces.Box(-1e4, 1e4, (1,))
    kind = CameraDictRolloutBuffer if keyed else CameraRolloutBuffer
    buffer = kind(steps, space, action_space, n_envs=envs)
    buffer.channels_last = channels_last
    frames = np.random.default_rng(0).integers(0, 256, (steps, envs, 4, 84, 84), np.uint8)
    rows = np.arange(steps * envs, dtype=np.float32).reshape(envs, steps).T  # env-major
    for step in range(steps):
        obs = {IMAGE_KEY: frames[step], "v": np.zeros((envs, 2))} if keyed else frames[step]
        zeros = torch.zeros(envs)
        buffer.add(obs, rows[step][:, None], np.zeros(envs), np.zeros(envs), zeros, zeros)
    buffer.compute_returns_and_advantage(torch.zeros(envs), np.zeros(envs))
    flat = RolloutBuffer.swap_and_flatten(frames)
    seen = 0
    for batch in buffer.get(4):
        got = batch.observations[IMAGE_KEY] if keyed else batch.observations
        assert got.dtype == torch.uint8
        assert got.is_contiguous(memory_format=torch.channels_last) == channels_last
        expected = flat[batch.actions[:, 0].numpy().astype(int)]
        assert np.array_equal(got.numpy(), expected)
        seen += len(got)
    assert seen == steps * envs


@pytest.mark.parametrize("encoder", ["small", "narrow", "nature"])
def test_a_cnns_size_is_reckoned_from_its_declared_layers(encoder: str) -> None:
    """The disk estimate's weights and flat width of each CNN, from the layers declared
    without torch, are those of the encoder the policy builds (SB3's for ``nature``)."""
    import torch

    from training.config import CNN_LAYERS
    from training.ppo.camera_policy import camera_encoder
    from training.runs.disk_space import PICTURE_SHAPE, convolution_sizes

    space = spaces.Box(0, 255, PICTURE_SHAPE, np.uint8)
    built = camera_encoder(space, encoder, whiten=False, features=64, byte_frames=True)
    convolutions = [m for m in built.modules() if isinstance(m, torch.nn.Conv2d)]
    dense = [m for m in built.modules() if isinstance(m, torch.nn.Linear)][-1]
    weights = sum(p.numel() for conv in convolutions for p in conv.parameters())
    assert convolution_sizes(CNN_LAYERS[encoder]) == (weights, dense.in_features)


@pytest.mark.parametrize(
    ("encoder", "features", "width"), [("small", 256, 64), ("narrow", 512, 0), ("nature", 512, 0)]
)
def test_the_disk_estimate_of_a_camera_checkpoint_is_near_a_saved_ones_size(
    tmp_path: Path, encoder: str, features: int, width: int
) -> None:
    """What start warns of before a Breakout run writes anything is within a quarter of the
    size of a checkpoint the run saves (after an update: Adam's moments with the weights),
    at the CNN's width the run asked for."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    from training.config import TrainConfig
    from training.runs.disk_space import estimated_checkpoint_bytes
    from training.session.model_builder import make_ppo_model

    env = DummyVecEnv([lambda: make_view("BreakoutNoFrameskip-v4", {})])
    config = TrainConfig(
        camera_encoder=encoder, cnn_features=features, net_width=width, n_steps=16, device="cpu"
    )
    model = make_ppo_model(config, env, None, None)
    model.learn(16)  # one update: the optimizer's moments are in the checkpoint too
    model.save(tmp_path / "run.zip")
    env.close()
    saved = (tmp_path / "run.zip").stat().st_size
    estimate = estimated_checkpoint_bytes(config, 0, 4, pictures=True)
    assert 0.75 * saved <= estimate <= 1.25 * saved, (estimate, saved)


def test_the_monitor_logs_whole_games_at_their_raw_score() -> None:
    """Over a real preprocessed SpaceInvaders in-process: the episodes ``GameMonitor``
    records (what every printed reward reads) are whole games at the emulator's total, while
    the learner's episodes end at every life lost."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    from training.envs.game_monitor import GameMonitor

    raws: list[_RawRewards] = []

    def build() -> GameView:
        raws.append(_RawRewards(gymnasium.make("SpaceInvadersNoFrameskip-v4")))
        return GameView(atari.preprocess(raws[-1]))

    env = GameMonitor(DummyVecEnv([build]))
    env.seed(2)
    env.reset()
    rng = np.random.default_rng(2)
    learner_ends, games = 0, []
    for _ in range(20_000):
        _, _, dones, infos = env.step(rng.integers(6, size=1))
        if dones[0]:
            learner_ends += 1
            if "episode" in infos[0]:
                games.append(infos[0]["episode"])
                break
    env.close()
    assert len(games) == 1 and learner_ends >= 3, (games, learner_ends)
    assert games[0]["r"] == raws[0].total and games[0]["l"] > 100
