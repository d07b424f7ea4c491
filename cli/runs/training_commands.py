"""Commands that train in the foreground: ``train``, ``sweep``, ``next``, ``curriculum``,
``tune``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from cli.common import train_flags as flags
from cli.common.console import console, fail
from cli.common.options import (
    RunName,
    valid_run,
    with_config_file,
)
from cli.common.paths import project_root
from training.config import TUNED


@flags.with_settings()
def train(
    run: RunName,
    config: flags.ConfigFile = None,
    resume: flags.Resume = None,
    reset_std: flags.ResetStd = None,
    force: flags.Force = False,
    git: flags.Git = None,
    auto_resume: flags.AutoResume = False,
    demos: flags.Demonstrations = None,
    until_steps: Annotated[int | None, typer.Option(hidden=True)] = None,
    settings: dict[str, Any] | None = None,
) -> None:
    """Train RUN in the foreground: PPO against the games, checkpoints, final save on Ctrl-C."""
    if auto_resume:
        from cli.runs.supervisor import Session, supervise

        valid_run(run)
        session = Session(
            run, settings or {}, config, resume, reset_std, force, git, tuple(demos or ())
        )
        raise typer.Exit(supervise(project_root(), session))
    from cli.runs.run_flow import run_training
    from training.session.planning import TrainRequest

    request = TrainRequest(
        project_root(),
        run,
        settings or {},
        config_file=config,
        resume=resume,
        force=force,
        reset_std=reset_std,
        until_timesteps=until_steps,
        demos=tuple(demos or ()),
    )
    raise typer.Exit(run_training(request, git))


@flags.with_settings(exclude=("push_every",))  # a sweep pushes every --push-every trials
def sweep(
    name: Annotated[
        str,
        typer.Argument(
            metavar="NAME", help="Sweep name: trials are runs NAME-t0000, NAME-t0001, ..."
        ),
    ],
    trials: Annotated[
        int, typer.Option(help="Trials to finish in all (a stopped sweep resumes).")
    ] = 10,
    timesteps_per_trial: Annotated[
        int, typer.Option(help="Training steps of each trial.")
    ] = 200_000,
    space: Annotated[
        Path | None,
        typer.Option(help="Search space YAML (default: lr, entropy, n_steps, batch, clip, width)."),
    ] = None,
    push_every: Annotated[
        int, typer.Option(help="Trials between commits and pushes (0: only at the end).")
    ] = 1,
    parallel: Annotated[
        int,
        typer.Option(
            help="With --cluster: trials at once, as Ray tasks spread over the nodes "
            "(each trains in a scratch folder there; this checkout alone commits)."
        ),
    ] = 1,
    config: flags.ConfigFile = None,
    git: flags.Git = None,
    settings: dict[str, Any] | None = None,
) -> None:
    """Search training settings with Optuna (TPE, median pruning; no pruning on a cluster);
    the options below are every trial's settings outside the search space."""
    from cli.runs.campaigns import sweep as run

    valid_run(name)
    overrides = with_config_file(config, settings or {})
    raise typer.Exit(
        run(
            project_root(),
            name,
            trials,
            timesteps_per_trial,
            space,
            overrides,
            push_every,
            git is not False,
            parallel,
        )
    )


@flags.with_settings()
def next_(
    from_run: Annotated[
        str | None, typer.Option("--from", help="The run to continue (default: the newest run).")
    ] = None,
    config: flags.ConfigFile = None,
    reset_std: flags.ResetStd = None,
    git: flags.Git = None,
    settings: dict[str, Any] | None = None,
) -> None:
    """Train the next run (run03 -> run04) from the previous run's final model."""
    from cli.runs.campaigns import next_run

    source = valid_run(from_run) if from_run else None
    overrides = with_config_file(config, settings or {})
    raise typer.Exit(next_run(project_root(), source, overrides, git, reset_std))


def curriculum(
    plan: Annotated[
        Path,
        typer.Argument(
            metavar="PLAN", help="A plan YAML: stages with their runs, game args and budgets."
        ),
    ],
    git: flags.Git = None,
) -> None:
    """Run a curriculum: stages in order, each resuming from the one before; stops at a failed stage."""
    from cli.runs.campaigns import curriculum as run

    raise typer.Exit(run(project_root(), plan, git is not False))


