"""Exporting a trained policy: the bot JSON (numpy-playable) and an ONNX file in
the Godot RL Agents plugin's layout, each proven equal to the model before it is
written.

Parity: over 10,000 random observations the numpy runner and onnxruntime give
the same deterministic actions as SB3 ``predict``: continuous within 1e-5,
discrete identical. A bot that fails is not written.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.torch_layers import FlattenExtractor
from stable_baselines3.common.vec_env import VecNormalize

from game_bridge.bot_runner import BOT_FORMAT, BOT_FORMAT_VERSION, BotRunner
from training.errors import ExportError
from training.evaluation import model_policy
from training.run_record import now_iso, write_json_atomic

PARITY_SAMPLES = 10_000
CONTINUOUS_TOLERANCE = 1e-5
TIE_TOLERANCE = 1e-6
"""Two logits closer than this are a tie that float32 rounding breaks arbitrarily
(about 1 observation in 200,000 for a barely trained policy)."""
ONNX_OPSET = 17
_ACTIVATION_NAMES = {torch.nn.Tanh: "tanh", torch.nn.ReLU: "relu", torch.nn.Identity: "linear"}


@dataclass(frozen=True)
class ParityReport:
    """How close an exported policy is to the model.

    :param samples: observations compared.
    :param max_abs_diff: largest difference of a continuous action (0 for discrete).
    :param agreement: discrete: fraction of identical actions among decisive observations
        (1.0 for continuous within tolerance).
    :param near_ties: discrete: observations whose two best logits lie within
        :data:`TIE_TOLERANCE`, where float32 rounding may pick either; not counted.
    """

    samples: int
    max_abs_diff: float
    agreement: float
    near_ties: int = 0

    def passed(self, discrete: bool) -> bool:
        """True when the export may be written."""
        return self.agreement == 1.0 if discrete else self.max_abs_diff <= CONTINUOUS_TOLERANCE


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote and how it checked out."""

    bot_json: Path
    bot_onnx: Path
    bot_parity: ParityReport
    onnx_parity: ParityReport


def _dense_layers(model: PPO) -> list[dict[str, Any]]:
    """The actor's layers: the policy MLP then the action head, as plain lists."""
    policy = model.policy
    if not isinstance(policy.features_extractor, FlattenExtractor):
        raise ExportError(
            "export supports vector observations (MlpPolicy); this policy uses another extractor"
        )
    if (
        not isinstance(model.observation_space, spaces.Box)
        or len(model.observation_space.shape) != 1
    ):
        raise ExportError(f"export supports a flat Box observation, not {model.observation_space}")
    modules = [*policy.mlp_extractor.policy_net, policy.action_net]
    layers: list[dict[str, Any]] = []
    for module in modules:
        if isinstance(module, torch.nn.Linear):
            layers.append(
                {
                    "weights": module.weight.detach().cpu().double().numpy().tolist(),
                    "biases": module.bias.detach().cpu().double().numpy().tolist(),
                    "activation": "linear",
                }
            )
        elif type(module) in _ACTIVATION_NAMES and layers:
            layers[-1]["activation"] = _ACTIVATION_NAMES[type(module)]
        else:
            raise ExportError(f"cannot export a layer of type {type(module).__name__}")
    return layers


def _action_spec(space: spaces.Space[Any]) -> dict[str, Any]:
    if isinstance(space, spaces.Box):
        return {
            "type": "continuous",
            "size": int(space.shape[0]),
            "low": space.low.astype(float).tolist(),
            "high": space.high.astype(float).tolist(),
            "read": "gaussian mean clipped to [low, high]",
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "discrete", "size": int(space.n), "read": "argmax of the outputs"}
    if isinstance(space, spaces.MultiDiscrete):
        return {
            "type": "multi_discrete",
            "size": len(space.nvec),
            "nvec": [int(n) for n in space.nvec],
            "read": "argmax of each segment of nvec outputs",
        }
    raise ExportError(f"cannot export a policy for action space {space}")


def _normalization(normalizer: VecNormalize | None) -> dict[str, Any] | None:
    if normalizer is None or not normalizer.norm_obs:
        return None
    rms = normalizer.obs_rms
    if isinstance(rms, dict):
        raise ExportError("export supports normalisation of a flat observation only")
    return {
        "mean": np.asarray(rms.mean, dtype=np.float64).tolist(),
        "scale": np.sqrt(
            np.asarray(rms.var, dtype=np.float64) + float(normalizer.epsilon)
        ).tolist(),
        "clip": float(normalizer.clip_obs),
        "rule": "clip((obs - mean) / scale, -clip, clip)",
    }


