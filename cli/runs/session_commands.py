"""Commands about runs in tmux sessions and the runs of this checkout: ``start``, ``resume``,
``stop``, ``status``, ``prune``, ``clean``, ``attach``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from cli.common import train_flags as flags
from cli.common.console import console, fail
from cli.common.options import (
    RunName,
    TbHost,
    TbPort,
    WebPort,
    has_page,
    valid_run,
)
from cli.common.paths import project_root
from games import DEFAULT_GAME, EDITOR_GAME
from training.config import TrainConfig


def check_plan(
    run: str,
    settings: dict[str, Any],
    config: Path | None,
    resume: str | None,
    force: bool,
    reset_std: float | None,
    git: bool | None,
    demos: tuple[Path, ...] = (),
) -> TrainConfig:
    """Plan the run as ``lander train`` would, without writing, so a mistake is one red
    line here, not a tmux window that dies, and a disk too small for it is said before it
    starts; return the run's settings."""
    from cli.runs.run_flow import git_choice, say_disk_room
    from training.session.planning import TrainRequest, plan_training

    request = TrainRequest(
        project_root(), run, settings, config_file=config, resume=resume, force=force,
        reset_std=reset_std, demos=demos,
    )  # fmt: skip
    plan = plan_training(request)
    say_disk_room(plan, git_choice(request, git))
    return plan.config


@flags.with_settings()
def start(
    run: RunName,
    tb_host: TbHost = None,
    tb_port: TbPort = None,
    web_port: WebPort = None,
    sweep_space: Annotated[
        Path | None,
        typer.Option("--sweep", help="Run `lander sweep RUN --space FILE ...` instead of one run."),
    ] = None,
    curriculum_plan: Annotated[
        Path | None,
        typer.Option("--curriculum", help="Run `lander curriculum PLAN` instead of one run."),
    ] = None,
    config: flags.ConfigFile = None,
    resume: flags.Resume = None,
    reset_std: flags.ResetStd = None,
    force: flags.Force = False,
    git: flags.Git = None,
    auto_resume: flags.AutoResume = True,
    demos: flags.Demonstrations = None,
    settings: dict[str, Any] | None = None,
) -> None:
    """Start RUN in a detached tmux session (train, dashboard, live page); attach if it runs.

    Takes every option of `lander train`, e.g. `lander start run03 --timesteps 20000000 --n-parallel 14`.
    """
    from cli.machine.tmux_sessions import TRAIN_WINDOW, find_session, window_alive
    from cli.runs.operations import start_in_tmux

    valid_run(run)
    settings = settings or {}
    demo_files = tuple(demos or ())
    if demo_files and (curriculum_plan is not None or sweep_space is not None):
        fail("--demos start one run: give them to `lander train` or `start` of a single run")
    session = flags.session_argv(config, resume, reset_std, force, git, demo_files)
    # Detached runs are the ones nobody watches: they heal themselves unless told not to;
    # the game in the editor is watched by the person who started it, and only they can
    # start it again.
    session += ["--auto-resume"] if auto_resume and settings.get("game") != EDITOR_GAME else []
    command: list[str] | None = None
    game = settings.get("game", DEFAULT_GAME)
    game_args: dict[str, str] = {}
    if curriculum_plan is not None:
        if not curriculum_plan.is_file():
            fail(f"plan {str(curriculum_plan)!r} does not exist")
        if settings or config or resume or reset_std is not None or force:
            fail("a curriculum's plan sets its stages' settings: give them in the plan, not here")
        from training.campaigns.curriculum import load_plan

        load_plan(curriculum_plan)  # a bad plan is one line here, not a dead tmux window
        command = ["curriculum", str(curriculum_plan.resolve())]
        command += [] if git is None else ["--git" if git else "--no-git"]
    elif sweep_space is not None:
        if not sweep_space.is_file():
            fail(f"search space {str(sweep_space)!r} does not exist")
        from training.campaigns.search_space import load_space

        load_space(sweep_space)
        if "push_every" in settings or resume or reset_std is not None or force:
            fail(
                "--push-every, --resume, --reset-std and --force are not sweep options "
                "(a sweep pushes every trial and resumes by running it again)"
            )
        command = ["sweep", run, "--space", str(sweep_space.resolve())]
        command += flags.settings_argv(settings) + flags.session_argv(
            config, None, None, False, git
        )
    else:
        live = find_session(project_root(), run)
        if live is None or not window_alive(live, TRAIN_WINDOW):
            planned = check_plan(run, settings, config, resume, force, reset_std, git, demo_files)
            game, game_args = planned.game, planned.game_args
    start_in_tmux(
        project_root(), run, flags.settings_argv(settings) + session, tb_host, tb_port, command,
        live_page=has_page(game, game_args), web_port=web_port,
    )  # fmt: skip


