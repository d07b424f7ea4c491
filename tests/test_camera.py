"""The lander seen through its camera (``--game-arg observation=pixels``): frames that
show what a pilot needs, sent in the Godot RL Agents plugin's camera encoding by real
game processes, trained on through the bridge and scored in-process on the same
frames."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from game_bridge.launcher import LaunchConfig
from game_bridge.vec_env import GameVecEnv
from games import launch_settings
from games.lander.camera import CAMERA_KEY, FRAME_SHAPE, TRAIL_S, camera_frames
from games.lander.physics import HEIGHT, LanderPhysics
from tests.conftest import find_free_port_block, lander
from training.evaluation import evaluate_in_process, game_settings, model_policy
from training.trainer import load_for_inference


def _centre(channel: np.ndarray) -> tuple[float, float]:
    """Where a drawn point lies, in arena units (x right, y up), from its pixel weights."""
    rows, cols = np.indices(channel.shape)
    weight = channel.astype(np.float64)
    x = (cols * weight).sum() / weight.sum() + 0.5
    y = (rows * weight).sum() / weight.sum() + 0.5
    scale = FRAME_SHAPE[2] / 20.0
    return x / scale, HEIGHT - y / scale


def test_a_frame_shows_the_lander_its_trail_and_the_target() -> None:
    pos = np.array([[7.3, 4.1], [15.55, 11.8]])
    vel = np.array([[2.0, -1.0], [0.0, 3.0]])
    target = np.array([[12.0, 9.5], [3.2, 2.6]])
    frames = camera_frames(pos, vel, target)
    assert frames.shape == (2, *FRAME_SHAPE) and frames.dtype == np.uint8
    for agent in range(2):
        expected = (pos[agent], pos[agent] - vel[agent] * TRAIL_S, target[agent])
        for channel, point in enumerate(expected):
            drawn = frames[agent, channel]
            assert 250 <= int(drawn.sum()) <= 260, "one point's weight, in whole"
            np.testing.assert_allclose(_centre(drawn), point, atol=0.05)
    # A point outside the arena is not drawn (its part inside the frame only).
    assert camera_frames(np.array([[-5.0, -5.0]]), np.zeros((1, 2)), target[:1])[0, 0].sum() == 0


def test_the_pixels_game_sends_the_plugins_camera_encoding(tmp_path: Path) -> None:
    """Over real TCP: a ``camera_2d`` box of uint8 in the declared [3, 36, 48] layout, the
    frames of the game's own physics (the same seed gives the same first frames), and a
    finished agent's terminal observation a frame too."""
    env = GameVecEnv(
        LaunchConfig(
            n_instances=1,
            base_port=find_free_port_block(1),
            seed=5,
            game_args={"agents": "3", "observation": "pixels"},
            **launch_settings("lander"),
        )
    )
    try:
        assert env.observation_space.shape == FRAME_SHAPE
        assert env.observation_space.dtype == np.uint8
        assert env.env_info.observations[0].key == CAMERA_KEY
        assert env.env_info.observations[0].is_image
        obs = env.reset()
        physics = LanderPhysics(3, 5)
        physics.reset_agents(np.ones(3, dtype=bool))  # as the game's reset does
        np.testing.assert_array_equal(obs, camera_frames(physics.pos, physics.vel, physics.target))
        ended = []
        for _ in range(400):  # 20 game seconds: every episode ends by its time limit at most
            obs, _, dones, infos = env.step(np.zeros((3, 2), dtype=np.float32))
            ended += [infos[i]["terminal_observation"] for i in np.flatnonzero(dones)]
            if ended:
                break
        assert ended and ended[0].shape == FRAME_SHAPE and ended[0].dtype == np.uint8
    finally:
        env.close()


def test_a_camera_run_trains_through_real_games_and_scores_on_frames(tmp_path: Path) -> None:
    """A short run of the camera mode through real game processes finishes with a model
    that reads frames, and the in-process scorer plays it on the same frames."""
    trained = lander(
        tmp_path, "train", "eyes", "--game-arg", "observation=pixels", "--n-parallel", "2",
        "--timesteps", "2048", "--no-git", timeout=300,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert "Traceback" not in trained.stdout + trained.stderr
    record = json.loads((tmp_path / "checkpoints" / "eyes" / "run.json").read_text())
    assert record["status"] == "finished"
    assert record["config"]["game_args"] == {"observation": "pixels"}
    model, normalizer = load_for_inference(tmp_path / "checkpoints" / "eyes" / "final.zip")
    assert model.observation_space.shape == FRAME_SHAPE
    settings = game_settings("lander", {"observation": "pixels"})
    result = evaluate_in_process(model_policy(model, normalizer), 8, settings=settings)
    assert result.normalized_score is not None and np.isfinite(result.mean_reward)
    assert -0.5 < result.normalized_score < 1.5
