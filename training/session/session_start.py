"""The first part of a training session, which needs no torch: plan the run, prepare
its folders, begin launching its games; and the clock of the whole start-up.

``lander train`` calls :func:`begin_session` before it imports the training stack, so
the games boot (:class:`~training.envs.game_launch.EarlyGames`: started, connected later)
while torch and Stable-Baselines3 load. :class:`StartupClock` stamps each phase from the
process's own start (the interpreter's launch, read from ``/proc``), so the phases a
user sees (``--verbose``, and always in train.log) count everything before the first
step.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from game_bridge.instance import allow_waits
from games import game_entry
from training.envs.game_launch import EarlyGames, editor_prompt, launch_config
from training.envs.godot_games import forget_godot_games, godot_game
from training.runs.checkpoints import remove_temporary_files
from training.runs.disk_space import disk_warnings, estimated_checkpoint_bytes, run_disk_needs
from training.runs.local_state import keep_damaged_record
from training.session.planning import TrainPlan, TrainRequest, plan_training


def process_started_at() -> float:
    """When this process started, in ``time.time()`` seconds: from ``/proc`` on Linux
    (to 10 ms: its start in clock ticks since boot, against the fractional uptime), else
    the moment this module was first imported."""
    try:
        with open("/proc/self/stat") as handle:
            # Field 22 (starttime) counts from the "(command)" field's end: index 19 after it.
            ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as handle:
            uptime = float(handle.read().split()[0])
        return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return _IMPORTED_AT


_IMPORTED_AT = time.time()


@dataclass
class StartupClock:
    """Seconds from the process's start to each phase of a session's start-up.

    :param launched: when the process started (``time.time()`` seconds).
    """

    launched: float = field(default_factory=process_started_at)
    marks: dict[str, float] = field(default_factory=dict)

    def mark(self, phase: str) -> None:
        """Stamp ``phase`` now, once."""
        self.marks.setdefault(phase, round(time.time() - self.launched, 3))

    def summary(self) -> str:
        """One line: each phase and its time since launch (:func:`read_summary` reads it)."""
        ordered = sorted(self.marks.items(), key=lambda mark: mark[1])
        phases = ", ".join(f"{phase} {seconds:.2f} s" for phase, seconds in ordered)
        return f"{SUMMARY_START} {phases}"


SUMMARY_START = "start-up (seconds since launch):"
"""How the start-up line begins, in train.log and on the console."""
_PHASE = re.compile(r"([a-z ,]+?) (\d+\.\d\d) s")


def read_summary(line: str) -> dict[str, float]:
    """The phases of a :meth:`StartupClock.summary` line (for the benchmark and tests),
    in the line's order: seconds since launch by phase."""
    phases = line.split(SUMMARY_START, 1)[1]
    return {name.strip(" ,"): float(seconds) for name, seconds in _PHASE.findall(phases)}


@dataclass
class SessionStart:
    """What :func:`begin_session` did: the plan, a crash's leftovers it removed, the games
    being launched (None in-process), the clock, and whether the run had no logs before
    (a new run whose games never start leaves none behind)."""

    plan: TrainPlan
    leftovers: list[Path]
    games: EarlyGames | None
    clock: StartupClock
    new_run: bool


def begin_session(request: TrainRequest, console: Console) -> SessionStart:
    """Plan the run, prepare its folders and begin launching its games.

    :raises ConfigError, CheckpointError: the plan's faults, before anything is written.
    """
    clock = StartupClock()
    clock.mark("interpreter and command")
    plan = plan_training(request, console)
    leftovers = prepare_folders(plan, request, console)
    new_run = not plan.paths.logs.exists()
    games = None
    if not plan.config.in_process:
        forget_godot_games()
        try:
            launch = launch_config(plan.config, plan.paths.games_log_dir, plan.paths.root / "build")
            if plan.config.game_project is not None:
                for note in godot_game(plan.config, plan.paths.root / "build").notes:
                    console.print(note)
            elif plan.config.own_game is None:
                for note in game_entry(plan.config.game).notes:
                    console.print(note)
            launch.announce = lambda listening: console.print(editor_prompt(listening))
            games = EarlyGames(launch)
        except BaseException:
            if new_run:  # a new run whose games never started leaves nothing behind
                shutil.rmtree(plan.paths.logs, ignore_errors=True)
            raise
    clock.mark("run planned, games started")
    return SessionStart(plan, leftovers, games, clock, new_run)


def prepare_folders(plan: TrainPlan, request: TrainRequest, console: Console) -> list[Path]:
    """``--force`` removes the old run, a damaged run.json is kept aside, a crash's
    temporary files go; returns those files, for the log."""
    allow_waits()
    paths = plan.paths
    if request.force and plan.previous is None and paths.exists():
        # --force replaces the run: the user asked for it by name.
        shutil.rmtree(paths.checkpoints, ignore_errors=True)
        shutil.rmtree(paths.logs, ignore_errors=True)
    if plan.damaged_record:
        kept = keep_damaged_record(paths)
        console.print(f"[yellow]the damaged run.json is kept as {kept}[/]")
    return remove_temporary_files(paths.checkpoints)


OWN_GAME_SIZES = (64, 4)
"""Observation and action values assumed for a game binary or server before it connects."""


def disk_warnings_for(plan: TrainPlan, committed: bool) -> list[str]:
    """What to say before the first step about the room on disk for this run (none when it
    fits): a resume's checkpoint size is its model's file's; a new run's is estimated from
    its settings and its game's spaces.

    :param committed: git carries the run (its checkpoints are copied into ``.git`` too).
    """
    config = plan.config
    resumed = plan.resume_point.model if plan.resume_point is not None else None
    if resumed is not None and resumed.is_file():
        size = resumed.stat().st_size
    elif config.own_game is None:
        entry = game_entry(config.game)
        size = estimated_checkpoint_bytes(
            config, entry.observation_size, entry.action_size, entry.sees_pictures(config.game_args)
        )
    else:
        size = estimated_checkpoint_bytes(config, *OWN_GAME_SIZES, pictures=False)
    return disk_warnings(run_disk_needs(plan.paths, config, size, committed), size)
