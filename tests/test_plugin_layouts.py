"""Every layout a game can declare exports to an ONNX file the Godot RL Agents plugin
feeds and reads as its own code does (``tests/plugin_decode.py``), and the action it
decodes is the trained policy's deterministic action as lander's games receive it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
import torch
from stable_baselines3 import PPO

from game_bridge.bot_runner import BotRunner
from game_bridge.codecs import ActionCodec
from game_bridge.spaces import ActionEntry
from tests.conftest import REPO_ROOT, git, godot_style, lander, train_briefly
from tests.plugin_decode import PluginInference
from training.bots.export import export_policy
from training.bots.onnx_export import MAX_IR_VERSION, ONNX_OPSET
from training.bots.plugin_layout import OnnxLayout
from training.errors import ExportError

LAYOUTS = {
    "continuous": [("move", 2, "continuous")],
    "discrete": [("jump", 4, "discrete")],
    "multi-discrete": [("turn", 3, "discrete"), ("jump", 2, "discrete")],
    "mixed": [("move", 2, "continuous"), ("jump", 2, "discrete")],
    "mixed, discrete first": [("jump", 3, "discrete"), ("move", 2, "continuous")],
}


class _Spaces(gymnasium.Env[Any, Any]):
    """An env that only carries spaces: the policy is built, never trained."""

    def __init__(
        self, observation_space: gymnasium.Space[Any], action_space: gymnasium.Space[Any]
    ) -> None:
        self.observation_space = observation_space
        self.action_space = action_space


OBSERVATIONS = {"one key": [("position", 5)], "two keys": [("position", 3), ("rays", 4)]}


def _policy(
    observations: list[tuple[str, int]], actions: list[tuple[str, int, str]], seed: int
) -> tuple[PPO, ActionCodec]:
    codec = ActionCodec(tuple(ActionEntry(k, n, t == "discrete") for k, n, t in actions))
    boxes = [(key, gymnasium.spaces.Box(-1.0, 1.0, (n,), np.float32)) for key, n in observations]
    # Several keys: a Dict in the declared order, as the bridge builds it.
    space = boxes[0][1] if len(boxes) == 1 else gymnasium.spaces.Dict(boxes)
    env = _Spaces(space, codec.space)
    policy = "MlpPolicy" if len(boxes) == 1 else "MultiInputPolicy"
    model = PPO(policy, env, seed=seed, device="cpu")
    with torch.no_grad():  # outputs well past [-1, 1], so clipping and ties are exercised
        model.policy.action_net.weight.mul_(30.0)
        model.policy.action_net.bias.uniform_(-1.0, 1.0)
    return model, codec


def _layout(
    observations: list[tuple[str, int]], actions: list[tuple[str, int, str]]
) -> dict[str, Any]:
    return {
        "observations": [{"key": k, "shape": [n], "image": False} for k, n in observations],
        "actions": [{"key": k, "size": n, "action_type": t} for k, n, t in actions],
    }


@pytest.mark.parametrize("observed", list(OBSERVATIONS))
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_the_plugin_decodes_the_trained_policys_action(
    name: str, observed: str, tmp_path: Path
) -> None:
    import onnx

    actions, observations = LAYOUTS[name], OBSERVATIONS[observed]
    keys = [key for key, _ in observations]  # not "obs": the plugin feeds each key by its name
    model, codec = _policy(observations, actions, seed=len(name))
    export_policy(
        model, None, "t", tmp_path / "t.json", tmp_path / "t.onnx",
        layout=OnnxLayout.of_game(_layout(observations, actions)), samples=2000,
    )  # fmt: skip
    written = onnx.load(str(tmp_path / "t.onnx"))
    assert written.ir_version <= MAX_IR_VERSION
    assert [op.version for op in written.opset_import if op.domain in ("", "ai.onnx")] == [
        ONNX_OPSET
    ]
    assert [i.name for i in written.graph.input] == [*keys, "state_ins"]
    plugin = PluginInference(
        tmp_path / "t.onnx", {k: {"size": n, "action_type": t} for k, n, t in actions}
    )
    rng = np.random.default_rng(7)
    batch = {key: rng.uniform(-1, 1, (2000, n)).astype(np.float32) for key, n in observations}
    model_input = batch[keys[0]] if len(keys) == 1 else batch
    lander_actions = codec.encode(model.predict(model_input, deterministic=True)[0])
    bot = BotRunner.from_file(tmp_path / "t.json")
    bot_input = batch if len(keys) > 1 else batch[keys[0]]
    np.testing.assert_array_equal(
        bot.act(bot_input), model.predict(model_input, deterministic=True)[0]
    ) if codec.all_discrete else np.testing.assert_allclose(
        bot.act(bot_input), model.predict(model_input, deterministic=True)[0], atol=1e-5
    )
    disagreements = 0
    for row, wanted in enumerate(lander_actions):
        decoded = plugin.act({key: batch[key][row].tolist() for key in keys})
        assert list(decoded) == [k for k, _, _ in actions]  # the declared key order
        for key, _, kind in actions:
            if kind == "continuous":
                np.testing.assert_allclose(decoded[key], wanted[key], atol=1e-5)
            elif decoded[key] != int(wanted[key]):
                disagreements += 1
    assert disagreements == 0


def test_a_layout_lander_cannot_export_is_one_export_error() -> None:
    grid = {
        "observations": [{"key": "grid", "shape": [2, 2], "image": False}],
        "actions": [{"key": "move", "size": 2, "action_type": "continuous"}],
    }
    with pytest.raises(ExportError, match="'grid' of shape \\[2, 2\\] is not a flat vector"):
        OnnxLayout.of_game(grid)
    model = PPO("MlpPolicy", _Spaces(gymnasium.spaces.Box(-1, 1, (2, 2), np.float32),
                                     gymnasium.spaces.Box(-1, 1, (2,), np.float32)), device="cpu")  # fmt: skip
    with pytest.raises(ExportError, match="export supports vector observations"):
        export_policy(model, None, "t", Path("/nonexistent/t.json"), Path("/nonexistent/t.onnx"))


def test_a_run_whose_game_cannot_be_exported_still_ends_and_publishes(
    checkout: tuple[Path, Path], port_block: Callable[[int], int]
) -> None:
    work, remote = checkout
    game = godot_style(work, "--obs_grid=1")
    result = train_briefly(work, "grid", game, port_block(1))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "export skipped: observation 'obs' of shape [2, 2] is not a flat vector" in output
    assert "Traceback" not in output
    pushed = git(remote, "ls-tree", "-r", "--name-only", "main")
    assert "checkpoints/grid/final.zip" in pushed and "checkpoints/grid/run.json" in pushed


def test_a_game_with_two_observation_keys_exports_two_inputs(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    import onnx

    game = godot_style(tmp_path, "--obs_key=sensors", "--extra_obs_key=phase")
    result = train_briefly(tmp_path, "keys", game, port_block(1), "--no-git")
    assert result.returncode == 0, result.stdout + result.stderr
    written = onnx.load(str(tmp_path / "bots" / "keys.onnx"))
    assert [i.name for i in written.graph.input] == ["sensors", "phase", "state_ins"]
    evaluated = lander(
        tmp_path, "eval", "keys", "--game-bin", str(game), "--episodes", "4",
        "--port", str(port_block(1)),
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    assert "mean_reward=" in evaluated.stdout


def test_a_game_whose_observation_key_is_not_obs_exports_an_input_of_that_name(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    import onnx

    game = godot_style(tmp_path, "--obs_key=sensors")
    result = train_briefly(tmp_path, "named", game, port_block(1), "--no-git")
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


def test_the_godot4_bot_player_parses_as_gdscript_4() -> None:
    gdparse = Path(sys.executable).with_name("gdparse")
    player = REPO_ROOT / "examples" / "godot4" / "bot_player.gd"
    parsed = subprocess.run(
        [str(gdparse), str(player)], capture_output=True, text=True, check=False
    )
    assert parsed.returncode == 0, parsed.stdout + parsed.stderr


def test_a_bot_lists_the_games_action_keys_for_players_in_the_engine(tmp_path: Path) -> None:
    actions = LAYOUTS["mixed, discrete first"]
    observations = OBSERVATIONS["one key"]
    model, _ = _policy(observations, actions, seed=3)
    export_policy(
        model, None, "t", tmp_path / "t.json", tmp_path / "t.onnx",
        layout=OnnxLayout.of_game(_layout(observations, actions)), samples=200,
    )  # fmt: skip
    spec = json.loads((tmp_path / "t.json").read_text())
    assert spec["action"]["keys"] == [
        {"key": "jump", "size": 3, "action_type": "discrete"},
        {"key": "move", "size": 2, "action_type": "continuous"},
    ]


def test_normalisation_of_several_keys_is_inside_the_graph(tmp_path: Path) -> None:
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    actions, observations = LAYOUTS["mixed"], OBSERVATIONS["two keys"]
    model, codec = _policy(observations, actions, seed=5)
    normalizer = VecNormalize(DummyVecEnv([lambda: model.env.envs[0]]), norm_reward=False)
    rng = np.random.default_rng(1)
    for key, size in observations:
        normalizer.obs_rms[key].mean = rng.uniform(-0.5, 0.5, size)
        normalizer.obs_rms[key].var = rng.uniform(0.05, 2.0, size)
    export_policy(
        model, normalizer, "t", tmp_path / "t.json", tmp_path / "t.onnx",
        layout=OnnxLayout.of_game(_layout(observations, actions)), samples=2000,
    )  # fmt: skip
    plugin = PluginInference(
        tmp_path / "t.onnx", {k: {"size": n, "action_type": t} for k, n, t in actions}
    )
    batch = {key: rng.uniform(-1, 1, (300, n)).astype(np.float32) for key, n in observations}
    wanted = codec.encode(model.predict(normalizer.normalize_obs(batch), deterministic=True)[0])
    for row in range(300):
        decoded = plugin.act({key: batch[key][row].tolist() for key in batch})
        np.testing.assert_allclose(decoded["move"], wanted[row]["move"], atol=1e-5)
        assert decoded["jump"] == int(wanted[row]["jump"])
