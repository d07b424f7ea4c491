"""A training run publishes its current bot for the live page: atomically (a reader never
sees half a file), only the latest kept, and readable by the numpy runner."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from game_bridge.bot_runner import BotRunner
from tests.conftest import lander
from training.runs.local_state import live_bot_path
from training.session.callbacks import PublishBot


def test_a_reader_hammering_the_published_bot_never_reads_half_of_one(tmp_path: Path) -> None:
    path = tmp_path / ".lander" / "live" / "run.json"
    version = {"n": 0}

    def build() -> dict[str, Any]:
        version["n"] += 1
        # Sizes that change from one version to the next, up to a few hundred kB.
        return {"version": version["n"], "weights": [[0.5] * 64] * (10 + version["n"] % 300)}

    publisher = PublishBot(1, path, build, log=lambda line: None)
    publisher.publish()
    done = threading.Event()
    reads, seen, broken = [0], set(), []

    def read() -> None:
        while not done.is_set():
            try:
                document = json.loads(path.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                broken.append(str(exc))
                continue
            reads[0] += 1
            seen.add(document["version"])
            assert len(document["weights"]) == 10 + document["version"] % 300

    readers = [threading.Thread(target=read) for _ in range(2)]
    for reader in readers:
        reader.start()
    for _ in range(300):
        publisher.publish()
    done.set()
    for reader in readers:
        reader.join()
    assert broken == [] and reads[0] > 50 and len(seen) > 10
    assert [p.name for p in path.parent.iterdir()] == ["run.json"]  # no old versions, no leftovers
    assert json.loads(path.read_text())["version"] == 301


def test_a_training_run_publishes_its_bot_as_it_trains(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    result = lander(
        tmp_path, "train", "live", "--timesteps", "3000", "--n-parallel", "1",
        "--agents-per-instance", "2", "--n-steps", "256", "--publish-every", "1024",
        "--port", str(port_block(1)), "--no-git",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    published = live_bot_path(tmp_path, "live")
    bot = BotRunner.from_file(published)
    assert bot.spec["run"] == "live" and bot.spec["timesteps"] == 3072  # the session's last policy
    final = json.loads((tmp_path / "bots" / "live.json").read_text())
    assert final["layers"] == bot.spec["layers"]
