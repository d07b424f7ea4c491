"""Evaluation records, one append-only file per run and writer, and the champion
derived from them.

Nothing here is a file that two machines write. The checkout that trains a run
appends its evaluations to ``checkpoints/<run>/evaluations.jsonl``, committed with
the run. Another checkout evaluating that run keeps the result in its untracked
``.lander/evaluations.jsonl``, or, when the user publishes it, in a file of its own
beside the run's (``evaluations-<checkout>.jsonl``). The champion of each game is
computed from the committed records whenever it is asked for, never stored, so it
cannot conflict and never names a bot that is not committed.
"""

from __future__ import annotations

import json
import math
import os
import socket
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from game_bridge.file_input import read_bounded
from games import DEFAULT_GAME, EDITOR_GAME, game_entry
from training.runs.local_state import checkout_id, local_evaluations_path
from training.runs.run_paths import RunPaths
from training.runs.run_record import RunRecord, now_iso

RECORDS_NAME = "evaluations.jsonl"
RECORDS_GLOB = "evaluations*.jsonl"

MAX_RECORDS_BYTES = 64 * 2**20
"""An evaluations file larger than this is skipped unread (a record is a line of 300 bytes)."""


def game_name(trained: dict[str, Any], game_bin: str | Path | None = None) -> str:
    """The game an evaluation was measured on: the executable's file name, or the
    bundled game's record name for its settings (a harder lander, or strokes scored at
    their end, is another game to champion)."""
    chosen = game_bin if game_bin is not None else trained.get("game_bin")
    if chosen is not None:
        return Path(str(chosen)).name
    if trained.get("game_url"):  # an OpenEnv server: its address names it
        return str(trained["game_url"])
    if trained.get("game_project"):  # a Godot project: its folder names it
        return Path(str(trained["game_project"])).name
    if trained.get("game") == EDITOR_GAME:
        return EDITOR_GAME
    return game_entry(trained.get("game") or DEFAULT_GAME).record_name(
        trained.get("game_args") or {}
    )


def checkout_relative(root: Path, path: Path) -> str | None:
    """``path`` relative to the checkout (``bots/run03.json``), or None when it lies outside."""
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return None


def inside_checkout(root: Path, relative: str) -> bool:
    """True when a path read from a record names a file inside the checkout: not absolute,
    no ``..``, no git pathspec magic; a record from elsewhere may hold anything."""
    candidate = Path(relative)
    if candidate.is_absolute() or ".." in candidate.parts or relative.startswith(":"):
        return False
    if any(char in relative for char in "*?[\\\0"):
        return False
    return (root / candidate).resolve().is_relative_to(root.resolve())


@dataclass(frozen=True)
class EvalRecord:
    """One evaluation of a run's policy.

    :param run: the evaluated run.
    :param timesteps: the policy's training steps.
    :param bot: the bot file evaluated, relative to the checkout (None for a checkpoint).
    :param game: where it was measured (:func:`game_name`).
    :param results: :class:`training.evaluation.scoring.EvalResult` as a dict.
    :param checkout: the checkout that measured it.
    """

    run: str
    timesteps: int | None
    bot: str | None
    game: str
    results: dict[str, Any]
    date: str
    commit: str | None
    checkout: str

    @property
    def mean_reward(self) -> float:
        return float(self.results["mean_reward"])

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalRecord | None:
        """A record read back, or None for a line that is not one (never an exception:
        one bad line must not hide the others)."""
        bot, timesteps = data.get("bot"), data.get("timesteps")
        try:
            if not math.isfinite(float(data["results"]["mean_reward"])):
                return None
            return cls(
                run=str(data["run"]),
                timesteps=timesteps if type(timesteps) is int else None,
                bot=bot if isinstance(bot, str) else None,
                game=str(data.get("game") or DEFAULT_GAME),
                results=dict(data["results"]),
                date=str(data.get("date", "")),
                commit=data.get("commit"),
                checkout=str(data.get("checkout", "")),
            )
        except (KeyError, TypeError, ValueError, OverflowError):
            return None


