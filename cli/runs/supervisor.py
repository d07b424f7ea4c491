"""``lander train RUN --auto-resume`` (the default of ``start`` and ``resume``): the
trainer runs as a child process, and one that ends abnormally (killed, out of memory, a
fault that stopped it) is started again from the run's newest valid checkpoint, after
a short back-off, to finish the steps the session set out to train.

Never restarted: a run that finished (its steps, or ``--stop-at-score``), one stopped by
``lander stop`` or Ctrl-C (the supervisor hears the interrupt too), more than
:data:`MAX_PER_HOUR` times in an hour, or a trainer that fails the same way twice in a
row at start-up (before any step). Each restart is recorded in ``run.json``
(``extra.auto_resumes``) and shown by ``lander status``.
"""

from __future__ import annotations

import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from cli.common.console import console
from cli.common.train_flags import session_argv, settings_argv
from cli.machine.tmux_sessions import lander_command
from training.runs.run_paths import RunPaths
from training.runs.run_record import RunRecord, now_iso

BACKOFF_S = 10.0
"""Seconds before a restart; doubled for each start-up failure in a row, up to
:data:`MAX_BACKOFF_S`."""
MAX_BACKOFF_S = 300.0
MAX_PER_HOUR = 3
"""Restarts allowed in any hour; one more and the supervisor gives up."""
ENDED_BY_USER = (0, 130)
"""Exit codes of a trainer that ended as asked: finished, or stopped (a second Ctrl-C: 130)."""


@dataclass(frozen=True)
class Session:
    """How the supervised trainer is started: the ``lander train`` options the user gave."""

    run: str
    settings: dict[str, Any]
    config: Path | None
    resume: str | None
    reset_std: float | None
    force: bool
    git: bool | None
    demos: tuple[Path, ...] = ()

    def first_argv(self, force: bool = False) -> list[str]:
        """The user's own command."""
        return [
            "train",
            self.run,
            *settings_argv(self.settings),
            *session_argv(
                self.config, self.resume, self.reset_std, self.force or force, self.git, self.demos
            ),
        ]

    def resume_argv(self, goal: int) -> list[str]:
        """Continue RUN in place from its newest valid checkpoint until ``goal`` steps (no
        std reset, no cloning from demos: the policy already had them)."""
        kept = {name: value for name, value in self.settings.items() if name != "timesteps"}
        return [
            "train",
            self.run,
            *settings_argv(kept),
            *session_argv(self.config, self.run, None, False, self.git),
            "--until-steps",
            str(goal),
        ]


def _record(paths: RunPaths) -> RunRecord | None:
    try:
        return RunRecord.load(paths.run_json) if paths.run_json.exists() else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _has_checkpoint(paths: RunPaths) -> bool:
    return paths.checkpoints.is_dir() and any(paths.checkpoints.glob("*.zip"))


def _why(code: int, record: RunRecord | None) -> str:
    """One line for a trainer's abnormal end."""
    how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
    error = record.error if record is not None and record.status == "failed" else None
    return f"{how}: {error}" if error else how


def _note_restart(paths: RunPaths, entry: dict[str, Any]) -> None:
    """Add a restart to run.json (the trainer is dead: nothing else writes it now)."""
    record = _record(paths)
    if record is None:
        return
    record.extra.auto_resumes.append(entry)
    record.save(paths.run_json)


def supervise(root: Path, session: Session) -> int:
    """Run the trainer until it ends as asked; return its last exit code."""
    paths = RunPaths(root, session.run)
    stop_requested: list[int] = []

    def heard(number: int, _frame: FrameType | None) -> None:
        stop_requested.append(number)  # the child heard it too, and ends in order

    previous = {sig: signal.signal(sig, heard) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _loop(paths, session, stop_requested)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _loop(paths: RunPaths, session: Session, stop_requested: list[int]) -> int:
    started = now_iso()
    new_run = not paths.exists()  # only then may a restart replace what its first try left
    argv = session.first_argv()
    goal: int | None = None
    restarts: list[float] = []
    quiet = 0  # abnormal ends in a row without a step trained
    last_startup_failure: str | None = None
    while True:
        before = _record(paths)
        steps_before = before.total_timesteps if before is not None else None
        code = subprocess.run(lander_command(*argv), check=False).returncode
        record = _record(paths)
        if goal is None and record is not None and record.sessions:
            first = record.sessions[-1]
            if first.get("started_at", "") >= started:
                goal = int(first.get("start_timesteps", 0)) + record.config.timesteps
        if stop_requested or code in ENDED_BY_USER:
            return code
        if record is not None and record.status in ("finished", "interrupted"):
            return code
        why = _why(code, record)
        progressed = record is not None and record.total_timesteps != steps_before
        quiet = 0 if progressed else quiet + 1
        if not progressed:
            if why == last_startup_failure:
                console.print(
                    f"[red]run {session.run} failed the same way twice at start-up ({why}): "
                    "not restarting it[/]"
                )
                return code
            last_startup_failure = why
        else:
            last_startup_failure = None
        now = time.monotonic()
        restarts = [at for at in restarts if now - at < 3600] + [now]
        if len(restarts) > MAX_PER_HOUR:
            console.print(
                f"[red]run {session.run} ended abnormally {len(restarts)} times within an hour "
                f"({why}): not restarting it again[/]"
            )
            return code
        wait = min(BACKOFF_S * 2 ** max(quiet - 1, 0), MAX_BACKOFF_S)
        resumable = goal is not None and _has_checkpoint(paths)
        console.print(
            f"[yellow]run {session.run}: the trainer ended abnormally ({why}); "
            + ("resuming from its newest checkpoint" if resumable else "starting it again")
            + f" in {wait:.0f} s[/]"
        )
        _note_restart(
            paths,
            {
                "at": now_iso(),
                "reason": why,
                "timesteps": record.total_timesteps if record is not None else 0,
            },
        )
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and not stop_requested:
            time.sleep(0.2)
        if stop_requested:
            return code
        if resumable and goal is not None:
            argv = session.resume_argv(goal)
        else:  # nothing of this session to resume: start it again as the user asked
            argv = session.first_argv(force=new_run and paths.exists())
