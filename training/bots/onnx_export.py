"""The ONNX file of a trained policy in the plugin's layout (inputs named after the observation
keys and ``state_ins``, outputs ``output`` and ``state_outs``, opset 17, IR version 8), and
onnxruntime playing it as a game does (:class:`OnnxPlayer`)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3 import PPO

from game_bridge.bot_runner import BotRunner
from training.bots.bot_spec import input_parts, input_widths
from training.bots.plugin_layout import OnnxLayout, action_starts
from training.errors import ExportError
from training.ppo.action_heads import FORBIDDEN, MASK_KEY, MaskedPolicy
from training.ppo.camera_policy import CameraExtractor
from training.ppo.recurrent_policy import RecurrentActorCritic, gru_step

ONNX_OPSET = 17


MAX_IR_VERSION = 8
"""The ONNX IR version written: the plugin's pinned onnxruntime (1.15) reads up to 9."""


class _OnnxPolicy(torch.nn.Module):
    """The deterministic actor in the plugin's layout: (obs, state_ins) -> (output, state_outs)."""

    def __init__(
        self, model: PPO, normalization: dict[str, Any] | None, layout: OnnxLayout
    ) -> None:
        super().__init__()
        self.policy_net = model.policy.mlp_extractor.policy_net
        self.action_net = model.policy.action_net
        policy = model.policy
        self.memory_cell = policy.memory_cell if isinstance(policy, RecurrentActorCritic) else None
        extractor = model.policy.features_extractor
        # Camera keys: the joined inputs cut back into the keys and run through the
        # policy's own extractor (its encoders), as the numpy runner does.
        self.extractor = extractor if isinstance(extractor, CameraExtractor) else None
        self.parts = [(key, tuple(part.shape)) for key, part in input_parts(model)]
        # A policy of masked moves: the input that is the game's mask, read raw.
        keys = [key for key, _ in self.parts]
        masked = isinstance(model.policy, MaskedPolicy) and MASK_KEY in keys
        self.mask_input = keys.index(MASK_KEY) if masked else None
        # A mixed policy's output as the plugin reads it: per key, a continuous key's
        # means then its log-std, a discrete key's slots clipped as the games get them.
        self.pieces = (
            [
                (start, size, discrete)
                for start, (_, size, discrete) in action_starts(layout.actions)
            ]
            if layout.mixed
            else []
        )
        log_std = getattr(model.policy, "log_std", None)
        self.log_std: torch.Tensor
        self.register_buffer(
            "log_std",
            log_std.detach().clone().float() if log_std is not None else torch.zeros(1),
        )
        self.normalize = normalization is not None
        # In float64, as VecNormalize and the bot file compute it: an input that hardly
        # varied over the run (a RAM byte, a constant sensor) has a scale near 1e-4, and a
        # float32 mean of 100 is already off by 4e-6, 0.04 after the division; Pong's RAM
        # policy's logits moved by 7e-5 and one choice in 10,000 flipped.
        mean = torch.tensor(normalization["mean"] if normalization else [0.0], dtype=torch.float64)
        scale = torch.tensor(
            normalization["scale"] if normalization else [1.0], dtype=torch.float64
        )
        self.mean: torch.Tensor
        self.scale: torch.Tensor
        self.register_buffer("mean", mean)
        self.register_buffer("scale", scale)
        clip = normalization["clip"] if normalization else None
        self.clip = float(clip) if clip is not None else float(np.finfo(np.float32).max)

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # One input per observation key, then state_ins, as the plugin feeds them.
        *keys, state_ins = inputs
        obs = keys[0] if len(keys) == 1 else torch.cat(keys, dim=1)
        if self.normalize:
            obs = torch.clamp((obs.double() - self.mean) / self.scale, -self.clip, self.clip)
            obs = obs.float()
        if self.extractor is not None:
            obs = self.extractor.encode(self._split(obs))  # normalized above
        if self.memory_cell is not None:
            # A bot with memory: state_ins is each agent's state [batch, units] (zeros at an
            # episode's start) and state_outs the state after this step (docs/godot.md).
            cell = self.memory_cell
            state_ins = gru_step(cell, obs @ cell.weight_ih.T + cell.bias_ih, state_ins)
            obs = torch.cat([obs, state_ins], dim=1)
        output = self.action_net(self.policy_net(obs))
        if self.mask_input is not None:
            allowed = keys[self.mask_input] > 0.5
            none = keys[self.mask_input].max(dim=1, keepdim=True).values <= 0.5
            output = torch.where(allowed | none, output, torch.full_like(output, FORBIDDEN))
        if not self.pieces:
            return output, state_ins
        parts = []
        for start, size, discrete in self.pieces:
            values = output[:, start : start + size]
            if discrete:
                parts.append(torch.clamp(values, -1.0, 1.0))
            else:
                log_std = self.log_std[start : start + size].unsqueeze(0)
                parts += [values, log_std.expand(values.shape[0], size)]
        return torch.cat(parts, dim=1), state_ins

    def _split(self, joined: torch.Tensor) -> Any:
        """The joined observation as the extractor takes it: each key in its shape."""
        parts = {}
        start = 0
        for key, shape in self.parts:
            size = int(np.prod(shape))
            parts[key] = joined[:, start : start + size].reshape(-1, *shape)
            start += size
        assert self.extractor is not None
        return parts if self.extractor.keyed else parts[self.parts[0][0]]


