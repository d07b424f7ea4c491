"""The run flow of ``lander train``: pull, train, export, evaluate, commit, push.

User mistakes (a bad name, a missing checkpoint, a bad setting, a game that will
not start) end as one red line and a non-zero exit, before anything is written.
After training, whatever happened, the bot is exported and evaluated when a
final model exists, so an interrupted run still leaves a playable bot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cli.console import console, fail
from cli.git_sync import current_commit
from game_bridge.errors import BridgeError
from training.bots import evaluate_target, export_run, run_target
from training.checkpoints import CheckpointError
from training.config import ConfigError
from training.eval_history import record_evaluation
from training.export import ExportError
from training.policy_tweaks import PolicyTweakError
from training.run_paths import InvalidRunName, RunPaths
from training.trainer import TrainOutcome, TrainRequest, train

USER_ERRORS = (ConfigError, CheckpointError, BridgeError, InvalidRunName, PolicyTweakError)


def run_training(
    root: Path,
    run: str,
    overrides: dict[str, Any],
    config_file: Path | None,
    resume: str | None,
    reset_std: float | None,
    force: bool,
    use_git: bool,
) -> int:
    """Run the whole flow for one session; return the process exit code."""
    request = TrainRequest(
        root=root,
        run=run,
        overrides=overrides,
        config_file=config_file,
        resume=resume,
        force=force,
        reset_std=reset_std,
        git_commit=current_commit(root),
    )
    try:
        outcome = train(request, console)
    except USER_ERRORS as exc:
        fail(str(exc))
    finish_run(root, run, outcome)
    return outcome.exit_code


def finish_run(root: Path, run: str, outcome: TrainOutcome) -> None:
    """Export the final model and evaluate the bot (bundled game), reporting each step."""
    paths = RunPaths(root, run)
    if not paths.final.exists():
        return
    try:
        result = export_run(root, run, paths.final)
    except (ExportError, CheckpointError) as exc:
        console.print(f"[yellow]export skipped:[/] {exc}")
        return
    console.print(
        f"exported {result.bot_json.relative_to(root)} and {result.bot_onnx.relative_to(root)}"
    )
    if outcome.record.config.game_bin is not None:
        console.print(
            f"evaluate it on this game with: lander eval {run} --game-bin {outcome.record.config.game_bin}"
        )
        return
    target = run_target(root, run)
    evaluation = evaluate_target(
        target, outcome.record.config.eval_episodes, None, outcome.record.config.port
    )
    recorded = record_evaluation(
        root, run, target.timesteps, target.bot, evaluation, outcome.record.git_commit
    )
    console.print(
        f"evaluation: {evaluation.line()}"
        + ("  [green](new champion)[/]" if recorded.champion_changed else "")
    )
