"""The run flow of ``lander train``: pull, train, export, evaluate, commit, push.

User mistakes (a bad name, a missing checkpoint, a bad setting, a game that will
not start, another trainer in this checkout) raise a ``LanderError`` before anything
is written, which the CLI ends as one red line and a non-zero exit. After training, whatever happened, the bot is
exported and evaluated when a final model exists, and the run's files are
committed and pushed, so an interrupted run still reaches every machine.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from cli.common.command_classes import note_sigterm
from cli.common.console import console, error_console, how
from cli.machine.setup import with_remembered_game
from cli.results.git_sync import (
    current_commit,
    keep_out_of_git,
    let_into_git,
    pull,
    run_paths_to_stage,
)
from cli.results.publishing import in_git, publish_files
from cli.results.records import committed_champions
from cli.runs.trainer_lock import TrainerLock
from games import EDITOR_GAME
from training.bots.run_bots import evaluate_target, export_run, export_sides, run_target
from training.errors import ExportError
from training.evaluation.records import game_name, record_evaluation
from training.runs.checkpoints import CheckpointError
from training.runs.run_paths import InvalidRunName, RunPaths
from training.runs.run_record import RunRecord
from training.session.planning import TrainPlan, TrainRequest
from training.session.session_start import begin_session, disk_warnings_for

if TYPE_CHECKING:
    from training.session.trainer import TrainOutcome


def say_disk_room(plan: TrainPlan, use_git: bool) -> None:
    """Before the first step: a warning for each place the run will not fit (its
    checkpoints, logs, bot and commits against the free space, a file size limit)."""
    for line in disk_warnings_for(plan, use_git):
        console.print(f"[yellow]warning: {escape(line)}[/]", soft_wrap=True)


def git_choice(request: TrainRequest, flag: bool | None) -> bool:
    """``--git``/``--no-git`` when given; else what the run being continued (or branched
    from) chose, so resuming a ``--no-git`` run never commits it; else git."""
    if flag is not None:
        return flag
    if request.paths.exists():
        return in_git(request.paths)
    try:
        source = RunPaths(request.root, request.resume) if request.resume else None
    except InvalidRunName:
        source = None  # a checkpoint path, not a run
    return in_git(source) if source is not None and source.exists() else True


@contextmanager
def checkout_session(root: Path, name: str, pull_first: bool) -> Iterator[TrainerLock]:
    """The frame of everything that trains in a checkout: hold its trainer lock and pull
    first when git carries the work. The work commits and pushes its own files."""
    with TrainerLock(root, name) as lock:
        if pull_first:
            console.print(f"git: {pull(root)}")
        yield lock


def run_training(request: TrainRequest, git_flag: bool | None) -> int:
    """Run the whole flow for one session under the checkout's trainer lock; return the exit code."""
    use_git = git_choice(request, git_flag)
    with checkout_session(request.root, request.run, use_git):
        code = train_session(request, use_git)
    return code


def train_session(request: TrainRequest, use_git: bool) -> int:
    """Train, export, evaluate, commit and push one run (the caller holds the lock).

    The request's ``git_commit`` is filled in here, from the checkout's HEAD.
    """
    root, paths = request.root, request.paths
    request.git_commit = current_commit(root)
    mark_git_use(request, use_git)
    if request.resume is None and request.config_file is None:
        # A new run plays the checkout's remembered game (lander setup --game-bin);
        # a resumed one keeps its own.
        request.overrides = with_remembered_game(root, request.overrides)
    # The games start while the training stack (torch, SB3) is imported: see begin_session.
    start = begin_session(request, console)
    say_disk_room(start.plan, use_git)
    try:
        from training.session.trainer import train
    except BaseException:
        if start.games is not None:
            start.games.close()
        raise
    pusher = _mid_run_pusher(paths) if use_git else None
    outcome = train(request, console, on_checkpoint=pusher, start=start)
    with RunEnd(paths, use_git) as end:
        end.step("export")
        finish_run(paths, outcome)
        if use_git:
            end.step("commit and push")
            publish(paths, outcome.record)
    return outcome.exit_code


