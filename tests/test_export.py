"""Export, evaluation and play: parity of the numpy bot and ONNX with the model,
the evaluation history and champion, and a bot the game plays."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from PIL import Image
from rich.console import Console
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecNormalize

from cli.results.records import committed_champions
from game_bridge.bot_runner import BotFormatError, BotRunner
from tests.conftest import LANDER, lander
from training.bots import export as export_module
from training.bots.export import ExportError, export_policy
from training.bots.parity import compare_actions, decisive
from training.bots.run_bots import bot_target, evaluate_target, run_target
from training.config import TrainConfig
from training.envs.environments import make_vec_env
from training.evaluation.records import EvalRecord, champions, read_records, record_evaluation
from training.evaluation.scoring import EvalResult, evaluate_in_process
from training.runs.local_state import checkout_id
from training.runs.run_paths import RunPaths
from training.runs.run_record import RunRecord
from training.session.trainer import TrainRequest, train

QUIET = Console(file=open(os.devnull, "w"))  # noqa: SIM115 (lives for the whole module)


def briefly_trained(action_type: str, normalize: bool = False) -> tuple[PPO, VecNormalize | None]:
    config = TrainConfig(
        in_process=True, n_parallel=1, agents_per_instance=4, game_args={"action_type": action_type}
    )
    env = make_vec_env(config)
    normalizer = VecNormalize(env, norm_reward=False) if normalize else None
    model = PPO(
        "MlpPolicy",
        normalizer or env,
        n_steps=256,
        batch_size=256,
        n_epochs=2,
        seed=3,
        device="cpu",
    )
    model.learn(2048)
    return model, normalizer


@pytest.mark.parametrize(
    ("action_type", "normalize"), [("continuous", False), ("continuous", True), ("discrete", False)]
)
def test_numpy_bot_and_onnx_give_the_models_deterministic_actions(
    tmp_path: Path, action_type: str, normalize: bool
) -> None:
    model, normalizer = briefly_trained(action_type, normalize)
    result = export_policy(
        model, normalizer, "parity", tmp_path / "parity.json", tmp_path / "parity.onnx"
    )
    assert result.bot_parity.samples == 10_000
    obs = np.random.default_rng(7).uniform(-1, 1, (10_000, 7)).astype(np.float32)
    expected, _ = model.predict(
        normalizer.normalize_obs(obs) if normalizer else obs, deterministic=True
    )
    bot = BotRunner.from_file(tmp_path / "parity.json")
    session = onnxruntime.InferenceSession(str(tmp_path / "parity.onnx"))
    output, state = session.run(
        None, {"obs": obs, "state_ins": np.zeros(len(obs), dtype=np.float32)}
    )
    if action_type == "continuous":
        assert np.max(np.abs(bot.act(obs) - expected)) <= 1e-5
        assert np.max(np.abs(np.clip(output, -1, 1) - expected)) <= 1e-5
    else:
        # Identical wherever the two best logits are not a float32 near-tie.
        mask = decisive(bot, obs)
        assert mask.mean() > 0.998
        assert np.array_equal(bot.act(obs)[mask], expected[mask])
        assert np.array_equal(np.argmax(output, axis=1)[mask], expected[mask])
    assert state.shape == (10_000,)
    spec = json.loads((tmp_path / "parity.json").read_text())
    assert (spec["observation"]["normalization"] is not None) == normalize


def test_onnx_normalizes_as_the_run_did_where_an_input_hardly_varied(tmp_path: Path) -> None:
    """A RAM byte or a constant sensor: a mean near 100 and a spread near 1e-3. In float32
    the mean alone is off by 4e-6 (0.004 after the division), and the ONNX file's actions
    moved; it normalizes in float64, as the run and the bot file do."""
    model, normalizer = briefly_trained("continuous", normalize=True)
    assert normalizer is not None
    rms = normalizer.obs_rms
    rms.mean = rms.mean + np.array([100.3, 57.7, 0, 0, 0, 0, 0])
    rms.var = rms.var * np.array([1e-6, 1e-6, 1, 1, 1, 1, 1])
    result = export_policy(
        model, normalizer, "narrow", tmp_path / "narrow.json", tmp_path / "narrow.onnx"
    )
    assert result.onnx_parity.max_abs_diff <= 1e-5
    rng = np.random.default_rng(5)
    obs = (rms.mean + np.sqrt(rms.var) * rng.standard_normal((5_000, 7))).astype(np.float32)
    expected, _ = model.predict(normalizer.normalize_obs(obs), deterministic=True)
    session = onnxruntime.InferenceSession(str(tmp_path / "narrow.onnx"))
    output, _ = session.run(None, {"obs": obs, "state_ins": np.zeros(len(obs), np.float32)})
    assert np.max(np.abs(np.clip(output, -1, 1) - expected)) <= 1e-5


def test_a_policy_without_hidden_layers_trains_and_exports_with_parity(tmp_path: Path) -> None:
    """``--net-width 0``: the action layer reads the observation (the features) as it is;
    the run trains, and its bot file and ONNX pass parity (the export refuses otherwise)
    with one layer."""
    trained = lander(
        tmp_path, "train", "flat", "--net-width", "0", "--timesteps", "2048", "--in-process",
        "--no-git", timeout=300,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert "exported bots/flat.json and bots/flat.onnx" in trained.stdout
    spec = json.loads((tmp_path / "bots" / "flat.json").read_text())
    assert [layer["activation"] for layer in spec["layers"]] == ["linear"]


def test_onnx_file_has_the_plugin_layout(tmp_path: Path) -> None:
    model, _ = briefly_trained("continuous")
    export_policy(model, None, "layout", tmp_path / "layout.json", tmp_path / "layout.onnx")
    graph = onnx.load(str(tmp_path / "layout.onnx"))
    onnx.checker.check_model(graph)
    assert [o.version for o in graph.opset_import if o.domain in ("", "ai.onnx")] == [17]

    def dims(value: onnx.ValueInfoProto) -> list[str | int]:
        return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]

    inputs = {i.name: dims(i) for i in graph.graph.input}
    outputs = {o.name: dims(o) for o in graph.graph.output}
    assert inputs == {"obs": ["batch_size", 7], "state_ins": ["batch_size"]}
    assert outputs == {"output": ["batch_size", 2], "state_outs": ["batch_size"]}


def test_export_refuses_a_bot_that_fails_parity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, _ = briefly_trained("continuous")
    original = export_module.build_bot_spec

    def tampered(*args: object, **kwargs: object) -> dict:
        spec = original(*args, **kwargs)  # type: ignore[arg-type]
        spec["layers"][-1]["biases"][0] += 0.01
        return spec

    monkeypatch.setattr(export_module, "build_bot_spec", tampered)
    with pytest.raises(ExportError, match="bot JSON disagrees"):
        export_policy(model, None, "bad", tmp_path / "bad.json", tmp_path / "bad.onnx")
    assert not (tmp_path / "bad.json").exists() and not (tmp_path / "bad.onnx").exists()


def test_parity_allows_float32_rounding_in_proportion_to_large_actions() -> None:
    """A raw action of 300 rounds at about 3e-5 in float32: within parity; an error of
    0.01 is not, and actions of size 1 keep the 1e-5 bound."""
    large = np.full((4, 2), 300.0)
    assert compare_actions(large, large + 3e-5, None).passed(discrete=False)
    assert not compare_actions(large, large + 1e-2, None).passed(discrete=False)
    small = np.full((4, 2), 0.5)
    assert not compare_actions(small, small + 3e-5, None).passed(discrete=False)


def test_bot_runner_needs_no_torch() -> None:
    code = (
        "import sys, game_bridge.bot_runner, games.lander.play; assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_bot_with_wrong_shapes_is_refused(tmp_path: Path) -> None:
    model, _ = briefly_trained("continuous")
    export_policy(model, None, "shape", tmp_path / "shape.json", tmp_path / "shape.onnx")
    spec = json.loads((tmp_path / "shape.json").read_text())
    spec["layers"][1]["weights"] = [row[:-1] for row in spec["layers"][1]["weights"]]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(spec))
    with pytest.raises(BotFormatError, match="layer 1"):
        BotRunner.from_file(broken)
    result = subprocess.run(
        [str(LANDER), "eval", str(broken)], capture_output=True, text=True, timeout=120, check=False
    )
    assert (
        result.returncode != 0 and "layer 1" in result.stderr and "Traceback" not in result.stderr
    )


def _record(run: str, reward: float, game: str = "lander", bot: str | None = "") -> EvalRecord:
    result = EvalResult(reward, 1.0, 0.5, 10, None).to_dict()
    chosen = f"bots/{run}.json" if bot == "" else bot
    return EvalRecord(run, 100, chosen, game, result, "", None, "box-000000")


def test_champion_is_the_best_committed_bot_of_each_game() -> None:
    records = [_record(f"e{i}", reward) for i, reward in enumerate([50, 80, 60, 90, 70], 1)]
    records += [
        _record("godot1", 500.0, game="lander.x86_64"),  # another game: never lander's champion
        _record("uncommitted", 95.0),  # its bot is not committed
        _record("checkpoint", 99.0, bot=None),  # a checkpoint, no bot file
    ]
    committed = {f"bots/e{i}.json" for i in range(1, 6)} | {"bots/godot1.json"}
    best = champions(records, committed.__contains__)
    assert {game: record.run for game, record in best.items()} == {
        "lander": "e4",
        "lander.x86_64": "godot1",
    }
    assert champions(records[:1], committed.__contains__)["lander"].run == "e1"


def test_evaluations_go_to_the_run_only_from_the_checkout_that_trained_it(
    tmp_path: Path,
) -> None:
    """Another checkout's evaluation stays local, or goes to a file of its own when published."""
    box, laptop = tmp_path / "box", tmp_path / "laptop"
    record = RunRecord(run="r1", config=TrainConfig())
    record.sessions.append({"checkout": checkout_id(box)})
    for root in (box, laptop):
        record.save(root / "checkpoints" / "r1" / "run.json")
    result = EvalResult(10.0, 1.0, 0.5, 10, None)
    on_box = record_evaluation(box, "r1", 100, None, result, None, "lander")
    on_laptop = record_evaluation(laptop, "r1", 100, None, result, None, "lander")
    published = record_evaluation(laptop, "r1", 100, None, result, None, "lander", publish=True)
    no_run = record_evaluation(laptop, None, None, None, result, None, "lander", publish=True)
    assert on_box.tracked and on_box.path == box / "checkpoints" / "r1" / "evaluations.jsonl"
    assert not on_laptop.tracked and on_laptop.path == laptop / ".lander" / "evaluations.jsonl"
    assert published.tracked and published.path.name == f"evaluations-{checkout_id(laptop)}.jsonl"
    assert not no_run.tracked and no_run.path == on_laptop.path
    assert [r.run for r in read_records([on_laptop.path])] == ["r1", ""]
    assert checkout_id(box) != checkout_id(laptop)


