"""``lander status``: one row per run, from ``checkpoints/*/run.json``, the
evaluation history, git and (on this machine) tmux. Works after a ``git pull``
on a machine where no run ever trained."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from cli.machine.tmux_sessions import train_window_alive
from cli.results.git_sync import PushStates
from cli.results.publishing import in_git
from cli.results.records import checkout_records, committed_champions, committed_records
from cli.runs.trainer_lock import holder
from training.evaluation.ratings import LEARNER
from training.evaluation.records import EvalRecord, best_by_run, champions, inside_checkout
from training.runs.disk_space import on_full_disk
from training.runs.live_progress import LiveProgress, read_live_progress
from training.runs.local_state import checkout_id
from training.runs.run_paths import RunPaths
from training.runs.run_record import RunRecord, load_runs, placement_summary, scan_runs


def _state(root: Path, record: RunRecord, trains_here: bool, live: LiveProgress | None) -> str:
    stage = record.extra.curriculum
    where = f" (stage {stage['stage']}/{stage['of']} of {stage['plan']})" if stage else ""
    resumes = len(record.extra.auto_resumes)
    healed = f" (auto-resumed {resumes}x)" if resumes else ""
    ratings = (record.extra.self_play or {}).get("ratings") or {}
    elo = f" (elo {float(ratings[LEARNER]):.0f})" if LEARNER in ratings else ""
    pace = f" {live.percent:.0f}%, ETA {live.eta_text()}" if live is not None else ""
    return _bare_state(root, record, trains_here) + pace + where + healed + elo


HEALTH_LABELS = {
    "std_collapsed": "std collapsed",
    "std_exploded": "std exploded",
    "no_entropy": "no entropy",
    "flat_reward": "reward flat",
    "large_updates": "large updates",
    "slow": "slow",
    "restart_storm": "restart storm",
}


def _newest_by_kind(record: RunRecord) -> dict[str, dict[str, Any]]:
    """The newest finding of each kind in the run's latest session, in order of first sight."""
    newest: dict[str, dict[str, Any]] = {}
    for finding in record.extra.health:
        if isinstance(finding.get("message"), str):
            newest[str(finding.get("kind", "?"))] = finding
    return newest


def _health(record: RunRecord) -> str:
    """What the run's latest session found wrong, or ``ok``."""
    kinds = [HEALTH_LABELS.get(kind, kind) for kind in _newest_by_kind(record)]
    return f"[yellow]{', '.join(kinds)}[/]" if kinds else "ok"


def _trains_here(root: Path, record: RunRecord, training_here: str | None) -> bool:
    """True when the run trains in this checkout now (it holds the trainer lock, or its
    tmux session's trainer window is alive)."""
    if training_here == record.run:
        return True
    return record.status == "running" and train_window_alive(root, record.run)


def _bare_state(root: Path, record: RunRecord, trains_here: bool) -> str:
    if trains_here:
        return "[green]running[/]"
    if record.status == "running":
        last = record.sessions[-1] if record.sessions else {}
        here = (
            last["checkout"] == checkout_id(root)
            if "checkout" in last
            else last.get("host") == socket.gethostname()
        )
        if here:
            # It trained in this checkout, and no trainer holds the lock: it was killed.
            return "[red]crashed[/] (resume it)"
        return "running (not here)"
    if record.status == "failed" and on_full_disk(record.error):
        return "[red]failed: disk full[/]"
    colors = {"finished": "blue", "interrupted": "yellow", "failed": "red"}
    return f"[{colors.get(record.status, 'white')}]{record.status}[/]"


SHOWN_RUNS = 40
"""Rows ``lander status`` shows unless asked for all (``--all``): the newest runs."""


def status_table(
    root: Path,
    evaluations: list[EvalRecord] | None = None,
    scanned: tuple[list[RunRecord], dict[str, str]] | None = None,
    limit: int | None = SHOWN_RUNS,
    local: bool = True,
) -> Table:
    """The table of the runs in this checkout, newest first: the newest ``limit`` of them
    (every one for None), and every run whose record is damaged.

    :param evaluations: the committed evaluation records, when the caller has read them.
    :param scanned: :func:`scan_runs` of the checkout, when the caller has read it.
    :param local: show this checkout's own evaluations beside the committed ones (False:
        only what every clone shows alike).
    """
    table = Table(title=f"lander runs in {root}")
    columns = [
        "run",
        "state",
        "steps",
        "fps",
        "reward",
        "success",
        "last checkpoint",
        "best eval",
        "restarts",
        "health",
    ]
    numeric = {"steps", "fps", "reward", "success", "best eval", "restarts"}
    for column in [*columns, "git", "parent"]:
        table.add_column(column, justify="right" if column in numeric else "left")
    records, damaged = scan_runs(root) if scanned is None else (scanned[0], dict(scanned[1]))
    newest = sorted(records, key=lambda record: record.updated_at, reverse=True)
    hidden = len(newest) - limit if limit is not None and len(newest) > limit else 0
    records = newest[: len(newest) - hidden]
    if hidden:
        table.caption = f"and {hidden} older run(s): lander status --all"
    training_here = holder(root)
    best = best_by_run(committed_records(root) if evaluations is None else evaluations)
    local_best = best_by_run(checkout_records(root)) if local else {}
    push_state = PushStates(root)
    for record in records:  # newest first
        try:
            table.add_row(*_row(root, record, training_here, best, local_best, push_state))
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            damaged[record.run] = f"a field of run.json has the wrong kind of value ({exc})"
    for run, reason in sorted(damaged.items()):
        state = "[green]running[/]" if training_here == run else "[red]damaged record[/]"
        table.add_row(run, state, *["-"] * 7, f"[red]{escape(reason[:300])}[/]", "", "")
    return table


