"""Operations on runs in tmux: start (or attach), resume, stop with a deadline, ``lander
clean`` of ended sessions, and ``lander prune`` of a finished run's intermediate checkpoints."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from cli.common.console import console, fail, how
from cli.machine.tmux_sessions import (
    TRAIN_WINDOW,
    attach,
    create_run_session,
    find_session,
    live_dashboards,
    remove_ended_sessions,
    runs_training,
    send_interrupt,
    session_name,
    start_dashboard,
    train_output,
    train_window_alive,
    window_alive,
)
from cli.results.git_sync import (
    run_paths_to_stage,
)
from cli.results.publishing import in_git, publish_files
from cli.runs.trainer_lock import holder
from cli.serving.dashboard import (
    choose_dashboard,
    choose_page_port,
    dashboard_url,
)
from game_bridge.local_names import who_can_reach
from training.evaluation.records import owns_run
from training.runs.checkpoints import (
    is_valid_checkpoint,
    normalization_path,
    policy_loads,
    rotating_checkpoints,
)
from training.runs.run_paths import RunPaths, unknown_run
from training.runs.run_record import RunRecord, load_runs


def _session_environment(root: Path) -> dict[str, str]:
    """What a tmux window needs of this shell: the checkout, and how hints name lander."""
    environment = {"LANDER_HOME": str(root)}
    if os.environ.get("LANDER_COMMAND"):
        environment["LANDER_COMMAND"] = os.environ["LANDER_COMMAND"]
    return environment


def start_in_tmux(
    root: Path,
    run: str,
    train_args: list[str],
    tb_host: str | None,
    tb_port: int | None,
    command_args: list[str] | None = None,
    live_page: bool = True,
    web_port: int | None = None,
) -> None:
    """Start ``lander train RUN ...`` (or ``lander <command_args>``: a sweep, a
    curriculum) in a detached session, or attach to the live one.

    :param live_page: serve the run's live page (its bot flies the lander after the cursor).
    :param web_port: the live page's port (``--web-port``; default: where the last was).
    """
    session = find_session(root, run)
    if session is not None and window_alive(session, TRAIN_WINDOW):
        if sys.stdin.isatty() and sys.stdout.isatty():
            attach(session)
        console.print(
            f"run {run} is running in tmux session {session.session_name}; attach with: {how(f'attach {run}')}"
        )
        return
    busy = holder(root)
    if busy is not None:
        fail(f"run {busy!r} is training in this checkout; stop it first ({how(f'stop {busy}')})")
    if session is not None:
        session.kill()  # the last trainer of this run has ended: start afresh
    dashboard = choose_dashboard(root, tb_host, tb_port)
    # One run, one live page: the bot it publishes, flying after the cursor (a sweep or a
    # curriculum trains several runs, a stroke bot flies no lander: no page).
    page_port, page_note = (
        choose_page_port(root, dashboard.host, web_port, avoid=dashboard.port)
        if command_args is None and live_page
        else (None, "")
    )
    page_args = (
        ["play", "--web", run, "--host", dashboard.host, "--web-port", str(page_port)]
        if page_port is not None
        else None
    )
    command = command_args if command_args is not None else ["train", run, *train_args]
    create_run_session(run, root, command, _session_environment(root), page_args)
    if dashboard.command is not None:
        start_dashboard(dashboard.port, root, dashboard.command, _session_environment(root))
    console.print(
        f"started run {run} in tmux session {session_name(root, run)} (window train: pull, train, export, push)"
    )
    console.print(f"dashboard: {dashboard.url}  ({dashboard.note}; {dashboard.reach})")
    if page_port is not None:
        console.print(
            f"live page: {dashboard_url(dashboard.host, page_port)}  (the bot follows your cursor; "
            f"the newest published bot flies; {who_can_reach(dashboard.host, '--tb-host')}"
            + (f"; {page_note})" if page_note else ")")
        )
    console.print(
        f"attach: {how(f'attach {run}')}   (detach again with Ctrl-b d)   stop: {how(f'stop {run}')}"
    )


def newest_run(root: Path) -> str | None:
    """The run whose record changed last."""
    records = load_runs(root)
    return max(records, key=lambda record: record.updated_at).run if records else None


def stop_run(root: Path, run: str, timeout: float) -> None:
    """Ctrl-C the trainer, then wait until it has saved, exported and pushed."""
    paths = RunPaths(root, run)
    session = find_session(root, run)
    if session is None or not window_alive(session, TRAIN_WINDOW):
        if not paths.exists():
            fail(unknown_run(root, run))
        ended = RunRecord.load(paths.run_json)
        if ended.status != "running":
            fail(
                f"run {run} is not running: it {ended.status} at {ended.total_timesteps:,} steps "
                f"(continue it with {how(f'resume {run}')})"
            )
        fail(
            f"run {run} is not training in tmux here (another machine, or it was killed: see {how('status')})"
        )
    started = time.monotonic()
    send_interrupt(session)
    console.print(
        f"sent Ctrl-C to run {run}; waiting up to {timeout:.0f} s for it to save, export and push"
    )
    while window_alive(session, TRAIN_WINDOW):
        if time.monotonic() - started > timeout:
            fail(
                f"run {run} did not finish within {timeout:.0f} s; look at it with: {how(f'attach {run}')}"
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
    missing = not final.exists() or not paths.bot_json.exists()
    pushed = [line for line in output.splitlines() if line.startswith("git: ")]
    console.print(
        ("[green]✓[/] " if any("pushed to" in line for line in pushed) else "[yellow]![/] ")
        + (pushed[-1] if pushed else "git: no push reported (was it started with --no-git?)")
    )
    session.kill()  # the run has ended; train.log keeps what its window showed
    if missing:
        fail(
            f"run {run} stopped without all of its results: see {paths.train_log.relative_to(root)}"
        )


def clean_sessions(root: Path) -> None:
    """``lander clean``: remove this checkout's tmux sessions of runs (and dashboards)
    that have ended, and offer to stop the dashboard when no run trains any more (it
    stays by default: curves are read after a run too)."""
    removed = remove_ended_sessions(root)
    console.print(
        f"removed {len(removed)} ended session(s): {', '.join(removed)}"
        if removed
        else "no ended sessions"
    )
    dashboards = live_dashboards(root)
    if dashboards and not runs_training(root) and holder(root) is None:
        console.print(
            f"the dashboard ({', '.join(dashboards)}) serves no running run; "
            f"stop it with {how('dashboard --stop')}"
        )


def prune_run(root: Path, run: str) -> None:
    """``lander prune RUN``: drop a finished run's rotating checkpoints from its files and
    its next commit, keeping ``final.zip`` (what a resume and an export start from), its
    bots, records, snapshots and logs. Only the checkout that trained the run prunes it
    (every run's files have one writer)."""
    paths = RunPaths(root, run)
    if not paths.exists():
        fail(unknown_run(root, run))
    if not owns_run(paths):
        fail(f"run {run} was trained in another checkout: prune it there")
    if holder(root) == run or train_window_alive(root, run):
        fail(f"run {run} is training: stop it first ({how(f'stop {run}')})")
    if not (is_valid_checkpoint(paths.final) and policy_loads(paths.final)):
        fail(f"run {run} has no valid final.zip: pruning would leave nothing to resume from")
    dropped = rotating_checkpoints(paths.checkpoints)
    if not dropped:
        console.print(f"run {run} has no intermediate checkpoints: nothing to prune")
        return
    size = sum(path.stat().st_size for path in dropped)
    for path in dropped:
        path.unlink()
        normalization_path(path).unlink(missing_ok=True)
    console.print(
        f"pruned {len(dropped)} intermediate checkpoint(s) of {run} ({size / 2**20:.1f} MB); "
        "kept final.zip, the bots, the records and the logs"
    )
    if not in_git(paths):
        return
    record = RunRecord.load(paths.run_json)
    publish_files(
        root,
        run_paths_to_stage(paths),
        f"{run}: pruned {len(dropped)} intermediate checkpoint(s) at {record.total_timesteps:,} "
        "steps (final.zip, bots and records kept)",
        finish=how(f"push {run}"),
    )
