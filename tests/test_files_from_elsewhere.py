"""Files that came from elsewhere (a bot from a download or a pull, a hand-edited record,
a settings file, a plan) are read as input, never obeyed: a bot never names the program
lander starts, a record never breaks status, numbers and sizes are bounded before any
work starts, and every refusal is one line and a non-zero exit.

Every test drives the real CLI in a subprocess over a real checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import libtmux
import pytest

from tests.conftest import GIT_IDENTITY, LANDER, git, lander, train_small


def lander_bot(run: str = "r1", **changes: Any) -> dict[str, Any]:
    """A valid bot of the bundled lander, written by hand (7 observations, 2 thrusts)."""
    spec: dict[str, Any] = {
        "format": "lander-bot",
        "version": 1,
        "run": run,
        "timesteps": 1000,
        "observation": {"size": 7},
        "action": {"type": "continuous", "size": 2, "low": [-1.0, -1.0], "high": [1.0, 1.0]},
        "layers": [
            {"weights": [[0.1] * 7] * 4, "biases": [0.0] * 4, "activation": "tanh"},
            {"weights": [[0.2] * 4] * 2, "biases": [0.0] * 2, "activation": "linear"},
        ],
        "trained_with": {"game": "lander", "game_args": {}, "action_repeat": 6},
    }
    spec.update(changes)
    return spec


def write_bot(path: Path, spec: dict[str, Any]) -> Path:
    path.write_text(json.dumps(spec))
    return path


def one_line_error(result: subprocess.CompletedProcess[str], *expected: str) -> str:
    """The refusal's text, after checking it is one line, a non-zero exit and no traceback."""
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    for text in expected:
        assert text in errors[0], output
    return errors[0]


def test_a_bot_never_names_the_program_lander_starts(tmp_path: Path) -> None:
    """Finding 1: a bot's ``trained_with.game_bin`` is not run; the refusal names the game and
    how to pass --game-bin, and with --game-bin the user's own program is the one started."""
    marker = tmp_path / "ran"
    hostile = tmp_path / "game.x86_64"
    hostile.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hostile.chmod(0o755)
    bot = write_bot(
        tmp_path / "downloaded.json",
        lander_bot(trained_with={"game_bin": str(hostile), "game_args": {}, "transport": "tcp"}),
    )
    refused = lander(tmp_path, "eval", str(bot), timeout=120)
    one_line_error(refused, "'game.x86_64'", "--game-bin")
    assert not marker.exists(), "the program the bot named was started"

    chosen = tmp_path / "mine.x86_64"
    chosen.write_text(f"#!/bin/sh\ntouch {tmp_path / 'mine-ran'}\nexit 3\n")
    chosen.chmod(0o755)
    with_game = lander(tmp_path, "eval", str(bot), "--game-bin", str(chosen), timeout=120)
    assert with_game.returncode != 0 and "Traceback" not in with_game.stdout + with_game.stderr
    assert (tmp_path / "mine-ran").exists() and not marker.exists()


def test_a_run_trained_elsewhere_does_not_start_the_program_its_record_names(
    tmp_path: Path,
) -> None:
    """Finding 1, by way of a pulled run: resuming a run that another checkout trained
    with --game-bin does not start that program unless the user names it."""
    marker = tmp_path / "ran"
    hostile = tmp_path / "theirs.x86_64"
    hostile.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hostile.chmod(0o755)
    train_small(tmp_path, "theirs")
    record_path = tmp_path / "checkpoints" / "theirs" / "run.json"
    record = json.loads(record_path.read_text())
    record["config"]["game_bin"] = str(hostile)
    for session in record["sessions"]:
        session["checkout"], session["root"] = "laptop-abcdef", "/elsewhere"
    record_path.write_text(json.dumps(record))
    (tmp_path / "bots" / "theirs.json").unlink()  # evaluate the checkpoint through its record
    branched = lander(
        tmp_path, "train", "mine", "--resume", "theirs", "--no-git", "--timesteps", "512",
        timeout=240,
    )  # fmt: skip
    one_line_error(branched, "'theirs.x86_64'", "--game-bin")
    evaluated = lander(tmp_path, "eval", "theirs", timeout=240)
    one_line_error(evaluated, "--game-bin")
    assert not marker.exists()