def build_bot_spec(
    model: PPO,
    normalizer: VecNormalize | None,
    run: str,
    git_commit: str | None,
    trained_with: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The bot JSON document for ``model`` (see docs/bot-format.md)."""
    space = model.observation_space
    assert isinstance(space, spaces.Box)
    return {
        "format": BOT_FORMAT,
        "version": BOT_FORMAT_VERSION,
        "run": run,
        "timesteps": int(model.num_timesteps),
        "git_commit": git_commit,
        "exported_at": now_iso(),
        "trained_with": trained_with or {},
        "observation": {"size": int(space.shape[0]), "normalization": _normalization(normalizer)},
        "action": _action_spec(model.action_space),
        "layers": _dense_layers(model),
    }


def _parity_observations(model: PPO, samples: int, seed: int) -> np.ndarray:
    space = model.observation_space
    assert isinstance(space, spaces.Box)
    rng = np.random.default_rng(seed)
    low = np.where(np.isfinite(space.low), space.low, -10.0)
    high = np.where(np.isfinite(space.high), space.high, 10.0)
    return rng.uniform(low, high, (samples, space.shape[0])).astype(np.float32)


def decisive(bot: BotRunner, obs: np.ndarray) -> np.ndarray:
    """Mask of observations whose discrete choice is not a near-tie (see :data:`TIE_TOLERANCE`)."""
    output = bot.network_output(obs)
    segments = [bot.action_size] if bot.action_type == "discrete" else bot.nvec
    mask = np.ones(len(obs), dtype=bool)
    for start, stop in itertools.pairwise(np.cumsum([0, *segments])):
        ranked = np.sort(output[:, start:stop], axis=1)
        mask &= ranked[:, -1] - ranked[:, -2] > TIE_TOLERANCE
    return mask


def _compare(
    expected: np.ndarray, actual: np.ndarray, decisive_mask: np.ndarray | None
) -> ParityReport:
    """Compare actions: within tolerance (continuous) or identical where decisive (discrete)."""
    if decisive_mask is not None:
        same = np.all(
            expected.reshape(len(expected), -1) == actual.reshape(len(actual), -1), axis=1
        )
        agreement = float(np.mean(same[decisive_mask])) if decisive_mask.any() else 1.0
        return ParityReport(len(expected), 0.0, agreement, int((~decisive_mask).sum()))
    diff = float(np.max(np.abs(expected.astype(np.float64) - actual.astype(np.float64))))
    return ParityReport(len(expected), diff, 1.0 if diff <= CONTINUOUS_TOLERANCE else 0.0)


class _OnnxPolicy(torch.nn.Module):
    """The deterministic actor in the plugin's layout: (obs, state_ins) -> (output, state_outs)."""

    def __init__(self, model: PPO, normalization: dict[str, Any] | None) -> None:
        super().__init__()
        self.policy_net = model.policy.mlp_extractor.policy_net
        self.action_net = model.policy.action_net
        self.normalize = normalization is not None
        mean = torch.tensor(normalization["mean"] if normalization else [0.0], dtype=torch.float32)
        scale = torch.tensor(
            normalization["scale"] if normalization else [1.0], dtype=torch.float32
        )
        self.mean: torch.Tensor
        self.scale: torch.Tensor
        self.register_buffer("mean", mean)
        self.register_buffer("scale", scale)
        self.clip = float(normalization["clip"]) if normalization else 0.0

    def forward(
        self, obs: torch.Tensor, state_ins: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.normalize:
            obs = torch.clamp((obs - self.mean) / self.scale, -self.clip, self.clip)
        return self.action_net(self.policy_net(obs)), state_ins


def export_onnx(model: PPO, normalization: dict[str, Any] | None, path: Path) -> None:
    """Write the ONNX file: inputs ``obs`` [batch, dim] and ``state_ins`` [batch],
    outputs ``output`` and ``state_outs``, opset 17 (the plugin's layout)."""
    module = _OnnxPolicy(model, normalization).to("cpu").eval()
    space = model.observation_space
    assert isinstance(space, spaces.Box)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(
            module,
            (torch.zeros(1, space.shape[0]), torch.zeros(1)),
            str(path),
            opset_version=ONNX_OPSET,
            input_names=["obs", "state_ins"],
            output_names=["output", "state_outs"],
            dynamic_axes={
                name: {0: "batch_size"} for name in ("obs", "state_ins", "output", "state_outs")
            },
            dynamo=False,
        )


def onnx_actions(path: Path, obs: np.ndarray, bot: BotRunner) -> np.ndarray:
    """Run the ONNX file with onnxruntime and read actions with the bot's rule."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    output, _ = session.run(
        None, {"obs": obs.astype(np.float32), "state_ins": np.zeros(len(obs), dtype=np.float32)}
    )
    return bot.read_actions(np.asarray(output))


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
) -> ExportResult:
    """Export ``model`` as a bot JSON and an ONNX file, after proving both equal to it.

    :raises ExportError: unsupported policy, or a parity failure (nothing is written then).
    """
    spec = build_bot_spec(model, normalizer, run, git_commit, trained_with)
    bot = BotRunner(spec)
    discrete = bot.action_type != "continuous"
    obs = _parity_observations(model, samples, seed)
    expected = model_policy(model, normalizer)(obs)
    mask = decisive(bot, obs) if discrete else None
    bot_parity = _compare(expected, bot.act(obs), mask)
    if not bot_parity.passed(discrete):
        raise ExportError(f"bot JSON disagrees with the model: {bot_parity}")
    bot_onnx.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=bot_onnx.parent, prefix=".export-") as scratch:
        candidate = Path(scratch) / bot_onnx.name
        export_onnx(model, spec["observation"]["normalization"], candidate)
        onnx_parity = _compare(expected, onnx_actions(candidate, obs, bot), mask)
        if not onnx_parity.passed(discrete):
            raise ExportError(f"ONNX export disagrees with the model: {onnx_parity}")
        try:
            write_json_atomic(bot_json, spec)
            os.replace(candidate, bot_onnx)
        except OSError as exc:
            raise ExportError(
                f"cannot write {bot_json.name} or {bot_onnx.name}: {exc.strerror or exc}"
            ) from None
    return ExportResult(bot_json, bot_onnx, bot_parity, onnx_parity)
