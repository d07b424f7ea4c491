"""Training end to end: real game processes, real checkpoints, real TensorBoard files."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from rich.console import Console
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback

from tests.conftest import (
    LANDER,
    game_executable,
    lander,
    python_game,
    tensorboard_steps,
    wait_until,
)
from training.config import ConfigError
from training.evaluation.scoring import evaluate_in_process, model_policy
from training.ppo.inference import load_for_inference
from training.ppo.policy_tweaks import PolicyTweakError, reset_action_std
from training.runs.checkpoints import CheckpointError, rotating_checkpoints
from training.runs.live_progress import read_live_progress
from training.runs.run_record import RunRecord
from training.session.callbacks import ProgressReport
from training.session.trainer import RunExists, TrainRequest, train

QUIET = Console(file=open(os.devnull, "w"))  # noqa: SIM115 (lives for the whole module)


def small_run(port: int, **extra: Any) -> dict[str, Any]:
    """2 instances x 2 agents, one 4096-step rollout per 4096 steps."""
    return {
        "n_parallel": 2,
        "agents_per_instance": 2,
        "n_steps": 1024,
        "batch_size": 1024,
        "n_epochs": 2,
        "timesteps": 4096,
        "checkpoint_every": 2048,
        "port": port,
        **extra,
    }


def test_short_run_leaves_checkpoints_final_run_json_and_tensorboard_events(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    outcome = train(
        TrainRequest(tmp_path, "short", small_run(port_block(2), timesteps=8192, eval_every=4096)),
        QUIET,
    )
    assert outcome.status == "finished" and outcome.exit_code == 0
    folder = tmp_path / "checkpoints" / "short"
    assert (folder / "final.zip").is_file()
    assert len(rotating_checkpoints(folder)) == 3, "the newest 3 of 4 checkpoints are kept"
    record = json.loads((folder / "run.json").read_text())
    assert record["status"] == "finished"
    assert record["total_timesteps"] == 8192
    assert record["config"]["n_parallel"] == 2
    assert record["extra"]["best_evaluation"]["timesteps"] in (4096, 8192)
    logs = tmp_path / "logs" / "short"
    for tag in (
        "rollout/ep_rew_mean",
        "rollout/success_rate",
        "time/fps",
        "train/std",
        "train/entropy_loss",
        "eval/mean_reward",
        "eval/normalized_score",
    ):
        assert tensorboard_steps(logs, tag), f"missing TensorBoard scalar {tag}"
    assert "steps=8192" in (logs / "train.log").read_text()
    assert PPO.load(folder / "final.zip").num_timesteps == 8192


def test_resume_continues_timestep_counter_in_the_same_tensorboard_folder(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    port = port_block(2)
    train(TrainRequest(tmp_path, "cont", small_run(port)), QUIET)
    assert PPO.load(tmp_path / "checkpoints" / "cont" / "final.zip").num_timesteps == 4096
    outcome = train(TrainRequest(tmp_path, "cont", {"timesteps": 4096}, resume="cont"), QUIET)
    assert outcome.record.total_timesteps == 8192
    assert PPO.load(tmp_path / "checkpoints" / "cont" / "final.zip").num_timesteps == 8192
    logs = tmp_path / "logs" / "cont"
    assert [p.name for p in logs.iterdir() if p.is_dir()] == ["games"], (
        "no second TensorBoard folder"
    )
    steps = [step for step, _ in tensorboard_steps(logs, "time/fps")]
    assert steps == [4096, 8192]
    # Settings came back from run.json: the resume gave only --timesteps.
    assert outcome.record.config.n_parallel == 2 and outcome.record.config.port == port
    assert len(outcome.record.sessions) == 2


def test_branch_records_its_parent_and_continues_the_step_axis(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    train(TrainRequest(tmp_path, "base", small_run(port_block(2))), QUIET)
    outcome = train(TrainRequest(tmp_path, "branch", {"timesteps": 4096}, resume="base"), QUIET)
    assert outcome.record.parent == "base"
    assert [s for s, _ in tensorboard_steps(tmp_path / "logs" / "branch", "time/fps")] == [8192]


def test_reset_std_sets_the_std_and_ent_coef_takes_effect_on_resume(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    train(TrainRequest(tmp_path, "explore", small_run(port_block(2))), QUIET)
    train(
        TrainRequest(
            tmp_path,
            "explore2",
            {"timesteps": 4096, "ent_coef": 0.05},
            resume="explore",
            reset_std=0.3,
        ),
        QUIET,
    )
    model = PPO.load(tmp_path / "checkpoints" / "explore2" / "final.zip")
    assert model.ent_coef == pytest.approx(0.05)
    # One short update moves the std only a little away from the reset value.
    stds = tensorboard_steps(tmp_path / "logs" / "explore2", "train/std")
    assert stds and abs(stds[0][1] - 0.3) < 0.03
    assert torch.exp(model.policy.log_std).mean().item() == pytest.approx(0.3, abs=0.03)


def test_reset_std_is_in_place_so_the_optimizer_keeps_the_parameter(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    train(TrainRequest(tmp_path, "inplace", small_run(port_block(2))), QUIET)
    model = PPO.load(tmp_path / "checkpoints" / "inplace" / "final.zip")
    before = model.policy.log_std
    reset_action_std(model, 0.25)
    assert model.policy.log_std is before
    optimized = {id(p) for group in model.policy.optimizer.param_groups for p in group["params"]}
    assert id(model.policy.log_std) in optimized
    assert torch.allclose(
        torch.exp(model.policy.log_std), torch.full_like(model.policy.log_std, 0.25)
    )


def test_reset_std_on_a_discrete_policy_is_a_clear_error(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    port = port_block(2)
    train(
        TrainRequest(tmp_path, "disc", small_run(port, game_args={"action_type": "discrete"})),
        QUIET,
    )
    with pytest.raises(PolicyTweakError, match="discrete"):
        train(TrainRequest(tmp_path, "disc2", {}, resume="disc", reset_std=0.5), QUIET)
    assert not (tmp_path / "checkpoints" / "disc2" / "run.json").exists()


def test_crash_leftovers_are_removed_and_a_corrupt_checkpoint_is_skipped(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    train(TrainRequest(tmp_path, "crashy", small_run(port_block(2))), QUIET)
    folder = tmp_path / "checkpoints" / "crashy"
    leftover = folder / ".ckpt_000000009999.zip.tmp"
    leftover.write_bytes(b"half a checkpoint")
    (folder / "final.zip").write_bytes(b"this is not a zip file")
    newest = rotating_checkpoints(folder)[-1]
    outcome = train(TrainRequest(tmp_path, "crashy", {"timesteps": 2048}, resume="crashy"), QUIET)
    assert not leftover.exists()
    assert outcome.record.resumed_from == str(newest)
    assert outcome.record.total_timesteps == 4096 + 4096, (
        "resumed from the 4096-step checkpoint, one rollout more"
    )


def test_existing_run_without_resume_is_refused_and_untouched(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    port = port_block(2)
    train(TrainRequest(tmp_path, "taken", small_run(port)), QUIET)
    before = (tmp_path / "checkpoints" / "taken" / "run.json").read_text()
    with pytest.raises(RunExists, match="--resume taken"):
        train(TrainRequest(tmp_path, "taken", small_run(port)), QUIET)
    assert (tmp_path / "checkpoints" / "taken" / "run.json").read_text() == before
    forced = train(TrainRequest(tmp_path, "taken", small_run(port), force=True), QUIET)
    assert forced.record.total_timesteps == 4096 and len(forced.record.sessions) == 1


def test_bad_settings_and_sources_fail_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="timesteps must be at least 1"):
        train(TrainRequest(tmp_path, "bad", {"timesteps": 0}), QUIET)
    with pytest.raises(CheckpointError, match="does not exist"):
        train(TrainRequest(tmp_path, "bad", {}, resume=str(tmp_path / "missing.zip")), QUIET)
    config = tmp_path / "settings.toml"
    config.write_text("n_parallel = 2\nwarp_factor = 9\n")
    with pytest.raises(ConfigError, match="unknown setting"):
        train(TrainRequest(tmp_path, "bad", {}, config_file=config), QUIET)
    assert not (tmp_path / "checkpoints" / "bad").exists()


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--learning-rate", "nan"),
        ("--ent-coef", "inf"),
        ("--speedup", "-inf"),
        ("--read-timeout", "nan"),
    ],
)
def test_non_finite_settings_are_refused_in_one_line(tmp_path: Path, flag: str, value: str) -> None:
    result = subprocess.run(
        [str(LANDER), "train", "finite", flag, value, "--no-git"],
        env={**os.environ, "LANDER_HOME": str(tmp_path)},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert f"{flag[2:]} must be a finite number" in output, output
    assert "Traceback" not in output
    assert not (tmp_path / "checkpoints" / "finite").exists()


def test_config_file_then_flags(tmp_path: Path, port_block: Callable[[int], int]) -> None:
    config = tmp_path / "settings.toml"
    config.write_text(
        'n-parallel = 1\nagents_per_instance = 4\nent_coef = 0.01\n[game_args]\ndifficulty = "0"\n'
    )
    outcome = train(
        TrainRequest(
            tmp_path,
            "layered",
            small_run(port_block(2), n_parallel=2) | {"ent_coef": 0.02},
            config_file=config,
        ),
        QUIET,
    )
    settings = outcome.record.config
    assert (settings.n_parallel, settings.agents_per_instance, settings.ent_coef) == (2, 2, 0.02)
    assert settings.game_args == {"difficulty": "0"}


def test_godot_style_game_with_mixed_actions_trains_through_game_bin(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    game = game_executable(tmp_path / "godot_game.x86_64", python_game("godot_style_game.py"))
    outcome = train(
        TrainRequest(tmp_path, "godot", small_run(port_block(2), game_bin=str(game))), QUIET
    )
    assert outcome.status == "finished"
    model = PPO.load(tmp_path / "checkpoints" / "godot" / "final.zip")
    assert model.action_space.shape == (4,)


def test_in_process_training_uses_the_same_num_envs(tmp_path: Path) -> None:
    outcome = train(TrainRequest(tmp_path, "inproc", small_run(1, in_process=True)), QUIET)
    assert outcome.status == "finished"
    assert PPO.load(tmp_path / "checkpoints" / "inproc" / "final.zip").n_envs == 4


def test_a_game_that_dies_ends_the_run_cleanly_with_final_saved(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    game = game_executable(
        tmp_path / "dying_game.x86_64", python_game("faulty_game.py", "--fault=die", "--after=1500")
    )
    outcome = train(
        TrainRequest(
            tmp_path, "dies", small_run(port_block(2), game_bin=str(game), timesteps=20000)
        ),
        QUIET,
    )
    assert outcome.status == "failed" and outcome.exit_code == 1
    assert "game instance" in (outcome.error or "") and "exit code 3" in (outcome.error or "")
    assert PPO.load(tmp_path / "checkpoints" / "dies" / "final.zip").num_timesteps > 0
    assert RunRecord.load(tmp_path / "checkpoints" / "dies" / "run.json").status == "failed"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train", "../x", "--no-git"], "invalid run name"),
        (["train", "a b", "--no-git"], "invalid run name"),
        (["train", "", "--no-git"], "invalid run name"),
        (["train", "r" * 200, "--no-git"], "invalid run name"),
        (["train", "ok", "--timesteps", "-5", "--no-git"], "timesteps must be at least 1"),
        (["train", "ok", "--n-parallel", "0", "--no-git"], "n-parallel must be at least 1"),
        (["train", "ok", "--game-bin", "/no/such/game", "--no-git"], "does not exist"),
        (
            ["train", "ok", "--resume", "nothing-here", "--no-git"],
            "run 'nothing-here' does not exist",
        ),
    ],
)
def test_cli_user_mistakes_give_one_red_line_and_write_nothing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = lander(tmp_path, *args)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert len(result.stderr.strip().splitlines()) <= 2
    assert not (tmp_path / "checkpoints").exists() or not any((tmp_path / "checkpoints").iterdir())


def test_sigint_mid_run_saves_a_loadable_final_and_exits_zero(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    env = {**os.environ, "LANDER_HOME": str(tmp_path)}
    process = subprocess.Popen(
        [str(LANDER), "train", "sig", "--no-git", "--timesteps", "10000000", "--n-parallel", "2",
         "--agents-per-instance", "2", "--n-steps", "256", "--port", str(port_block(2))],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    log = tmp_path / "logs" / "sig" / "train.log"
    try:
        wait_until(lambda: log.exists() and "steps=" in log.read_text(), 90, "the first rollout")
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, output
    record = RunRecord.load(tmp_path / "checkpoints" / "sig" / "run.json")
    assert record.status == "interrupted"
    model = PPO.load(tmp_path / "checkpoints" / "sig" / "final.zip")
    assert model.num_timesteps == record.total_timesteps > 0


def test_normalization_statistics_are_saved_beside_checkpoints_and_restored(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    import pickle

    port = port_block(2)
    train(TrainRequest(tmp_path, "norm", small_run(port, normalize_observations=True)), QUIET)
    folder = tmp_path / "checkpoints" / "norm"
    assert (folder / "final.vecnormalize.pkl").is_file()
    assert all(
        p.with_name(p.stem + ".vecnormalize.pkl").is_file() for p in rotating_checkpoints(folder)
    )
    with (folder / "final.vecnormalize.pkl").open("rb") as handle:
        first = pickle.load(handle).obs_rms.count
    train(TrainRequest(tmp_path, "norm", {"timesteps": 4096}, resume="norm"), QUIET)
    with (folder / "final.vecnormalize.pkl").open("rb") as handle:
        second = pickle.load(handle).obs_rms.count
    assert second > first + 4000, "the resumed run kept counting from the saved statistics"


def test_a_stale_final_loses_to_a_newer_checkpoint(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    import shutil

    from training.runs.checkpoints import find_resume_point

    port = port_block(2)
    train(TrainRequest(tmp_path, "stale", small_run(port)), QUIET)
    folder = tmp_path / "checkpoints" / "stale"
    shutil.copy(folder / "final.zip", tmp_path / "old-final.zip")
    train(TrainRequest(tmp_path, "stale", {"timesteps": 4096}, resume="stale"), QUIET)
    # A later session killed before its end leaves the earlier session's final.zip behind.
    shutil.copy(tmp_path / "old-final.zip", folder / "final.zip")
    chosen = find_resume_point(tmp_path, "stale").model
    assert chosen.name == "ckpt_000000008192.zip"


class _WireSeen(BaseCallback):
    """Records whether the environment PPO trains on steps in binary."""

    def __init__(self) -> None:
        super().__init__()
        self.binary: bool | None = None

    def _on_training_start(self) -> None:
        from training.envs.environments import game_env_of

        game = game_env_of(self.training_env)
        self.binary = None if game is None else game.binary

    def _on_step(self) -> bool:
        return True


def test_fast_wire_training_uses_binary_steps(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    """The bundled game speaks the binary steps by default; --no-fast-wire keeps JSON."""
    seen = _WireSeen()
    request = TrainRequest(tmp_path, "fast", small_run(port_block(2)))
    outcome = train(request, QUIET, extra_callbacks=[seen])
    assert outcome.status == "finished" and seen.binary is True
    plain = _WireSeen()
    json_run = small_run(port_block(2), fast_wire=False)
    train(TrainRequest(tmp_path, "plain", json_run), QUIET, extra_callbacks=[plain])
    assert plain.binary is False


class _ThreadsSeen(BaseCallback):
    """Records torch's thread count while collecting and once each rollout is collected."""

    def __init__(self) -> None:
        super().__init__()
        self.collecting: set[int] = set()
        self.updating: set[int] = set()

    def _on_step(self) -> bool:
        self.collecting.add(torch.get_num_threads())
        return True

    def _on_rollout_end(self) -> None:  # runs after UpdateThreads switched for the update
        self.updating.add(torch.get_num_threads())


