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

from games import DEFAULT_GAME
from training.bots import evaluate_target, export_run, run_target
from training.eval_callback import PeriodicEvaluation
from training.eval_records import game_name, record_evaluation
from training.evaluation import EvalResult, game_settings
from training.run_paths import RunPaths, validate_run_name
from training.run_record import RunRecord, now_iso
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
    where: dict[str, str] | None = None  # node and host of a trial trained on a cluster

    def to_json(self) -> str:
        """The ``trials.jsonl`` line."""
        record: dict[str, Any] = {
            "trial": self.number,
            "run": self.run,
            "state": self.state,
            "params": self.params,
            "timesteps": self.timesteps,
            "date": now_iso(),
            **(self.where or {}),
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


@dataclass
class SweepTrials:
    """What every trial of one sweep shares, and the end of a trial wherever it trained.

    :param on_trial: called after each finished trial (commits and pushes).
    :param tags: :class:`~training.run_record.RunExtras` fields set in every trial's run.json.
    """

    root: Path
    name: str
    timesteps_per_trial: int
    space: dict[str, dict[str, Any]]
    base_overrides: dict[str, Any]
    console: Console
    on_trial: Callable[[TrialResult], None] | None = None
    git_commit: str | None = None
    tags: dict[str, Any] | None = None

    @property
    def bundled(self) -> bool:
        """Trials play the bundled game (evaluated in-process, pruned on evaluations)."""
        return self.base_overrides.get("game_bin") is None

    @property
    def episodes(self) -> int:
        """Episodes of each evaluation."""
        return int(self.base_overrides.get("eval_episodes", 20))

    def run_of(self, trial: optuna.Trial) -> str:
        """The run name of a trial."""
        return f"{self.name}-t{trial.number:04d}"

    def request(self, root: Path, trial: optuna.Trial, params: dict[str, Any]) -> TrainRequest:
        """The training request of a trial (in ``root``: the checkout, or a worker's scratch)."""
        overrides = {
            **self.base_overrides,
            **params,
            "timesteps": self.timesteps_per_trial,
            "eval_every": 0,
        }
        tags = {**(self.tags or {}), "sweep": {"name": self.name, "trial": trial.number}}
        return TrainRequest(
            root, self.run_of(trial), overrides, force=True, git_commit=self.git_commit, tags=tags
        )

    def announce(self, trial: optuna.Trial, params: dict[str, Any], where: str = "") -> None:
        """The line that starts a trial."""
        self.console.print(
            f"[bold]trial {trial.number}[/] ({self.run_of(trial)}{where}): {json.dumps(params)}"
        )

    def finish(
        self,
        trial: optuna.Trial,
        params: dict[str, Any],
        status: str,
        record: RunRecord | None,
        error: str | None = None,
        where: dict[str, str] | None = None,
    ) -> float:
        """Export (unless the trial did), evaluate and record a trained trial, log it to
        ``trials.jsonl`` and report it; the objective's value.

        :param status: finished, interrupted, failed or pruned.
        :param where: the node and host it trained on, for a trial on a cluster.
        :raises optuna.TrialPruned: for a failed or pruned trial.
        """
        run = self.run_of(trial)
        paths = RunPaths(self.root, run)
        result = None
        if status != "failed" and self.bundled:  # a pruned trial has a bot and a score too
            if not paths.bot_json.exists():
                export_run(paths)
            target = run_target(paths)
            result = evaluate_target(target, self.episodes, None, 0)
            game = game_name(target.trained)
            record_evaluation(
                self.root, run, target.timesteps, target.bot, result, self.git_commit, game
            )
        timesteps = record.total_timesteps if record is not None else 0
        finished = TrialResult(trial.number, run, params, status, result, timesteps, where)
        _, trials_log = sweep_paths(self.root, self.name)
        trials_log.parent.mkdir(parents=True, exist_ok=True)
        with trials_log.open("a") as handle:
            handle.write(finished.to_json() + "\n")
        if self.on_trial is not None:
            self.on_trial(finished)
        if status == "failed":
            raise optuna.TrialPruned(f"run failed: {error}")
        if status == "pruned":
            raise optuna.TrialPruned()
        if result is not None:
            return result.mean_reward
        last = record.extra.last_reward if record is not None else None
        return float(last or 0.0)


def open_study(root: Path, name: str, seed: int) -> optuna.Study:
    """The sweep's Optuna study in its SQLite file (created, or loaded to go on)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # lander prints its own line per trial
    database, _ = sweep_paths(root, name)
    database.parent.mkdir(parents=True, exist_ok=True)
    return optuna.create_study(
        study_name=name,
        storage=f"sqlite:///{database}",
        load_if_exists=True,
        direction="maximize",
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0),
    )


def run_sweep(
    sweep: SweepTrials,
    trials: int,
    cluster: str | None = None,
    parallel: int = 1,
) -> optuna.Study:
    """Run trials until ``trials`` have finished (counting those of earlier sessions).

    :param cluster: a Ray cluster's address: trials train on its nodes,
        ``parallel`` at a time (:mod:`training.cluster_sweep`); None trains them here,
        one after another.
    """
    base_overrides = sweep.base_overrides
    study = open_study(sweep.root, sweep.name, int(base_overrides.get("seed", 0)))
    done = sum(1 for trial in study.trials if trial.state in FINISHED_STATES)
    eval_every = int(base_overrides.get("eval_every") or max(sweep.timesteps_per_trial // 4, 1))
    settings = game_settings(
        base_overrides.get("game", DEFAULT_GAME),
        base_overrides.get("game_args", {}),
        base_overrides.get("action_repeat"),
    )

    def objective(trial: optuna.Trial) -> float:
        params = sample(trial, sweep.space)
        pruning = _PruneOnEvaluation()

        def report(steps: int, result: EvalResult) -> None:
            trial.report(result.mean_reward, steps)
            if trial.should_prune():
                pruning.pruned = True

        # Pruning evaluations play the bundled game's physics: none for another game.
        evaluation = (
            [PeriodicEvaluation(eval_every, sweep.episodes, settings, on_result=report)]
            if sweep.bundled
            else []
        )
        sweep.announce(trial, params)
        request = sweep.request(sweep.root, trial, params)
        outcome = train(request, sweep.console, extra_callbacks=[*evaluation, pruning])
        state = "pruned" if pruning.pruned else outcome.status
        return sweep.finish(trial, params, state, outcome.record, outcome.error)

    remaining = trials - done
    if remaining <= 0:
        sweep.console.print(f"sweep {sweep.name}: all {trials} trials are done")
        return study
    sweep.console.print(f"sweep {sweep.name}: {done} trial(s) done, running {remaining} more")
    if cluster is not None:
        from training.cluster_sweep import run_on_cluster

        run_on_cluster(study, sweep, remaining, cluster, parallel)
    else:
        study.optimize(objective, n_trials=remaining, catch=())
    return study
