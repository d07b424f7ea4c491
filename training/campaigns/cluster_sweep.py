"""Sweep trials as Ray tasks on a cluster's nodes (``lander sweep NAME --cluster ADDRESS``).

Optuna's ask and tell stay on the driver, with the study's SQLite file. Each trial
trains on a worker node in a scratch folder, its games on that node, and returns
what it made (checkpoints, logs, bot) as bytes; the driver writes them into its
checkout, evaluates and records the trial, and alone commits (DESIGN.md: one
writer per file). Workers need no git and no push rights, only a clone with
``./lander setup --cluster`` so that lander and the game are there.

A worker lost mid-trial fails that trial (Optuna records it as failed) and the
sweep goes on. Trials on a cluster are not pruned mid-run: the median pruner would
need the study's database on every worker; they are compared at their end.
"""

from __future__ import annotations

import contextlib
import socket
import tempfile
from pathlib import Path
from typing import Any

import optuna

from game_bridge.cluster import connect_ray
from game_bridge.relay import checkout_root
from training.campaigns.search_space import sample
from training.campaigns.trials import SweepTrials
from training.errors import ExportError
from training.runs.checkpoints import CheckpointError
from training.runs.local_state import checkout_id
from training.runs.run_paths import RunPaths
from training.runs.run_record import RunRecord, write_bytes_atomic


def train_trial(
    run: str, overrides: dict[str, Any], tags: dict[str, Any], git_commit: str | None
) -> dict[str, Any]:
    """Train one trial on this node in a scratch folder (a Ray task's body).

    :return: ``status``, ``error``, ``files`` (path in the checkout -> bytes: the run's
        checkpoints and logs, and its bot when it could be exported), ``node``, ``host``.
    """
    import ray
    from rich.console import Console

    from training.bots.run_bots import export_run
    from training.session.trainer import TrainRequest, train

    game_bin = overrides.get("game_bin")
    if game_bin is not None and not Path(game_bin).is_absolute():
        overrides = {**overrides, "game_bin": str(checkout_root() / game_bin)}
    with tempfile.TemporaryDirectory(prefix="lander-trial-") as scratch:
        root = Path(scratch)
        request = TrainRequest(root, run, overrides, force=True, git_commit=git_commit, tags=tags)
        outcome = train(request, Console(quiet=True))
        paths = request.paths
        if outcome.status != "failed" and game_bin is None:
            # If it cannot be exported here, the driver tries again and says why.
            with contextlib.suppress(CheckpointError, ExportError):
                export_run(paths)
        made = [p for folder in (paths.checkpoints, paths.logs) for p in folder.rglob("*")]
        made += [paths.bot_json, paths.bot_onnx]
        files = {str(path.relative_to(root)): path.read_bytes() for path in made if path.is_file()}
    return {
        "status": outcome.status,
        "error": outcome.error,
        "files": files,
        "node": ray.get_runtime_context().get_node_id(),
        "host": socket.gethostname(),
    }


def _portable(root: Path, overrides: dict[str, Any]) -> dict[str, Any]:
    """Settings a worker can use: a game binary inside the checkout by its relative path
    (each node has its own clone), and no cluster of the trial's own."""
    portable = {k: v for k, v in overrides.items() if k not in ("cluster", "instances_per_node")}
    game_bin = portable.get("game_bin")
    if game_bin is not None and Path(game_bin).resolve().is_relative_to(root.resolve()):
        portable["game_bin"] = str(Path(game_bin).resolve().relative_to(root.resolve()))
    return portable


def adopt_trial(root: Path, run: str, files: dict[str, bytes], where: dict[str, str]) -> RunRecord:
    """Write a trial's files into this checkout and make it this checkout's run (the one
    that alone writes its files from now on), noting the node it trained on.

    :raises ValueError: a path that would land outside the run's own folders.
    """
    paths = RunPaths(root, run)
    allowed = (paths.checkpoints, paths.logs, paths.bot_json, paths.bot_onnx)
    for name, data in files.items():
        target = (root / name).resolve()
        if not any(target == a.resolve() or target.is_relative_to(a.resolve()) for a in allowed):
            raise ValueError(f"trial {run} returned a file outside its run: {name}")
        target.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(target, data)
    record = RunRecord.load(paths.run_json)
    if record.sessions:
        record.sessions[-1]["checkout"] = checkout_id(root)
    record.extra.trained_on = where
    record.save(paths.run_json)
    return record


def run_on_cluster(
    study: optuna.Study, sweep: SweepTrials, count: int, address: str, parallel: int
) -> None:
    """Run ``count`` trials, ``parallel`` at a time, as Ray tasks spread over the nodes.

    :raises ClusterError: the cluster cannot be reached.
    """
    import ray

    connect_ray(address)
    # One CPU a trial: a node takes as many trials at once as it has CPUs.
    task = ray.remote(train_trial).options(num_cpus=1, max_retries=0, scheduling_strategy="SPREAD")
    pending: dict[Any, tuple[optuna.Trial, dict[str, Any]]] = {}
    asked = 0
    while asked < count or pending:
        while asked < count and len(pending) < parallel:
            trial = study.ask()
            params = sample(trial, sweep.space)
            request = sweep.request(sweep.root, trial, params)
            sweep.announce(trial, params, ", on the cluster")
            overrides = _portable(sweep.root, request.overrides)
            ref = task.remote(request.run, overrides, request.tags, request.git_commit)
            pending[ref] = (trial, params)
            asked += 1
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            trial, params = pending.pop(ref)
            _tell(study, sweep, trial, params, ref)


def _tell(
    study: optuna.Study, sweep: SweepTrials, trial: optuna.Trial, params: dict[str, Any], ref: Any
) -> None:
    """Bring one trial home: its files into the checkout, its value (or failure) to Optuna."""
    import ray

    try:
        made = ray.get(ref)
    except ray.exceptions.RayError as exc:
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        reason = f"its worker was lost ({type(exc).__name__}: {lines[0][:160]})"
        sweep.console.print(f"[red]trial {trial.number} failed: {reason}[/]")
        with contextlib.suppress(optuna.TrialPruned):
            sweep.finish(trial, params, "failed", None, reason)
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        return
    where = {"node": made["node"], "host": made["host"]}
    run = sweep.run_of(trial)
    record = adopt_trial(sweep.root, run, made["files"], where)
    try:
        value = sweep.finish(trial, params, made["status"], record, made["error"], where)
    except optuna.TrialPruned:
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        return
    study.tell(trial, value)
