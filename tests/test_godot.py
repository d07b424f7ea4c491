"""The Godot lander (examples/godot_lander), run headless by the Godot engine and
trained end to end like any Godot export. .ci/run installs godot3-server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from game_bridge.bot_runner import BotRunner
from game_bridge.frame_stack import start_episodes
from game_bridge.launcher import LaunchConfig
from game_bridge.vec_env import GameVecEnv
from tests.conftest import REPO_ROOT, lander, wait_until
from training.runs.run_record import RunRecord, write_json_atomic

GODOT_GAME = REPO_ROOT / "examples" / "godot_lander" / "lander.x86_64"
pytestmark = pytest.mark.skipif(
    shutil.which(os.environ.get("GODOT_BIN", "godot3-server")) is None,
    reason="no Godot engine (godot3-server)",
)


def test_godot_game_speaks_the_protocol_with_floats_and_truncation(
    port_block: Callable[[int], int],
) -> None:
    env = GameVecEnv(
        LaunchConfig(command=[str(GODOT_GAME)], n_instances=2, base_port=port_block(2), speedup=1000,
                     game_args={"agents": "2"}, read_timeout=20)
    )  # fmt: skip
    try:
        assert (
            env.num_envs == 4
            and env.observation_space.shape == (7,)
            and env.action_space.shape == (2,)
        )
        first = env.reset()
        assert np.all(np.abs(first) <= 1.0)
        ended = []
        for _ in range(210):  # an episode is 20 game seconds = 200 steps of 6 ticks
            obs, _, dones, infos = env.step(np.zeros((4, 2), dtype=np.float32))
            ended.extend(infos[i] for i in np.flatnonzero(dones))
        assert not np.allclose(obs, first), "Godot's physics moves the landers"
        assert ended and all(
            "terminal_observation" in info and "TimeLimit.truncated" in info for info in ended
        )
        assert env.call("anything") == [[None, None], [None, None]]
    finally:
        env.close()
    assert all(instance.exit_code() is not None for instance in env.instances)


def test_godot_game_trains_end_to_end_exports_a_bot_and_resumes(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    common = [
        "--no-git",
        "--n-parallel",
        "2",
        "--agents-per-instance",
        "2",
        "--n-steps",
        "512",
        "--checkpoint-every",
        "2048",
        "--port",
        str(port_block(2)),
    ]
    setup = lander(tmp_path, "setup", "--game-bin", str(GODOT_GAME), "--port", str(port_block(1)))
    assert setup.returncode == 0, setup.stdout + setup.stderr
    assert "godot" in setup.stdout and "imported godot_lander" in setup.stdout
    first = lander(tmp_path, "train", "godot", "--speedup", "1000", "--timesteps", "4096", *common)
    assert first.returncode == 0, first.stdout + first.stderr
    record = RunRecord.load(tmp_path / "checkpoints" / "godot" / "run.json")
    assert record.config.game_bin == str(GODOT_GAME) and record.total_timesteps == 4096
    assert list((tmp_path / "checkpoints" / "godot").glob("ckpt_*.zip"))
    assert (tmp_path / "bots" / "godot.json").is_file() and (
        tmp_path / "bots" / "godot.onnx"
    ).is_file()
    resumed = lander(
        tmp_path, "train", "godot", "--resume", "godot", "--timesteps", "2048", "--no-git"
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert RunRecord.load(tmp_path / "checkpoints" / "godot" / "run.json").total_timesteps == 6144
    evaluated = lander(tmp_path, "eval", "godot", "--episodes", "4", "--port", str(port_block(1)))
    assert evaluated.returncode == 0, evaluated.stderr
    assert (
        evaluated.stdout.startswith("mean_reward=") and "normalized_score=n/a" in evaluated.stdout
    )
    picture = tmp_path / "godot.png"
    played = lander(
        tmp_path, "play", str(tmp_path / "bots" / "godot.json"), "--game-bin", str(GODOT_GAME),
        "--record", str(picture), "--seconds", "5", "--port", str(port_block(1)),
    )  # fmt: skip
    assert played.returncode == 0, played.stderr
    with Image.open(picture) as image:
        assert len(image.convert("RGB").getcolors(maxcolors=1 << 16) or []) > 3
    # The game flies the bot itself with the GDScript player (no trainer, no ONNX), and
    # acts as lander's numpy runner does on the same observations.
    trace = tmp_path / "bot-trace.jsonl"
    flown = subprocess.run(
        [str(GODOT_GAME), f"--bot={tmp_path / 'bots' / 'godot.json'}", f"--bot_trace={trace}",
         "--bot_steps=100", "--speedup=100", "--agents=2"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert flown.returncode == 0, flown.stdout + flown.stderr
    assert "flying bot godot (6144 steps of training)" in flown.stdout
    rows = [json.loads(line) for line in trace.read_text().splitlines()]
    assert len(rows) == 200  # 100 steps of 2 agents
    observations = np.array([row["obs"] for row in rows])
    actions = np.array([row["action"] for row in rows])
    bot = BotRunner.from_file(tmp_path / "bots" / "godot.json")
    assert np.abs(bot.act(observations) - actions).max() <= 1e-4
    assert len({tuple(row["obs"]) for row in rows}) > 150, "the landers move under the bot"
    # A newer bot written to the same file (a run publishing as it trains) is swapped in.
    live = tmp_path / "live.json"
    shutil.copy(tmp_path / "bots" / "godot.json", live)
    game = subprocess.Popen(
        [str(GODOT_GAME), f"--bot={live}", "--bot_steps=1000000", "--speedup=20", "--agents=2"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    said: list[str] = []
    assert game.stdout is not None
    threading.Thread(
        target=lambda: said.extend(iter(game.stdout.readline, "")), daemon=True
    ).start()
    try:
        wait_until(lambda: any("(6144 steps" in line for line in said), 60, "the first bot")
        newer = json.loads(live.read_text())
        newer["timesteps"] = 8192
        write_json_atomic(live, newer)
        wait_until(lambda: any("(8192 steps" in line for line in said), 30, "the newer bot")
    finally:
        game.kill()
        game.wait()


def test_godot_duel_mode_trains_with_self_play_and_its_bot_flies_both_sides_in_the_engine(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    """The example's two-side mode (``--game-arg mode=duel``: red and blue in
    agent_policy_names) trains with --self-play under the real engine; its bot then flies
    both landers of a match in the engine through the GDScript player."""
    trained = lander(
        tmp_path, "train", "gduel", "--game-bin", str(GODOT_GAME), "--game-arg", "mode=duel",
        "--self-play", "--snapshot-every", "512", "--swap-every", "256", "--speedup", "1000",
        "--n-parallel", "1", "--agents-per-instance", "4", "--n-steps", "256", "--batch-size",
        "256", "--timesteps", "2048", "--no-git", "--port", str(port_block(2)),
    )  # fmt: skip
    assert trained.returncode == 0, trained.stdout + trained.stderr
    record = RunRecord.load(tmp_path / "checkpoints" / "gduel" / "run.json")
    state = record.extra.self_play
    assert state is not None and state["side"] == "red" and state["rounds"] > 0
    assert len(list((tmp_path / "checkpoints" / "gduel" / "snapshots").glob("snap_*.pt"))) >= 3
    bot_file = tmp_path / "bots" / "gduel.json"
    assert json.loads(bot_file.read_text())["rating"]["elo"] > 0
    trace = tmp_path / "duel-trace.jsonl"
    flown = subprocess.run(
        [str(GODOT_GAME), f"--bot={bot_file}", f"--bot_trace={trace}", "--bot_steps=60",
         "--speedup=100", "--agents=2", "--mode=duel"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert flown.returncode == 0, flown.stdout + flown.stderr
    rows = [json.loads(line) for line in trace.read_text().splitlines()]
    assert len(rows) == 120 and {row["agent"] for row in rows} == {0, 1}
    observations = np.array([row["obs"] for row in rows])
    assert observations.shape == (120, 11), "each lander sees its rival"
    bot = BotRunner.from_file(bot_file)
    assert np.abs(bot.act(observations) - np.array([row["action"] for row in rows])).max() <= 1e-4


def test_the_gdscript_player_flies_a_bot_with_memory_as_the_numpy_runner_does(
    tmp_path: Path,
) -> None:
    """A bot with memory exported by lander, flown by the Godot example itself: each
    lander's state kept by the GDScript player from step to step and emptied when its
    episode starts again, its actions the numpy runner's (which keeps the same states)."""
    from tests.memory_bots import export_memory_bot

    bot_file = export_memory_bot(tmp_path)
    trace = tmp_path / "trace.jsonl"
    flown = subprocess.run(
        [str(GODOT_GAME), f"--bot={bot_file}", f"--bot_trace={trace}", "--bot_steps=260",
         "--speedup=100", "--agents=2"],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert flown.returncode == 0, flown.stdout + flown.stderr
    rows = [json.loads(line) for line in trace.read_text().splitlines()]
    assert len(rows) == 520
    bot = BotRunner.from_file(bot_file)
    starts = 0
    for agent in (0, 1):
        mine = [row for row in rows if row["agent"] == agent]
        assert mine[0]["start"]
        player = bot.policy()
        for row in mine:
            if row["start"]:
                starts += 1
                start_episodes(player, np.array([True]))
            action = player(np.array([row["obs"]]))[0]
            assert np.abs(action - np.array(row["action"])).max() <= 1e-4, row
    assert starts > 2, "episodes ended and started again under the bot"
    stateless = bot.act(np.array([row["obs"] for row in rows]))
    played = np.array([row["action"] for row in rows])
    assert np.abs(stateless - played).max() > 1e-3, "the memory changed the actions"