def test_trained_run_exports_a_bot_that_scores_as_its_checkpoint(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    overrides = {
        "timesteps": 8192,
        "n_parallel": 2,
        "agents_per_instance": 4,
        "port": port_block(2),
    }
    train(TrainRequest(tmp_path, "scored", overrides), QUIET)
    checkpoint = run_target(RunPaths(tmp_path, "scored"))  # no bot yet: the checkpoint itself
    from training.bots.run_bots import export_run

    export_run(RunPaths(tmp_path, "scored"))
    bot = bot_target(tmp_path / "bots" / "scored.json")
    from_checkpoint = evaluate_target(checkpoint, 32, None, 0)
    from_bot = evaluate_target(bot, 32, None, 0)
    assert from_bot.mean_reward == pytest.approx(from_checkpoint.mean_reward, rel=1e-3)
    assert from_bot.success_rate == from_checkpoint.success_rate


def test_normalization_baselines_hold_on_episodes_they_were_not_measured_on() -> None:
    """The baselines come from fixed seeds; on other seeds the reference controller still
    scores about 1 and the random policy about 0."""
    from games.lander.controllers import random_actions, reference_actions

    rng = np.random.default_rng(4242)
    reference = evaluate_in_process(reference_actions, 200, seed=4242)
    random = evaluate_in_process(lambda o: random_actions(rng, len(o), False), 200, seed=4242)
    assert reference.normalized_score == pytest.approx(1.0, abs=0.05)
    assert random.normalized_score == pytest.approx(0.0, abs=0.05)


def test_train_flow_exports_evaluates_and_play_records_headless(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    result = lander(
        tmp_path, "train", "flow", "--no-git", "--timesteps", "4096", "--n-parallel", "2",
        "--agents-per-instance", "2", "--n-steps", "1024", "--port", str(port_block(2)),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "bots" / "flow.json").is_file() and (
        tmp_path / "bots" / "flow.onnx"
    ).is_file()
    records = read_records([tmp_path / "checkpoints" / "flow" / "evaluations.jsonl"])
    assert [record.run for record in records] == ["flow"]
    assert committed_champions(tmp_path)["lander"].bot == "bots/flow.json"
    evaluated = lander(tmp_path, "eval", "flow", "--episodes", "8")
    assert evaluated.returncode == 0
    line = evaluated.stdout.strip().splitlines()[0]
    assert line.startswith("mean_reward=") and "std_reward=" in line and "success_rate=" in line
    assert "normalized_score=" in line
    by_name = lander(tmp_path, "play", "flow", "--seconds", "25")  # a run: its exported bot
    assert by_name.returncode == 0 and "episode(s): mean_reward=" in by_name.stdout, by_name
    for picture in ("flight.png", "flight.gif"):
        played = lander(
            tmp_path,
            "play",
            str(tmp_path / "bots" / "flow.json"),
            "--record",
            str(tmp_path / picture),
            "--seconds",
            "25",
        )
        assert played.returncode == 0, played.stderr
        with Image.open(tmp_path / picture) as image:
            assert image.size == (900, 680)
            rgb = image.convert("RGB")
            colors = rgb.getcolors(maxcolors=1 << 16)
            assert colors is not None and len(colors) > 3, (
                "the picture shows trajectories, not a blank canvas"
            )
            title_band = rgb.crop((0, 0, 900, 40)).getcolors(maxcolors=1 << 16)
            axis_band = rgb.crop((0, 640, 900, 680)).getcolors(maxcolors=1 << 16)
            assert title_band and len(title_band) > 1, "a title and a legend above the plot"
            assert axis_band and len(axis_band) > 1, "axis labels below the plot"


def test_the_bundled_game_plays_a_bot_by_itself(tmp_path: Path) -> None:
    model, _ = briefly_trained("continuous")
    export_policy(model, None, "alone", tmp_path / "alone.json", tmp_path / "alone.onnx")
    result = subprocess.run(
        [sys.executable, "-m", "games.lander", f"--bot={tmp_path / 'alone.json'}", "--agents=3"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("episodes=3 mean_reward=")
    broken = tmp_path / "broken.json"
    broken.write_text("{}")
    refused = subprocess.run(
        [sys.executable, "-m", "games.lander", f"--bot={broken}"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert refused.returncode == 2 and "not a lander bot" in refused.stderr
