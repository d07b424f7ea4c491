"""Faults of a game, injected into real processes over each transport: one faulty game
(``tests/games/faulty_game.py``) and one test body per behaviour, parametrised over TCP
and stdio, so a fault handled on one carrier is shown handled on the other."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from game_bridge.errors import (
    FrameTooLarge,
    InstanceDied,
    InstanceTimeout,
    LaunchError,
    ProtocolViolation,
)
from game_bridge.launcher import LaunchConfig
from game_bridge.vec_env import GameVecEnv
from tests.conftest import find_free_port_block, python_game

READ_TIMEOUT = 2.0
LINE_LIMIT = 100_000
"""The stdio games' line limit here (TCP keeps the default frame limit)."""
TRANSPORTS = ("tcp", "stdio")


def faulty_games(
    transport: str, *game_args: str, n_instances: int = 2, read_timeout: float = READ_TIMEOUT
) -> LaunchConfig:
    """``n_instances`` of the faulty game with ``game_args``, over ``transport``."""
    limits = {"max_frame_bytes": LINE_LIMIT} if transport == "stdio" else {}
    return LaunchConfig(
        command=python_game("faulty_game.py", *game_args),
        n_instances=n_instances,
        transport=transport,
        base_port=find_free_port_block(n_instances),
        read_timeout=read_timeout,
        **limits,  # type: ignore[arg-type]
    )


