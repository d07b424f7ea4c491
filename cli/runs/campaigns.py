"""Campaigns of several runs in the foreground: ``lander sweep``, ``lander next``
and ``lander curriculum``. Each holds the checkout's trainer lock for its whole
length and carries its results with git like a single run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cli.common.console import console, fail
from cli.machine.setup import with_remembered_game
from cli.results.git_sync import (
    current_commit,
    keep_out_of_git,
    let_into_git,
    run_paths_to_stage,
)
from cli.results.publishing import publish_files
from cli.runs.operations import newest_run
from cli.runs.run_flow import checkout_session, git_choice, train_session
from training.campaigns.curriculum import Stage, load_plan, run_plan
from training.campaigns.search_space import load_space
from training.campaigns.sweep import run_sweep
from training.campaigns.trials import SweepTrials, TrialResult
from training.runs.run_paths import RunPaths, next_run_name
from training.session.planning import TrainRequest


def next_run(
    root: Path,
    source: str | None,
    overrides: dict[str, Any],
    git_flag: bool | None,
    reset_std: float | None = None,
) -> int:
    """Resume the previous run's final model as the next run name. The name is chosen
    after the pull, so a name another machine has pushed is seen as taken."""
    with checkout_session(root, source or "next", git_flag is not False) as lock:
        previous = source or newest_run(root)
        if previous is None:
            fail("no runs in checkpoints/ to continue from")
        name = next_run_name(root, RunPaths(root, previous).run)
        lock.name_run(name)
        console.print(f"next run: {name}, resumed from {previous}")
        request = TrainRequest(root, name, overrides, resume=previous, reset_std=reset_std)
        code = train_session(request, git_choice(request, git_flag))
    return code


def curriculum(root: Path, plan_file: Path, use_git: bool) -> int:
    """Run a curriculum plan's stages in order; stop at the first that fails."""
    plan = load_plan(plan_file)

    def stage_session(stage: Stage, previous: str | None, index: int) -> int:
        tags = {"curriculum": {"plan": plan.name, "stage": index, "of": len(plan.stages)}}
        force = previous is None and RunPaths(root, stage.run).exists()
        request = TrainRequest(
            root,
            stage.run,
            stage.overrides,
            resume=previous,
            force=force,
            reset_std=stage.reset_std,
            tags=tags,
        )
        return train_session(request, use_git)

    with checkout_session(root, plan.name, use_git):
        code = run_plan(plan, stage_session, console.print)
    return code


def sweep(
    root: Path,
    name: str,
    trials: int,
    timesteps_per_trial: int,
    space_file: Path | None,
    overrides: dict[str, Any],
    push_every: int,
    use_git: bool,
    parallel: int = 1,
) -> int:
    """Run (or resume) an Optuna sweep; commit and push every ``push_every`` trials.

    :param parallel: trials at once, on the Ray cluster named by ``overrides["cluster"]``.
    """
    if trials < 1 or timesteps_per_trial < 1 or parallel < 1:
        fail("--trials, --timesteps-per-trial and --parallel must be at least 1")
    overrides = with_remembered_game(root, overrides)
    space = load_space(space_file)
    RunPaths(root, name)  # a bad sweep name is one line before any trial
    finished: list[TrialResult] = []

    def publish_trials() -> None:
        paths = [str(RunPaths(root, name).logs.relative_to(root))]
        for result in finished:
            paths.extend(run_paths_to_stage(RunPaths(root, result.run)))
        message = f"sweep {name}: {len(finished)} trial(s) this session"
        publish_files(root, sorted(set(paths)), message)

    def on_trial(result: TrialResult) -> None:
        finished.append(result)
        score = "-" if result.result is None else f"{result.result.mean_reward:.1f}"
        console.print(f"trial {result.number} {result.state}: mean_reward={score}")
        if use_git and push_every > 0 and len(finished) % push_every == 0:
            publish_trials()

    cluster = overrides.pop("cluster", None)
    if overrides.pop("instances_per_node", None) is not None:
        fail(
            "--instances-per-node places one run's games; a sweep places whole trials (--parallel)"
        )
    if parallel > 1 and cluster is None:
        fail("--parallel runs trials side by side on a Ray cluster: add --cluster ADDRESS")
    for pattern in (name, f"{name}-t*"):  # the sweep's own log folder, and every trial
        (let_into_git if use_git else keep_out_of_git)(root, pattern)
    trials_of_sweep = SweepTrials(
        root,
        name,
        timesteps_per_trial,
        space,
        overrides,
        console,
        on_trial,
        current_commit(root),
    )
    with checkout_session(root, name, use_git):
        study = run_sweep(trials_of_sweep, trials, cluster, parallel)
        if use_git:
            publish_trials()
    complete = [t for t in study.trials if t.value is not None]
    if complete:
        best = max(complete, key=lambda t: t.value or float("-inf"))
        console.print(
            f"best trial {best.number} ({name}-t{best.number:04d}): {best.value:.2f} with {best.params}"
        )
    return 0
