"""The bundled game's fork server: forked instances behave like launched ones."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from game_bridge import forked_games
from game_bridge.errors import InstanceDied
from game_bridge.forked_games import ForkedGame, ForkServer
from game_bridge.launcher import LaunchConfig, close_instances, launch_instances
from game_bridge.vec_env import GameVecEnv
from tests.conftest import LANDER_GAME, python_game, wait_until


def test_bundled_instances_are_forked_into_sessions_of_their_own(
    port_block: Callable[[int], int], tmp_path: Path
) -> None:
    config = LaunchConfig(
        **LANDER_GAME, n_instances=2, base_port=port_block(2), output_dir=tmp_path
    )
    instances, infos = launch_instances(config)
    try:
        assert config.forks_games
        assert [info.n_agents for info in infos] == [1, 1]
        for instance in instances:
            assert isinstance(instance.process, ForkedGame)
            # Its own session (a Ctrl-C for the trainer does not reach it), not the server.
            assert os.getsid(instance.process.pid) == instance.process.pid
            assert instance.process.pid != forked_games.fork_server(LANDER_GAME["fork_main"]).pid
            assert instance.process.poll() is None
        # A game that gets garbage says so in its own log and quits.
        instances[1].send_bytes(b"\x05\x00\x00\x00{oops")
        assert instances[1].process is not None
        assert instances[1].process.wait(timeout=10) == 0
        assert "bad frame from the trainer" in (tmp_path / "game_1.log").read_text()
        assert instances[0].process is not None and instances[0].process.poll() is None
    finally:
        close_instances(instances)
    assert [instance.exit_code() for instance in instances] == [0, 0]


def test_a_killed_forked_game_is_reported_with_its_signal(
    port_block: Callable[[int], int],
) -> None:
    env = GameVecEnv(LaunchConfig(**LANDER_GAME, n_instances=1, base_port=port_block(1)))
    try:
        env.reset()
        process = env.instances[0].process
        assert process is not None
        os.kill(process.pid, signal.SIGKILL)
        with pytest.raises(InstanceDied, match=r"exit code -9"):
            env.instances[0].receive_body()
    finally:
        env.close()


def test_a_new_fork_server_replaces_one_that_died(port_block: Callable[[int], int]) -> None:
    server = forked_games.fork_server(LANDER_GAME["fork_main"])
    os.kill(server.pid, signal.SIGKILL)
    wait_until(lambda: not server.alive, 10, "the fork server to die")
    env = GameVecEnv(LaunchConfig(**LANDER_GAME, n_instances=2, base_port=port_block(2)))
    try:
        assert forked_games.fork_server(LANDER_GAME["fork_main"]).pid != server.pid
        obs, rewards, _, _ = env.step(np.zeros((2, 2), dtype=np.float32))
        assert obs.shape == (2, 7) and rewards.shape == (2,)
    finally:
        env.close()


def test_a_game_dies_with_its_killed_server_and_reports_its_end(tmp_path: Path) -> None:
    """Whatever kills the server (a trainer killed takes its server along) takes its
    games too: none is left behind, and each still reports that it ended."""
    server = ForkServer(LANDER_GAME["fork_main"])
    try:
        game = server.fork(["--port=1"], tmp_path / "game.log")  # nothing listens: it waits
        assert game.poll() is None
        os.kill(server.pid, signal.SIGKILL)
        wait_until(lambda: not server.alive, 10, "the fork server to die")
        wait_until(lambda: game.poll() is not None, 10, "the game to die with its server")
        assert game.wait(timeout=10) == forked_games.UNKNOWN_EXIT_CODE
    finally:
        server.close()


def test_other_games_are_launched_not_forked(port_block: Callable[[int], int]) -> None:
    config = LaunchConfig(
        command=python_game("faulty_game.py", "--fault=none"),
        n_instances=1,
        base_port=port_block(1),
    )
    assert not config.forks_games
    instances, _ = launch_instances(config)
    try:
        assert not isinstance(instances[0].process, ForkedGame)
    finally:
        close_instances(instances)
