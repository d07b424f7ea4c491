"""Evaluation, training records and baselines name the game they really ran on: a game
that declares its own number of agents, and one that never reports success."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import godot_style, lander, train_briefly
from training.runs.run_paths import RunPaths
from training.runs.run_record import RunRecord


def test_random_policy_on_a_game_binary_plays_that_game(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    game = godot_style(tmp_path, "--episode_len=10")
    port = str(port_block(1))
    bundled = lander(tmp_path, "eval", "--policy", "random", "--episodes", "20", "--port", port)
    played = lander(
        tmp_path, "eval", "--policy", "random", "--episodes", "20", "--game-bin", str(game),
        "--port", port,
    )  # fmt: skip
    assert played.returncode == 0, played.stdout + played.stderr
    # The game never says is_success and has no known baselines: no rate, no score.
    assert "normalized_score=n/a" in played.stdout and "success_rate" not in played.stdout
    assert "normalized_score=n/a" not in bundled.stdout  # the bundled game has baselines
    mean = float(played.stdout.split("mean_reward=")[1].split()[0])
    # Random steer[0] in [-1, 1] and boost half the time: about 0.25 a step, 10 steps.
    assert 0.0 < mean < 6.0
    reference = lander(
        tmp_path, "eval", "--policy", "reference", "--game-bin", str(game), "--port", port
    )
    assert reference.returncode != 0
    assert "bundled games only" in reference.stderr + reference.stdout
    assert "Traceback" not in reference.stderr + reference.stdout


def test_a_run_records_the_agents_its_game_declares(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    game = godot_style(tmp_path, "--fixed_agents=3")
    result = train_briefly(
        tmp_path, "fixed", game, port_block(2), "--n-parallel", "2", "--agents-per-instance",
        "8", "--timesteps", "256", "--no-git",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 envs on 2 game.x86_64 instance(s)" in result.stdout
    assert "the game declares 3 agent(s) per instance" in result.stdout
    record = RunRecord.load(RunPaths(tmp_path, "fixed").run_json)
    assert record.config.agents_per_instance == 3
    bot = json.loads((tmp_path / "bots" / "fixed.json").read_text())
    assert bot["trained_with"]["agents_per_instance"] == 3


def test_a_game_that_ignores_speedup_gets_a_warning(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    # 60 ticks/s of its own where --speedup 20 asks for 1,200: a godot3-branch game.
    game = godot_style(tmp_path, "--tick_rate=60")
    slow_flags = ("--speedup", "20", "--action-repeat", "2", "--n-steps", "16", "--no-git")
    result = train_briefly(tmp_path, "slow", game, port_block(1), *slow_flags)
    assert result.returncode == 0, result.stdout + result.stderr
    warning = "far below 60 x --speedup = 1,200"
    assert warning in result.stdout
    assert warning in RunPaths(tmp_path, "slow").train_log.read_text()
    fast = godot_style(tmp_path)  # answers at once: no warning
    quick = train_briefly(tmp_path, "quick", fast, port_block(1), *slow_flags)
    assert quick.returncode == 0 and "far below" not in quick.stdout
