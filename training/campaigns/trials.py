"""The trials of a sweep: what every trial shares, the request that trains one, and its end
wherever it trained (this machine, or a node of a cluster, which hands its files back),
so the sweep's study and the cluster runner both build on it and neither on the other.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from rich.console import Console

from training.bots.run_bots import evaluate_target, export_run, run_target
from training.evaluation.records import game_name, record_evaluation
from training.evaluation.scoring import EvalResult
from training.runs.run_paths import RunPaths, validate_run_name
from training.runs.run_record import RunRecord, now_iso
from training.session.trainer import TrainRequest


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


def sweep_paths(root: Path, name: str) -> tuple[Path, Path]:
    """The study database and the trials log of sweep ``name``."""
    folder = RunPaths(root, validate_run_name(name)).logs
    return folder / "sweep.db", folder / "trials.jsonl"


@dataclass
class SweepTrials:
    """What every trial of one sweep shares, and the end of a trial wherever it trained.

    :param on_trial: called after each finished trial (commits and pushes).
    :param tags: :class:`~training.runs.run_record.RunExtras` fields set in every trial's run.json.
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