def test_a_bot_outside_the_checkout_is_published_without_its_path_and_old_records_do_not_break_status(
    checkout: tuple[Path, Path], tmp_path: Path
) -> None:
    """Finding 3: ``eval ~/Downloads/base.json --publish`` commits no path outside the
    checkout, and records that hold one (absolute, ``../``, pathspec magic) leave status,
    eval and champions working on every clone."""
    work, remote = checkout
    folder = work / "checkpoints" / "r1"
    folder.mkdir(parents=True)
    record = {
        "run": "r1",
        "config": {},
        "status": "finished",
        "total_timesteps": 1000,
        "sessions": [{"checkout": "box-123456", "host": "box", "root": "/box"}],
    }
    (folder / "run.json").write_text(json.dumps(record))
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "r1 from the box")
    downloads = tmp_path / "Downloads"
    downloads.mkdir()
    bot = write_bot(downloads / "base.json", lander_bot())
    published = lander(work, "eval", str(bot), "--publish", timeout=120)
    assert published.returncode == 0, published.stdout + published.stderr
    lines = [
        json.loads(line)
        for path in folder.glob("evaluations-*.jsonl")
        for line in path.read_text().splitlines()
    ]
    assert lines and all(line["bot"] is None for line in lines), lines
    assert str(tmp_path) not in git(work, "show", "HEAD")

    relative = Path(os.path.relpath(bot, work))
    hostile = [str(bot), str(relative), ":(glob)**", "../../etc/passwd", 17]
    with (folder / "evaluations.jsonl").open("w") as handle:
        for index, path in enumerate(hostile):
            line = {"run": "r1", "bot": path, "game": "lander", "timesteps": 10,
                    "results": {"mean_reward": 900.0 + index}, "checkout": "box-123456"}  # fmt: skip
            handle.write(json.dumps(line) + "\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "records with paths from elsewhere")
    git(work, "push", "-q")
    clone = tmp_path / "laptop"
    git(tmp_path, "clone", "-q", str(remote), str(clone))
    for home in (work, clone):
        status = lander(home, "status", timeout=120)
        assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
        assert "r1" in status.stdout and "champion on" not in status.stdout
        again = lander(home, "eval", str(bot), timeout=120)
        assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr


HAND_EDITED: dict[str, dict[str, Any]] = {
    "layers missing": {"layers": None},
    "layers an object": {"layers": {"weights": [1]}},
    "a layer without weights": {"layers": [{"biases": [0.0, 0.0], "activation": "linear"}]},
    "ragged weights": {
        "layers": [{"weights": [[0.1] * 7, [0.1] * 3], "biases": [0, 0], "activation": "linear"}]
    },
    "biases a number": {
        "layers": [{"weights": [[0.1] * 7] * 2, "biases": 0.5, "activation": "linear"}]
    },
    "NaN weights": {
        "layers": [{"weights": [[float("nan")] * 7] * 2, "biases": [0, 0], "activation": "linear"}]
    },
    "weights as text": {
        "layers": [{"weights": [["a"] * 7] * 2, "biases": [0, 0], "activation": "linear"}]
    },
    "observation a list": {"observation": [7]},
    "observation of the wrong size": {
        "observation": {"size": 5},
        "layers": [{"weights": [[0.1] * 5] * 2, "biases": [0, 0], "activation": "linear"}],
    },
    "negative observation size": {"observation": {"size": -7}},
    "action bounds of the wrong size": {
        "action": {"type": "continuous", "size": 2, "low": [-1.0], "high": [1.0, 1.0, 1.0]}
    },
    "a zero normalization scale": {
        "observation": {
            "size": 7,
            "normalization": {"mean": [0.0] * 7, "scale": [0.0] * 7, "clip": 5.0},
        }
    },
    "trained_with a list": {"trained_with": ["lander"]},
    "an action repeat of a billion": {"trained_with": {"game": "lander", "action_repeat": 10**9}},
    "game_args of numbers": {"trained_with": {"game": "lander", "game_args": {"difficulty": 2}}},
    "an unknown game": {"trained_with": {"game": "chess"}},
    "a run that is no run name": {"run": "../../etc"},
    "timesteps as text": {"timesteps": "many"},
}


@pytest.mark.parametrize("command", ["eval", "play"])
def test_hand_edited_bots_are_one_line_each(command: str, tmp_path: Path) -> None:
    """Finding 9 (and 8's action repeat): every broken bot file is refused by eval and play
    in one line, quickly (an action repeat of 10^9 once ate 9 GB), and nothing is recorded."""
    for name, change in HAND_EDITED.items():
        bot = write_bot(tmp_path / "bot.json", lander_bot(**change))
        started = time.monotonic()
        extra = ["--seconds", "1"] if command == "play" else []
        result = lander(tmp_path, command, str(bot), *extra, timeout=120)
        assert time.monotonic() - started < 60, f"{name}: took too long"
        try:
            one_line_error(result)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None
    assert not (tmp_path / ".lander" / "evaluations.jsonl").exists(), "a broken bot was recorded"


def test_oversized_and_exploding_files_are_refused_before_the_work_starts(
    tmp_path: Path, tmux_socket: str
) -> None:
    """Finding 8: a 50 MB --config and a 70 MB bot are refused by size in one short line; a
    YAML alias bomb as a curriculum is refused before tmux starts (no session, no run)."""
    big = tmp_path / "big.json"
    big.write_text('{"timesteps": 1, "x": "' + "y" * (50 * 2**20) + '"}')
    refused = lander(tmp_path, "train", "big", "--config", str(big), "--no-git", timeout=120)
    line = one_line_error(refused, "over the")
    assert len(refused.stdout + refused.stderr) < 1000 and len(line) < 300

    huge = tmp_path / "huge.json"
    with huge.open("w") as handle:
        handle.write('{"format": "lander-bot", "pad": "')
        handle.write("x" * (70 * 2**20))
        handle.write('"}')
    one_line_error(lander(tmp_path, "eval", str(huge), timeout=120), "MB")

    levels = ["a: &a [" + ", ".join(['"lol"'] * 9) + "]"]
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        levels.append(f"{name}: &{name} [" + ", ".join([f"*{previous}"] * 9) + "]")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join([*levels, "stages: [*i]"]) + "\n")
    started = time.monotonic()
    result = lander(tmp_path, "start", "bomb", "--curriculum", str(bomb), socket=tmux_socket)
    one_line_error(result, "expands to over")
    assert time.monotonic() - started < 60
    tmux = libtmux.Server(socket_name=tmux_socket)
    assert not tmux.is_alive() or not list(tmux.sessions), (
        "a session for a plan that cannot be read"
    )


