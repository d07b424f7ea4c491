"""Hostile games and hostile neighbours, second round: a stranger on a game's port, a
stop while a game hangs, restarts that fail or find their port taken, checkpoints
whose weights do not load, and a property test of the bridge against random replies.
Real game processes over real TCP throughout."""

from __future__ import annotations

import io
import json
import math
import os
import signal
import socket
import subprocess
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from game_bridge.errors import BridgeError
from game_bridge.instance import GameInstance
from game_bridge.launcher import LaunchConfig
from game_bridge.peer_check import connected_by
from game_bridge.vec_env import GameVecEnv
from tests.conftest import (
    LANDER,
    LANDER_GAME,
    faulty,
    find_free_port_block,
    game_executable,
    python_game,
    wait_until,
)
from training.runs.checkpoints import find_resume_point
from training.runs.run_record import RunRecord
from training.session.trainer import TrainRequest, train

QUIET = Console(file=open(os.devnull, "w"))  # noqa: SIM115 (lives for the whole module)


def test_a_stranger_on_the_port_is_refused_and_the_game_still_connects(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    port = port_block(1)
    instance = GameInstance(0, port)
    stranger = socket.create_connection(("127.0.0.1", port))  # before the game starts
    try:
        log = tmp_path / "game.log"
        instance.start(python_game("faulty_game.py", "--fault=none", f"--port={port}"), log)
        wait_until(instance.try_accept, 30, "the real game to connect")
        assert instance.refused == 1
        assert instance.process is not None and instance._conn is not None
        assert connected_by(instance._conn, instance.process.pid) is True
        stranger.settimeout(5)
        assert stranger.recv(1) == b"", "the stranger's connection was closed"
        assert "refused a connection" in log.read_text()
        instance.send({"type": "handshake", "major_version": "0", "minor_version": "7"})
        instance.send({"type": "env_info"})
        assert instance.receive("env_info")["n_agents"] == 2
    finally:
        stranger.close()
        instance.close()


def test_a_stop_does_not_wait_for_a_hung_game(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    """The first Ctrl-C ends a step that waits on a hung game at once, not at --read-timeout."""
    hanging = game_executable(tmp_path / "hangs.x86_64", faulty(tmp_path, "hang", after=40))
    env = {**os.environ, "LANDER_HOME": str(tmp_path)}
    trainer = subprocess.Popen(
        [str(LANDER), "train", "hung", "--no-git", "--game-bin", str(hanging), "--n-parallel", "1",
         "--port", str(port_block(2)), "--read-timeout", "600", "--max-restarts-per-minute", "0",
         "--n-steps", "16", "--batch-size", "32", "--checkpoint-every", "32"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        markers = tmp_path / "markers"
        wait_until(lambda: markers.exists() and any(markers.iterdir()), 120, "the game to hang")
        time.sleep(0.5)  # the trainer is now inside a read
        stopped_at = time.monotonic()
        trainer.send_signal(signal.SIGINT)
        output, _ = trainer.communicate(timeout=60)
    finally:
        if trainer.poll() is None:
            trainer.kill()
    assert time.monotonic() - stopped_at < 30, "the stop waited for the read timeout"
    assert trainer.returncode == 0, output
    record = RunRecord.load(tmp_path / "checkpoints" / "hung" / "run.json")
    assert record.status == "interrupted"
    assert (tmp_path / "checkpoints" / "hung" / "final.zip").is_file()
    assert "Traceback" not in output


def test_restarts_are_counted_exactly_and_a_failed_relaunch_is_one_of_them(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    # Launch 1 dies after some steps, launch 2 exits before connecting, launch 3 behaves.
    counter = tmp_path / "launches"
    behaving = " ".join(faulty(tmp_path, "die", after=300))
    script = tmp_path / "flaky.x86_64"
    script.write_text(
        "#!/bin/sh\n"
        f"n=$(($(cat {counter} 2>/dev/null || echo 0) + 1)); echo $n > {counter}\n"
        'if [ "$n" = 2 ]; then echo "refusing to start"; exit 5; fi\n'
        f'exec {behaving} "$@"\n'
    )
    script.chmod(0o755)
    overrides = {
        "n_parallel": 1, "agents_per_instance": 2, "n_steps": 256, "batch_size": 256, "n_epochs": 1,
        "timesteps": 2048, "port": port_block(2), "game_bin": str(script), "max_restarts_per_minute": 3,
    }  # fmt: skip
    outcome = train(TrainRequest(tmp_path, "flaky", overrides), QUIET)
    assert outcome.status == "finished", outcome.error
    assert outcome.record.extra.restarts == 2 and counter.read_text().strip() == "3"

    # Always dying, limit 2: the third fault stops the run, and all three are counted.
    dying = game_executable(tmp_path / "dies.x86_64", faulty(tmp_path, "die", after=3, once=False))
    overrides.update(game_bin=str(dying), max_restarts_per_minute=2, port=port_block(2))
    failed = train(TrainRequest(tmp_path, "dying", overrides), QUIET)
    assert failed.status == "failed" and "restarts within a minute" in (failed.error or "")
    assert RunRecord.load(tmp_path / "checkpoints" / "dying" / "run.json").extra.restarts == 3


def test_a_restart_whose_port_was_taken_moves_to_a_free_port(
    port_block: Callable[[int], int],
) -> None:
    port = port_block(1)
    env = GameVecEnv(
        LaunchConfig(**LANDER_GAME, n_instances=1, base_port=port), max_restarts_per_minute=3
    )
    holder: socket.socket | None = None
    try:
        env.reset()
        game = env.instances[0]
        game.listener.close()  # the port is free for a moment, and someone takes it
        holder = socket.socket()
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the game's connection stays
        holder.bind(("127.0.0.1", port))
        holder.listen(1)
        assert game.process is not None
        os.kill(game.process.pid, signal.SIGKILL)
        actions = np.zeros((env.num_envs, 2), dtype=np.float32)
        for _ in range(50):
            env.step(actions)
            if env.restarts:
                break
        moved = env.config.port_of(0)
        assert env.restarts and moved != port
        assert env.port_moves == [(0, port, moved)]
        observations, *_ = env.step(actions)
        assert np.isfinite(observations).all()
    finally:
        env.close()
        if holder is not None:
            holder.close()


def test_resume_falls_back_past_a_checkpoint_whose_weights_do_not_load(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    overrides = {"timesteps": 2048, "port": port_block(2), "checkpoint_every": 512}
    overrides.update({"n_parallel": 2, "agents_per_instance": 2, "n_steps": 128})
    train(TrainRequest(tmp_path, "weights", overrides), QUIET)
    folder = tmp_path / "checkpoints" / "weights"
    (folder / "final.zip").unlink()
    newest, older = sorted(folder.glob("ckpt_*.zip"))[-1], sorted(folder.glob("ckpt_*.zip"))[-2]
    rewritten = io.BytesIO()
    with zipfile.ZipFile(newest) as source, zipfile.ZipFile(rewritten, "w") as target:
        for item in source.infolist():
            data = source.read(item) if item.filename != "policy.pth" else b"not a torch file"
            target.writestr(item, data)
    newest.write_bytes(rewritten.getvalue())  # a sound zip whose CRCs pass
    assert zipfile.ZipFile(newest).testzip() is None
    assert find_resume_point(tmp_path, "weights").model == older
    resumed = train(TrainRequest(tmp_path, "weights", {"timesteps": 256}, resume="weights"), QUIET)
    assert resumed.status == "finished" and resumed.record.resumed_from == str(older)


REPLIES = st.lists(
    st.one_of(
        st.builds(lambda r: {"kind": "valid", "value": r}, st.floats(-100, 100)),
        st.builds(
            lambda v: {"kind": "nonfinite", "value": v},
            st.sampled_from(["nan", "inf", "-inf", "1e39"]),
        ),
        st.just({"kind": "truncated"}),
        st.builds(lambda d: {"kind": "slow", "value": d}, st.sampled_from([0.0, 0.001, 0.01])),
        st.builds(lambda b: {"kind": "garbage", "value": list(b)}, st.binary(max_size=40)),
    ),
    min_size=1,
    max_size=4,
)
READ_TIMEOUT = 1.0


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(script=REPLIES)
def test_every_step_is_finite_or_a_named_fault_within_its_deadline(
    script: list[dict[str, object]], tmp_path: Path
) -> None:
    script_file = tmp_path / f"script-{os.getpid()}-{time.monotonic_ns()}.json"
    script_file.write_text(json.dumps(script))
    config = LaunchConfig(
        command=python_game("scripted_game.py", f"--script={script_file}"),
        n_instances=1,
        base_port=find_free_port_block(1),
        read_timeout=READ_TIMEOUT,
    )
    env = GameVecEnv(config, max_restarts_per_minute=0)
    try:
        env.reset()
        actions = np.zeros((env.num_envs, 1), dtype=np.float32)
        for _ in range(len(script)):
            started = time.monotonic()
            try:
                observations, rewards, _, _ = env.step(actions)
            except BridgeError as fault:
                assert fault.instance == 0 and str(fault)
                assert time.monotonic() - started < READ_TIMEOUT + 1.5
                return
            assert np.isfinite(observations).all() and np.isfinite(rewards).all()
            assert not any(math.isnan(r) for r in rewards.tolist())
    finally:
        env.close()