class _EndInterrupted(BaseException):
    """A second Ctrl-C, or a SIGTERM, while a run's end is being done."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class RunEnd:
    """The end of a run (export, evaluation, commit, push) done in full, or said to be
    skipped: never cut short in silence.

    ``lander stop`` sends Ctrl-C; one that lands after training ended (the final
    checkpoint is saved) asks for what the run is already doing, so the end goes on. A
    second Ctrl-C, or SIGTERM, stops it: git's processes are killed with it, and one line
    says what was skipped and the commands that finish it. The files are whole either way
    (every write is atomic).

    :param paths: the run.
    :param use_git: whether the end commits and pushes.
    """

    def __init__(self, paths: RunPaths, use_git: bool) -> None:
        self.paths = paths
        self.use_git = use_git
        self.current = "export"
        self._asked = False
        self.signalled: int | None = None
        """A second Ctrl-C or a SIGTERM noted during the end (acted on at a safe point)."""
        self._previous: dict[int, Any] = {}

    def step(self, name: str) -> None:
        """Say which step runs now (``export``, ``commit and push``): a safe point, where a
        second Ctrl-C or a SIGTERM noted since stops the end."""
        self._stop_if_signalled()
        self.current = name

    def _stop_if_signalled(self) -> None:
        if self.signalled is not None:
            raise _EndInterrupted(self.signalled)

    def _handler(self, signum: int, _frame: FrameType | None) -> None:
        """Note the signal; never raise into whatever runs (a finalizer, a logging lock):
        git's processes are killed at once, so a hung push ends, and the end stops at its
        next safe point (:meth:`step`, or its own end)."""
        if signum == signal.SIGINT and not self._asked:
            self._asked = True
            console.print(
                f"[yellow]Ctrl-C: training has ended; finishing the run's {self._rest()} "
                "(Ctrl-C again to skip it)[/]"
            )
            return
        if signum == signal.SIGTERM:
            note_sigterm(signum)
        if self.signalled is None:
            self.signalled = signum
            kill_descendants()

    def _rest(self) -> str:
        steps = ["export", "evaluation"] if self.current == "export" else []
        steps += ["commit and push"] if self.use_git else []
        return ", ".join(steps) or "end"

    def __enter__(self) -> RunEnd:
        self._previous = {
            sig: signal.signal(sig, self._handler) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, _: Any
    ) -> None:
        ending = self.signalled is not None or isinstance(
            error, _EndInterrupted | KeyboardInterrupt
        )
        for sig, old in self._previous.items():
            # Ending on a signal: more of a storm of them must not raise in the middle of
            # the exit (Python's own SIGINT handler would); the exit code says the first.
            signal.signal(sig, signal.SIG_IGN if ending else old)
        if error is None and self.signalled is not None:
            error = _EndInterrupted(self.signalled)  # noted during the last step
        if not isinstance(error, _EndInterrupted | KeyboardInterrupt):
            return
        kill_descendants()  # a git push that hangs would outlive us
        for thread in threading.enumerate():
            if isinstance(thread, threading.Timer):
                thread.cancel()  # git's kill-after-timeout watchdog would hold the exit
        run = self.paths.run
        finish = [how(f"export {run}")] if self.current == "export" else []
        finish += [how(f"push {run}")] if self.use_git else []
        name = error.args[0] if isinstance(error, _EndInterrupted) else "SIGINT"
        error_console.print(
            f"[yellow]{name}: skipped the run's {self._rest()}; its files are whole. "
            f"Finish with: {' && '.join(finish)}[/]",
            soft_wrap=True,
        )
        signum = error.signum if isinstance(error, _EndInterrupted) else signal.SIGINT
        sys.exit(128 + signum)


def kill_descendants() -> None:
    """SIGKILL every process this one started, and theirs (git and its remote helper)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(stat.parent.name))
    pending, found = [os.getpid()], []
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    for pid in found:
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def mark_git_use(request: TrainRequest, use_git: bool) -> None:
    """Say whether git carries the run where that is said, once (``.git/info/exclude``,
    :func:`cli.results.publishing.in_git`): a ``--no-git`` run's files are kept out of git in this
    checkout; a git session of a run trained before with ``--no-git`` lets them in again."""
    paths = request.paths
    if use_git:
        let_into_git(paths.root, paths.run)
    else:
        keep_out_of_git(paths.root, paths.run)


def _mid_run_pusher(paths: RunPaths) -> Any:
    """Every ``push_every`` checkpoints, commit and push what the run has so far."""
    saved = 0

    def on_checkpoint(path: Path, record: RunRecord) -> None:
        nonlocal saved
        saved += 1
        every = record.config.push_every
        if every > 0 and saved % every == 0:
            publish(paths, record, f"checkpoint {path.name}")

    return on_checkpoint


def commit_message(run: str, record: RunRecord, what: str | None = None) -> str:
    """``run03: 600,000 steps, reward 251.3 (finished)``."""
    reward = record.extra.last_reward
    reward_text = f", reward {reward:.1f}" if reward is not None else ""
    return f"{run}: {record.total_timesteps:,} steps{reward_text} ({what or record.status})"


def publish(paths: RunPaths, record: RunRecord, what: str | None = None) -> None:
    """Commit the run's files and push, reporting each step; never raises for a failed push."""
    message = commit_message(paths.run, record, what)
    publish_files(paths.root, run_paths_to_stage(paths), message, finish=how(f"push {paths.run}"))


def finish_run(paths: RunPaths, outcome: TrainOutcome) -> None:
    """Export the final model and evaluate the bot (bundled game), reporting each step."""
    root, run = paths.root, paths.run
    if not outcome.final_saved:
        return  # this session wrote no final model (a full disk): nothing new to export
    try:
        result = export_run(paths, paths.final)
        sides = export_sides(paths, console)
    except (ExportError, CheckpointError) as exc:
        console.print(f"[yellow]export skipped:[/] {exc}")
        return
    for exported in [result, *sides]:
        console.print(
            f"exported {exported.bot_json.relative_to(root)} and "
            f"{exported.bot_onnx.relative_to(root)}"
        )
    if outcome.record.config.game_bin is not None:
        console.print(
            "evaluate it on this game with: "
            + how(f"eval {run} --game-bin {outcome.record.config.game_bin}")
        )
        return
    if outcome.record.config.game_url is not None:
        return  # an OpenEnv server: evaluated during the run (--eval-every), not after it
    config = outcome.record.config
    if config.game_project is not None or config.game == EDITOR_GAME:
        where = (
            f"--game-project {config.game_project}"
            if config.game_project is not None
            else f"--game {EDITOR_GAME} (and press Play)"
        )
        console.print("evaluate it on this game with: " + how(f"eval {run} {where}"))
        return
    target = run_target(paths)
    evaluation = evaluate_target(
        target, outcome.record.config.eval_episodes, None, outcome.record.config.port
    )
    game = game_name(target.trained)
    champion = committed_champions(root).get(game)
    record_evaluation(
        root, run, target.timesteps, target.bot, evaluation, outcome.record.git_commit, game
    )
    better = target.bot is not None and (
        champion is None or evaluation.mean_reward > champion.mean_reward
    )
    note = f"new champion on {game}" if in_git(paths) else f"best on {game}, but kept out of git"
    console.print(f"evaluation: {evaluation.line()}" + (f"  [green]({note})[/]" if better else ""))
