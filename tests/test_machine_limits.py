"""Limits that fit the machine and help that tells the truth, each made for real: a game that
declares 10,000 agents trains (the fixed cap of 4,096 is gone), what does not fit this
machine's memory is refused with the figures; a disk with too little room for a run is said
before its first step (a tmpfs in a private mount namespace, a file size limit), and a run
that stopped on a full disk shows so in ``status``; ``--help`` shows the defaults the chosen
game gets, and the README's table of general defaults is the settings' own."""

from __future__ import annotations

import os
import re
import resource
import subprocess
from collections.abc import Callable
from pathlib import Path

import libtmux
import pytest

from cli.common.train_flags import option_name
from game_bridge.machine_memory import available_memory
from game_bridge.spaces import agent_limit
from tests.conftest import GIT_IDENTITY, LANDER, REPO_ROOT, SMALL, lander, private_mounts
from training.config import CONTINUOUS_PICTURE_DEFAULTS, TrainConfig


def test_a_game_declaring_10000_agents_trains(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    """The bundled lander over TCP with 10,000 agents in one instance: the run trains,
    exports and evaluates (a fixed cap of 4,096 refused it)."""
    assert agent_limit() > 10_000
    done = lander(
        tmp_path, "train", "crowd", "--no-git", "--game-arg", "agents=10000", "--n-parallel",
        "1", "--n-steps", "4", "--n-epochs", "1", "--timesteps", "40000",
        "--port", str(port_block(1)), timeout=300,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "10000 envs on 1 lander instance(s)" in output
    assert "run crowd finished at 40,000 steps" in output
    assert (tmp_path / "bots" / "crowd.json").is_file()


def test_what_does_not_fit_the_memory_is_refused_with_the_figures(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    """A rollout of a million steps of 10,000 agents, and a billion agents per instance:
    each one line naming what it needs and what the machine has, exit 1, no traceback,
    before any buffer is made."""
    available = available_memory()
    assert available is not None
    rollout = lander(
        tmp_path, "train", "vast", "--no-git", "--game-arg", "agents=10000", "--n-parallel",
        "1", "--n-steps", "1000000", "--timesteps", "40000", "--port", str(port_block(1)),
        timeout=300,
    )  # fmt: skip
    output = rollout.stdout + rollout.stderr
    assert rollout.returncode == 1 and "Traceback" not in output, output[-3000:]
    (line,) = [text for text in output.splitlines() if "a rollout of" in text]
    assert "1,000,000 steps x 10,000 agents x" in line and "values (float32) needs" in line
    have = re.search(r"the ([\d,.]+) GB this machine has available", line)
    assert have is not None, line
    assert 0.7 < float(have.group(1).replace(",", "")) * 2**30 / available < 1.3, line
    agents = lander(tmp_path, "train", "many", "--no-git", "--agents-per-instance", "1000000000")
    output = agents.stdout + agents.stderr
    assert agents.returncode == 1 and "Traceback" not in output, output
    (line,) = [text for text in output.splitlines() if "--agents-per-instance is" in text]
    assert "1,000,000,000: one step of that many agents needs at least 953.7 GB" in line
    most = re.search(r"it takes at most ([\d,]+) agents", line)
    assert most is not None, line
    assert 0.7 < int(most.group(1).replace(",", "")) / agent_limit() < 1.3, line


SMALL_CHECKPOINTS = """
home="$1"; shift
mkdir -p "$home/checkpoints"
mount -t tmpfs -o size=200k tmpfs "$home/checkpoints" || exit 97
"$@"
echo "trainer exit $?"
exec "$1" status
"""
"""Runs ``lander train ...`` with checkpoints/ on a 200 KB tmpfs (a private mount namespace,
gone with the command), then ``lander status`` on the same disk."""


def test_a_run_on_a_small_disk_is_warned_before_its_first_step_and_status_says_disk_full(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    """200 KB free for checkpoints/: ``train`` says so before its first step, with what
    the run will write there; the run stops at the checkpoint that does not fit, and
    ``status`` shows it failed on a full disk."""
    if not private_mounts():
        pytest.skip("this machine allows no private tmpfs mount (unshare -rm)")
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", SMALL_CHECKPOINTS, "sh", str(tmp_path), str(LANDER),
         "train", "tight", "--no-git", "--timesteps", "8192", "--checkpoint-every", "1024",
         "--n-parallel", "2", "--port", str(port_block(2))],
        capture_output=True, text=True, timeout=300, check=False, stdin=subprocess.DEVNULL,
        env={**os.environ, "LANDER_HOME": str(tmp_path), "COLUMNS": "250"},
    )  # fmt: skip
    lines = (done.stdout + done.stderr).splitlines()
    warned = [i for i, line in enumerate(lines) if "low disk:" in line]
    first_step = next(i for i, line in enumerate(lines) if line.startswith("steps="))
    assert warned and warned[0] < first_step, lines
    warning = lines[warned[0]]
    assert f"MB free at {tmp_path / 'checkpoints'}" in warning
    assert "checkpoints of" in warning and "--keep-checkpoints" in warning
    assert "trainer exit 1" in lines, lines[-20:]
    # The error names its path: past the 250 columns where a long temporary path runs, the
    # console wraps it, so the words are looked for across the lines.
    assert "No space left on device" in "".join(lines), lines[-40:]
    (row,) = [line for line in lines if "│ tight " in line]
    assert "failed: disk full" in row


def test_a_file_size_limit_below_a_checkpoint_is_said_before_the_first_step(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    """Files may grow to 64 KB (``ulimit -f``) and a checkpoint is about 150 KB: ``train``
    says so first; the run fails at its first checkpoint; status shows a full disk."""

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))

    done = subprocess.run(
        [str(LANDER), "train", "capped", "--no-git", "--timesteps", "4096", "--port",
         str(port_block(2)), *SMALL],
        capture_output=True, text=True, timeout=300, check=False, preexec_fn=small_files,
        env={**os.environ, "LANDER_HOME": str(tmp_path)}, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    lines = (done.stdout + done.stderr).splitlines()
    warned = [i for i, line in enumerate(lines) if "(ulimit -f)" in line]
    assert warned and warned[0] < next(i for i, ln in enumerate(lines) if "run capped:" in ln)
    assert "files may grow to 0.07 MB here" in lines[warned[0]]
    assert done.returncode == 1
    status = lander(tmp_path, "status", env={"COLUMNS": "250"})
    (row,) = [line for line in status.stdout.splitlines() if "│ capped " in line]
    assert "failed: disk full" in row


def test_start_says_a_disk_too_small_before_it_starts(
    tmp_path: Path, tmux_socket: str, port_block: Callable[[int], int]
) -> None:
    """``lander start`` plans the run and says the disk's shortfall in its own output (a
    file size limit here), then starts the run in tmux as asked."""

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))

    done = subprocess.run(
        [str(LANDER), "start", "tiny", "--no-git", "--no-auto-resume", "--timesteps", "2048",
         "--port", str(port_block(2)), "--tb-port", str(port_block(1)), *SMALL],
        capture_output=True, text=True, timeout=120, check=False, preexec_fn=small_files,
        env={**os.environ, **GIT_IDENTITY, "LANDER_HOME": str(tmp_path),
             "LANDER_TMUX_SOCKET": tmux_socket},
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    lines = output.splitlines()
    warned = [i for i, line in enumerate(lines) if "(ulimit -f)" in line]
    started = [i for i, line in enumerate(lines) if line.startswith("started run tiny")]
    assert warned and started and warned[0] < started[0], output
    assert libtmux.Server(socket_name=tmux_socket).sessions, "the run was started anyway"


def _help_default(game_flags: list[str], option: str) -> str:
    done = lander(REPO_ROOT, "train", "x", *game_flags, "--help", env={"COLUMNS": "100"})
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    match = re.search(re.escape(option) + r" .*?\[default: ([^\]]*)\]", text)
    assert match is not None, text[:3000]
    return match.group(1)


@pytest.mark.parametrize(
    ("game_flags", "option", "shown"),
    [
        ([], "--n-steps", "32 for lander; general: 64"),
        ([], "--agents-per-instance", "8 for lander; general: 4"),
        (["--game", "stroke"], "--normalize-observations", "off for stroke; general: on"),
        (["--game", "gym:CartPole-v1"], "--n-steps", "64"),
        (["--game", "gym:CartPole-v1"], "--agents-per-instance", "4"),
        (["--game-bin", "/bin/true"], "--adaptive-kl", "0.01"),
        (
            ["--game", "gym:BreakoutNoFrameskip-v4"],
            "--n-epochs",
            "4 for gym:BreakoutNoFrameskip-v4; general: 10",
        ),
        (["--game", "gym:BreakoutNoFrameskip-v4"], "--log-std-init", "0"),
        (
            ["--game", "gym:BreakoutNoFrameskip-v4"],
            "--net-width",
            "0 for gym:BreakoutNoFrameskip-v4; general: 64",
        ),
        (
            ["--game", "gym:CarRacing-v3"],
            "--camera-encoder",
            "small for gym:CarRacing-v3; general: centroids",
        ),
        (["--game", "gym:CarRacing-v3"], "--log-std-init", "-2 for gym:CarRacing-v3; general: 0"),
        (
            ["--game", "gym:CarRacing-v3"],
            "--n-steps",
            f"{CONTINUOUS_PICTURE_DEFAULTS['n_steps']} for gym:CarRacing-v3; general: 64",
        ),
    ],
)
def test_help_shows_the_defaults_the_chosen_game_gets(
    game_flags: list[str], option: str, shown: str
) -> None:
    """``train --help`` with a bundled game shows its own defaults beside the general ones;
    a ``gym:`` game and a game binary show the general ones, a ``gym:`` game that sends
    pictures the defaults for pictures, and one that acts continuously from pictures
    those for continuous actions from pictures too."""
    assert _help_default(game_flags, option).startswith(shown)


def test_the_readme_names_the_general_defaults_as_they_are() -> None:
    """Each row of the README's table of general defaults is the setting's own default."""
    readme = (REPO_ROOT / "README.md").read_text()
    rows = re.findall(r"^\| `(--[a-z-]+)` \| ([^|]+) \|", readme, flags=re.MULTILINE)
    named = {flag: value.strip() for flag, value in rows}
    for needed in ("--normalize-observations", "--normalize-rewards", "--adaptive-kl",
                   "--std-regrowth", "--agents-per-instance"):  # fmt: skip
        assert needed in named, needed
    general = TrainConfig()
    for name in vars(general):
        flag = option_name(name)
        if flag not in named:
            continue
        value = getattr(general, name)
        expected = ("on" if value else "off") if isinstance(value, bool) else f"{value:g}"
        assert named[flag] == expected, (flag, named[flag], expected)


READ_ONLY = """
home="$1"; place="$2"; shift 2
mkdir -p "$home/$place"
mount --bind "$home/$place" "$home/$place" && mount -o remount,ro,bind "$home/$place" || exit 97
exec "$@"
"""
"""Runs a command with ``home/place`` read-only (a bind mount in a private namespace)."""


@pytest.mark.parametrize("place", ["checkpoints", "logs"])
def test_a_read_only_place_is_one_line_before_training(
    tmp_path: Path, place: str, port_block: Callable[[int], int]
) -> None:
    """checkpoints/ or logs/ on a read-only mount: one red line naming the place, exit 1,
    no traceback."""
    if not private_mounts():
        pytest.skip("this machine allows no private mount (unshare -rm)")
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", READ_ONLY, "sh", str(tmp_path), place, str(LANDER),
         "train", "frozen", "--no-git", "--timesteps", "2048", "--port", str(port_block(2)),
         *SMALL],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
        env={**os.environ, "LANDER_HOME": str(tmp_path)},
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Traceback" not in output
    (line,) = [text for text in output.splitlines() if text.startswith("error:")]
    assert f"Read-only file system ({tmp_path / place}" in line, line
