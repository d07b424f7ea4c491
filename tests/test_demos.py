"""Learning from demonstrations: files in the Godot RL Agents plugin's layout and in
lander's own (``lander record`` through real games), behaviour cloning before PPO, what
a run records of them, and the one line every bad demo gets."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from tests.conftest import lander
from training.demos.files import DemoError, check_demos, load_demos
from training.runs.run_record import RunRecord

SMALL = ["--n-parallel", "2", "--agents-per-instance", "4", "--n-steps", "256"]


def ok(result: Any) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return str(result.stdout)


def record_reference(home: Path, port: int, episodes: int, out: Path) -> dict[str, Any]:
    """``lander record --policy reference`` through the real game; the file it wrote."""
    said = ok(lander(home, "record", "--policy", "reference", "--episodes", str(episodes),
                     "--out", str(out), "--port", str(port), timeout=120))  # fmt: skip
    assert f"recorded {episodes} episode(s)" in said and "reference on lander" in said, said
    return dict(json.loads(out.read_text()))


def plugin_layout(document: dict[str, Any]) -> list[list[Any]]:
    """The same episodes as the plugin's ``sync.gd`` writes them: per episode
    ``[observations, actions]``, the observation list one longer (its terminal one)."""
    return [
        [episode["observations"] + [episode["observations"][-1]], episode["actions"]]
        for episode in document["episodes"]
    ]


def normalized(output: str) -> float:
    line = next(line for line in output.splitlines() if line.startswith("evaluation:"))
    return float(line.split("normalized_score=")[1].split()[0])


def test_record_then_demos_reaches_a_higher_score_than_plain_ppo_with_the_same_seed(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    demos = tmp_path / "reference.json"
    document = record_reference(tmp_path, port_block(1), 10, demos)
    assert document["format"] == "lander-demos" and document["game"] == "lander"
    assert len(document["episodes"]) == 10
    assert all(len(e["observations"]) == len(e["actions"]) == len(e["rewards"])
               for e in document["episodes"])  # fmt: skip
    common = ["--no-git", "--timesteps", "20000", "--seed", "3", "--eval-episodes", "40", *SMALL]
    taught = ok(lander(tmp_path, "train", "taught", "--demos", str(demos),
                       "--port", str(port_block(2)), *common, timeout=300))  # fmt: skip
    plain = ok(lander(tmp_path, "train", "plain", "--port", str(port_block(2)), *common,
                      timeout=300))  # fmt: skip
    assert "behaviour cloning: 2,000 demonstrated steps" in taught, taught
    assert normalized(taught) > normalized(plain) + 0.2, (taught, plain)
    record = RunRecord.load(tmp_path / "checkpoints" / "taught" / "run.json")
    assert record.extra.demos is not None
    (file,) = record.extra.demos["files"]
    assert file["sha256"] == hashlib.sha256(demos.read_bytes()).hexdigest()
    assert file["episodes"] == 10 and file["layout"] == "lander"
    assert record.extra.demos["cloning"]["held_out_episodes"] == 1
    # A resume does not clone again, and is not given demos to clone.
    again = ok(lander(tmp_path, "train", "taught", "--resume", "taught", "--no-git",
                      "--timesteps", "1024", "--port", str(port_block(2)), *SMALL))  # fmt: skip
    assert "behaviour cloning" not in again
    assert RunRecord.load(tmp_path / "checkpoints" / "taught" / "run.json").extra.demos == (
        record.extra.demos
    )


def test_a_demo_file_in_the_plugins_layout_trains_a_run_through_real_games(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    document = record_reference(tmp_path, port_block(1), 4, tmp_path / "lander.json")
    plugin = tmp_path / "expert_demos.json"
    plugin.write_text(json.dumps(plugin_layout(document)))
    loaded = load_demos(plugin)
    assert loaded.layout == "plugin" and loaded.game is None
    at_once = tmp_path / "ended_at_once.json"  # an episode done on its first observation
    at_once.write_text(json.dumps([[[document["episodes"][0]["observations"][0]], []],
                                   *plugin_layout(document)[:1]]))  # fmt: skip
    assert len(load_demos(at_once).episodes) == 1, "the episode without a step is dropped"
    assert [e.steps for e in loaded.episodes] == [len(e["actions"]) for e in document["episodes"]]
    said = ok(lander(tmp_path, "train", "plug", "--no-git", "--demos", str(plugin),
                     "--timesteps", "2048", "--port", str(port_block(2)), *SMALL,
                     timeout=300))  # fmt: skip
    assert "behaviour cloning: 800 demonstrated steps" in said, said
    record = RunRecord.load(tmp_path / "checkpoints" / "plug" / "run.json")
    assert record.extra.demos is not None
    assert record.extra.demos["files"][0]["layout"] == "plugin"
    assert record.extra.demos["cloning"]["value_warmed"] is False, "the plugin records no reward"


def _lander_demo(**change: Any) -> dict[str, Any]:
    episode = {"observations": [[0.1] * 7] * 3, "actions": [[0.5, -0.5]] * 3, "rewards": [1.0] * 3}
    document = {"format": "lander-demos", "version": 1, "game": "lander", "game_args": {},
                "episodes": [episode, episode]}  # fmt: skip
    document.update(change)
    return document


BAD: dict[str, tuple[Any, str]] = {
    "empty": ([], "holds no episode with a step in it"),
    "not json": ("{not json", "is not JSON"),
    "neither layout": ({"episodes": []}, "neither a Godot RL Agents demo array nor a lander"),
    "another game": (
        _lander_demo(game="stroke"),
        "was recorded on stroke, and this run trains lander",
    ),
    "other spaces": (
        _lander_demo(episodes=[{"observations": [[0.1] * 5], "actions": [[0.0, 0.0]]}]),
        "observations of 5 numbers, and this game sends 7",
    ),
    "action out of range": (
        _lander_demo(episodes=[{"observations": [[0.1] * 7], "actions": [[2.0, 0.0]]}]),
        "episode 0 step 0: action 2 is outside [-1, 1]",
    ),
    "nan": ("[[[[0.1, NaN, 0, 0, 0, 0, 0]], [[0, 0]]]]", "hold NaN or infinity"),
    "mismatched lengths": (
        [[[[0.1] * 7] * 4, [[0.0, 0.0]]]],
        "episode 0 has 4 observations for 1 actions",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_each_bad_demo_is_one_line_and_leaves_nothing_behind(
    case: str, tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    content, message = BAD[case]
    demo = tmp_path / "bad.json"
    demo.write_text(content if isinstance(content, str) else json.dumps(content))
    result = lander(tmp_path, "train", "bad", "--no-git", "--demos", str(demo),
                    "--timesteps", "1024", "--port", str(port_block(2)), *SMALL,
                    timeout=120)  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for folder in ("checkpoints", "logs", "bots"):
        assert not (tmp_path / folder).exists() or not any((tmp_path / folder).iterdir()), folder


def test_demos_do_not_start_a_resumed_policy_or_a_self_play_run(tmp_path: Path) -> None:
    demo = tmp_path / "good.json"
    demo.write_text(json.dumps(_lander_demo()))
    ok(lander(tmp_path, "train", "x", "--no-git", "--in-process", "--timesteps", "64",
              "--n-steps", "32", "--n-parallel", "1", "--eval-episodes", "1"))  # fmt: skip
    resumed = lander(tmp_path, "train", "y", "--no-git", "--resume", "x", "--demos", str(demo))
    assert resumed.returncode == 1 and "a resumed policy has learned already" in resumed.stderr
    assert not (tmp_path / "checkpoints" / "y").exists()
    sides = lander(tmp_path, "train", "z", "--no-git", "--self-play", "--game", "duel",
                   "--demos", str(demo))  # fmt: skip
    assert sides.returncode == 1 and "do not combine with --self-play" in sides.stderr
    bad_setting = lander(tmp_path, "record", "--policy", "reference", "--game-arg",
                         "difficulty=9", "--out", str(tmp_path / "x.json"))  # fmt: skip
    assert bad_setting.returncode == 1 and "difficulty must be one of" in bad_setting.stderr
    assert not (tmp_path / "x.json").exists()


def test_checks_against_the_games_spaces_name_the_step_and_the_choice(tmp_path: Path) -> None:
    path = tmp_path / "choices.json"
    path.write_text(
        json.dumps(_lander_demo(episodes=[{"observations": [[0.0] * 7] * 2, "actions": [1, 7]}]))
    )
    loaded = load_demos(path)
    box = spaces.Box(-np.inf, np.inf, (7,), np.float32)
    with pytest.raises(DemoError, match="episode 0 step 1: action 7 is not a choice in 0-4"):
        check_demos(loaded, box, spaces.Discrete(5))
    check_demos(loaded, box, spaces.Discrete(8))  # every choice in range: no error
