"""Model checkpoints: atomic writes, rotation, crash clean-up, and choosing what to resume.

A checkpoint is ``ckpt_<steps>.zip`` (SB3's model file) with, when observations
are normalised, ``ckpt_<steps>.vecnormalize.pkl`` beside it. Every file is written
to a temporary name, synced, then renamed, so no checkpoint is ever half-written.
"""

from __future__ import annotations

import io
import json
import pickle
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

if TYPE_CHECKING:  # only types here: status and bots on a light install load this module
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.vec_env import VecNormalize

from game_bridge.errors import LanderError
from game_bridge.lfs_pointers import LFS_FIX, is_lfs_pointer, lfs_pointer_message
from training.runs.run_paths import RunPaths, unknown_run
from training.runs.run_record import TEMPORARY_SUFFIX, write_bytes_atomic

CHECKPOINT_PATTERN = re.compile(r"ckpt_(\d+)\.zip")
FINAL_NAME = "final.zip"
NORMALIZE_SUFFIX = ".vecnormalize.pkl"


class CheckpointError(LanderError):
    """A checkpoint could not be written, found or read."""


def normalization_path(model_path: Path) -> Path:
    """Where the observation-normalisation statistics of a checkpoint live."""
    return model_path.with_name(model_path.name.removesuffix(".zip") + NORMALIZE_SUFFIX)


def _write_atomic(path: Path, data: bytes) -> None:
    try:
        write_bytes_atomic(path, data)
    except OSError as exc:
        raise CheckpointError(f"cannot write {path}: {exc.strerror or exc}") from None


def save_checkpoint(
    model: BaseAlgorithm, path: Path, normalizer: VecNormalize | None = None
) -> Path:
    """Save ``model`` (and normalisation statistics) atomically to ``path``.

    The model is serialised in memory first, so a full disk fails before any
    rename and leaves every earlier checkpoint intact.

    :raises CheckpointError: when the folder is not writable or the disk is full.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    model.save(buffer)
    _write_atomic(path, buffer.getvalue())
    if normalizer is not None:
        _write_atomic(normalization_path(path), pickle.dumps(normalizer))
    return path


def checkpoint_steps(path: Path) -> int | None:
    """The step count in a rotating checkpoint's name, or None for other files."""
    match = CHECKPOINT_PATTERN.fullmatch(path.name)
    return int(match.group(1)) if match else None


def checkpoint_name(steps: int) -> str:
    """The file name of the rotating checkpoint at ``steps``."""
    return f"ckpt_{steps:012d}.zip"


def rotating_checkpoints(folder: Path) -> list[Path]:
    """The rotating checkpoints in ``folder``, oldest first."""
    found = [(checkpoint_steps(p), p) for p in folder.glob("ckpt_*.zip")]
    return [path for steps, path in sorted((s, p) for s, p in found if s is not None)]


