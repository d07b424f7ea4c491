"""What a session writes about itself: its entry in the run's record, its first line, the
timestamped lines of ``train.log``, and one line for an error nobody expected."""

from __future__ import annotations

import socket
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from stable_baselines3 import PPO

from games import EDITOR_GAME, gym_env_id
from training.runs.local_state import checkout_id
from training.runs.run_record import RunRecord, now_iso
from training.session.planning import (
    TrainPlan,
    TrainRequest,
)


def session_record(plan: TrainPlan, request: TrainRequest, model: PPO) -> RunRecord:
    """The run's record for this session: the previous one continued, or a new one."""
    record = plan.previous or RunRecord(run=plan.paths.run, config=plan.config, parent=plan.parent)
    record.config = plan.config
    record.status = "running"
    record.error = None
    record.git_commit = request.git_commit
    record.total_timesteps = model.num_timesteps
    record.resumed_from = str(plan.resume_point.model) if plan.resume_point else None
    # This session's findings and stop (earlier sessions' stay in train.log and TensorBoard).
    record.extra = replace(record.extra, **request.tags, health=[], stopped_at_score=None)
    record.sessions.append(
        {
            "started_at": now_iso(),
            "start_timesteps": model.num_timesteps,
            "resumed_from": record.resumed_from,
            "reset_std": request.reset_std,
            "git_commit": request.git_commit,
            "host": socket.gethostname(),
            "checkout": checkout_id(plan.paths.root),
            "root": str(plan.paths.root.resolve()),
        }
    )
    return record


def session_banner(plan: TrainPlan, request: TrainRequest, model: PPO) -> str:
    """The session's first line: what it trains, on what, for how long, with what."""
    config = plan.config
    game = Path(config.game_bin).name if config.game_bin else config.game
    if config.game_project is not None:
        game = Path(config.game_project).name
    if config.in_process:
        where = f"in-process {gym_env_id(config.game)}"
    elif config.game_transport == "stdio":
        where = f"{config.n_parallel} {game} instance(s) on stdio"
    elif config.game_url is not None:
        where = f"{config.n_parallel} session(s) of the OpenEnv server {config.game_url}"
    elif config.game == EDITOR_GAME:
        where = f"the game in the Godot editor on port {config.port} (this machine only)"
    else:
        reach = "the cluster's nodes only" if config.cluster else "this machine only"
        where = f"{config.n_parallel} {game} instance(s) from port {config.port} ({reach})"
    origin = (
        f"resuming from {plan.resume_point.model} at {model.num_timesteps:,} steps"
        if plan.resume_point
        else "new"
    )
    return (
        f"run {plan.paths.run}: {origin}; {config.num_envs} envs on {where}; "
        f"{config.timesteps:,} steps; lr={config.learning_rate:g} ent_coef={config.ent_coef:g} "
        f"device={model.device}"
        + (f"; std reset to {request.reset_std:g}" if request.reset_std is not None else "")
    )


class LogFile:
    """Appends timestamped plain lines to the run's ``train.log``; a line that cannot be
    written (a full disk) is dropped rather than ending the run."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path

    def __call__(self, line: str) -> None:
        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)  # a removed logs/RUN/ comes back
            with self.path.open("a") as handle:
                handle.write(f"{stamp} {line}\n")
        except OSError:
            pass


def describe_error(exc: BaseException) -> str:
    """One line for an unexpected exception: its kind and message (an OSError's reason and file)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror + (f" ({exc.filename})" if exc.filename else "")
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
