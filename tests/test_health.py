"""Runs that watch their own health and heal themselves: the health rules on made-up
rollouts, a run pushed into collapse, a trainer SIGKILLed in its tmux session that comes
back by itself, a stop that is final, a start-up that fails twice the same way (and
never loses an existing run), and --stop-at-score."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import libtmux
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from cli.machine.tmux_sessions import session_name, window_alive
from tests.conftest import find_free_port_block, lander, start_small, trainer_pids, wait_until
from training.config import TrainConfig
from training.session.health import HealthMonitor, RolloutStats


def feed(monitor: HealthMonitor, rollouts: list[RolloutStats]) -> list[list[str]]:
    found = [monitor.observe(stats) for stats in rollouts]
    for finding in (finding for findings in found for finding in findings):
        assert "RUN" not in finding.message, "advice names the run, not a placeholder"
        if finding.kind in ("slow", "restart_storm"):
            assert f"logs/{monitor.run}/games/" in finding.message
    return [[finding.kind for finding in findings] for findings in found]


def test_a_band_is_reported_after_its_rollouts_in_a_row_once_until_it_clears() -> None:
    monitor = HealthMonitor(TrainConfig(health_rollouts=3, ent_coef=0.0001), "h1")
    stds = [0.5, 0.05, 0.05, 0.05, 0.05, 0.5, 0.05, 0.05, 0.05]
    kinds = feed(monitor, [RolloutStats(1000 * i, std=s) for i, s in enumerate(stds, 1)])
    assert kinds == [[], [], [], ["std_collapsed"], [], [], [], [], ["std_collapsed"]]
    finding = HealthMonitor(TrainConfig(health_rollouts=1, ent_coef=0.0001), "h1").observe(
        RolloutStats(18_200_000, std=0.075)
    )[0]
    assert finding.message == (
        "std 0.075 at 18.2M steps: collapsed (healthy 0.1-2), no exploration left: "
        "resume with --reset-std 0.3 --ent-coef 0.001"
    )
    exploded = HealthMonitor(TrainConfig(health_rollouts=1, ent_coef=0.005), "h1").observe(
        RolloutStats(5_000_000, std=3.0)
    )[0]
    assert (
        exploded.kind == "std_exploded" and "--reset-std 0.5 --ent-coef 0.001" in exploded.message
    )


def test_entropy_updates_speed_flat_reward_and_restart_storms() -> None:
    config = TrainConfig(health_rollouts=2, health_flat_steps=10_000, health_restarts=3)
    monitor = HealthMonitor(config, "h1")
    rollouts = [
        RolloutStats(1000, entropy=0.5, reward=1.0, approx_kl=0.01, fps=5000),
        RolloutStats(2000, entropy=0.01, reward=5.0, approx_kl=0.3, fps=5000),
        RolloutStats(3000, entropy=0.01, reward=5.0, approx_kl=0.3, fps=5000),
        *[RolloutStats(4000 + 1000 * i, entropy=0.5, reward=5.02, fps=5000) for i in range(5)],
        RolloutStats(9000, entropy=0.5, reward=5.0, fps=1000),
        RolloutStats(10_000, entropy=0.5, reward=5.0, fps=1000),
        RolloutStats(12_500, entropy=0.5, reward=5.0, fps=5000, recent_restarts=3),
    ]
    kinds = feed(monitor, rollouts)
    assert kinds[2] == ["no_entropy", "large_updates"]
    assert kinds[-2] == ["slow"]
    assert kinds[-1] == ["flat_reward", "restart_storm"]
    assert sum(len(k) for k in kinds) == 5  # nothing else, nothing twice


def _record(work: Path, run: str) -> dict:
    path = work / "checkpoints" / run / "run.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _tensorboard_steps(work: Path, run: str) -> list[int]:
    events = EventAccumulator(str(work / "logs" / run))
    events.Reload()
    return [event.step for event in events.Scalars("time/fps")]


def test_a_sigkilled_trainer_comes_back_by_itself_and_its_counters_continue(
    checkout: tuple[Path, Path], tmux_socket: str
) -> None:
    work, _ = checkout
    start_small(work, "heal", tmux_socket, "--timesteps", "40000", "--checkpoint-every", "4096")
    checkpoints = work / "checkpoints" / "heal"
    wait_until(
        lambda: len(list(checkpoints.glob("ckpt_*.zip"))) >= 2 and len(trainer_pids("heal")) == 1,
        180,
        "two checkpoints of a running trainer",
    )
    killed_at = _record(work, "heal")["total_timesteps"]
    os.kill(trainer_pids("heal")[0], signal.SIGKILL)
    wait_until(lambda: _record(work, "heal").get("status") == "finished", 240, "the run to finish")
    record = _record(work, "heal")
    assert len(record["extra"]["auto_resumes"]) == 1
    assert "killed by signal 9" in record["extra"]["auto_resumes"][0]["reason"]
    assert record["total_timesteps"] >= 40_000  # the session's goal, not 40,000 more
    assert record["total_timesteps"] < 40_000 + 8192
    resumed = record["sessions"][-1]
    assert resumed["start_timesteps"] > 0 and resumed["resumed_from"].endswith(".zip")
    steps = _tensorboard_steps(work, "heal")
    assert max(steps) > killed_at and min(steps) < killed_at  # one curve, continued
    status = lander(work, "status", socket=tmux_socket)
    assert "auto-resumed 1x" in status.stdout


def test_lander_stop_ends_an_auto_resumable_run_for_good(
    checkout: tuple[Path, Path], tmux_socket: str
) -> None:
    work, _ = checkout
    start_small(work, "final", tmux_socket, "--timesteps", "10000000", "--checkpoint-every", "2048")
    checkpoints = work / "checkpoints" / "final"
    wait_until(lambda: any(checkpoints.glob("ckpt_*.zip")), 180, "the first checkpoint")
    stopped = lander(work, "stop", "final", socket=tmux_socket)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    # stop returned once the train window ended: its supervisor is gone with it, so
    # nothing can start the trainer again.
    sessions = libtmux.Server(socket_name=tmux_socket).sessions.filter(
        session_name=session_name(work, "final")
    )
    assert not sessions or not window_alive(sessions[0], "train")
    assert trainer_pids("final") == []
    record = _record(work, "final")
    assert record["status"] == "interrupted" and "auto_resumes" not in record["extra"]


def test_stop_at_score_ends_a_run_cleanly_when_reached(tmp_path: Path) -> None:
    result = lander(
        tmp_path, "train", "enough", "--timesteps", "600000", "--stop-at-score", "0.5",
        "--eval-every", "8192", "--no-git", "--port", str(find_free_port_block(4)), timeout=400,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    record = _record(tmp_path, "enough")
    assert record["status"] == "finished"
    stopped = record["extra"]["stopped_at_score"]
    assert stopped["score"] >= 0.5 and stopped["goal"] == 0.5
    assert record["total_timesteps"] < 200_000  # far short of the 600,000 asked for
    assert (tmp_path / "checkpoints" / "enough" / "final.zip").exists()
    assert (tmp_path / "bots" / "enough.json").exists()
    assert "reached --stop-at-score 0.5" in (tmp_path / "logs" / "enough" / "train.log").read_text()
    assert "reached --stop-at-score 0.5: ending the run" in output


def test_a_run_pushed_into_collapse_gets_the_finding_and_its_advice(tmp_path: Path) -> None:
    port = str(find_free_port_block(4))
    first = lander(tmp_path, "train", "calm", "--timesteps", "4096", "--no-git", "--port", port)
    assert first.returncode == 0, first.stdout + first.stderr
    pushed = lander(
        tmp_path, "train", "squeezed", "--resume", "calm", "--reset-std", "0.01",
        "--ent-coef", "0", "--health-rollouts", "2", "--timesteps", "8192", "--no-git",
        "--port", port,
    )  # fmt: skip
    output = pushed.stdout + pushed.stderr
    assert pushed.returncode == 0, output
    findings = _record(tmp_path, "squeezed")["extra"]["health"]
    # Collapsed first; a policy this narrow also makes huge updates, reported too.
    assert findings[0]["kind"] == "std_collapsed"
    assert {finding["kind"] for finding in findings} <= {"std_collapsed", "large_updates"}
    advice = "resume with --reset-std 0.3 --ent-coef 0.001"
    assert findings[0]["message"].startswith("std 0.01") and advice in findings[0]["message"]
    assert "health: std 0.01" in output
    assert advice in (tmp_path / "logs" / "squeezed" / "train.log").read_text()
    status = lander(tmp_path, "status")
    assert "std collapsed" in status.stdout and advice in status.stdout.replace("\n", " ")
    assert "calm" in status.stdout and _record(tmp_path, "calm")["extra"].get("health") is None
    events = EventAccumulator(str(tmp_path / "logs" / "squeezed"), size_guidance={"tensors": 0})
    events.Reload()
    texts = [e.tensor_proto.string_val[0].decode() for e in events.Tensors("health/text_summary")]
    assert any(advice in text for text in texts)


def test_auto_resume_never_replaces_a_run_it_did_not_start(tmp_path: Path) -> None:
    """A supervised ``train`` of a name that exists (a failed run, no --resume) fails as a
    plain one does, twice the same way at start-up, so it is not restarted again; and the
    old run's files stay: a restart adds --force only to a run its own first try created."""
    port = str(find_free_port_block(4))
    first = lander(tmp_path, "train", "old", "--timesteps", "2048", "--no-git", "--port", port)
    assert first.returncode == 0, first.stdout + first.stderr
    run_json = tmp_path / "checkpoints" / "old" / "run.json"
    record = json.loads(run_json.read_text())
    run_json.write_text(json.dumps({**record, "status": "failed", "error": "a game failed"}))
    again = lander(tmp_path, "train", "old", "--auto-resume", "--no-git", "--port", port)
    output = again.stdout + again.stderr
    assert again.returncode != 0 and "already exists" in output
    assert "failed the same way twice at start-up" in output
    assert output.count("ended abnormally") == 1  # one restart, then it gave up
    assert "Traceback" not in output
    assert (tmp_path / "checkpoints" / "old" / "final.zip").exists()
    assert json.loads(run_json.read_text())["total_timesteps"] == record["total_timesteps"]