def test_torch_takes_every_core_for_the_update_and_one_while_games_step(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    seen = _ThreadsSeen()
    outcome = train(
        TrainRequest(tmp_path, "threads", small_run(port_block(2), update_threads=3)),
        QUIET,
        extra_callbacks=[seen],
    )
    assert outcome.status == "finished"
    assert seen.collecting == {1} and seen.updating == {3}
    assert torch.get_num_threads() == 1, "training ends with the collection setting"


def test_defaults_learn_the_bundled_game_to_a_good_bot(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    """The learning floor of the defaults that benchmarks/time_to_skill.py chose: through
    real game processes, 200,000 steps reach a normalized score of 0.8 (0.9 is usually
    passed near 150,000)."""
    request = TrainRequest(tmp_path, "floor", {"timesteps": 200_000, "port": port_block(4)})
    outcome = train(request, QUIET)
    assert outcome.status == "finished"
    model, normalizer = load_for_inference(tmp_path / "checkpoints" / "floor" / "final.zip")
    result = evaluate_in_process(model_policy(model, normalizer), 100)
    assert result.normalized_score is not None and result.normalized_score >= 0.8, result.line()


def test_progress_lines_are_throttled_but_the_last_rollout_is_always_logged(
    tmp_path: Path, port_block: Callable[[int], int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a terminal (a log file, CI) a line comes every PLAIN_LINE_EVERY_S seconds
    (patched to an hour here) with the percent done and the time left; the run's live
    file holds the last numbers for ``lander status``."""
    assert QUIET.is_terminal is False
    monkeypatch.setattr(ProgressReport, "PLAIN_LINE_EVERY_S", 3600.0)
    outcome = train(
        TrainRequest(tmp_path, "quiet", small_run(port_block(2), timesteps=16384)), QUIET
    )
    assert outcome.status == "finished"
    log = (tmp_path / "logs" / "quiet" / "train.log").read_text()
    lines = [line for line in log.splitlines() if " steps=" in line]
    assert [line.split()[2] for line in lines] == ["steps=4096", "steps=16384"], (
        "the first rollout, then only the last"
    )
    assert " done=25.0% eta=" in lines[0] and " done=100.0% eta=0s" in lines[1], lines
    live = read_live_progress(tmp_path, "quiet")
    assert live is not None and (live.steps, live.target, live.percent) == (16384, 16384, 100.0)


def test_a_terminal_gets_progress_lines_more_often_than_a_log_file() -> None:
    plain = ProgressReport(Console(file=io.StringIO()), print, 1000)
    terminal = ProgressReport(Console(file=io.StringIO(), force_terminal=True), print, 1000)
    assert plain.line_every_s == ProgressReport.PLAIN_LINE_EVERY_S
    assert terminal.line_every_s == ProgressReport.LINE_EVERY_S < plain.line_every_s
