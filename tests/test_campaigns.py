"""Sweeps, next runs and curricula, with real games, a real Optuna study in
SQLite and a git checkout with a bare remote."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from cli.results.records import committed_champions
from tests.conftest import REPO_ROOT, SMALL, git, lander
from training.campaigns.search_space import DEFAULT_SPACE, load_space
from training.config import TrainConfig
from training.runs.run_record import RunRecord


def test_sweep_runs_trials_adds_more_when_run_again_and_names_the_champion(
    checkout: tuple[Path, Path], port_block: Callable[[int], int]
) -> None:
    work, remote = checkout
    port = str(port_block(2))
    common = ["--timesteps-per-trial", "1024", "--push-every", "1", "--port", port, *SMALL]
    first = lander(work, "sweep", "sw", "--trials", "2", *common)
    assert first.returncode == 0, first.stdout + first.stderr
    lines = (work / "logs" / "sw" / "trials.jsonl").read_text().splitlines()
    assert len(lines) == 2
    resumed = lander(work, "sweep", "sw", "--trials", "3", *common)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "2 trial(s) done, running 1 more" in resumed.stdout
    trials = [
        json.loads(line)
        for line in (work / "logs" / "sw" / "trials.jsonl").read_text().splitlines()
    ]
    assert [t["run"] for t in trials] == ["sw-t0000", "sw-t0001", "sw-t0002"]
    for trial in trials:
        assert {
            "learning_rate",
            "ent_coef",
            "n_steps",
            "minibatches",
            "clip_range",
            "net_width",
        } <= set(trial["params"])
        assert {"mean_reward", "std_reward", "success_rate"} <= set(trial)
    best = max(trials, key=lambda t: t["mean_reward"])
    champion = committed_champions(work)["lander"]
    assert champion.run == best["run"] and champion.bot == f"bots/{best['run']}.json"
    assert champion.mean_reward == pytest.approx(best["mean_reward"])
    assert (work / "logs" / "sw" / "sweep.db").is_file()
    assert RunRecord.load(work / "checkpoints" / "sw-t0002" / "run.json").extra.sweep == {
        "name": "sw",
        "trial": 2,
    }
    pushed = git(remote, "ls-tree", "-r", "--name-only", "main")
    assert "logs/sw/trials.jsonl" in pushed and "bots/sw-t0002.json" in pushed


def test_next_names_the_next_run_and_resumes_with_the_same_settings(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    port = str(port_block(2))
    assert (
        lander(
            tmp_path, "train", "run03", "--no-git", "--timesteps", "1024", "--port", port, *SMALL
        ).returncode
        == 0
    )
    result = lander(tmp_path, "next", "--no-git", "--timesteps", "1024", "--ent-coef", "0.02")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "next run: run04, resumed from run03" in result.stdout
    record = RunRecord.load(tmp_path / "checkpoints" / "run04" / "run.json")
    assert record.parent == "run03"
    assert record.total_timesteps == 2048
    assert record.config.n_parallel == 2 and record.config.port == int(port)  # carried from run03
    assert record.config.ent_coef == 0.02  # changed by a flag


def test_curriculum_resumes_stage_two_from_stage_one(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    port = port_block(2)
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        f"""
name: course
stages:
  - run: course-easy
    timesteps: 1024
    n_parallel: 2
    agents_per_instance: 2
    n_steps: 256
    port: {port}
    game_args: {{difficulty: 0}}
    ent_coef: 0.01
  - run: course-hard
    timesteps: 1024
    game_args: {{difficulty: 2}}
    reset_std: 0.5
"""
    )
    result = lander(tmp_path, "curriculum", str(plan), "--no-git")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "stage 1/2 (course-easy)" in result.stdout and "stage 2/2 (course-hard)" in result.stdout
    easy = RunRecord.load(tmp_path / "checkpoints" / "course-easy" / "run.json")
    hard = RunRecord.load(tmp_path / "checkpoints" / "course-hard" / "run.json")
    assert hard.parent == "course-easy"
    assert hard.total_timesteps == easy.total_timesteps + 1024
    assert hard.config.game_args == {"difficulty": "2"} and hard.config.n_parallel == 2
    assert hard.sessions[-1]["reset_std"] == 0.5
    status = lander(tmp_path, "status").stdout
    assert "stage 2/2 of course" in next(
        line for line in status.splitlines() if "course-hard" in line
    )


def test_curriculum_stops_at_a_failed_stage(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        f"""
stages:
  - run: ok-stage
    timesteps: 512
    n_parallel: 1
    n_steps: 256
    port: {port_block(1)}
  - run: bad-stage
    timesteps: 512
    game_bin: /no/such/game
  - run: never
    timesteps: 512
"""
    )
    result = lander(tmp_path, "curriculum", str(plan), "--no-git")
    assert result.returncode != 0
    assert "does not exist" in result.stderr
    assert (tmp_path / "checkpoints" / "ok-stage" / "final.zip").is_file()
    assert not (tmp_path / "checkpoints" / "never").exists()


def test_the_default_search_space_is_the_written_one_and_cuts_whole_minibatches() -> None:
    """``examples/plans/sweep-space.yaml`` is the default space written out, and every
    rollout the default space can draw, on any number of envs, is cut into whole
    minibatches (a drawn batch size of 1,024 would not divide 12 envs x 128 steps)."""
    written = load_space(REPO_ROOT / "examples" / "plans" / "sweep-space.yaml")
    assert written == DEFAULT_SPACE
    for n_steps in DEFAULT_SPACE["n_steps"]["choices"]:
        for minibatches in DEFAULT_SPACE["minibatches"]["choices"]:
            config = TrainConfig(n_steps=n_steps, minibatches=minibatches)
            for num_envs in (1, 3, 12, 32, 56):
                assert (n_steps * num_envs) % config.minibatch_size(num_envs) == 0