@flags.with_settings()
def resume(
    run: Annotated[
        str | None,
        typer.Argument(metavar="RUN", help="The run to resume (default: the newest run)."),
    ] = None,
    as_run: Annotated[
        str | None,
        typer.Option(
            "--as", help="Resume into a new run of this name (a branch); default: continue RUN."
        ),
    ] = None,
    tb_host: TbHost = None,
    tb_port: TbPort = None,
    web_port: WebPort = None,
    config: flags.ConfigFile = None,
    reset_std: flags.ResetStd = None,
    git: flags.Git = None,
    auto_resume: flags.AutoResume = True,
    settings: dict[str, Any] | None = None,
) -> None:
    """Resume a run in tmux, in place or as a new branch run (--as), with changed settings.

    Example: `lander resume run03 --as run04 --ent-coef 0.001 --reset-std 0.3`. Settings not
    given keep the resumed run's values (the defaults shown are a new run's)."""
    from cli.runs.operations import newest_run, start_in_tmux

    root = project_root()
    source = run or newest_run(root)
    if source is None:
        fail("no runs in checkpoints/ to resume")
    valid_run(source)
    target = valid_run(as_run) if as_run else source
    settings = settings or {}
    planned = check_plan(target, settings, config, source, False, reset_std, git)
    args = flags.settings_argv(settings) + flags.session_argv(config, source, reset_std, False, git)
    args += ["--auto-resume"] if auto_resume and planned.game != EDITOR_GAME else []
    live_page = has_page(planned.game, planned.game_args)
    start_in_tmux(root, target, args, tb_host, tb_port, live_page=live_page, web_port=web_port)


def stop(
    run: Annotated[str, typer.Argument(metavar="RUN", help="The run to stop.")],
    timeout: Annotated[
        float, typer.Option(help="Seconds to wait for the final save, export and push.")
    ] = 300.0,
) -> None:
    """Stop RUN gracefully: Ctrl-C, then wait for the final checkpoint, the export and the push."""
    from cli.runs.operations import stop_run

    stop_run(project_root(), valid_run(run), timeout)


def status(
    show_all: Annotated[
        bool, typer.Option("--all", help="Every run, not only the newest 40.")
    ] = False,
) -> None:
    """A table of runs: state, steps, fps, reward, last checkpoint, best evaluation, pushed or not."""
    from cli.results.records import committed_records
    from cli.runs.status_table import (
        SHOWN_RUNS,
        champion_lines,
        cluster_lines,
        godot_lines,
        health_lines,
        status_table,
    )
    from training.runs.run_record import scan_runs

    root = project_root()
    evaluations = committed_records(root)  # read once for the table and the champions
    scanned = scan_runs(root)
    console.print(status_table(root, evaluations, scanned, None if show_all else SHOWN_RUNS))
    records = scanned[0]
    shown = records if show_all else records[-SHOWN_RUNS:]
    lines = [*health_lines(root, records), *cluster_lines(root, records), *godot_lines(shown)]
    for line in [*lines, *champion_lines(root, evaluations)]:
        console.print(line)


def prune(
    run: Annotated[str, typer.Argument(metavar="RUN", help="The finished run to prune.")],
) -> None:
    """Drop a finished run's intermediate checkpoints (commit and push the removal), keeping
    final.zip, its bots, records and logs: the repository's next clones stay light."""
    from cli.runs.operations import prune_run

    prune_run(project_root(), valid_run(run))


def clean() -> None:
    """Remove the tmux sessions of runs that have ended (and of dashboards that exited)."""
    from cli.runs.operations import clean_sessions

    clean_sessions(project_root())


def attach(
    run: Annotated[
        str, typer.Argument(metavar="RUN", help="The run whose tmux session to attach.")
    ],
) -> None:
    """Attach this terminal to RUN's tmux session (detach with Ctrl-b d)."""
    from cli.machine.tmux_sessions import attach as attach_session
    from cli.machine.tmux_sessions import find_session

    session = find_session(project_root(), valid_run(run))
    if session is None:
        fail(f"run {run} has no tmux session here")
    if not sys.stdin.isatty():
        fail("attach needs a terminal")
    attach_session(session)