def export_onnx(
    model: PPO, normalization: dict[str, Any] | None, path: Path, layout: OnnxLayout | None = None
) -> None:
    """Write the ONNX file in the plugin's layout: inputs named after the observation key
    [batch, dim] and ``state_ins`` [batch], outputs ``output`` and ``state_outs``, opset 17,
    IR version 8 (what the plugin's onnxruntime 1.15 loads)."""
    layout = layout or OnnxLayout()
    module = _OnnxPolicy(model, normalization, layout).to("cpu").eval()
    widths = input_widths(model)
    if len(widths) != len(layout.input_names):
        raise ExportError(
            f"the policy takes {len(widths)} observation input(s), the game declares "
            f"{len(layout.input_names)} key(s) ({', '.join(layout.input_names)})"
        )
    names = [*layout.input_names, "state_ins", "output", "state_outs"]
    policy = model.policy
    state = (
        torch.zeros(1, policy.memory)
        if isinstance(policy, RecurrentActorCritic)
        else torch.zeros(1)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(
            module,
            (*(torch.zeros(1, width) for width in widths), state),
            str(path),
            opset_version=ONNX_OPSET,
            input_names=names[:-2],
            output_names=names[-2:],
            dynamic_axes={name: {0: "batch_size"} for name in names},
            dynamo=False,
        )
    import onnx

    written = onnx.load(str(path))
    if written.ir_version > MAX_IR_VERSION:
        written.ir_version = MAX_IR_VERSION
        onnx.save(written, str(path))


def onnx_output(path: Path, obs: Any, input_names: tuple[str, ...] = ("obs",)) -> np.ndarray:
    """Run the ONNX file with onnxruntime, fed as the plugin feeds it (one input per
    observation key, and ``state_ins``): its ``output`` (a bot with memory's from an
    episode's start)."""
    return OnnxPlayer(path, input_names).step(obs, None)[0]


class OnnxPlayer:
    """An ONNX bot run with onnxruntime as a game runs it: one input per observation key
    and ``state_ins`` (zeros for a bot without memory; each agent's state for one with).

    :param path: the ONNX file.
    :param input_names: its observation inputs, in the game's order.
    """

    def __init__(self, path: Path, input_names: tuple[str, ...] = ("obs",)) -> None:
        import onnxruntime

        self.session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        self.input_names = input_names
        shape = next(i for i in self.session.get_inputs() if i.name == "state_ins").shape
        self.units = int(shape[1]) if len(shape) == 2 else 0
        """The state's width: 0 for the plugin's placeholder ``state_ins`` [batch]."""

    def step(self, obs: Any, state: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """``output`` and ``state_outs`` for a batch, from ``state`` (None: zeros)."""
        parts = [obs[name] for name in self.input_names] if isinstance(obs, dict) else [obs]
        # A camera's frame goes in flat, its bytes as floats, as the plugin feeds any key.
        feed: dict[str, np.ndarray] = {
            name: np.asarray(part, np.float32).reshape(len(part), -1)
            for name, part in zip(self.input_names, parts, strict=True)
        }
        batch = len(parts[0])
        if state is not None:
            feed["state_ins"] = np.asarray(state, np.float32)
        elif self.units:
            feed["state_ins"] = np.zeros((batch, self.units), dtype=np.float32)
        else:
            feed["state_ins"] = np.zeros(batch, dtype=np.float32)
        output, after = self.session.run(None, feed)
        return np.asarray(output), np.asarray(after)


def onnx_actions(
    path: Path, obs: Any, bot: BotRunner, input_names: tuple[str, ...] = ("obs",)
) -> np.ndarray:
    """Run the ONNX file with onnxruntime and read actions with the bot's rule."""
    return bot.read_actions(onnx_output(path, obs, input_names))