def _row(
    root: Path,
    record: RunRecord,
    training_here: str | None,
    best: dict[str, float],
    local_best: dict[str, float],
    push_state: PushStates,
) -> list[str]:
    """The status row of one run; a field of the wrong kind raises (TypeError, ValueError,
    KeyError, AttributeError) and the run is shown as damaged instead.

    :param best: each run's best committed mean reward.
    :param local_best: each run's best mean reward among this checkout's records (shown,
        marked local, when no committed one is as good: a ``--no-git`` run's score).
    """
    extra = record.extra
    evaluation = best.get(record.run)
    if evaluation is None and extra.best_evaluation:
        evaluation = float(extra.best_evaluation["mean_reward"])
    here = local_best.get(record.run)
    shown = "-" if evaluation is None else f"{evaluation:.1f}"
    if here is not None and (evaluation is None or here > evaluation):
        shown = f"{here:.1f} (local)" if evaluation is None else f"{shown}, {here:.1f} (local)"
    trains_here = _trains_here(root, record, training_here)
    live = read_live_progress(root, record.run) if trains_here else None
    if live is not None and live.steps < record.total_timesteps:
        live = None  # from before the checkpoint this session resumed
    steps, fps = record.total_timesteps, extra.last_fps
    reward, success = extra.last_reward, extra.last_success
    if live is not None:
        steps, fps, reward, success = live.steps, live.fps, live.reward, live.success
    return [
        record.run,
        _state(root, record, trains_here, live),
        f"{steps:,}",
        f"{fps:,.0f}",
        "-" if reward is None else f"{reward:.1f}",
        "-" if success is None else f"{success:.2f}",
        record.last_checkpoint or "-",
        shown,
        str(extra.restarts),
        _health(record),
        push_state(record.run, in_git(RunPaths(root, record.run), record, push_state.kept_out)),
        record.parent or "",
    ]


def _described(record: EvalRecord) -> str:
    """``run01 (bots/run01.json), mean reward 251.3, normalized score 1.020 at 600,000 steps``."""
    score = record.results.get("normalized_score")
    return (
        f"{record.run} ({record.bot}), mean reward {record.mean_reward:.1f}"
        + (f", normalized score {float(score):.3f}" if isinstance(score, int | float) else "")
        + (f" at {record.timesteps:,} steps" if record.timesteps else "")
    )


def champion_lines(
    root: Path, evaluations: list[EvalRecord] | None = None, local: bool = True
) -> list[str]:
    """One line per game: its champion among committed evaluations and bots, and, where
    this checkout holds a better bot that git does not carry (a ``--no-git`` run, an
    evaluation kept here), that one too, marked local (unless ``local`` is False)."""
    committed = committed_champions(root, evaluations)
    best_here = champions(
        checkout_records(root) if local else [],
        lambda bot: inside_checkout(root, bot) and (root / bot).is_file(),
    )
    lines = []
    for game in sorted({*committed, *best_here}):
        champion, here = committed.get(game), best_here.get(game)
        if champion is not None:
            lines.append(f"champion on {game}: {_described(champion)}")
        if here is not None and (champion is None or here.mean_reward > champion.mean_reward):
            lines.append(f"best here on {game} (local, not in git): {_described(here)}")
    return lines


def health_lines(root: Path, records: list[RunRecord] | None = None) -> list[str]:
    """For each run whose latest session has health findings: the newest of each kind,
    with its advice."""
    return [
        f"{record.run}: {finding['message']}"
        for record in (load_runs(root) if records is None else records)
        for finding in _newest_by_kind(record).values()
    ]


def cluster_lines(root: Path, records: list[RunRecord] | None = None) -> list[str]:
    """For each run training now with games on a cluster: which node runs which instances."""
    lines = []
    for record in load_runs(root) if records is None else records:
        if record.status == "running" and record.extra.cluster:
            try:
                lines.append(f"{record.run}: " + placement_summary(record.extra.cluster))
            except (TypeError, ValueError, AttributeError):
                continue  # a damaged placement: the table already shows the run
    return lines


def godot_lines(records: list[RunRecord]) -> list[str]:
    """For each run that trained a Godot game: the engine and version, and from what (the
    editor, the source at a commit, a build made from one)."""
    from training.envs.godot_games import describe_origin

    lines = []
    for record in records:
        origin = record.extra.godot
        if isinstance(origin, dict):
            lines.append(f"{record.run}: trained against {describe_origin(origin)}")
    return lines
