"""Frame stacking of camera keys (``--frame-stack N``): the trainer's stack over real game
processes, the bot file's ``frames``, and every player keeping the frames as training
did, down to the ONNX file fed as a game must feed it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, VecMonitor
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

from game_bridge.bot_runner import BotFormatError, BotRunner
from game_bridge.frame_stack import FrameStack, StackedPolicy, start_episodes
from game_bridge.sprites import hex_frames
from games.lander.camera import CAMERA_KEY, FRAME_SHAPE, camera_frames
from games.lander.physics import LanderPhysics
from tests.conftest import lander, lander_games
from tests.plugin_decode import PluginInference
from training.config import ConfigError, TrainConfig, check_config
from training.envs.environments import CameraFrameStack
from training.ppo.inference import load_for_inference


def _frames(*values: int) -> np.ndarray:
    """One 1 x 1 x 2 frame per agent, filled with its value."""
    return np.array([np.full((1, 1, 2), v, dtype=np.uint8) for v in values])


def test_a_stack_holds_the_last_frames_oldest_first_from_copies_of_the_first() -> None:
    stack = FrameStack(3)
    first = stack(_frames(1, 2))
    assert first.shape == (2, 3, 1, 2)
    assert first[:, :, 0, 0].tolist() == [[1, 1, 1], [2, 2, 2]]
    assert stack(_frames(3, 4))[:, :, 0, 0].tolist() == [[1, 1, 3], [2, 2, 4]]
    terminal = stack.with_last(np.full((1, 1, 2), 9, dtype=np.uint8), 1)
    assert terminal[:, 0, 0].tolist() == [2, 4, 9], "after the episode's frames"
    stack.start(np.array([False, True]))  # agent 1's next frame starts an episode
    assert stack(_frames(5, 6))[:, :, 0, 0].tolist() == [[1, 3, 5], [6, 6, 6]]
    assert stack(_frames(7, 8))[:, :, 0, 0].tolist() == [[3, 5, 7], [6, 6, 8]]
    stack.start()  # a new evaluation: everything forgotten, even the number of agents
    assert stack(_frames(1, 2, 3))[:, :, 0, 0].tolist() == [[1, 1, 1], [2, 2, 2], [3, 3, 3]]


def test_a_dict_observation_stacks_its_camera_keys_only() -> None:
    stack = FrameStack(2, [CAMERA_KEY])
    vector = np.array([[0.5, 0.25]])
    stack({CAMERA_KEY: _frames(1), "obs": vector})
    stacked = stack({CAMERA_KEY: _frames(2), "obs": vector})
    assert stacked[CAMERA_KEY][0, :, 0, 0].tolist() == [1, 2]
    assert stacked["obs"] is vector
    seen: list[Any] = []
    policy = StackedPolicy(lambda obs: seen.append(obs) or np.zeros(1), FrameStack(2))
    policy(_frames(4))
    policy(_frames(5))
    start_episodes(policy, np.array([True]))
    policy(_frames(6))
    assert [obs[0, :, 0, 0].tolist() for obs in seen] == [[4, 4], [4, 5], [6, 6]]
    start_episodes(lambda obs: obs)  # a policy that keeps nothing ignores it


class _Raw(VecEnvWrapper):
    """Keeps the game's own observations, before the stack sees them."""

    def __init__(self, venv: VecEnv) -> None:
        super().__init__(venv)
        self.obs: np.ndarray = np.zeros(0)
        self.infos: list[dict[str, Any]] = []

    def reset(self) -> VecEnvObs:
        self.obs = np.array(self.venv.reset())
        return self.obs

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        self.obs = np.array(obs)
        self.infos = [{"terminal_observation": i.get("terminal_observation")} for i in infos]
        return obs, rewards, dones, infos


def test_the_trainers_stack_over_real_games_restarts_at_each_episode() -> None:
    """Over real TCP, three agents whose episodes end at their own times: each stacked
    observation is the previous frame and this one, a new episode starts from two copies
    of its first frame, and a terminal observation follows its own episode's frame."""
    raw = _Raw(VecMonitor(lander_games(3, seed=3, observation="pixels")))
    env = CameraFrameStack(raw, 2)
    try:
        channels = FRAME_SHAPE[0]
        assert env.observation_space.shape == (2 * channels, *FRAME_SHAPE[1:])
        obs = env.reset()
        np.testing.assert_array_equal(obs, np.concatenate([raw.obs, raw.obs], axis=1))
        rng = np.random.default_rng(0)
        ends = 0
        for _ in range(600):
            previous = raw.obs
            obs, _, dones, infos = env.step(rng.uniform(-1, 1, (3, 2)).astype(np.float32))
            for agent in range(3):
                before = raw.obs[agent] if dones[agent] else previous[agent]
                np.testing.assert_array_equal(obs[agent], np.concatenate([before, raw.obs[agent]]))
                if dones[agent]:
                    ends += 1
                    terminal = raw.infos[agent]["terminal_observation"]
                    np.testing.assert_array_equal(
                        infos[agent]["terminal_observation"],
                        np.concatenate([previous[agent], terminal]),
                    )
            if ends >= 4:
                break
        assert ends >= 4, "episodes ended"
    finally:
        env.close()


