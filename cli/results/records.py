"""The results every clone agrees on: evaluation records and bots that are committed.

``training.evaluation.records`` knows where records live; this module adds what git says
is committed, so that ``lander status`` prints the same champions and best
evaluations on every machine after a pull, and a champion never names a file that
the repository does not hold.
"""

from __future__ import annotations

from pathlib import Path

from cli.results.git_sync import tracked
from training.evaluation.records import (
    EvalRecord,
    champions,
    inside_checkout,
    read_records,
    record_files,
)
from training.runs.local_state import local_evaluations_path


def committed_records(root: Path) -> list[EvalRecord]:
    """Records in files git tracks (every file outside a repository)."""
    files = record_files(root)
    known = tracked(root, [str(path.relative_to(root)) for path in files])
    if known is not None:
        files = [path for path in files if str(path.relative_to(root)) in known]
    return read_records(files)


def checkout_records(root: Path) -> list[EvalRecord]:
    """Every record this checkout holds, committed or not: the runs' files and the
    checkout's own (``.lander/evaluations.jsonl``)."""
    return read_records([*record_files(root), local_evaluations_path(root)])


def committed_champions(
    root: Path, records: list[EvalRecord] | None = None
) -> dict[str, EvalRecord]:
    """The champion of each game, among committed records whose bot is committed.

    :param records: :func:`committed_records`, when the caller has read them already.
    """
    records = committed_records(root) if records is None else records
    bots = sorted(
        {record.bot for record in records if record.bot and inside_checkout(root, record.bot)}
    )
    known = tracked(root, bots)

    def available(bot: str) -> bool:
        return bot in bots and (root / bot).is_file() and (known is None or bot in known)

    return champions(records, available)
