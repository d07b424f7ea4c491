"""``lander push``: commit and push what runs left unpushed, or publish one run that was
kept out of git (``--no-git``, a trial of a ``--no-git`` sweep)."""

from __future__ import annotations

from pathlib import Path

from cli.common.console import console, fail, how
from cli.results.git_sync import (
    keep_out_of_git,
    kept_out_names,
    kept_out_of_git,
    let_into_git,
    run_paths_to_stage,
)
from cli.results.publishing import in_git, publish_files
from training.runs.run_paths import RunPaths, unknown_run
from training.runs.run_record import RunRecord, load_runs


def _let_trial_in(root: Path, run: str, record: RunRecord) -> None:
    """A trial of a ``--no-git`` sweep is kept out with all its sweep's trials: lift that,
    and keep the other trials out one by one."""
    sweep = record.extra.sweep
    if sweep is None:
        return
    pattern = f"{sweep.get('name')}-t*"
    trials = [path.parent.name for path in (root / "checkpoints").glob(f"{pattern}/run.json")]
    names = kept_out_names(root)
    kept = [trial for trial in trials if trial != run and kept_out_of_git(root, trial, names)]
    if not let_into_git(root, pattern):
        return
    for trial in kept:
        keep_out_of_git(root, trial)


def push_runs(root: Path, run: str | None = None) -> None:
    """``lander push``: commit and push every run meant for git that is not pushed yet;
    ``lander push RUN`` publishes that one run, even one trained with ``--no-git``."""
    if run is not None:
        paths = RunPaths(root, run)
        if not paths.exists():
            fail(unknown_run(root, run))
        if let_into_git(root, run) or not in_git(paths):
            _let_trial_in(root, run, RunRecord.load(paths.run_json))
            console.print(f"run {run}: no longer kept out of git")
        runs = [run]
    else:
        records = load_runs(root)
        every = [record.run for record in records]
        names = kept_out_names(root)
        runs = [r.run for r in records if in_git(RunPaths(root, r.run), r, names)]
        kept_out = sorted(set(every) - set(runs))
        if kept_out:
            console.print(
                f"kept out of git (--no-git): {', '.join(kept_out)}; publish one with: {how('push RUN')}"
            )
    stage = sorted({p for name in runs for p in run_paths_to_stage(RunPaths(root, name))})
    message = f"lander push: results of {', '.join(runs) or 'no runs'}"
    finish = how(f"push {run}" if run is not None else "push")
    result = publish_files(root, stage, message, warn_on_failure=False, finish=finish)
    if not result.pushed:
        fail(result.message)
