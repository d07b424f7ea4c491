"""Faults injected into real processes: games that crash, hang or send garbage
mid-run, a trainer killed with SIGKILL, a full disk, a remote that moved, a port
in use, and bad input. Plus property-based fuzzing of the frame decoder and the
env_info parser."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from stable_baselines3.common.callbacks import BaseCallback

from game_bridge import protocol
from game_bridge.errors import PortInUse, ProtocolViolation
from game_bridge.instance import GameInstance
from game_bridge.launcher import LaunchConfig
from game_bridge.spaces import parse_env_info
from game_bridge.vec_env import GameVecEnv, TooManyRestarts
from tests.conftest import (
    GIT_IDENTITY,
    LANDER,
    LANDER_GAME,
    SMALL,
    faulty,
    game_executable,
    git,
    lander,
    wait_until,
)
from training.config import TrainConfig
from training.runs import run_record
from training.runs.run_record import RunRecord
from training.session.trainer import TrainRequest, train

QUIET = Console(file=open(os.devnull, "w"))  # noqa: SIM115 (lives for the whole module)


def test_too_many_restarts_stop_with_the_instance_and_its_last_output(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    env = GameVecEnv(
        LaunchConfig(command=faulty(tmp_path, "die", after=1, once=False), base_port=port_block(1)),
        max_restarts_per_minute=2,
    )
    try:
        env.reset()
        with pytest.raises(
            TooManyRestarts, match="game instance 0: 3 game restarts within a minute"
        ) as caught:
            for _ in range(20):
                env.step(np.zeros((2, 1), dtype=np.float32))
        assert "last output: " in str(caught.value) and "injecting fault die" in str(caught.value)
    finally:
        env.close()


def test_training_survives_a_crashing_game_and_counts_the_restart(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    game = game_executable(tmp_path / "crashy_game.x86_64", faulty(tmp_path, "die", after=700))
    overrides = {
        "n_parallel": 2, "agents_per_instance": 2, "n_steps": 512, "batch_size": 512, "n_epochs": 1,
        "timesteps": 8192, "port": port_block(2), "game_bin": str(game),
    }  # fmt: skip
    outcome = train(TrainRequest(tmp_path, "survivor", overrides), QUIET)
    assert outcome.status == "finished" and outcome.record.total_timesteps >= 8192
    assert outcome.record.extra.restarts == 2
    log = (tmp_path / "logs" / "survivor" / "train.log").read_text()
    assert "restarted game instance 0" in log and "restarted game instance 1" in log
    from tests.conftest import tensorboard_steps

    assert (
        max(
            value
            for _, value in tensorboard_steps(tmp_path / "logs" / "survivor", "games/restarts")
        )
        == 2
    )


def game_pids(port: int) -> list[int]:
    """Processes connected to the trainer's ``port`` (launched or forked alike)."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote_port = int(fields[2].split(":")[1], 16)
        if remote_port == port and fields[3] == "01":  # 01: ESTABLISHED
            inodes.add(f"socket:[{fields[9]}]")
    found = []
    for fd_folder in Path("/proc").glob("[0-9]*/fd"):
        try:
            links = {os.readlink(fd) for fd in fd_folder.iterdir()}
        except OSError:
            continue
        if links & inodes:
            found.append(int(fd_folder.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_sigkilled_trainer_leaves_no_games_and_resumes_from_its_newest_checkpoint(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    port = port_block(2)
    env = {**os.environ, "LANDER_HOME": str(tmp_path)}
    args = ["train", "killed", "--no-git", "--timesteps", "10000000", "--port", str(port), *SMALL]
    trainer = subprocess.Popen(
        [str(LANDER), *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    folder = tmp_path / "checkpoints" / "killed"
    try:
        wait_until(lambda: len(list(folder.glob("ckpt_*.zip"))) >= 2, 120, "two checkpoints")
        games = game_pids(port) + game_pids(port + 1)
        assert len(games) == 2
        trainer.send_signal(signal.SIGKILL)
        trainer.wait(timeout=10)
    finally:
        if trainer.poll() is None:
            trainer.kill()
    wait_until(lambda: not any(alive(pid) for pid in games), 15, "games to exit after SIGKILL")
    status = subprocess.run(
        [str(LANDER), "status"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert "crashed" in next(line for line in status.stdout.splitlines() if " killed " in line)
    newest = sorted(folder.glob("ckpt_*.zip"))[-1]
    (folder / ".ckpt_999999999999.zip.tmp").write_bytes(b"half-written")
    resumed = subprocess.run(
        [str(LANDER), "train", "killed", "--resume", "killed", "--no-git", "--timesteps", "512", "--port", str(port)],
        env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    record = RunRecord.load(folder / "run.json")
    assert record.resumed_from == str(newest)
    assert record.status == "finished"
    assert not list(folder.glob("*.tmp"))


class _BreaksAfterTwoRollouts(BaseCallback):
    """A bug inside training: raised from a callback, as any library error would be."""

    def __init__(self, port: int) -> None:
        super().__init__()
        self.port, self.rollouts, self.games = port, 0, list[int]()

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        self.rollouts += 1
        if self.rollouts == 2:
            self.games = game_pids(self.port) + game_pids(self.port + 1)
            raise RuntimeError("a bug in a callback")


def test_an_unexpected_error_inside_training_still_ends_in_order(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    port = port_block(2)
    breaks = _BreaksAfterTwoRollouts(port)
    overrides = {"timesteps": 100_000, "n_parallel": 2, "agents_per_instance": 2, "port": port}
    outcome = train(TrainRequest(tmp_path, "broken", overrides), QUIET, extra_callbacks=[breaks])
    assert outcome.status == "failed" and outcome.exit_code == 1
    assert outcome.error == "RuntimeError: a bug in a callback"
    assert outcome.final_saved and (tmp_path / "checkpoints" / "broken" / "final.zip").is_file()
    record = RunRecord.load(tmp_path / "checkpoints" / "broken" / "run.json")
    assert record.status == "failed" and record.error == outcome.error
    assert len(breaks.games) == 2
    wait_until(lambda: not any(alive(pid) for pid in breaks.games), 15, "the games to be closed")
    log = (tmp_path / "logs" / "broken" / "train.log").read_text()
    assert "Traceback" in log and "run broken failed" in log


def _pids_with(marker: str) -> list[int]:
    """Processes whose command line holds ``marker``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def test_no_game_outlives_a_trainer_killed_mid_step_or_terminated_mid_launch(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    env = {**os.environ, "LANDER_HOME": str(tmp_path)}
    # A game that stops reading its socket mid-run, and a trainer killed while it waits.
    hanging = game_executable(tmp_path / "hangs.x86_64", faulty(tmp_path, "hang", after=5))
    port = port_block(2)
    trainer = subprocess.Popen(
        [str(LANDER), "train", "stuck", "--no-git", "--game-bin", str(hanging), "--port", str(port),
         "--n-parallel", "1", "--read-timeout", "300", "--max-restarts-per-minute", "0"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(lambda: bool(game_pids(port)), 120, "the game to connect")
        games = game_pids(port)
        wait_until(
            lambda: (tmp_path / "markers").exists() and any((tmp_path / "markers").iterdir()),
            60,
            "the hang",
        )
    finally:
        trainer.kill()
        trainer.wait(timeout=10)
    wait_until(lambda: not any(alive(pid) for pid in games), 15, "the hanging game to die")

    # SIGTERM while the games are still starting: one line, and no game left behind.
    marker = f"slow-start-{port}"
    slow = game_executable(
        tmp_path / "slow.x86_64", [sys.executable, "-c", "import time; time.sleep(300)", marker]
    )
    launching = subprocess.Popen(
        [str(LANDER), "train", "early", "--no-git", "--game-bin", str(slow), "--port", str(port_block(2))],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    wait_until(lambda: bool(_pids_with(marker)), 60, "the slow game to start")
    started = _pids_with(marker)
    launching.send_signal(signal.SIGTERM)
    _, stderr = launching.communicate(timeout=30)
    assert launching.returncode == 128 + signal.SIGTERM and "terminated" in stderr
    assert "Traceback" not in stderr
    wait_until(lambda: not any(alive(pid) for pid in started), 15, "the slow game to be closed")


def test_a_remote_that_never_answers_is_given_up_on_time(
    checkout: tuple[Path, Path], port_block: Callable[[int], int]
) -> None:
    work, _ = checkout
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections (the kernel does) and never says a word
    git(work, "remote", "set-url", "origin", f"git://127.0.0.1:{silent.getsockname()[1]}/x.git")
    env = {**os.environ, **GIT_IDENTITY, "LANDER_HOME": str(work), "LANDER_GIT_TIMEOUT": "3"}
    started = time.monotonic()
    try:
        trained = subprocess.run(
            [str(LANDER), "train", "silent", "--timesteps", "512", "--port", str(port_block(2)), *SMALL],
            env=env, capture_output=True, text=True, timeout=240, check=False,
        )  # fmt: skip
    finally:
        silent.close()
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert "could not pull (the remote did not answer within 3 s)" in trained.stdout
    assert "push failed (the remote did not answer within 3 s)" in trained.stdout
    assert time.monotonic() - started < 120
    assert "silent: " in git(work, "log", "-1", "--format=%s"), "the commit is kept"


def test_a_full_disk_still_records_the_final_status_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.json"
    record = RunRecord(run="full", config=TrainConfig())
    record.save(path)

    def no_room(*_: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(run_record, "write_json_atomic", no_room)
    record.status, record.error = "failed", "No space left on device (checkpoints/full)"
    record.save(path)
    again = RunRecord.load(path)
    assert (again.status, again.error) == ("failed", "No space left on device (checkpoints/full)")


def test_full_disk_gives_a_clear_error_and_leaves_earlier_checkpoints_intact(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    port = port_block(2)
    env = {**os.environ, "LANDER_HOME": str(tmp_path)}
    first = subprocess.run(
        [str(LANDER), "train", "full", "--no-git", "--timesteps", "4096", "--port", str(port), *SMALL],
        env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    folder = tmp_path / "checkpoints" / "full"
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.glob("*.zip")}

    def small_disk() -> None:
        # Files may grow to 64 KiB: a model checkpoint (about 150 KiB) does not fit.
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))

    full = subprocess.run(
        [str(LANDER), "train", "full", "--resume", "full", "--no-git", "--timesteps", "4096", "--port", str(port)],
        env=env, capture_output=True, text=True, timeout=180, check=False, preexec_fn=small_disk,
    )  # fmt: skip
    output = full.stdout + full.stderr
    assert full.returncode != 0
    assert "cannot write" in output and "File too large" in output
    assert "Traceback" not in output
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.glob("*.zip")}
    assert after == before, "no earlier checkpoint was touched"
    assert not list(folder.glob("*.tmp"))
    assert RunRecord.load(folder / "run.json").status == "failed"


def test_push_rejected_because_the_remote_moved_is_rebased_and_retried(
    checkout: tuple[Path, Path], tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    work, remote = checkout
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(remote), str(other))
    (other / "elsewhere.txt").write_text("pushed from another machine\n")
    git(other, "add", "elsewhere.txt")
    git(other, "commit", "-q", "-m", "another machine")

    env = {**os.environ, **GIT_IDENTITY, "LANDER_HOME": str(work)}
    trainer = subprocess.Popen(
        [str(LANDER), "train", "moved", "--timesteps", "4096", "--port", str(port_block(2)), *SMALL],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    log = work / "logs" / "moved" / "train.log"
    wait_until(lambda: log.exists(), 60, "training to start (after its pull)")
    git(other, "push", "-q")  # the remote moves while the run trains
    output, _ = trainer.communicate(timeout=180)
    assert trainer.returncode == 0, output
    assert "pushed to origin/main" in output
    history = git(remote, "log", "--format=%s", "main")
    assert "another machine" in history and "moved: " in history


def test_port_in_use_moves_to_the_next_free_block_or_names_the_port(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    base = port_block(6)
    holder = GameInstance(0, base + 1)
    try:
        with pytest.raises(PortInUse, match=f"port 127.0.0.1:{base + 1} is already in use"):
            GameVecEnv(LaunchConfig(**LANDER_GAME, n_instances=2, base_port=base, auto_port=False))
        outcome = train(
            TrainRequest(
                tmp_path, "ports", {"timesteps": 512, "n_parallel": 2, "n_steps": 32, "port": base}
            ),
            QUIET,
        )
        assert outcome.status == "finished"
        assert (
            f"ports {base}+ were taken" in (tmp_path / "logs" / "ports" / "train.log").read_text()
        )
    finally:
        holder.close()


def test_bad_input_is_one_line_a_non_zero_exit_and_nothing_written(tmp_path: Path) -> None:
    not_executable = tmp_path / "game.x86_64"
    not_executable.write_text("#!/bin/sh\n")
    not_a_model = tmp_path / "model.zip"
    not_a_model.write_bytes(b"PK but not really")
    settings_file = tmp_path / "bad.toml"
    settings_file.write_text("warp_factor = 9\n")
    wrong_kind = tmp_path / "kind.toml"
    wrong_kind.write_text('n_parallel = "four"\n')
    text_game = tmp_path / "notes.x86_64"  # executable, but text: the kernel will not run it
    text_game.write_text("some notes\n")
    text_game.chmod(0o755)
    cases = [
        (["train", "x", "--no-git", "--game-bin", str(not_executable)], "is not executable"),
        (
            ["train", "x", "--no-git", "--resume", str(not_a_model)],
            "is not a lander/SB3 model checkpoint",
        ),
        (
            ["train", "x", "--no-git", "--config", str(settings_file)],
            "unknown setting(s) warp_factor",
        ),
        (["train", "x", "--no-git", "--config", str(wrong_kind)], "n_parallel must be int"),
        (["export", "nothing"], "run 'nothing' does not exist"),
        (["play", str(tmp_path / "missing.json")], "missing.json' does not exist"),
        (["play", "nothing"], "run 'nothing' does not exist"),
        (["train", "x", "--no-git", "--game-arg", "difficulty"], "--game-arg expects KEY=VALUE"),
        (["train", "x", "--no-git", "--seed", "-1"], "seed must be 0 or more"),
        (["train", "x", "--no-git", "--learning-rate", "nan"], "learning-rate must be a finite"),
        (["train", "x", "--no-git", "--ent-coef", "inf"], "ent-coef must be a finite number"),
        (["train", "x", "--no-git", "--speedup", "nan"], "speedup must be a finite number"),
        (["train", "x", "--no-git", "--timesteps", "1" + "0" * 20], "timesteps must be at most"),
        (["train", "x", "--no-git", "--game-bin", str(text_game)], "Exec format error"),
        (["export", "x", "--checkpoint", str(not_a_model)], "is not a lander/SB3 model"),
        (["start", "x", "--tb-host", "127.0.0.1;x"], "is not an address or host name"),
    ]
    if not torch.cuda.is_available():
        cases.append((["train", "x", "--no-git", "--device", "cuda"], "sees no CUDA device"))
    for args, message in cases:
        result = lander(tmp_path, *args)
        assert result.returncode != 0, args
        assert message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr + result.stdout
        assert len(result.stderr.strip().splitlines()) <= 2
    assert not (tmp_path / "checkpoints").exists()
    assert not (tmp_path / "bots").exists()
    assert not (tmp_path / "logs").exists() or not any((tmp_path / "logs").iterdir())


# -- property-based fuzzing -------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=10), JSON_VALUES, max_size=6))
def test_any_message_survives_a_frame_round_trip(message: dict[str, Any]) -> None:
    frame = protocol.encode_message(message)
    assert frame[4:].isascii()
    assert protocol.decode_frames(frame) == [message]


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=64))
def test_frame_decoder_refuses_garbage_only_with_frame_errors(data: bytes) -> None:
    try:
        messages = protocol.decode_frames(data, max_bytes=1024)
    except protocol.FrameError:
        return
    assert all(isinstance(m, dict) for m in messages)


SPACE_SPECS = st.fixed_dictionaries(
    {},
    optional={
        "size": st.one_of(
            st.integers(-2, 5),
            st.floats(-2, 5),
            st.lists(st.integers(-1, 4), max_size=3),
            st.text(max_size=3),
        ),
        "space": st.sampled_from(["box", "discrete", "other"]),
        "action_type": st.sampled_from(["continuous", "discrete", "sideways"]),
        "low": st.floats(-5, 0),
    },
)


@settings(max_examples=500, deadline=None)
@given(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["env_info", "reset"])},
        optional={
            "observation_space": st.one_of(
                st.dictionaries(st.text(max_size=6), SPACE_SPECS, max_size=3),
                st.lists(st.dictionaries(st.text(max_size=6), SPACE_SPECS, max_size=2), max_size=3),
                JSON_VALUES,
            ),
            "action_space": st.one_of(
                st.dictionaries(st.text(max_size=6), SPACE_SPECS, max_size=3),
                st.lists(st.dictionaries(st.text(max_size=6), SPACE_SPECS, max_size=2), max_size=3),
                JSON_VALUES,
            ),
            "n_agents": st.one_of(st.integers(-1, 4), st.floats(-1, 4), st.text(max_size=2)),
            "agent_policy_names": st.one_of(st.lists(st.text(max_size=4), max_size=4), JSON_VALUES),
        },
    )
)
def test_env_info_parser_accepts_or_raises_a_protocol_violation_only(
    message: dict[str, Any],
) -> None:
    try:
        info = parse_env_info(message, instance=0)
    except ProtocolViolation as exc:
        assert str(exc).startswith("game instance 0: ")
        return
    assert info.n_agents >= 1 and info.observations and info.actions
    json.dumps([entry.key for entry in info.actions])
