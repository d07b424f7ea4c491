"""The Godot RL Agents plugin's ONNX inference, transliterated from its source
(``edbeeching/godot_rl_agents_plugin``, main branch): ``onnx/csharp/ONNXInference.cs``
(one input per observation key, named after it, ``[1, len]`` floats, plus ``state_ins``;
outputs ``output`` and ``state_outs``), ``onnx/wrapper/ONNX_wrapper.gd``
(``set_action_means_only``) and ``sync.gd`` (``_extract_action_dict``, deterministic).
Written from that code, not from lander's exporter, so the tests check lander against
what the plugin does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


class PluginInference:
    """An ONNX model as the plugin's ``ONNXModel`` holds it, for one agent's action space."""

    def __init__(self, model_path: Path, action_space: dict[str, dict[str, Any]]) -> None:
        import onnxruntime

        self.session = onnxruntime.InferenceSession(str(model_path))
        # ONNXInference.Initialize: the output size is output's dimension 1.
        output = next(o for o in self.session.get_outputs() if o.name == "output")
        self.action_output_size = int(output.shape[1])
        self.action_space = action_space
        self.action_means_only = self._set_action_means_only(action_space)

    def _set_action_means_only(self, agent_action_space: dict[str, dict[str, Any]]) -> bool:
        continuous_only = True
        continuous_actions = 0
        for action in agent_action_space:
            if agent_action_space[action]["action_type"] != "continuous":
                continuous_only = False
                break
            continuous_actions += agent_action_space[action]["size"]
        return continuous_only and continuous_actions == self.action_output_size

    def run_inference(self, obs: dict[str, list[float]], state_ins: int) -> dict[str, list[float]]:
        inputs = {"state_ins": np.array([state_ins], dtype=np.float32)}
        for key, sub_obs in obs.items():
            inputs[key] = np.array(sub_obs, dtype=np.float32).reshape(1, len(sub_obs))
        results = self.session.run(["output", "state_outs"], inputs)
        return {
            "output": results[0].reshape(-1).tolist(),
            "state_outs": results[1].reshape(-1).tolist(),
        }

    def act(self, obs: dict[str, list[float]]) -> dict[str, Any]:
        """sync.gd's _inference_process for one agent, deterministic inference."""
        action = self.run_inference(obs, 1)
        return extract_action_dict(action["output"], self.action_space, self.action_means_only)


def extract_action_dict(
    action_array: list[float], action_space: dict[str, dict[str, Any]], action_means_only: bool
) -> dict[str, Any]:
    index = 0
    result: dict[str, Any] = {}
    for key in action_space:
        size = action_space[key]["size"]
        action_type = action_space[key]["action_type"]
        if action_type == "discrete":
            largest_logit = -np.inf
            largest_logit_idx = 0
            for logit_idx in range(size):
                logit_value = action_array[index + logit_idx]
                if logit_value > largest_logit:
                    largest_logit = logit_value
                    largest_logit_idx = logit_idx
            result[key] = largest_logit_idx
            index += size
        elif action_type == "continuous":
            result[key] = [min(max(v, -1.0), 1.0) for v in action_array[index : index + size]]
            index += size if action_means_only else size * 2
        else:
            raise AssertionError(
                f"Only discrete and continuous action types supported: {action_type}"
            )
    return result
