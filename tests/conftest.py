"""Shared fixtures: free loopback port blocks, the test games, deadlines."""

from __future__ import annotations

import os
import random
import shlex
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import libtmux
import pytest

from game_bridge.launcher import LaunchConfig
from game_bridge.vec_env import GameVecEnv
from games import launch_settings

TESTS_DIR = Path(__file__).resolve().parent
GAMES_DIR = TESTS_DIR / "games"
REPO_ROOT = TESTS_DIR.parent
LANDER = REPO_ROOT / ".venv" / "bin" / "lander"
"""The installed CLI, as a user runs it (tests run it in a checkout of their own)."""
LANDER_GAME = launch_settings("lander")
"""``LaunchConfig(**LANDER_GAME, ...)`` launches the bundled lander (forked)."""


def lander_games(agents: int, seed: int = 0, **game_args: str) -> GameVecEnv:
    """One instance of the bundled lander with ``agents`` agents over real TCP (its
    ``--game-arg`` settings as keywords: ``observation="pixels"``)."""
    return GameVecEnv(
        LaunchConfig(
            **LANDER_GAME,
            n_instances=1,
            base_port=find_free_port_block(1),
            seed=seed,
            game_args={"agents": str(agents), **game_args},
        )
    )


def _block_is_free(base: int, count: int) -> bool:
    for port in range(base, base + count):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def private_mounts() -> bool:
    """Whether this machine lets a process mount a tmpfs of its own (a private mount
    namespace: root, or a user namespace), for the tests that fill or freeze a disk."""
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
        capture_output=True, check=False,
    )  # fmt: skip
    return probe.returncode == 0


