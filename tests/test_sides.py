"""Games whose sides declare spaces of their own (the duel's chase: a hunter with
continuous thrust, a prey with five discrete moves): the padded batch the bridge moves,
a model per side with turns, each side's checkpoints, snapshots, ratings and bot, over
real game processes and the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cli.results.git_sync import run_paths_to_stage
from game_bridge.bot_runner import BotRunner
from game_bridge.codecs import PaddedCodec
from game_bridge.errors import ProtocolViolation
from game_bridge.launcher import LaunchConfig
from game_bridge.spaces import PADDED_KEY, parse_env_info
from game_bridge.vec_env import GameVecEnv
from games import launch_settings
from games.duel.chase import HUNTER_OBS, PREY_OBS, ChaseWorld
from games.duel.client import ChaseGame
from tests.conftest import find_free_port_block, lander
from training.runs.run_paths import RunPaths

CHASE = ["--game", "duel", "--game-arg", "mode=chase"]
SMALL_CHASE = [
    *CHASE, "--n-parallel", "2", "--agents-per-instance", "4", "--n-steps", "128",
    "--batch-size", "256", "--checkpoint-every", "1024", "--eval-episodes", "8",
]  # fmt: skip


def test_sides_with_their_own_spaces_move_as_one_padded_batch() -> None:
    info = parse_env_info(ChaseGame({"agents": "4"}).env_info())
    hunter, prey = info.sides
    assert (hunter.name, prey.name) == ("hunter", "prey") and hunter.agents == (0, 2)
    assert hunter.observation_size == HUNTER_OBS and prey.observation_size == PREY_OBS
    assert info.observation_space.shape == (PREY_OBS,) and info.binary_encoding is None
    assert info.side("prey").layout()["actions"] == [
        {"key": "move", "size": 5, "action_type": "discrete"}
    ]
    codec = PaddedCodec(info)
    rows = [{"obs": [0.1] * HUNTER_OBS}, {"obs": [0.2] * PREY_OBS}] * 2
    batch = codec.decode(rows, 4, 0)[PADDED_KEY]
    assert batch.shape == (4, PREY_OBS) and np.all(batch[0, HUNTER_OBS:] == 0.0)
    assert np.allclose(batch[1], 0.2) and np.allclose(batch[2, :HUNTER_OBS], 0.1)
    assert codec.decode_one({"obs": [0.3] * PREY_OBS}, 0, agent=3)[PADDED_KEY][-1] == pytest.approx(
        0.3
    )
    actions = np.array([[0.5, -0.5], [3.0, 0.0], [1.0, 1.0], [1.2, 0.0]], dtype=np.float32)
    encoded = codec.encode(actions)
    assert list(encoded[0]) == ["thrust"] and np.allclose(encoded[0]["thrust"], [0.5, -0.5])
    assert encoded[1] == {"move": 3}
    assert encoded[3] == {"move": 1}, "a discrete side's choice is the first column, rounded"


def test_a_side_whose_agents_disagree_or_read_images_is_refused() -> None:
    message = ChaseGame({"agents": "4"}).env_info()
    message["observation_space"][3] = {"obs": {"size": [4], "space": "box"}}
    with pytest.raises(ProtocolViolation, match="agents of side 'prey' declare different spaces"):
        parse_env_info(message)
    message = ChaseGame({"agents": "2"}).env_info()
    message["observation_space"][1] = {"camera_2d": {"size": [8, 8, 3], "space": "box"}}
    with pytest.raises(ProtocolViolation, match="one vector observation key each"):
        parse_env_info(message)


def test_the_chase_is_zero_sum_and_its_rules_decide_rounds() -> None:
    world = ChaseWorld(4, seed=2)
    rng = np.random.default_rng(0)
    outcomes = set()
    for _ in range(300):
        result = world.step(rng.uniform(-1, 1, (4, 2)), rng.integers(0, 5, 4))
        outcomes |= set(result.outcome[result.ended].tolist())
        world.reset_matches(result.ended)
    assert outcomes <= {-1, 0, 1} and 1 in outcomes
    world.reset_matches(np.ones(4, dtype=bool))
    world.physics.pos[1] = world.physics.pos[0] + [0.2, 0.0]  # the prey next to its hunter
    world.physics.vel[0:2] = 0.0
    caught = world.step(np.zeros((4, 2)), np.zeros(4, dtype=np.int64))
    assert caught.ended[0] and caught.outcome[0] == 1 and caught.hunter_reward[0] > 5


def test_a_game_of_sides_with_their_own_spaces_needs_self_play(tmp_path: Path) -> None:
    refused = lander(tmp_path, "train", "plain", "--timesteps", "512", "--no-git",
                     "--port", str(find_free_port_block(2)), *SMALL_CHASE, timeout=120)  # fmt: skip
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "declare spaces of their own: train them with --self-play" in refused.stderr
    assert not (tmp_path / "logs" / "plain").exists()


def _model_steps(path: Path) -> int:
    import zipfile

    with zipfile.ZipFile(path) as archive:
        return int(json.loads(archive.read("data"))["num_timesteps"])


def test_each_side_learns_in_turns_with_its_own_checkpoints_ratings_and_bot(
    tmp_path: Path,
) -> None:
    port = str(find_free_port_block(2))
    flags = ["--self-play", "--team-change", "512", "--snapshot-every", "512",
             "--swap-every", "256", "--no-git", "--port", port, *SMALL_CHASE]  # fmt: skip
    trained = lander(tmp_path, "train", "hunt", "--timesteps", "2048", *flags, timeout=400)
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert "this run's model plays hunter, prey has its own (checkpoints/hunt/sides/prey)" in (
        trained.stdout
    )
    paths = RunPaths(tmp_path, "hunt")
    prey_folder = paths.side_checkpoints("prey")
    assert _model_steps(paths.final) == 2048
    assert _model_steps(prey_folder / "final.zip") == 2048, "the prey learned as many steps"
    assert sorted(p.name for p in (prey_folder / "snapshots").glob("snap_*.pt"))[0] == (
        "snap_000000000000.pt"
    )
    record = json.loads(paths.run_json.read_text())
    state = record["extra"]["self_play"]
    assert state["side"] == "hunter" and set(state["sides"]) == {"prey"}
    ratings = state["ratings"]
    assert {"learner", "learner:prey", "prey:snap_000000000000"} <= set(ratings)
    assert ratings["learner"] != 1200.0 and ratings["learner:prey"] != 1200.0
    assert record["extra"]["game_layout"]["actions"][0]["key"] == "thrust"
    assert record["extra"]["side_layouts"]["prey"]["actions"][0]["key"] == "move"
    assert (tmp_path / "logs" / "hunt" / "sides" / "prey").is_dir()

    hunter_bot = json.loads(paths.bot_json.read_text())
    prey_bot = BotRunner.from_file(paths.side_bot_json("prey"))
    assert hunter_bot["side"] == "hunter" and prey_bot.spec["side"] == "prey"
    assert prey_bot.spec["rating"]["elo"] == ratings["learner:prey"]
    moves = prey_bot.act(np.zeros((3, PREY_OBS), dtype=np.float32))
    assert moves.shape == (3,) and set(moves.tolist()) <= set(range(5))
    assert paths.side_bot_onnx("prey").is_file()
    staged = run_paths_to_stage(paths)
    assert "bots/hunt-prey.json" in staged and "bots/hunt-prey.onnx" in staged

    hunter, prey = str(paths.bot_json), str(paths.side_bot_json("prey"))
    match = lander(tmp_path, "match", hunter, prey, "--games", "6", "--port", port, timeout=200)
    assert match.returncode == 0, match.stdout + match.stderr
    assert "hunt vs hunt-prey: 6 rounds: wins=" in match.stdout
    same = lander(tmp_path, "match", hunter, hunter, "--games", "4", "--port", port, timeout=200)
    assert same.returncode == 1 and "Traceback" not in same.stderr
    assert "a match is a bot of each side, not hunter against hunter" in same.stderr

    page = lander(tmp_path, "play", "--web", hunter, "--web-port", port, timeout=60)
    assert page.returncode == 1 and "web page does not play mode=chase" in page.stderr

    graded = lander(tmp_path, "export", "hunt", "--tiers", "easy,hard", timeout=300)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    easy = json.loads((tmp_path / "bots" / "hunt-easy.json").read_text())
    assert easy["side"] == "hunter" and easy["tier"] == "easy" and "versus_hardest" not in easy

    resumed = lander(tmp_path, "train", "hunt", "--resume", "hunt", "--timesteps", "1024",
                     "--no-git", "--port", port, timeout=400)  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert _model_steps(prey_folder / "final.zip") == 3072, "the prey's model was resumed"
    after = json.loads(paths.run_json.read_text())["extra"]["self_play"]
    assert after["rounds"] > state["rounds"] and "prey:snap_000000002048" in after["ratings"]

    fixed = lander(tmp_path, "train", "fixed", "--timesteps", "512", "--opponent", prey, *flags,
                   timeout=200)  # fmt: skip
    assert fixed.returncode == 1 and "Traceback" not in fixed.stderr
    assert "have their own spaces and each trains a model: drop --opponent" in fixed.stderr
    assert not (tmp_path / "checkpoints" / "fixed").exists()


def test_a_padded_game_restarts_and_steps_through_the_bridge() -> None:
    env = GameVecEnv(
        LaunchConfig(**launch_settings("duel"), base_port=find_free_port_block(1),
                     game_args={"agents": "2", "mode": "chase"}),
        max_restarts_per_minute=0,
    )  # fmt: skip
    try:
        obs = env.reset()
        assert obs.shape == (2, PREY_OBS) and np.all(obs[0, HUNTER_OBS:] == 0.0)
        ended = 0
        for _ in range(200):
            _, _, dones, infos = env.step(np.array([[1.0, 1.0], [2.0, 0.0]], np.float32))
            for index in np.flatnonzero(dones):
                ended += 1
                assert infos[index]["terminal_observation"].shape == (PREY_OBS,)
        assert ended > 0
    finally:
        env.close()
