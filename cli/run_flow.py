"""The run flow of ``lander train``: pull, train, export, commit, push.

Until export and git land, the flow is: train and save. User mistakes (a bad
name, a missing checkpoint, a bad setting, a game that will not start) end as
one red line and a non-zero exit, before anything is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cli.console import console, fail
from cli.git_sync import current_commit
from game_bridge.errors import BridgeError
from training.checkpoints import CheckpointError
from training.config import ConfigError
from training.policy_tweaks import PolicyTweakError
from training.run_paths import InvalidRunName
from training.trainer import TrainRequest, train

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
    return outcome.exit_code