def _step(env: GameVecEnv, times: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    result = None
    for _ in range(times):
        result = env.step(np.zeros((env.num_envs, 1), dtype=np.float32))
    assert result is not None
    return result


NAMED_ERRORS = [
    ("tcp", "eof", InstanceDied, "closed the connection"),
    ("stdio", "eof", InstanceDied, "the game closed its standard output"),
    ("tcp", "die", InstanceDied, "exit code 3"),
    ("stdio", "die", InstanceDied, "\\(exit code 3\\); last output: injecting fault die"),
    ("tcp", "hang", InstanceTimeout, "no reply within 2 s"),
    ("stdio", "hang", InstanceTimeout, "no reply within 2 s"),
    ("tcp", "trickle", InstanceTimeout, "no reply within 2 s"),
    ("stdio", "trickle", InstanceTimeout, "no reply within 2 s"),
    ("tcp", "oversize", FrameTooLarge, "2000000000 bytes"),
    ("stdio", "oversize", FrameTooLarge, f"limit is {LINE_LIMIT} bytes"),
    ("tcp", "badjson", ProtocolViolation, "malformed JSON"),
    ("stdio", "badjson", ProtocolViolation, "malformed JSON .*debug: the player jumped"),
    ("tcp", "wrongtype", ProtocolViolation, "expected a 'step' message, got type 'reset'"),
    ("stdio", "wrongtype", ProtocolViolation, "expected a 'step' message, got type 'reset'"),
    ("tcp", "wrongcount", ProtocolViolation, "for 2 agents"),
    ("stdio", "wrongcount", ProtocolViolation, "for 2 agents"),
]


@pytest.mark.parametrize(
    ("transport", "fault", "error", "text"),
    NAMED_ERRORS,
    ids=[f"{t}-{f}" for t, f, _, _ in NAMED_ERRORS],
)
def test_each_fault_ends_within_its_deadline_with_a_named_error(
    transport: str, fault: str, error: type[Exception], text: str
) -> None:
    # One instance: a second one, faulty the same way and never read, would only be killed
    # after close's 3 s of grace (test_a_faulty_game_is_restarted... runs two).
    env = GameVecEnv(faulty_games(transport, f"--fault={fault}", "--after=3", n_instances=1))
    try:
        env.reset()
        _step(env, 3)
        started = time.monotonic()
        with pytest.raises(error, match=text) as caught:
            _step(env)
        assert time.monotonic() - started < READ_TIMEOUT + 2.0
        assert str(caught.value).startswith("game instance 0: ")
    finally:
        env.close()
    assert all(instance.exit_code() is not None for instance in env.instances)


RESTARTED = [
    (transport, fault, reason)
    for transport in TRANSPORTS
    for fault, reason in [
        ("die", "exit code 3"),
        ("eof", "closed"),
        ("hang", "no reply within"),
        ("badjson", "malformed JSON"),
        ("wrongcount", "for 2 agents"),
        ("oversize", "bytes"),
        ("huge", "non-finite"),
        ("trickle", "no reply within"),
    ]
]


@pytest.mark.parametrize(
    ("transport", "fault", "reason"), RESTARTED, ids=[f"{t}-{f}" for t, f, _ in RESTARTED]
)
def test_a_faulty_game_is_restarted_and_its_episodes_end_truncated(
    tmp_path: Path, transport: str, fault: str, reason: str
) -> None:
    config = faulty_games(
        transport, f"--fault={fault}", "--after=3", f"--once_marker={tmp_path}", read_timeout=1.5
    )
    env = GameVecEnv(config, max_restarts_per_minute=5)
    try:
        env.reset()
        pids = [instance.process.pid for instance in env.instances if instance.process]
        _step(env, 3)
        started = time.monotonic()
        obs, rewards, dones, infos = _step(env)
        assert time.monotonic() - started < 10.0
        assert dones.all(), "every agent of a restarted instance ends its episode"
        assert not rewards.any()
        assert all(info["TimeLimit.truncated"] for info in infos)
        assert all(np.array_equal(info["terminal_observation"], [0.0, 0.0]) for info in infos)
        assert len(env.restarts) == 2 and reason in env.restarts[0].reason
        assert [instance.process.pid for instance in env.instances if instance.process] != pids
        obs, _, dones, _ = _step(env, 20)  # training goes on with the restarted games
        assert not dones.any() and obs.shape == (4, 2)
    finally:
        env.close()


CAMERA_FAULTS = [
    (transport, fault, text)
    for transport in TRANSPORTS
    for fault, text in [
        ("badimage", "sent 11 bytes; its shape [3, 2, 2] needs 12"),
        ("nothex", "sent 'not a picture', not hex text"),
    ]
]


@pytest.mark.parametrize(
    ("transport", "fault", "text"), CAMERA_FAULTS, ids=[f"{t}-{f}" for t, f, _ in CAMERA_FAULTS]
)
def test_a_camera_frame_that_does_not_fit_is_a_named_fault_and_restarted(
    tmp_path: Path, transport: str, fault: str, text: str
) -> None:
    """A camera key beside a vector key decodes to uint8 frames in the declared shape; a
    frame of the wrong size, or not hex, is a game fault naming the key and the agent,
    and the game is restarted like any other."""
    config = faulty_games(
        transport, f"--fault={fault}", "--after=3", "--camera=1", f"--once_marker={tmp_path}",
        read_timeout=1.5,
    )  # fmt: skip
    env = GameVecEnv(config, max_restarts_per_minute=5)
    try:
        obs = env.reset()
        assert isinstance(obs, dict) and list(obs) == ["obs", "camera_2d"]
        assert obs["camera_2d"].shape == (4, 3, 2, 2) and obs["camera_2d"].dtype == np.uint8
        _step(env, 3)
        _, _, dones, infos = _step(env)
        assert dones.all() and all(info["TimeLimit.truncated"] for info in infos)
        reason = env.restarts[0].reason
        assert "observation 'camera_2d'" in reason and text in reason, reason
        obs, _, dones, _ = _step(env, 20)  # the restarted games send whole frames again
        assert not dones.any() and (obs["camera_2d"] == 0x7F).all()
    finally:
        env.close()


@pytest.mark.parametrize(
    ("transport", "error", "text"),
    [
        ("tcp", LaunchError, "exited with code 4 before connecting; last output: giving up"),
        ("stdio", InstanceDied, "exit code 4.*giving up before env_info"),
    ],
    ids=TRANSPORTS,
)
def test_a_game_that_gives_up_at_the_start_is_reported_at_once_with_its_output(
    transport: str, error: type[Exception], text: str
) -> None:
    started = time.monotonic()
    with pytest.raises(error, match=text):
        GameVecEnv(faulty_games(transport, "--fault=noconnect", n_instances=1))
    assert time.monotonic() - started < 10.0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_game_that_ignores_close_is_killed(transport: str) -> None:
    env = GameVecEnv(faulty_games(transport, "--ignore_close=1", n_instances=1))
    env.reset()
    started = time.monotonic()
    env.close()
    assert time.monotonic() - started < 10.0
    assert env.instances[0].exit_code() is not None