def owns_run(paths: RunPaths) -> bool:
    """True when this checkout trained the run's latest session, so it alone writes the
    run's files. A record without checkouts (an older lander) counts as owned when it
    trained on this host."""
    if not paths.run_json.exists():
        return False
    try:
        sessions = RunRecord.load(paths.run_json).sessions
    except ValueError:
        return False
    if not sessions:
        return False
    last = sessions[-1]
    if "checkout" in last:
        return bool(last["checkout"] == checkout_id(paths.root))
    return bool(last.get("host") == socket.gethostname())


@dataclass(frozen=True)
class Recorded:
    """Where an evaluation was written, and whether that place is committed with the run."""

    path: Path
    tracked: bool


def record_destination(root: Path, run: str | None, publish: bool = False) -> Recorded:
    """The file an evaluation of ``run`` goes to from this checkout (see the module's rule)."""
    paths = RunPaths(root, run) if run is not None else None
    if paths is not None and paths.exists():
        folder = paths.checkpoints
        if owns_run(paths):
            return Recorded(folder / RECORDS_NAME, True)
        if publish:
            return Recorded(folder / f"evaluations-{checkout_id(root)}.jsonl", True)
    return Recorded(local_evaluations_path(root), False)


def append_record(path: Path, record: EvalRecord) -> None:
    """Append one line and fsync it: an append-only file is never rewritten, so a crash
    loses at most the line being written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.write(json.dumps(asdict(record), sort_keys=True) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def record_evaluation(
    root: Path,
    run: str | None,
    timesteps: int | None,
    bot: Path | None,
    result: Any,
    commit: str | None,
    game: str,
    publish: bool = False,
) -> Recorded:
    """Record an evaluation where this checkout may write it (:func:`record_destination`).

    :param result: a :class:`training.evaluation.scoring.EvalResult`.
    """
    # A bot outside the checkout (a download) is named by nobody's path: a committed
    # record holds only paths inside the repository, which every clone can resolve.
    bot_text = checkout_relative(root, bot) if bot is not None else None
    destination = record_destination(root, run, publish)
    record = EvalRecord(
        run=run or "",
        timesteps=timesteps,
        bot=bot_text,
        game=game,
        results=result.to_dict(),
        date=now_iso(),
        commit=commit,
        checkout=checkout_id(root),
    )
    append_record(destination.path, record)
    return destination


def read_records(paths: Iterable[Path]) -> list[EvalRecord]:
    """Every record in these files, oldest line first; unreadable lines are skipped."""
    records = []
    for path in paths:
        try:
            lines = read_bounded(path, MAX_RECORDS_BYTES).decode(errors="replace").splitlines()
        except OSError:  # a folder, a FIFO, a link to a device, too large: no records
            continue
        for line in lines:
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a crash
            record = EvalRecord.from_dict(data) if isinstance(data, dict) else None
            if record is not None:
                records.append(record)
    return records


def record_files(root: Path) -> list[Path]:
    """Every run's evaluation files in this checkout (committed or not)."""
    return sorted((root / "checkpoints").glob(f"*/{RECORDS_GLOB}"))


def champions(
    records: Iterable[EvalRecord], bot_available: Callable[[str], bool]
) -> dict[str, EvalRecord]:
    """The best record of each game whose bot file is available (committed), by mean
    reward; ties go to the earlier record. Baselines are never recorded, so a random
    or reference policy is never champion; nor is a checkpoint without a bot."""
    best: dict[str, EvalRecord] = {}
    for record in records:
        if not record.run or record.bot is None or not bot_available(record.bot):
            continue
        current = best.get(record.game)
        if current is None or record.mean_reward > current.mean_reward:
            best[record.game] = record
    return best


def best_by_run(records: Iterable[EvalRecord]) -> dict[str, float]:
    """Each run's best mean reward over its records."""
    best: dict[str, float] = {}
    for record in records:
        if record.mean_reward > best.get(record.run, float("-inf")):
            best[record.run] = record.mean_reward
    return best