@flags.with_settings(exclude=TUNED)
def tune(
    objective: Annotated[
        str,
        typer.Option(
            help="What to race for: 'time' (wall seconds from launch to --reward, samples that "
            "teach) or 'fps' (training steps per second)."
        ),
    ] = "fps",
    seconds: Annotated[
        float,
        typer.Option(help="Training seconds per setting (time: the longest a race may take)."),
    ] = 20.0,
    reward: Annotated[
        float | None,
        typer.Option(
            help="time: the training reward (rollout/ep_rew_mean) to race to; "
            "default 200 on the bundled game, required for other games."
        ),
    ] = None,
    n_parallel: Annotated[
        str | None,
        typer.Option(help="Instance counts to try, comma-separated [fps: 2,4,8; time: 2,4]."),
    ] = None,
    agents: Annotated[
        str | None,
        typer.Option(
            help="Agents per instance to try, comma-separated (bundled game's --agents) "
            "[fps: 4,8,16; time: 8,16]."
        ),
    ] = None,
    speedup: Annotated[
        str, typer.Option(help="Speedups to try, comma-separated ('default': the game's own).")
    ] = "default",
    n_steps: Annotated[
        str | None,
        typer.Option(
            help="Rollout lengths (steps per env) to try, comma-separated "
            "('default': the run's) [fps: default; time: 32,64]."
        ),
    ] = None,
    batch_size: Annotated[
        str,
        typer.Option(help="Minibatch sizes to try, comma-separated ('default': the run's)."),
    ] = "default",
    config: flags.ConfigFile = None,
    settings: dict[str, Any] | None = None,
) -> None:
    """Find the best --n-parallel, --agents-per-instance, --speedup, --n-steps and --batch-size
    here: a short run per setting, ranked by time to a reward (--objective time) or by fps."""
    from training.campaigns.tuning import best, plan_races, tune

    lists = {
        "n_parallel": n_parallel,
        "agents_per_instance": agents,
        "speedup": speedup,
        "n_steps": n_steps,
        "batch_size": batch_size,
    }
    plan = plan_races(objective, seconds, reward, lists, with_config_file(config, settings or {}))
    results = tune(plan.races, plan.seconds, plan.overrides, console, plan.target)
    console.print(_race_table(results, plan.target, plan.seconds))
    winner = best(results, objective)
    target = plan.target
    if winner is None:
        fail(
            f"no setting reached reward {target:g} in {seconds:g} s; try more --seconds"
            if target is not None
            else "no setting trained; run `lander setup` to check the game"
        )
    measured = (
        f"reward {target:g} in {winner.seconds_to_reward:.1f} s"
        if target is not None
        else f"{winner.fps:,.0f} fps"
    )
    console.print(
        f"fastest: {measured}. Use: ./lander start RUN {winner.setting.flags()} "
        + " ".join(flags.settings_argv(settings or {}))
    )


def _race_table(results: list[Any], target: float | None, seconds: float) -> Any:
    """``tune``'s table: a row per setting, its fps and (racing to a reward) its time."""
    from rich.table import Table

    title = (
        f"seconds from launch to reward {target:g} per setting (at most {seconds:g} s each)"
        if target is not None
        else f"training fps per setting ({seconds:g} s each)"
    )
    table = Table(title=title)
    columns = ("n-parallel", "agents-per-instance", "speedup", "n-steps", "batch-size", "fps")
    for column in (*columns, *(("seconds to reward",) if target is not None else ())):
        table.add_column(column, justify="right")
    for result in results:
        setting = result.setting
        row = [
            str(setting.n_parallel),
            str(setting.agents_per_instance),
            str(setting.speedup or "default"),
            str(setting.n_steps or "default"),
            str(setting.batch_size or "default"),
            "failed" if result.fps is None else f"{result.fps:,.0f}",
        ]
        if target is not None:
            reached = result.seconds_to_reward
            row.append("not reached" if reached is None else f"{reached:.1f}")
        table.add_row(*row)
    return table
