"""The bridge end to end: real game processes over real loopback TCP."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from game_bridge.launcher import LaunchConfig
from game_bridge.vec_env import GameVecEnv
from games.lander.physics import LanderPhysics
from tests.conftest import GAMES_DIR, LANDER_GAME, exited, game_executable, python_game, wait_until


@pytest.mark.parametrize("fast_wire", [False, True], ids=["json", "binary"])
def test_vec_env_over_two_instances_of_two_agents_matches_in_process_physics(
    port_block: Callable[[int], int], fast_wire: bool
) -> None:
    seed = 11
    env = GameVecEnv(
        LaunchConfig(
            **LANDER_GAME,
            n_instances=2,
            base_port=port_block(2),
            seed=seed,
            game_args={"agents": "2"},
            fast_wire=fast_wire,
        )
    )
    try:
        assert env.num_envs == 4
        assert env.binary == fast_wire
        # Instance i plays physics seeded seed + i; its agents are envs 2i and 2i+1.
        reference = [LanderPhysics(2, seed + i) for i in range(2)]
        for physics in reference:
            physics.reset_agents(np.ones(2, dtype=bool))
        obs = env.reset()
        assert np.allclose(obs, np.concatenate([p.observe() for p in reference]), atol=1e-6)
        rng = np.random.default_rng(5)
        truncations = terminal_checked = 0
        for _ in range(1000):
            # Actions with 6 decimals travel exactly (float32's shortest digits, or
            # protocol.WIRE_DECIMALS without orjson): the reference gets what the games get.
            actions = np.round(rng.uniform(-1, 1, (4, 2)), 6)
            if fast_wire:  # binary actions travel as float32
                actions = actions.astype(np.float32).astype(np.float64)
            obs, rewards, dones, infos = env.step(actions)
            for i, physics in enumerate(reference):
                result = physics.step(actions[2 * i : 2 * i + 2])
                done = result.terminated | result.truncated
                assert np.array_equal(dones[2 * i : 2 * i + 2], done)
                assert np.allclose(rewards[2 * i : 2 * i + 2], result.reward, atol=1e-5)
                for agent in np.flatnonzero(done):
                    info = infos[2 * i + agent]
                    assert np.allclose(info["terminal_observation"], result.obs[agent], atol=1e-6)
                    assert info["TimeLimit.truncated"] == bool(result.truncated[agent])
                    assert isinstance(info["is_success"], bool)
                    truncations += int(result.truncated[agent])
                    terminal_checked += 1
                physics.reset_agents(done)
                assert np.allclose(obs[2 * i : 2 * i + 2], physics.observe(), atol=1e-6)
        assert terminal_checked > 0
        assert truncations > 0, "1000 steps of 200-step episodes must hit the time limit"
    finally:
        env.close()
    assert all(instance.exit_code() == 0 for instance in env.instances)


def test_camera_frames_travel_as_bytes_and_match_the_plugins_json(
    port_block: Callable[[int], int],
) -> None:
    """The bundled game's camera mode steps in lander's binary picture encoding once
    offered it, and the batch sees what the plugin's hex-in-JSON shows, byte for byte:
    frames, rewards, ends, successes and the frames before each reset, same seeds."""
    runs: dict[bool, list[tuple[Any, ...]]] = {}
    for fast_wire in (False, True):
        env = GameVecEnv(
            LaunchConfig(
                **LANDER_GAME,
                n_instances=2,
                base_port=port_block(2),
                seed=7,
                game_args={"agents": "2", "observation": "pixels"},
                fast_wire=fast_wire,
            )
        )
        try:
            assert env.binary == fast_wire
            steps: list[tuple[Any, ...]] = [(env.reset(),)]
            rng = np.random.default_rng(1)
            for _ in range(450):  # past the 200-step time limit twice
                steps.append(env.step(rng.uniform(-1, 1, (4, 2)).astype(np.float32)))
        finally:
            env.close()
        runs[fast_wire] = steps
    assert runs[True][0][0].dtype == np.uint8 and runs[True][0][0].shape == (4, 3, 36, 48)
    assert np.array_equal(runs[True][0][0], runs[False][0][0])
    ends = 0
    for binary, json_step in zip(runs[True][1:], runs[False][1:], strict=True):
        obs, rewards, dones, infos = binary
        assert obs.dtype == np.uint8 and np.array_equal(obs, json_step[0])
        # JSON carries a reward in its shortest digits, the binary step as float32
        assert np.allclose(rewards, json_step[1], atol=1e-6)
        assert np.array_equal(dones, json_step[2])
        for info, expected in zip(infos, json_step[3], strict=True):
            assert info.keys() == expected.keys()
            if "terminal_observation" in info:
                ends += 1
                last = info["terminal_observation"]
                assert last.dtype == np.uint8 and last.any()
                assert np.array_equal(last, expected["terminal_observation"])
            assert all(info[key] == expected[key] for key in info if key != "terminal_observation")
    assert ends >= 8, ends


def test_godot_style_game_with_mixed_actions_gets_each_value_under_its_key(
    port_block: Callable[[int], int],
) -> None:
    env = GameVecEnv(
        LaunchConfig(
            command=python_game("godot_style_game.py"),
            n_instances=2,
            base_port=port_block(2),
            fast_wire=True,  # offered, not understood: the game keeps speaking JSON
        )
    )
    try:
        assert not env.binary
        # steer (2 continuous) then boost (2 choices as 2 slots, argmax).
        assert env.action_space.shape == (4,)
        env.reset()
        actions = np.array(
            [
                [0.5, -0.25, 0.9, 0.1],
                [-1.0, 1.0, 0.0, 0.7],
                [0.1, 0.2, -0.3, 0.3],
                [2.0, -3.0, 0.6, -0.6],
            ],
            dtype=np.float32,
        )
        obs, rewards, _, _ = env.step(actions)
        assert np.allclose(
            obs[:, :3], [[0.5, -0.25, 0], [-1.0, 1.0, 1], [0.1, 0.2, 1], [1.0, -1.0, 0]]
        )
        assert np.allclose(rewards, [0.5, -0.5, 0.6, 1.0])
        for _ in range(24):
            _, _, dones, infos = env.step(actions)
        assert dones.all()
        # No terminal_observation from this game: the bridge supplies one anyway.
        assert all("terminal_observation" in info for info in infos)
        assert env.call("anything") == [[0.0, 1.0], [0.0, 1.0]]
    finally:
        env.close()


@pytest.mark.parametrize(
    ("forked", "transport"),
    [(True, "tcp"), (False, "tcp"), (False, "stdio")],
    ids=["forked", "launched", "stdio"],
)
def test_games_exit_by_themselves_when_the_trainer_is_killed(
    port_block: Callable[[int], int], forked: bool, transport: str
) -> None:
    script = (
        "import sys, time\n"
        "from game_bridge import forked_games\n"
        "from game_bridge.launcher import LaunchConfig\n"
        "from game_bridge.vec_env import GameVecEnv\n"
        "from games import launch_settings\n"
        "game = launch_settings('lander')\n"
        f"game['fork_main'] = game['fork_main'] if {forked} else None\n"
        f"config = LaunchConfig(**game, n_instances=2, base_port={port_block(2)},"
        f" transport={transport!r})\n"
        "env = GameVecEnv(config)\n"
        "env.reset()\n"
        "pids = [i.process.pid for i in env.instances]\n"
        "if config.forks_games:\n"
        "    pids.append(forked_games.fork_server(game['fork_main']).pid)\n"
        "print(' '.join(str(pid) for pid in pids), flush=True)\n"
        "time.sleep(120)\n"
    )
    trainer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert trainer.stdout is not None
        pids = [int(pid) for pid in trainer.stdout.readline().split()]
        assert len(pids) == (3 if forked else 2)  # with the fork server, which must go too
        trainer.send_signal(signal.SIGKILL)
        trainer.wait(timeout=10)

        wait_until(
            lambda: all(exited(pid) for pid in pids),
            15.0,
            "game processes to exit after the trainer was killed",
        )
    finally:
        if trainer.poll() is None:
            trainer.kill()


def test_all_instances_start_together(tmp_path: Path, port_block: Callable[[int], int]) -> None:
    """Each game waits a second before it connects: launched one after another, their
    starts would be a second apart; launched together, they start within a fraction."""
    stamps = tmp_path / "starts"
    stamps.mkdir()
    script = (
        "import os, sys, time; "
        f"open(os.path.join({str(stamps)!r}, str(os.getpid())), 'w').write(repr(time.time())); "
        "time.sleep(1.0); "
        f"os.execv(sys.executable, [sys.executable, {str(GAMES_DIR / 'faulty_game.py')!r}, "
        "'--fault=none', *sys.argv[1:]])"
    )
    game = game_executable(tmp_path / "slow_to_connect.x86_64", [sys.executable, "-c", script])
    env = GameVecEnv(LaunchConfig(command=[str(game)], n_instances=4, base_port=port_block(4)))
    try:
        starts = [float(path.read_text()) for path in stamps.iterdir()]
        assert len(starts) == 4 and env.num_envs == 8
        assert max(starts) - min(starts) < 0.9
    finally:
        env.close()


def test_games_of_a_config_without_an_output_folder_leave_nothing_in_tmp() -> None:
    """An evaluation or a match launches games with no output folder named: their logs go
    to a temporary folder, removed when the games close (and made again if the same
    settings launch games once more)."""
    from tests.conftest import lander_games

    games = lander_games(2)
    folder = games.config.output_dir
    assert folder is not None and folder.is_dir() and games.config.temporary_output
    games.reset()
    games.close()
    assert not folder.exists()
    again = GameVecEnv(games.config)
    again.reset()
    again.close()
    assert not folder.exists()
