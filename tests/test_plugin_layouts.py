"""Every layout a game can declare exports to an ONNX file the Godot RL Agents plugin
feeds and reads as its own code does (``tests/plugin_decode.py``), and the action it
decodes is the trained policy's deterministic action as lander's games receive it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
import torch
from stable_baselines3 import PPO

from game_bridge.spaces import ActionCodec, ActionEntry
from tests.conftest import game_executable, git, python_game
from tests.plugin_decode import PluginInference
from tests.test_operations import lander
from training.errors import ExportError
from training.export import MAX_IR_VERSION, ONNX_OPSET, OnnxLayout, export_policy

LAYOUTS = {
    "continuous": [("move", 2, "continuous")],
    "discrete": [("jump", 4, "discrete")],
    "multi-discrete": [("turn", 3, "discrete"), ("jump", 2, "discrete")],
    "mixed": [("move", 2, "continuous"), ("jump", 2, "discrete")],
    "mixed, discrete first": [("jump", 3, "discrete"), ("move", 2, "continuous")],
}
OBS_SIZE = 5


class _Spaces(gymnasium.Env[np.ndarray, Any]):
    """An env that only carries spaces: the policy is built, never trained."""

    def __init__(self, action_space: gymnasium.Space[Any]) -> None:
        self.observation_space = gymnasium.spaces.Box(-1.0, 1.0, (OBS_SIZE,), np.float32)
        self.action_space = action_space


def _policy(actions: list[tuple[str, int, str]], seed: int) -> tuple[PPO, ActionCodec]:
    codec = ActionCodec(tuple(ActionEntry(k, n, t == "discrete") for k, n, t in actions))
    model = PPO("MlpPolicy", _Spaces(codec.space), seed=seed, device="cpu")
    with torch.no_grad():  # outputs well past [-1, 1], so clipping and ties are exercised
        model.policy.action_net.weight.mul_(30.0)
        model.policy.action_net.bias.uniform_(-1.0, 1.0)
    return model, codec


def _layout(obs_key: str, actions: list[tuple[str, int, str]]) -> dict[str, Any]:
    return {
        "observations": [{"key": obs_key, "shape": [OBS_SIZE], "image": False}],
        "actions": [{"key": k, "size": n, "action_type": t} for k, n, t in actions],
    }


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_the_plugin_decodes_the_trained_policys_action(name: str, tmp_path: Path) -> None:
    import onnx

    actions = LAYOUTS[name]
    obs_key = "position"  # not "obs": the plugin feeds each key under its own name
    model, codec = _policy(actions, seed=len(name))
    layout = _layout(obs_key, actions)
    export_policy(
        model, None, "t", tmp_path / "t.json", tmp_path / "t.onnx",
        layout=OnnxLayout.of_game(layout), samples=2000,
    )  # fmt: skip
    written = onnx.load(str(tmp_path / "t.onnx"))
    assert written.ir_version <= MAX_IR_VERSION
    assert [op.version for op in written.opset_import if op.domain in ("", "ai.onnx")] == [
        ONNX_OPSET
    ]
    assert [i.name for i in written.graph.input] == [obs_key, "state_ins"]
    plugin = PluginInference(
        tmp_path / "t.onnx", {k: {"size": n, "action_type": t} for k, n, t in actions}
    )
    observations = np.random.default_rng(7).uniform(-1, 1, (2000, OBS_SIZE)).astype(np.float32)
    lander_actions = codec.encode(model.predict(observations, deterministic=True)[0])
    disagreements = 0
    for row, wanted in zip(observations, lander_actions, strict=True):
        decoded = plugin.act({obs_key: row.tolist()})
        assert list(decoded) == [k for k, _, _ in actions]  # the declared key order
        for key, _, kind in actions:
            if kind == "continuous":
                np.testing.assert_allclose(decoded[key], wanted[key], atol=1e-5)
            elif decoded[key] != int(wanted[key]):
                disagreements += 1
    assert disagreements == 0


def test_a_layout_lander_cannot_export_is_one_export_error() -> None:
    two_keys = {
        "observations": [
            {"key": "position", "shape": [3], "image": False},
            {"key": "rays", "shape": [8], "image": False},
        ],
        "actions": [{"key": "move", "size": 2, "action_type": "continuous"}],
    }
    with pytest.raises(ExportError, match="2 observation keys"):
        OnnxLayout.of_game(two_keys)
    dict_space = gymnasium.spaces.Dict(
        {"a": gymnasium.spaces.Box(-1, 1, (3,)), "b": gymnasium.spaces.Box(-1, 1, (2,))}
    )

    class _DictSpaces(gymnasium.Env[Any, Any]):
        observation_space = dict_space
        action_space = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)

    model = PPO("MultiInputPolicy", _DictSpaces(), device="cpu")
    with pytest.raises(ExportError, match="one flat vector observation"):
        export_policy(model, None, "t", Path("/nonexistent/t.json"), Path("/nonexistent/t.onnx"))


def test_a_run_whose_game_cannot_be_exported_still_ends_and_publishes(
    checkout: tuple[Path, Path], port_block: Callable[[int], int]
) -> None:
    work, remote = checkout
    game = game_executable(
        work / "game.x86_64", python_game("godot_style_game.py", "--extra_obs_key=rays")
    )
    result = lander(
        work, "train", "twokeys", "--game-bin", str(game), "--n-parallel", "1",
        "--agents-per-instance", "2", "--timesteps", "128", "--n-steps", "32",
        "--port", str(port_block(1)),
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "export skipped: the game declares 2 observation keys (obs, rays)" in output
    assert "Traceback" not in output
    pushed = git(remote, "ls-tree", "-r", "--name-only", "main")
    assert "checkpoints/twokeys/final.zip" in pushed and "checkpoints/twokeys/run.json" in pushed


def test_a_game_whose_observation_key_is_not_obs_exports_an_input_of_that_name(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    import onnx

    game = game_executable(
        tmp_path / "game.x86_64", python_game("godot_style_game.py", "--obs_key=sensors")
    )
    result = lander(
        tmp_path, "train", "named", "--game-bin", str(game), "--n-parallel", "1",
        "--agents-per-instance", "2", "--timesteps", "128", "--n-steps", "32",
        "--port", str(port_block(1)), "--no-git",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    written = onnx.load(str(tmp_path / "bots" / "named.onnx"))
    assert [i.name for i in written.graph.input] == ["sensors", "state_ins"]
    plugin = PluginInference(
        tmp_path / "bots" / "named.onnx",
        {
            "steer": {"size": 2, "action_type": "continuous"},
            "boost": {"size": 2, "action_type": "discrete"},
        },
    )
    decoded = plugin.act({"sensors": [0.1, -0.2, 1.0, 0.5]})
    assert set(decoded) == {"steer", "boost"} and decoded["boost"] in (0, 1)
