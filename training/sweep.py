"""``lander sweep``: an Optuna study over training settings.

Each trial is a run ``NAME-tNNNN`` with its own checkpoints and logs, evaluated
during training (median pruning stops poor trials early) and at its end. The
study lives in ``logs/NAME/sweep.db`` (SQLite), so a stopped sweep resumes where
it stopped; ``logs/NAME/trials.jsonl`` gets one line per finished trial.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from rich.console import Console
from stable_baselines3.common.callbacks import BaseCallback

from training.bots import evaluate_target, export_run, run_target
from training.eval_callback import PeriodicEvaluation
from training.eval_records import game_name, record_evaluation
from training.evaluation import EvalResult, LanderSettings
from training.run_paths import RunPaths, validate_run_name
from training.run_record import now_iso
from training.search_space import sample
from training.trainer import TrainRequest, train

FINISHED_STATES = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)


@dataclass(frozen=True)
class TrialResult:
    """One finished trial, as written to ``trials.jsonl``."""

    number: int
    run: str
    params: dict[str, Any]
    state: str
    result: EvalResult | None
    timesteps: int

    def to_json(self) -> str:
        """The ``trials.jsonl`` line."""
        record: dict[str, Any] = {
            "trial": self.number,
            "run": self.run,
            "state": self.state,
            "params": self.params,
            "timesteps": self.timesteps,
            "date": now_iso(),
        }
        if self.result is not None:
            record.update(
                mean_reward=self.result.mean_reward,
                std_reward=self.result.std_reward,
                success_rate=self.result.success_rate,
                normalized_score=self.result.normalized_score,
            )
        return json.dumps(record)


class _PruneOnEvaluation(BaseCallback):
    """Ends training when Optuna's median pruner says the trial is behind."""

    def __init__(self) -> None:
        super().__init__()
        self.pruned = False

    def _on_step(self) -> bool:
        return not self.pruned


def sweep_paths(root: Path, name: str) -> tuple[Path, Path]:
    """The study database and the trials log of sweep ``name``."""
    folder = RunPaths(root, validate_run_name(name)).logs
    return folder / "sweep.db", folder / "trials.jsonl"


def run_sweep(
    root: Path,
    name: str,
    trials: int,
    timesteps_per_trial: int,
    space: dict[str, dict[str, Any]],
    base_overrides: dict[str, Any],
    console: Console,
    on_trial: Callable[[TrialResult], None] | None = None,
    git_commit: str | None = None,
    tags: dict[str, Any] | None = None,
) -> optuna.Study:
    """Run trials until ``trials`` have finished (counting those of earlier sessions).

    :param base_overrides: train settings every trial shares (ports, game, ...).
    :param on_trial: called after each finished trial (commits and pushes).
    :param tags: kept in every trial's run.json (whether git carries the sweep).
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # lander prints its own line per trial
    database, trials_log = sweep_paths(root, name)
    database.parent.mkdir(parents=True, exist_ok=True)
    seed = int(base_overrides.get("seed", 0))
    study = optuna.create_study(
        study_name=name,
        storage=f"sqlite:///{database}",
        load_if_exists=True,
        direction="maximize",
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0),
    )
    done = sum(1 for trial in study.trials if trial.state in FINISHED_STATES)
    eval_every = int(base_overrides.get("eval_every") or max(timesteps_per_trial // 4, 1))
    episodes = int(base_overrides.get("eval_episodes", 20))
    settings = LanderSettings.from_game(
        base_overrides.get("game_args", {}), base_overrides.get("action_repeat")
    )

    def objective(trial: optuna.Trial) -> float:
        params = sample(trial, space)
        run = f"{name}-t{trial.number:04d}"
        pruning = _PruneOnEvaluation()

        def report(steps: int, result: EvalResult) -> None:
            trial.report(result.mean_reward, steps)
            if trial.should_prune():
                pruning.pruned = True

        # Pruning evaluations play the bundled game's physics: none for another game.
        bundled = base_overrides.get("game_bin") is None
        evaluation = (
            [PeriodicEvaluation(eval_every, episodes, settings, on_result=report)]
            if bundled
            else []
        )
        overrides = {**base_overrides, **params, "timesteps": timesteps_per_trial, "eval_every": 0}
        console.print(f"[bold]trial {trial.number}[/] ({run}): {json.dumps(params)}")
        trial_tags = {**(tags or {}), "sweep": {"name": name, "trial": trial.number}}
        request = TrainRequest(
            root, run, overrides, force=True, git_commit=git_commit, tags=trial_tags
        )
        outcome = train(request, console, extra_callbacks=[*evaluation, pruning])
        state = "pruned" if pruning.pruned else outcome.status
        result = None
        if outcome.status != "failed" and base_overrides.get("game_bin") is None:
            export_run(request.paths)
            target = run_target(request.paths)
            result = evaluate_target(target, episodes, None, 0)
            game = game_name(target.trained)
            record_evaluation(root, run, target.timesteps, target.bot, result, git_commit, game)
        finished = TrialResult(
            trial.number, run, params, state, result, outcome.record.total_timesteps
        )
        with trials_log.open("a") as handle:
            handle.write(finished.to_json() + "\n")
        if on_trial is not None:
            on_trial(finished)
        if outcome.status == "failed":
            raise optuna.TrialPruned(f"run failed: {outcome.error}")
        if pruning.pruned:
            raise optuna.TrialPruned()
        assert result is not None or base_overrides.get("game_bin") is not None
        return (
            result.mean_reward
            if result is not None
            else float(outcome.record.extra.get("last_reward") or 0.0)
        )

    if trials > done:
        console.print(f"sweep {name}: {done} trial(s) done, running {trials - done} more")
        study.optimize(objective, n_trials=trials - done, catch=())
    else:
        console.print(f"sweep {name}: all {trials} trials are done")
    return study