def test_frame_stacking_needs_a_camera(tmp_path: Path) -> None:
    env = VecMonitor(lander_games(1))
    try:
        with pytest.raises(ConfigError, match="has no camera key"):
            CameraFrameStack(env, 2)
    finally:
        env.close()
    refused = lander(
        tmp_path, "train", "flat", "--frame-stack", "2", "--in-process", "--timesteps", "64",
        "--no-git",
    )  # fmt: skip
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "--frame-stack stacks camera frames" in refused.stderr
    assert "Traceback" not in refused.stderr
    with pytest.raises(ConfigError, match="other sides' snapshots play single frames"):
        check_config(TrainConfig(self_play=True, frame_stack=2))


def test_a_bot_file_says_how_many_frames_each_camera_key_stacks() -> None:
    spec = _stacked_bot(frames=2)
    assert BotRunner(spec).frames == 2
    with pytest.raises(BotFormatError, match="4 frames do not split its 6 channels"):
        BotRunner(_stacked_bot(frames=4))
    with pytest.raises(BotFormatError, match="0 frames do not split"):
        BotRunner(_stacked_bot(frames=0))


def _stacked_bot(frames: int) -> dict[str, Any]:
    """A bot of one camera key of 6 x 2 x 2 (two frames of 3 channels, when ``frames`` is 2)."""
    return {
        "format": "lander-bot",
        "version": 1,
        "observation": {
            "size": 24,
            "keys": [
                {
                    "key": CAMERA_KEY, "size": 24, "shape": [6, 2, 2], "frames": frames,
                    "encoder": [{"type": "flatten"}],
                }
            ],
        },
        "action": {"type": "continuous", "size": 1},
        "layers": [{"weights": [[0.0] * 24], "biases": [0.0], "activation": "linear"}],
    }  # fmt: skip


def test_a_stacked_camera_run_exports_a_bot_that_keeps_its_frames(tmp_path: Path) -> None:
    """``--frame-stack 2`` through real games: the bot file records two frames; the numpy
    bot played on single frames, and the ONNX file fed the two frames' bytes oldest first
    (what a game must feed), give the model's actions on the stack; eval, play and a
    resume keep the stack (and refuses another)."""
    trained = lander(
        tmp_path, "train", "motion", "--game-arg", "observation=pixels", "--frame-stack", "2",
        "--n-parallel", "2", "--timesteps", "4096", "--no-git",
    )  # fmt: skip
    assert trained.returncode == 0, trained.stdout + trained.stderr
    spec = json.loads((tmp_path / "bots" / "motion.json").read_text())
    key = spec["observation"]["keys"][0]
    channels = FRAME_SHAPE[0]
    assert (key["key"], key["frames"], key["shape"]) == (
        CAMERA_KEY, 2, [2 * channels, *FRAME_SHAPE[1:]],
    )  # fmt: skip

    model, normalizer = load_for_inference(tmp_path / "checkpoints" / "motion" / "final.zip")
    bot = BotRunner(spec)
    player = bot.policy()
    physics = LanderPhysics(4, 21)
    rng = np.random.default_rng(4)
    previous = camera_frames(physics.pos, physics.vel, physics.target)
    start_episodes(player)
    player(previous)  # the first step: two copies of the first frame
    plugin = PluginInference(
        tmp_path / "bots" / "motion.onnx", {"move": {"size": 2, "action_type": "continuous"}}
    )
    for _ in range(5):
        physics.step(rng.uniform(-1, 1, (4, 2)))
        frames = camera_frames(physics.pos, physics.vel, physics.target)
        stacked = np.concatenate([previous, frames], axis=1)
        wanted, _ = model.predict(stacked, deterministic=True)
        np.testing.assert_allclose(player(frames), wanted, atol=1e-4)
        for agent, (old, new) in enumerate(
            zip(hex_frames(previous), hex_frames(frames), strict=True)
        ):
            fed = [float(byte) for byte in bytes.fromhex(old) + bytes.fromhex(new)]
            np.testing.assert_allclose(
                plugin.act({CAMERA_KEY: fed})["move"], wanted[agent], atol=1e-4
            )
        previous = frames
    assert normalizer is None

    evaluated = lander(tmp_path, "eval", "motion", "--episodes", "4")
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    assert "normalized_score=" in evaluated.stdout
    played = lander(tmp_path, "play", "motion", "--seconds", "25", "--agents", "2")
    assert played.returncode == 0 and "episode(s): mean_reward=" in played.stdout, played.stdout
    resumed = lander(
        tmp_path, "train", "motion", "--resume", "motion", "--timesteps", "1024", "--no-git"
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    record = json.loads((tmp_path / "checkpoints" / "motion" / "run.json").read_text())
    assert record["config"]["frame_stack"] == 2 and record["total_timesteps"] > 4096
    # A resume cannot reshape the network: a shape flag that differs is refused, not ignored.
    for flag, value, kept in (("--frame-stack", "3", "2"), ("--cnn-features", "64", "256")):
        reshaped = lander(
            tmp_path, "train", "motion", "--resume", "motion", flag, value, "--no-git",
            "--timesteps", "64",
        )  # fmt: skip
        said = reshaped.stdout + reshaped.stderr
        assert reshaped.returncode != 0 and "Traceback" not in said, said
        assert f"{flag} {value}: run motion's policy has {flag} {kept}" in said, said
    again = json.loads((tmp_path / "checkpoints" / "motion" / "run.json").read_text())
    assert again["total_timesteps"] == record["total_timesteps"]
