"""``lander sweep``: an Optuna study over training settings.

Each trial is a run ``NAME-tNNNN`` with its own checkpoints and logs, evaluated
during training (median pruning stops poor trials early) and at its end. The
study lives in ``logs/NAME/sweep.db`` (SQLite), so a stopped sweep resumes where
it stopped; ``logs/NAME/trials.jsonl`` gets one line per finished trial.
"""

from __future__ import annotations

from pathlib import Path

import optuna
from stable_baselines3.common.callbacks import BaseCallback

from games import DEFAULT_GAME
from training.campaigns.search_space import sample
from training.campaigns.trials import SweepTrials, sweep_paths
from training.evaluation.scoring import EvalResult, game_settings
from training.session.eval_callback import PeriodicEvaluation
from training.session.trainer import train

FINISHED_STATES = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)


class _PruneOnEvaluation(BaseCallback):
    """Ends training when Optuna's median pruner says the trial is behind."""

    def __init__(self) -> None:
        super().__init__()
        self.pruned = False

    def _on_step(self) -> bool:
        return not self.pruned


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
        ``parallel`` at a time (:mod:`training.campaigns.cluster_sweep`); None trains them here,
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
        from training.campaigns.cluster_sweep import run_on_cluster

        run_on_cluster(study, sweep, remaining, cluster, parallel)
    else:
        study.optimize(objective, n_trials=remaining, catch=())
    return study