def rotate_checkpoints(folder: Path, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` rotating checkpoints; return what was deleted."""
    removed = rotating_checkpoints(folder)[:-keep] if keep > 0 else []
    for path in removed:
        path.unlink(missing_ok=True)
        normalization_path(path).unlink(missing_ok=True)
    return removed


def remove_temporary_files(folder: Path) -> list[Path]:
    """Remove the temporary files a crash left mid-write; return them."""
    if not folder.is_dir():
        return []
    leftovers = [p for p in folder.iterdir() if p.name.endswith(TEMPORARY_SUFFIX)]
    for path in leftovers:
        path.unlink(missing_ok=True)
    return leftovers


def is_valid_checkpoint(path: Path) -> bool:
    """True when ``path`` is a readable SB3 model zip (policy weights and data)."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            if not {"data", "policy.pth"} <= names:
                return False
            return archive.testzip() is None
    except (OSError, zipfile.BadZipFile):
        return False


PPO_POLICY_MODULES = (
    "stable_baselines3.common.policies",
    "training.ppo.recurrent_policy",
    "training.ppo.action_heads",
)
"""Where PPO's policies (ActorCriticPolicy and its CNN and multi-input kinds, lander's
policies with memory and with masked moves) are defined; a SAC, TD3 or DQN model names a
module of its own."""


def algorithm_of(path: Path) -> str | None:
    """The algorithm a model zip was saved by when it is not PPO-shaped (``sac``, ``dqn``),
    read from the module of its policy class; None when it is PPO's or cannot be told."""
    try:
        with zipfile.ZipFile(path) as archive:
            data = json.loads(archive.read("data"))
        module = data["policy_class"]["__module__"]
    except (OSError, zipfile.BadZipFile, KeyError, TypeError, ValueError):
        return None
    if not isinstance(module, str) or module.startswith(PPO_POLICY_MODULES):
        return None
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else module


def policy_loads(path: Path) -> bool:
    """True when the checkpoint's weights load: a zip whose CRCs pass can still hold a
    ``policy.pth`` written wrongly. Without torch (a light install) it cannot be tried."""
    try:
        import torch
    except ImportError:
        return True
    try:
        with zipfile.ZipFile(path) as archive:
            data = archive.read("policy.pth")
        torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception:  # any unpickling or format error: this file cannot be resumed
        return False
    return True


class DamagedSnapshot(CheckpointError):
    """A self-play snapshot that does not read as a state dict (cut short, edited, from
    elsewhere); its message names the file and why."""


def read_snapshot(path: Path) -> dict[str, Any]:
    """The state dict of the self-play snapshot at ``path``, read as data only.

    :raises DamagedSnapshot: it cannot be read (``snapshot PATH does not load (why)``).
    """
    import torch

    try:
        state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, ValueError, EOFError, pickle.UnpicklingError) as exc:
        raise DamagedSnapshot(f"snapshot {path} does not load ({first_line(exc)})") from None
    return state


def first_line(exc: BaseException) -> str:
    """An exception's first line, at most 80 characters (its type when it says nothing):
    what a one-line warning quotes of torch's many-line messages."""
    return str(exc).splitlines()[0][:80] if str(exc) else type(exc).__name__


def saved_timesteps(path: Path) -> int | None:
    """The ``num_timesteps`` stored in a model file, or None when it cannot be read."""
    try:
        with zipfile.ZipFile(path) as archive:
            return int(json.loads(archive.read("data"))["num_timesteps"])
    except (OSError, zipfile.BadZipFile, KeyError, ValueError, TypeError):
        return None


@dataclass(frozen=True)
class ResumePoint:
    """What a resume starts from.

    :param model: the checkpoint file.
    :param run: the run it belongs to, when it came from a run name.
    """

    model: Path
    run: str | None


def find_resume_point(root: Path, source: str, console: Console | None = None) -> ResumePoint:
    """Choose the checkpoint to resume from.

    ``source`` is a run name (its ``final.zip``, else its newest valid rotating
    checkpoint; corrupt files are skipped with a warning) or a path to a model file.
    A ``final.zip`` older than the newest checkpoint (left by an earlier session
    before a later one was killed) loses to that checkpoint.

    :raises CheckpointError: when nothing valid is found.
    """
    candidate = Path(source)
    if candidate.suffix == ".zip" or candidate.is_file():
        if not candidate.is_file():
            raise CheckpointError(f"checkpoint {source!r} does not exist")
        if is_lfs_pointer(candidate):
            raise CheckpointError(lfs_pointer_message(candidate, "checkpoint"))
        if not (is_valid_checkpoint(candidate) and policy_loads(candidate)):
            raise CheckpointError(f"{source!r} is not a lander/SB3 model checkpoint")
        other = algorithm_of(candidate)
        if other is not None:
            raise CheckpointError(
                f"{source!r} is a {other.upper()} model: lander trains PPO and resumes only PPO checkpoints"
            )
        return ResumePoint(candidate.resolve(), None)
    paths = RunPaths(root, source)
    if not paths.checkpoints.is_dir():
        raise CheckpointError(unknown_run(root, source))
    newest = newest_valid_model(paths.checkpoints, console)
    if newest is not None:
        return ResumePoint(newest, source)
    pointers = [
        path
        for path in [*rotating_checkpoints(paths.checkpoints), paths.final]
        if is_lfs_pointer(path)
    ]
    if pointers:
        raise CheckpointError(
            f"run {source!r}'s checkpoints are Git LFS pointers, not the files: {LFS_FIX}"
        )
    raise CheckpointError(f"run {source!r} has no valid checkpoint to resume from")


def newest_valid_model(folder: Path, console: Console | None = None) -> Path | None:
    """The model a resume of ``folder`` starts from: its ``final.zip`` or its newest valid
    rotating checkpoint, whichever has more steps (corrupt files skipped with a warning);
    None when there is none."""
    valid: list[tuple[int, int, Path]] = []
    for rank, option in enumerate([*rotating_checkpoints(folder), folder / FINAL_NAME]):
        if not option.exists():
            continue
        usable = is_valid_checkpoint(option) and policy_loads(option)
        steps = saved_timesteps(option) if usable else None
        if steps is None:
            if console is not None:
                why = "a Git LFS pointer" if is_lfs_pointer(option) else "corrupt"
                console.print(f"[yellow]warning:[/] skipping {why} checkpoint {option}")
            continue
        valid.append((steps, rank, option))  # on equal steps final.zip (ranked last) wins
    return max(valid)[2] if valid else None
