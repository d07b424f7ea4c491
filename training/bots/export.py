"""Exporting a trained policy: the bot JSON (numpy-playable, ``bot_spec.py``) and an ONNX file
in the Godot RL Agents plugin's layout (``onnx_export.py``), each proven equal to the model
(``parity.py``) before it is written: a bot that fails is not written."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecNormalize

from game_bridge.bot_runner import BotRunner
from training.bots.bot_spec import build_bot_spec, input_parts
from training.bots.onnx_export import export_onnx, onnx_actions
from training.bots.parity import (
    CAMERA_PARITY_SAMPLES,
    CAMERA_TOLERANCE,
    CONTINUOUS_TOLERANCE,
    PARITY_SAMPLES,
    ParityReport,
    compare_actions,
    decisive,
    mixed_parity,
    onnx_episodes,
    parity_episodes,
    parity_observations,
    played_episodes,
)
from training.bots.plugin_layout import OnnxLayout
from training.errors import ExportError
from training.evaluation.scoring import model_policy
from training.ppo.camera_policy import is_camera
from training.ppo.recurrent_policy import RecurrentActorCritic
from training.runs.run_record import write_json_atomic


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote and how it checked out."""

    bot_json: Path
    bot_onnx: Path
    bot_parity: ParityReport
    onnx_parity: ParityReport


def export_policy(
    model: PPO,
    normalizer: VecNormalize | None,
    run: str,
    bot_json: Path,
    bot_onnx: Path,
    git_commit: str | None = None,
    trained_with: dict[str, Any] | None = None,
    samples: int = PARITY_SAMPLES,
    seed: int = 0,
    layout: OnnxLayout | None = None,
    notes: dict[str, Any] | None = None,
) -> ExportResult:
    """Export ``model`` as a bot JSON and an ONNX file, after proving both equal to it
    (the ONNX file read as the Godot plugin reads it, for the game's ``layout``).

    :param notes: more top-level fields of the bot file (its ``rating``, its ``tier``).
    :raises ExportError: unsupported policy, or a parity failure (nothing is written then).
    """
    layout = layout or OnnxLayout()
    spec = build_bot_spec(model, normalizer, run, git_commit, trained_with, layout)  # checks it
    camera = any(is_camera(part) for _, part in input_parts(model))
    tolerance = CAMERA_TOLERANCE if camera else CONTINUOUS_TOLERANCE
    if camera:
        samples = min(samples, CAMERA_PARITY_SAMPLES)
    spec.update(notes or {})
    bot = BotRunner(spec)
    discrete = bot.action_type != "continuous"
    obs = parity_observations(model, normalizer, samples, seed)
    recurrent = isinstance(model.policy, RecurrentActorCritic)
    if recurrent:
        episodes = parity_episodes(obs)
        expected, bot_actions, mask = played_episodes(
            model_policy(model, normalizer), bot, episodes
        )
    else:
        expected = model_policy(model, normalizer, stacked=True)(obs)
        mask = decisive(bot, obs) if discrete else None
        bot_actions = bot.act(obs)
    bot_parity = compare_actions(expected, bot_actions, mask, tolerance)
    if not bot_parity.passed(discrete):
        raise ExportError(f"bot JSON disagrees with the model: {bot_parity}")
    bot_onnx.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=bot_onnx.parent, prefix=".export-") as scratch:
        candidate = Path(scratch) / bot_onnx.name
        export_onnx(model, spec["observation"]["normalization"], candidate, layout)
        if recurrent:
            onnx_parity = compare_actions(
                expected, onnx_episodes(candidate, bot, episodes, layout), mask, tolerance
            )
        else:
            onnx_parity = (
                mixed_parity(candidate, obs, expected, layout, tolerance)
                if layout.mixed
                else compare_actions(
                    expected, onnx_actions(candidate, obs, bot, layout.input_names), mask, tolerance
                )
            )
        if not onnx_parity.passed(discrete or layout.mixed):
            raise ExportError(f"ONNX export disagrees with the model: {onnx_parity}")
        try:
            write_json_atomic(bot_json, spec, compact=True)
            os.replace(candidate, bot_onnx)
        except OSError as exc:
            raise ExportError(
                f"cannot write {bot_json.name} or {bot_onnx.name}: {exc.strerror or exc}"
            ) from None
    return ExportResult(bot_json, bot_onnx, bot_parity, onnx_parity)
