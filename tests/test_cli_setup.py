"""`lander setup` writes the game binary and passes the smoke test."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from tests.conftest import REPO_ROOT, game_executable, lander, python_game


def test_setup_writes_an_executable_game_binary_and_passes_the_smoke_test(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    result = lander(tmp_path, "setup", "--port", str(port_block(1)))
    assert result.returncode == 0, result.stdout + result.stderr
    binary = tmp_path / "build" / "lander_game.x86_64"
    assert binary.is_file() and os.access(binary, os.X_OK)
    assert "smoke test" in result.stdout and "100 steps" in result.stdout
    # Safe to run again: nothing to rewrite, still passing.
    again = lander(tmp_path, "setup", "--port", str(port_block(1)))
    assert again.returncode == 0
    assert "up to date" in again.stdout


def test_game_binary_is_launchable_by_path_like_a_godot_export(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    assert lander(tmp_path, "setup", "--port", str(port_block(1))).returncode == 0
    from game_bridge.launcher import LaunchConfig
    from game_bridge.vec_env import GameVecEnv

    env = GameVecEnv(
        LaunchConfig(
            command=[str(tmp_path / "build" / "lander_game.x86_64")],
            base_port=port_block(1),
            game_args={"agents": "3"},
        )
    )
    try:
        assert env.reset().shape == (3, 7)
    finally:
        env.close()


def test_setup_with_a_broken_game_fails_with_a_one_line_reason(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    game = game_executable(
        tmp_path / "broken_game.sh", python_game("faulty_game.py", "--fault=noconnect")
    )
    result = lander(tmp_path, "setup", "--game-bin", str(game), "--port", str(port_block(1)))
    assert result.returncode != 0
    assert "smoke test" in result.stdout and "exited with code 4" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_setup_checklist_covers_the_machine_and_remembers_a_game(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    game = game_executable(tmp_path / "my_game.x86_64", python_game("godot_style_game.py"))
    result = lander(tmp_path, "setup", "--game-bin", str(game), "--port", str(port_block(1)))
    assert result.returncode == 0, result.stdout + result.stderr
    for check in (
        "python",
        "virtualenv",
        "torch",
        "tmux",
        "git",
        "tensorboard",
        "game binary",
        "smoke test",
    ):
        assert check in result.stdout
    assert "CPU build" in result.stdout or "CUDA" in result.stdout
    trained = lander(
        tmp_path, "train", "mine", "--no-git", "--timesteps", "512", "--n-parallel", "1",
        "--n-steps", "256", "--port", str(port_block(1)),
    )  # fmt: skip
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert str(game) in (tmp_path / "checkpoints" / "mine" / "run.json").read_text()


def test_ci_runs_the_readme_test_command_and_setup_dev_checks_what_the_tests_need(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    commands = [line.strip() for line in readme.split("## On a fresh machine")[1].split("\n    ")]
    test_command = next(line.splitlines()[0] for line in commands if "pytest" in line)
    assert "setup --dev" in test_command
    ci = (REPO_ROOT / ".ci" / "run").read_text().splitlines()
    assert test_command in ci, "CI runs the README's test command exactly"
    result = lander(tmp_path, "setup", "--dev", "--port", str(port_block(1)))
    assert result.returncode == 0, result.stdout + result.stderr
    for check in ("ray", "playwright", "godot3-server", "chromium", "smoke test"):
        assert check in result.stdout, check