def find_free_port_block(count: int) -> int:
    """A base port whose next ``count`` loopback ports are free right now."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, 60000 - count)
        if _block_is_free(base, count):
            return base
    raise RuntimeError("no free block of loopback ports")


@pytest.fixture
def port_block() -> Callable[[int], int]:
    """Call with a count to get a base port of that many free ports."""
    return find_free_port_block


def python_game(script: str, *args: str) -> list[str]:
    """The command that runs one of the test games under tests/games."""
    return [sys.executable, str(GAMES_DIR / script), *args]


def game_executable(path: Path, command: list[str]) -> Path:
    """An executable at ``path`` that runs ``command`` with its arguments, as a
    game export would be launched by path (``--game-bin``)."""
    path.write_text("#!/bin/sh\nexec " + shlex.join(command) + ' "$@"\n')
    path.chmod(0o755)
    return path


def exited(pid: int) -> bool:
    """True when process ``pid`` is gone; a zombie counts (it has exited, only unreaped)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] == "Z"
    except FileNotFoundError:
        return True


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` until it holds, failing the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "lander tests",
    "GIT_AUTHOR_EMAIL": "tests@lander.invalid",
    "GIT_COMMITTER_NAME": "lander tests",
    "GIT_COMMITTER_EMAIL": "tests@lander.invalid",
}
SMALL = [
    "--n-parallel",
    "2",
    "--agents-per-instance",
    "2",
    "--n-steps",
    "256",
    "--checkpoint-every",
    "2048",
]


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_IDENTITY}
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture
def tmux_socket() -> Iterator[str]:
    """A private tmux server, killed afterwards with everything it ran."""
    name = f"lander-test-{uuid.uuid4().hex[:8]}"
    yield name
    server = libtmux.Server(socket_name=name)
    if server.is_alive():
        server.kill()


@pytest.fixture
def checkout(tmp_path: Path) -> tuple[Path, Path]:
    """A lander checkout (as a user would have) whose origin is a bare repository."""
    remote = tmp_path / "remote.git"
    work = tmp_path / "work"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    for folder in ("checkpoints", "logs", "bots"):
        (work / folder).mkdir()
        (work / folder / ".gitkeep").touch()
    shutil.copy(REPO_ROOT / ".gitignore", work / ".gitignore")
    (work / "notes.txt").write_text("the user's own file\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "init")
    git(work, "remote", "add", "origin", str(remote))
    git(work, "push", "-q", "-u", "origin", "main")
    return work, remote


def lander(
    home: Path,
    *args: str,
    socket: str | None = None,
    timeout: float = 600,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the installed CLI in the checkout ``home`` as a user would (no terminal, no
    standard input); with ``socket``, its tmux is a private server of that name."""
    env = {**os.environ, **GIT_IDENTITY, "LANDER_HOME": str(home), **(env or {})}
    if socket:
        env["LANDER_TMUX_SOCKET"] = socket
    return subprocess.run(
        [str(LANDER), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@contextmanager
def lander_server(
    home: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    """``lander ARGS`` (``play --web ...`` or ``serve ...``) in ``home`` on a free loopback
    port (``--web-port``/``--port``), until the block ends; yields the port once it listens."""
    port = find_free_port_block(1)
    flag = "--web-port" if args[:2] == ("play", "--web") else "--port"
    server = subprocess.Popen(
        [str(LANDER), *args, flag, str(port)],
        env={**os.environ, **GIT_IDENTITY, "LANDER_HOME": str(home), **(env or {})},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip

    def listening() -> bool:
        assert server.poll() is None, server.communicate()[0]
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_until(listening, 90, "the server to listen")
        yield port, server
    finally:
        server.terminate()
        server.wait(timeout=10)


def train_small(home: Path, run: str, *args: str) -> None:
    """``lander train RUN`` of 512 steps on 2 small games, without git; it must succeed."""
    trained = lander(
        home, "train", run, "--no-git", "--timesteps", "512",
        "--port", str(find_free_port_block(2)), *SMALL, *args, timeout=240,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stdout + trained.stderr


def background_trainer(home: Path, run: str, *args: str, **env: str) -> subprocess.Popen[str]:
    """``lander train RUN`` on 2 small games in the background, its output merged in a pipe."""
    return subprocess.Popen(
        [str(LANDER), "train", run, "--port", str(find_free_port_block(2)), *SMALL, *args],
        env={**os.environ, **GIT_IDENTITY, "LANDER_HOME": str(home), **env},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def trainer_pids(run: str) -> list[int]:
    """The `lander train RUN` trainer processes on this machine (not an `--auto-resume`
    supervisor, which only waits on its trainer)."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            parts = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        wanted = b"cli" in parts and b"train" in parts and run.encode() in parts
        if wanted and b"--auto-resume" not in parts:
            pids.append(int(cmdline.parent.name))
    return pids


def faulty(tmp_path: Path, fault: str, after: int = 3, once: bool = True) -> list[str]:
    """The faulty test game with ``fault`` after ``after`` good steps (once per instance)."""
    marker = tmp_path / "markers"
    marker.mkdir(exist_ok=True)
    extra = [f"--once_marker={marker}"] if once else []
    return python_game("faulty_game.py", f"--fault={fault}", f"--after={after}", *extra)


def godot_style(home: Path, *args: str) -> Path:
    """The Godot-style test game with ``args``, as an executable in ``home``."""
    return game_executable(home / "game.x86_64", python_game("godot_style_game.py", *args))


def train_briefly(
    home: Path, run: str, game: Path, port: int, *flags: str
) -> subprocess.CompletedProcess[str]:
    """``lander train RUN`` for a few rollouts on ``game`` (one instance of 2 agents unless
    ``flags`` say otherwise)."""
    return lander(
        home, "train", run, "--game-bin", str(game), "--n-parallel", "1",
        "--agents-per-instance", "2", "--timesteps", "128", "--n-steps", "32",
        "--port", str(port), *flags,
    )  # fmt: skip


def start_small(work: Path, run: str, tmux_socket: str, *flags: str) -> None:
    """``lander start RUN`` with 2 games of 4 agents (auto-resume is start's default)."""
    started = lander(
        work, "start", run, "--n-parallel", "2", "--agents-per-instance", "4", "--no-git",
        "--port", str(find_free_port_block(2)), "--tb-host", "127.0.0.1",
        "--tb-port", str(find_free_port_block(1)), *flags, socket=tmux_socket,
    )  # fmt: skip
    assert started.returncode == 0, started.stdout + started.stderr


def tensorboard_steps(folder: Path, tag: str) -> list[tuple[int, float]]:
    """Every (step, value) of a scalar across all event files in ``folder`` (not subfolders)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    points: list[tuple[int, float]] = []
    for events in sorted(folder.glob("events.out.tfevents.*")):
        accumulator = EventAccumulator(str(events))
        accumulator.Reload()
        if tag in accumulator.Tags()["scalars"]:
            points.extend((e.step, e.value) for e in accumulator.Scalars(tag))
    return sorted(points)


def skips_are_failures() -> bool:
    """Under CI (``CI=true``) the README's test set-up (``./lander setup --dev``) must
    give the machine everything the tests need, so a skipped test means it did not."""
    return os.environ.get("CI") == "true" or os.environ.get("LANDER_NO_SKIPS") == "1"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the session for any skip when :func:`skips_are_failures`, naming each one."""
    if not skips_are_failures():
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if not skipped:
        return
    for report in skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        print(f"\nskipped under CI: {report.nodeid}: {reason}", file=sys.stderr)
    print(
        f"{len(skipped)} test(s) skipped: `./lander setup --dev` must install what they need",
        file=sys.stderr,
    )
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
