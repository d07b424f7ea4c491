"""Operations with the real parts: a private tmux server, a git checkout with a
bare remote in a temporary folder, a second clone, TensorBoard on loopback."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import urllib.request
from pathlib import Path

import libtmux

from cli.machine.tmux_sessions import session_name, window_alive
from cli.serving.dashboard import choose_page_port
from tests.conftest import (
    GIT_IDENTITY,
    LANDER,
    SMALL,
    find_free_port_block,
    git,
    lander,
    trainer_pids,
    wait_until,
)


def trainer_processes(run: str) -> int:
    """How many `lander train RUN` trainers exist on this machine."""
    return len(trainer_pids(run))


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


def test_start_stop_push_and_a_second_clone_gets_every_result(
    checkout: tuple[Path, Path], tmux_socket: str, tmp_path: Path
) -> None:
    work, remote = checkout
    tb_port = find_free_port_block(1)
    game_port = str(find_free_port_block(2))
    web_port = find_free_port_block(1)
    started = lander(
        work, "start", "r1", "--timesteps", "10000000", "--port", game_port, *SMALL,
        "--checkpoint-every", "5000000", "--publish-every", "1024", "--tb-host", "127.0.0.1",
        "--tb-port", str(tb_port), "--web-port", str(web_port), socket=tmux_socket,
    )  # fmt: skip
    assert started.returncode == 0, started.stdout + started.stderr
    assert f"http://127.0.0.1:{tb_port}/" in started.stdout and "lander attach r1" in started.stdout
    page = started.stdout.split("live page: ")[1].split()[0]
    assert page == f"http://127.0.0.1:{web_port}/", started.stdout
    tmux = libtmux.Server(socket_name=tmux_socket)
    session = tmux.sessions.get(session_name=session_name(work, "r1"))
    assert [w.window_name for w in session.windows] == ["train", "page"]
    assert int(session.windows[0].window_width or 0) >= 200, "the progress line fits"
    dashboard = tmux.sessions.get(session_name=f"lander-dashboard-{tb_port}")
    assert [w.window_name for w in dashboard.windows] == ["dashboard"]
    wait_until(lambda: http_ok(f"http://127.0.0.1:{tb_port}/"), 90, "TensorBoard to answer")
    log = work / "logs" / "r1" / "train.log"
    wait_until(lambda: log.exists() and "steps=" in log.read_text(), 90, "the first rollout")
    # Long before its first checkpoint, status shows the steps the run trained so far.
    live_rows: list[list[str]] = []

    def live_steps_shown() -> bool:
        status = lander(work, "status", socket=tmux_socket)
        row = next(line for line in status.stdout.splitlines() if " r1 " in line)
        cells = [cell.strip() for cell in row.split("│")]
        live_rows.append(cells)
        return "running" in cells[2] and "ETA" in cells[2] and int(cells[3].replace(",", "")) > 0

    wait_until(live_steps_shown, 60, "status to show r1's live steps")
    assert not list((work / "checkpoints" / "r1").glob("ckpt_*.zip")), live_rows[-1]
    # The live page serves the bot the run publishes as it trains, and the next one.
    assert http_ok(page) and http_ok(page + "page.js")
    published: list[int] = []

    def bot_published() -> bool:
        try:
            with urllib.request.urlopen(page + "bot", timeout=5) as response:
                spec = json.loads(response.read())
        except (OSError, ValueError):
            return False
        if spec["run"] == "r1" and spec["timesteps"] not in published:
            published.append(spec["timesteps"])
        return len(published) >= 2

    wait_until(bot_published, 120, "two bots published while r1 trains")

    again = lander(work, "start", "r1", socket=tmux_socket)
    assert again.returncode == 0 and "is running" in again.stdout
    other = lander(work, "start", "r2", "--port", str(find_free_port_block(2)), socket=tmux_socket)
    assert other.returncode != 0 and "'r1' is training" in other.stderr
    assert trainer_processes("r1") == 1

    stopped = lander(work, "stop", "r1", "--timeout", "120", socket=tmux_socket)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert "final checkpoint checkpoints/r1/final.zip" in stopped.stdout
    assert "pushed to origin/main" in stopped.stdout
    assert trainer_processes("r1") == 0
    assert tmux.sessions.get(session_name=session_name(work, "r1"), default=None) is None, (
        "an ended run's session goes"
    )
    wait_until(lambda: not http_ok(page), 10, "the live page to end with the run's session")
    assert http_ok(f"http://127.0.0.1:{tb_port}/"), "the dashboard outlives the run's session"
    cleaned = lander(work, "clean", socket=tmux_socket)
    assert "serves no running run" in cleaned.stdout and "dashboard --stop" in cleaned.stdout
    dashboard_stopped = lander(work, "dashboard", "--stop", socket=tmux_socket)
    assert dashboard_stopped.returncode == 0, dashboard_stopped.stdout + dashboard_stopped.stderr
    wait_until(lambda: not http_ok(f"http://127.0.0.1:{tb_port}/"), 20, "TensorBoard to stop")
    none_left = lander(work, "dashboard", "--stop", socket=tmux_socket)
    assert none_left.returncode == 1 and "no dashboard" in none_left.stderr
    again_stopped = lander(work, "stop", "r1", socket=tmux_socket)
    assert (
        again_stopped.returncode == 1 and "is not running: it interrupted" in again_stopped.stderr
    )

    second = tmp_path / "laptop"
    git(tmp_path, "clone", "-q", str(remote), str(second))
    assert (second / "bots" / "r1.json").is_file()
    assert (second / "checkpoints" / "r1" / "final.zip").is_file()
    assert list((second / "logs" / "r1").glob("events.out.tfevents.*"))
    assert not (second / "logs" / "r1" / "games").exists(), "game consoles stay local"
    status = lander(second, "status", socket=tmux_socket)
    assert status.returncode == 0
    row = next(line for line in status.stdout.splitlines() if " r1 " in line)
    assert "interrupted" in row and "pushed" in row


def test_failed_push_keeps_the_commit_and_lander_push_sends_it_later(
    checkout: tuple[Path, Path],
) -> None:
    work, remote = checkout
    git(work, "remote", "set-url", "origin", str(work.parent / "unreachable.git"))
    trained = lander(
        work,
        "train",
        "offline",
        "--timesteps",
        "2048",
        "--port",
        str(find_free_port_block(2)),
        *SMALL,
    )
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert "push failed" in trained.stdout and "stays local" in trained.stdout
    assert "offline: 2,048 steps" in git(work, "log", "-1", "--format=%s")
    row = next(line for line in lander(work, "status").stdout.splitlines() if " offline " in line)
    assert "not pushed" in row
    failed_again = lander(work, "push")
    assert failed_again.returncode != 0 and "push failed" in failed_again.stderr
    git(work, "remote", "set-url", "origin", str(remote))
    pushed = lander(work, "push")
    assert pushed.returncode == 0, pushed.stderr
    assert git(work, "rev-parse", "HEAD") == git(remote, "rev-parse", "main")
    row = next(line for line in lander(work, "status").stdout.splitlines() if " offline " in line)
    assert "pushed" in row and "not pushed" not in row


def test_user_changes_stay_untouched_and_unstaged(checkout: tuple[Path, Path]) -> None:
    work, _ = checkout
    (work / "notes.txt").write_text("edited, not staged\n")
    (work / "draft.txt").write_text("staged by the user\n")
    git(work, "add", "draft.txt")
    trained = lander(
        work, "train", "tidy", "--timesteps", "2048", "--port", str(find_free_port_block(2)), *SMALL
    )
    assert trained.returncode == 0, trained.stdout + trained.stderr
    committed = git(work, "show", "--name-only", "--format=", "HEAD").split()
    assert committed and all(
        name.startswith(("checkpoints/tidy/", "logs/tidy/", "bots/tidy.")) for name in committed
    )
    assert (work / "notes.txt").read_text() == "edited, not staged\n"
    status = git(work, "status", "--porcelain")
    assert " M notes.txt" in status and "A  draft.txt" in status


def test_pull_conflict_stops_before_training_and_loses_nothing(
    checkout: tuple[Path, Path], tmp_path: Path
) -> None:
    work, remote = checkout
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(remote), str(other))
    (other / "notes.txt").write_text("changed on another machine\n")
    git(other, "commit", "-q", "-am", "other machine")
    git(other, "push", "-q")
    (work / "notes.txt").write_text("changed here\n")
    git(work, "commit", "-q", "-am", "this machine")
    head = git(work, "rev-parse", "HEAD")
    result = lander(
        work,
        "train",
        "blocked",
        "--timesteps",
        "2048",
        "--port",
        str(find_free_port_block(2)),
        *SMALL,
    )
    assert result.returncode != 0 and "conflict" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (work / "checkpoints" / "blocked").exists()
    assert git(work, "rev-parse", "HEAD") == head
    assert (work / "notes.txt").read_text() == "changed here\n"
    assert not (work / ".git" / "rebase-merge").exists()


def test_resume_in_tmux_branches_into_a_new_run(
    checkout: tuple[Path, Path], tmux_socket: str
) -> None:
    work, _ = checkout
    port = str(find_free_port_block(2))
    assert (
        lander(
            work, "train", "base", "--timesteps", "2048", "--port", port, *SMALL, "--no-git"
        ).returncode
        == 0
    )
    tb_port = str(find_free_port_block(1))
    resumed = lander(
        work, "resume", "--as", "branch", "--timesteps", "2048", "--ent-coef", "0.01",
        "--tb-host", "127.0.0.1", "--tb-port", tb_port, "--no-git", socket=tmux_socket,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    record = work / "checkpoints" / "branch" / "run.json"

    def finished() -> bool:
        return record.exists() and '"status": "finished"' in record.read_text()

    wait_until(finished, 120, "the resumed run to finish")
    text = record.read_text()
    assert '"parent": "base"' in text and '"ent_coef": 0.01' in text


def test_start_refuses_bad_names_and_flags_before_tmux(
    checkout: tuple[Path, Path], tmux_socket: str
) -> None:
    work, _ = checkout
    for args, message in (
        (["start", "../x"], "invalid run name"),
        (["start", "ok", "--bogus"], "No such option"),
    ):
        result = lander(work, *args, socket=tmux_socket)
        assert result.returncode != 0 and message in result.stderr
    assert (
        not libtmux.Server(socket_name=tmux_socket).is_alive()
        or not libtmux.Server(socket_name=tmux_socket).sessions
    )


def test_push_every_commits_and_pushes_mid_run(checkout: tuple[Path, Path]) -> None:
    """The remote has the run's checkpoints while the run still trains."""
    work, remote = checkout
    env = {**os.environ, **GIT_IDENTITY, "LANDER_HOME": str(work)}
    trainer = subprocess.Popen(
        [str(LANDER), "train", "often", "--timesteps", "10000000", "--checkpoint-every", "1024",
         "--push-every", "2", "--n-parallel", "2", "--agents-per-instance", "2", "--n-steps", "256",
         "--port", str(find_free_port_block(2))],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip

    def pushed_mid_run() -> list[str]:
        subjects = git(remote, "log", "--format=%s", "main").splitlines()
        return [s for s in subjects if s.startswith("often:") and "(checkpoint ckpt_" in s]

    try:
        wait_until(lambda: len(pushed_mid_run()) >= 2, 180, "two pushes during the run")
        assert trainer.poll() is None, "the run was still training when the remote had them"
    finally:
        trainer.send_signal(signal.SIGINT)
        output, _ = trainer.communicate(timeout=180)
    assert trainer.returncode == 0, output
    assert "(interrupted)" in git(remote, "log", "-1", "--format=%s", "main")


def test_start_runs_a_curriculum_in_tmux(checkout: tuple[Path, Path], tmux_socket: str) -> None:
    work, _ = checkout
    plan = work.parent / "plan.yaml"
    port = find_free_port_block(2)
    plan.write_text(
        f"name: tour\nstages:\n"
        f"  - {{run: tour-a, timesteps: 512, n_parallel: 2, agents_per_instance: 2, n_steps: 128, port: {port}}}\n"
        f"  - {{run: tour-b, timesteps: 512}}\n"
    )
    started = lander(
        work, "start", "tour", "--curriculum", str(plan), "--no-git",
        "--tb-host", "127.0.0.1", "--tb-port", str(find_free_port_block(1)), socket=tmux_socket,
    )  # fmt: skip
    assert started.returncode == 0, started.stdout + started.stderr
    record = work / "checkpoints" / "tour-b" / "run.json"
    wait_until(
        lambda: record.exists() and '"status": "finished"' in record.read_text(),
        120,
        "stage 2 to finish",
    )
    assert '"parent": "tour-a"' in record.read_text()
    tmux = libtmux.Server(socket_name=tmux_socket)
    session = tmux.sessions.get(session_name=session_name(work, "tour"))
    wait_until(lambda: not window_alive(session, "train"), 60, "the curriculum's window to end")
    cleaned = lander(work, "clean", socket=tmux_socket)
    assert cleaned.returncode == 0 and session_name(work, "tour") in cleaned.stdout
    names = {s.session_name for s in tmux.sessions}
    assert session_name(work, "tour") not in names and any(
        n.startswith("lander-dashboard-") for n in names
    )


def test_the_live_pages_port_is_remembered_and_a_taken_one_moves_on(tmp_path: Path) -> None:
    wanted = find_free_port_block(3)
    assert choose_page_port(tmp_path, "127.0.0.1", wanted, avoid=1) == (wanted, "")
    # The next run without --web-port gets the same port; while something holds it, the
    # next free one, saying why, and the remembered port stays.
    assert choose_page_port(tmp_path, "127.0.0.1", None, avoid=1) == (wanted, "")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", wanted))
        holder.listen()
        port, note = choose_page_port(tmp_path, "127.0.0.1", None, avoid=1)
        assert port > wanted and note == f"port {wanted} is taken"
    assert choose_page_port(tmp_path, "127.0.0.1", None, avoid=wanted) == (
        wanted + 1,
        f"port {wanted} is the dashboard's",
    )
    assert choose_page_port(tmp_path, "127.0.0.1", None, avoid=1) == (wanted, "")
