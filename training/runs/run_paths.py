"""Where a run's files live, and the run-name rule that guards every path.

A run name typed by a user is validated here once, before it becomes a folder,
a tmux session or part of a git commit.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

from game_bridge.errors import LanderError

RUN_NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
SNAPSHOT_GLOB = "snap_*.pt"
"""The files of a self-play run's snapshots (in :attr:`RunPaths.snapshots`)."""


class InvalidRunName(LanderError, ValueError):
    """A run name that could escape its folder or confuse tmux and git."""


def validate_run_name(name: str) -> str:
    """Return ``name`` if it is a safe run name, else raise :class:`InvalidRunName`.

    Allowed: letters, digits, ``-``, ``_``, ``.``; 1 to 64 characters; not starting
    with ``.`` or ``-``; never containing ``..``.
    """
    if not RUN_NAME_PATTERN.fullmatch(name) or ".." in name:
        shown = name if len(name) <= 40 else name[:40] + "..."
        raise InvalidRunName(
            f"invalid run name {shown!r}: use 1-64 letters, digits, '-', '_' or '.', not starting with '.' or '-'"
        )
    return name


@dataclass(frozen=True)
class RunPaths:
    """The files of one run inside a checkout.

    :param root: the checkout (holds ``checkpoints/``, ``logs/``, ``bots/``).
    :param run: a validated run name.
    """

    root: Path
    run: str

    def __post_init__(self) -> None:
        validate_run_name(self.run)

    @property
    def checkpoints(self) -> Path:
        """``checkpoints/<run>/``: rotating checkpoints, ``final.zip`` and ``run.json``."""
        return self.root / "checkpoints" / self.run

    @property
    def logs(self) -> Path:
        """``logs/<run>/``: TensorBoard events (continuous across resumes) and ``train.log``."""
        return self.root / "logs" / self.run

    @property
    def run_json(self) -> Path:
        """The run record."""
        return self.checkpoints / "run.json"

    @property
    def final(self) -> Path:
        """The model saved at the end of the run (normal or interrupted)."""
        return self.checkpoints / "final.zip"

    @property
    def train_log(self) -> Path:
        """The console text of every session of this run."""
        return self.logs / "train.log"

    @property
    def snapshots(self) -> Path:
        """A self-play run's frozen snapshots of its learner (committed with the run)."""
        return self.checkpoints / "snapshots"

    @property
    def games_log_dir(self) -> Path:
        """Each game instance's console output (not committed: see .gitignore)."""
        return self.logs / "games"

    @property
    def bot_json(self) -> Path:
        """The exported policy."""
        return self.root / "bots" / f"{self.run}.json"

    @property
    def bot_onnx(self) -> Path:
        """The exported policy in the Godot RL Agents plugin's ONNX layout."""
        return self.root / "bots" / f"{self.run}.onnx"

    def side_checkpoints(self, side: str) -> Path:
        """``checkpoints/<run>/sides/<side>/``: the model of another side of a game whose
        sides have their own spaces (its checkpoints, ``final.zip`` and snapshots)."""
        return self.checkpoints / "sides" / validate_run_name(side)

    def side_bot_json(self, side: str) -> Path:
        """The exported policy of another side (``bots/<run>-<side>.json``)."""
        return self.root / "bots" / f"{self.run}-{validate_run_name(side)}.json"

    def side_bot_onnx(self, side: str) -> Path:
        """Another side's policy in the plugin's ONNX layout."""
        return self.side_bot_json(side).with_suffix(".onnx")

    def other_sides(self) -> list[str]:
        """The other sides this run trained a model for (their folders), sorted."""
        folder = self.checkpoints / "sides"
        if not folder.is_dir():
            return []
        return sorted(
            path.name
            for path in folder.iterdir()
            if path.is_dir() and RUN_NAME_PATTERN.fullmatch(path.name)
        )

    def exists(self) -> bool:
        """True when this run has been started before."""
        return self.run_json.exists()


def unknown_run(root: Path, run: str) -> str:
    """The message for a run name that names no run here, with the closest one when a
    typo is likely (``did you mean run03?``)."""
    names = sorted(path.parent.name for path in (root / "checkpoints").glob("*/run.json"))
    close = difflib.get_close_matches(run, names, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else " (status lists the runs)"
    return f"run {run!r} does not exist in {root / 'checkpoints'}{hint}"


def next_run_name(root: Path, run: str) -> str:
    """The run after ``run``: its trailing number plus one, padding kept
    (``run03`` -> ``run04``, ``run9`` -> ``run10``, ``exp`` -> ``exp2``), skipping
    names already taken in this checkout."""
    match = re.fullmatch(r"(.*?)(\d+)", run)
    prefix, number, width = (
        (match.group(1), int(match.group(2)), len(match.group(2))) if match else (run, 1, 1)
    )
    while True:
        number += 1
        candidate = validate_run_name(f"{prefix}{number:0{width}d}")
        if not RunPaths(root, candidate).checkpoints.exists():
            return candidate
