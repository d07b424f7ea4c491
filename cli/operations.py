"""Operations on runs in tmux: start (or attach), resume, stop with a deadline,
and ``lander push`` for whatever runs left unpushed."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

from cli.console import console, fail
from cli.dashboard import dashboard_url, port_is_free, serves_tensorboard, tensorboard_command
from cli.git_sync import commit_paths, push, run_paths_to_stage
from cli.tmux_sessions import (
    TRAIN_WINDOW,
    TmuxError,
    attach,
    create_run_session,
    find_session,
    send_interrupt,
    session_name,
    train_output,
    window_alive,
)
from cli.trainer_lock import holder
from training.run_paths import RunPaths
from training.run_record import RunRecord


@dataclass(frozen=True)
class DashboardChoice:
    """Where the dashboard is, and whether this session must start it."""

    url: str
    command: list[str] | None
    note: str


def choose_dashboard(root: Path, host: str, port: int) -> DashboardChoice:
    """Reuse a TensorBoard already serving ``port``; else start one; say if the port is taken."""
    url = dashboard_url(host, port)
    if serves_tensorboard(host, port):
        return DashboardChoice(url, None, f"reusing the TensorBoard already serving port {port}")
    if not port_is_free(host, port):
        return DashboardChoice(url, None, f"port {port} is taken by something else: use --tb-port")
    return DashboardChoice(url, tensorboard_command(root, host, port), "dashboard window started")


def start_in_tmux(
    root: Path,
    run: str,
    train_args: list[str],
    tb_host: str,
    tb_port: int,
    command_args: list[str] | None = None,
) -> None:
    """Start ``lander train RUN ...`` (or ``lander <command_args>``: a sweep, a
    curriculum) in a detached session, or attach to the live one."""
    session = find_session(run)
    if session is not None and window_alive(session, TRAIN_WINDOW):
        if sys.stdin.isatty() and sys.stdout.isatty():
            attach(session)
        console.print(
            f"run {run} is running in tmux session {session.session_name}; attach with: lander attach {run}"
        )
        return
    busy = holder(root)
    if busy is not None:
        fail(f"run {busy!r} is training in this checkout; stop it first (lander stop {busy})")
    if session is not None:
        session.kill()  # the last trainer of this run has ended: start afresh
    dashboard = choose_dashboard(root, tb_host, tb_port)
    try:
        command = command_args if command_args is not None else ["train", run, *train_args]
        create_run_session(run, root, command, dashboard.command, {"LANDER_HOME": str(root)})
    except TmuxError as exc:
        fail(str(exc))
    console.print(
        f"started run {run} in tmux session {session_name(run)} (window train: pull, train, export, push)"
    )
    console.print(f"dashboard: {dashboard.url}  ({dashboard.note})")
    console.print(
        f"attach: lander attach {run}   (detach again with Ctrl-b d)   stop: lander stop {run}"
    )


def newest_run(root: Path) -> str | None:
    """The run whose record changed last."""
    records = []
    for path in (root / "checkpoints").glob("*/run.json"):
        try:
            records.append((RunRecord.load(path).updated_at, path.parent.name))
        except ValueError:
            continue
    return max(records)[1] if records else None


def stop_run(root: Path, run: str, timeout: float) -> None:
    """Ctrl-C the trainer, then wait until it has saved, exported and pushed."""
    paths = RunPaths(root, run)
    session = find_session(run)
    if session is None or not window_alive(session, TRAIN_WINDOW):
        fail(f"run {run} is not running in tmux here (lander status shows every run)")
    started = time.monotonic()
    send_interrupt(session)
    console.print(
        f"sent Ctrl-C to run {run}; waiting up to {timeout:.0f} s for it to save, export and push"
    )
    while window_alive(session, TRAIN_WINDOW):
        if time.monotonic() - started > timeout:
            fail(
                f"run {run} did not finish within {timeout:.0f} s; look at it with: lander attach {run}"
            )
        time.sleep(0.5)
    output = "\n".join(train_output(session, 200))
    record = RunRecord.load(paths.run_json) if paths.run_json.exists() else None
    final = paths.final
    console.print(
        ("[green]✓[/]" if final.exists() else "[red]✗[/]")
        + f" final checkpoint {final.relative_to(root)}"
        + (f" at {record.total_timesteps:,} steps ({record.status})" if record else "")
    )
    console.print(
        ("[green]✓[/]" if paths.bot_json.exists() else "[red]✗[/]")
        + f" bot {paths.bot_json.relative_to(root)}"
    )
    pushed = [line for line in output.splitlines() if line.startswith("git: ")]
    console.print(
        ("[green]✓[/] " if any("pushed to" in line for line in pushed) else "[yellow]![/] ")
        + (pushed[-1] if pushed else "git: no push reported (was it started with --no-git?)")
    )


def push_everything(root: Path) -> None:
    """Commit every run's unpushed files and the shared evaluation files, then push."""
    runs = sorted(path.parent.name for path in (root / "checkpoints").glob("*/run.json"))
    paths = sorted({p for run in runs for p in run_paths_to_stage(root, run)})
    sha = commit_paths(root, paths, f"lander push: results of {', '.join(runs) or 'no runs'}")
    console.print(f"git: committed {sha[:10]}" if sha else "git: nothing new to commit")
    result = push(root)
    if not result.pushed:
        fail(result.message)
    console.print(f"[green]git: {result.message}[/]")