def test_input_that_names_nothing_sound_is_one_line(tmp_path: Path) -> None:
    """Finding 9 and the extras: a SAC model to --resume, a symlink loop as --game-bin, a
    bad LANDER_GIT_TIMEOUT (0 and nan no longer turn the limit off), and a --game-arg the
    bundled game does not know."""
    import gymnasium
    from stable_baselines3 import SAC

    import games.lander.gym_env  # noqa: F401 (registers Lander-v0)

    sac = tmp_path / "sac.zip"  # the lander's own spaces: only the algorithm is wrong
    SAC("MlpPolicy", gymnasium.make("Lander-v0"), learning_starts=10, buffer_size=100).save(sac)
    one_line_error(
        lander(tmp_path, "train", "s", "--resume", str(sac), "--no-git", timeout=120), "SAC"
    )
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    one_line_error(
        lander(tmp_path, "train", "l", "--game-bin", str(tmp_path / "loop1"), "--no-git"),
        "--game-bin",
    )
    for value in ("abc", "0", "nan", "-5"):
        env = {
            **os.environ,
            **GIT_IDENTITY,
            "LANDER_HOME": str(tmp_path),
            "LANDER_GIT_TIMEOUT": value,
        }
        result = subprocess.run(
            [str(LANDER), "status"], env=env, capture_output=True, text=True, timeout=60,
            check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        one_line_error(result, "LANDER_GIT_TIMEOUT", repr(value))
    unknown = lander(tmp_path, "train", "p", "--game-arg", "gravity=low", "--no-git")
    one_line_error(unknown, "gravity", "action_type", "difficulty", "observation")
    assert not (tmp_path / "checkpoints" / "p").exists()
    stroke = lander(tmp_path, "train", "p", "--game", "stroke", "--game-arg", "reward_mode=later")
    one_line_error(stroke, "reward_mode", "delayed")


def test_a_run_named_like_a_file_is_evaluated_by_name(tmp_path: Path) -> None:
    """The extras: a run called ``r.json`` is a run to ``eval``, not a missing file."""
    train_small(tmp_path, "r.json")
    result = lander(tmp_path, "eval", "r.json", "--episodes", "4", timeout=120)
    assert result.returncode == 0 and "normalized_score=" in result.stdout, result.stderr
