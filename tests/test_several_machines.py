"""Several machines, one repository: clones of one bare remote (a box, a laptop) that
train, evaluate, stop, resume, push and pull in any order, and never collide in git.

Commands run in this process (Typer's runner) to keep a long interleaving affordable;
git, the bare remote, tmux and TensorBoard are the real ones.
"""

from __future__ import annotations

import os
import random
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from cli.app import app
from cli.results.git_sync import push
from cli.results.records import committed_champions
from cli.runs.status_table import champion_lines, status_table
from cli.serving.dashboard import choose_dashboard, serves_logs_of, tensorboard_command
from tests.conftest import GIT_IDENTITY, REPO_ROOT, find_free_port_block, git, wait_until
from training.runs.run_record import RunRecord

TINY = """
timesteps = 256
n_parallel = 1
agents_per_instance = 4
in_process = true
n_steps = 32
batch_size = 64
n_epochs = 2
eval_episodes = 2
checkpoint_every = 128
"""
# Two seeded days in the suite (each 36 operations; 20-25 s apiece); more with
# LANDER_INTERLEAVE_SEEDS=1,2,3,4,... when the rules of several machines change.
SEEDS = [int(seed) for seed in os.environ.get("LANDER_INTERLEAVE_SEEDS", "1,2").split(",")]
OPERATIONS = 36


@dataclass
class Clone:
    """One machine's checkout, driven through the CLI."""

    name: str
    root: Path
    tmux_socket: str
    trained: list[str] = field(default_factory=list)  # runs this clone trained (owns)
    counter: int = 0

    def lander(self, *args: str) -> str:
        env = {
            **GIT_IDENTITY,
            "LANDER_HOME": str(self.root),
            "LANDER_TMUX_SOCKET": self.tmux_socket,
        }
        result = CliRunner().invoke(app, list(args), env=env)
        output = result.output
        assert result.exit_code == 0, f"{self.name}: lander {' '.join(args)}\n{output}"
        return output

    def fresh(self, suffix: str) -> str:
        """A run name no other clone makes (no trailing digit, so ``next`` cannot reach it)."""
        self.counter += 1
        return f"{self.name}{self.counter}{suffix}"

    def runs(self) -> list[str]:
        return sorted(p.parent.name for p in (self.root / "checkpoints").glob("*/run.json"))

    def bots(self) -> list[str]:
        return sorted(str(p.relative_to(self.root)) for p in (self.root / "bots").glob("*.json"))

    def clean(self) -> str:
        """``git status``: empty when lander left nothing for git to carry or to trip on."""
        return git(self.root, "status", "--porcelain")


def _table(root: Path) -> str:
    """``lander status`` as text, without its title (which names the folder) and without
    what only this clone holds (its own evaluations of the other's runs, marked local)."""
    console = Console(record=True, width=300, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(status_table(root, local=False))
    for line in champion_lines(root, local=False):
        console.print(line)
    lines = console.export_text().splitlines()
    return "\n".join(lines[1:])


def _clones(checkout: tuple[Path, Path], tmp_path: Path, socket: str) -> tuple[Clone, Clone]:
    work, remote = checkout
    laptop = tmp_path / "laptop"
    git(tmp_path, "clone", "-q", str(remote), str(laptop))
    for root in (work, laptop):
        (root / "tiny.toml").write_text(TINY)
        (root / ".git" / "info").mkdir(exist_ok=True)
        with (root / ".git" / "info" / "exclude").open("a") as handle:
            handle.write("/tiny.toml\n")
    return Clone("a", work, socket), Clone("b", laptop, socket)


def _operate(kind: str, me: Clone, rng: random.Random) -> None:
    cfg = str(me.root / "tiny.toml")
    own_finished = [
        run
        for run in me.trained
        if RunRecord.load(me.root / "checkpoints" / run / "run.json").status != "running"
    ]
    if kind == "train" or (kind in ("resume", "next", "eval_run") and not me.runs()):
        name = me.fresh("r")
        me.lander("train", name, "--config", cfg)
        me.trained.append(name)
    elif kind == "resume":
        if own_finished and rng.random() < 0.5:
            run = rng.choice(own_finished)
            me.lander("train", run, "--resume", run, "--config", cfg, "--timesteps", "128")
        else:
            source, name = rng.choice(me.runs()), me.fresh("b")
            me.lander("train", name, "--resume", source, "--config", cfg, "--ent-coef", "0.01")
            me.trained.append(name)
    elif kind == "next":
        before = set(me.runs())
        me.lander("next", "--from", rng.choice(me.runs()), "--timesteps", "256")
        me.trained.extend(sorted(set(me.runs()) - before))
    elif kind == "eval_run":
        me.lander("eval", rng.choice(me.runs()), "--episodes", "2")
    elif kind == "eval_bot":
        if me.bots():
            me.lander("eval", str(me.root / rng.choice(me.bots())), "--episodes", "2")
    elif kind == "sweep":
        name = me.fresh("s")
        me.lander(
            "sweep", name, "--trials", "1", "--timesteps-per-trial", "128", "--in-process",
            "--n-parallel", "1", "--agents-per-instance", "4", "--n-steps", "32",
            "--batch-size", "64",
        )  # fmt: skip
        me.trained.append(f"{name}-t0000")
    elif kind == "stop":
        name = me.fresh("t")
        tb_port = str(find_free_port_block(1))
        me.lander(
            "start", name, "--config", cfg, "--timesteps", "10000000",
            "--tb-host", "127.0.0.1", "--tb-port", tb_port,
        )  # fmt: skip
        me.trained.append(name)
        wait_until(
            lambda: bool(list((me.root / "checkpoints" / name).glob("ckpt_*.zip"))),
            120,
            f"{name}'s first checkpoint",
        )
        output = me.lander("stop", name, "--timeout", "120")
        assert "pushed to origin/main" in output, output
    elif kind == "push":
        me.lander("push")
    elif kind == "pull":
        pulled = subprocess.run(
            ["git", "pull"], cwd=me.root, capture_output=True, text=True, check=False
        )
        assert pulled.returncode == 0, f"{me.name}: git pull\n{pulled.stdout}{pulled.stderr}"
    elif kind == "status":
        me.lander("status")


KINDS = ["train", "resume", "next", "eval_run", "eval_bot", "sweep", "push", "pull", "status"]
WEIGHTS = [3, 2, 2, 3, 2, 1, 1, 4, 1]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_random_day_on_two_clones_never_conflicts(
    seed: int, checkout: tuple[Path, Path], tmp_path: Path, tmux_socket: str
) -> None:
    """Any order of train, stop, resume, eval, next, sweep, push and pull on two clones:
    every pull succeeds, nothing is left for git to trip on, and after one last pull
    each both clones hold every result and print the same status."""
    rng = random.Random(seed)
    box, laptop = _clones(checkout, tmp_path, tmux_socket)
    plan = [(rng.choice((box, laptop)), rng.choices(KINDS, WEIGHTS)[0]) for _ in range(OPERATIONS)]
    plan[OPERATIONS // 3] = (plan[OPERATIONS // 3][0], "stop")  # one run in tmux, stopped
    for step, (me, kind) in enumerate(plan):
        _operate(kind, me, rng)
        assert me.clean() == "", f"step {step} ({me.name} {kind}) left: {me.clean()}"
    for me in (box, laptop):
        _operate("pull", me, rng)
    assert box.runs() == laptop.runs()
    assert len(box.runs()) >= 3
    for run in box.runs():
        for me in (box, laptop):
            assert (me.root / "checkpoints" / run / "final.zip").is_file(), (me.name, run)
            assert (me.root / "bots" / f"{run}.json").is_file(), (me.name, run)
            assert (me.root / "checkpoints" / run / "evaluations.jsonl").is_file(), (me.name, run)
    assert _table(box.root) == _table(laptop.root)
    champions = committed_champions(box.root)
    assert set(champions) == {"lander"}
    assert git(box.root, "ls-files", champions["lander"].bot or "-").strip()


def test_a_no_git_run_stays_out_until_pushed_by_name(
    checkout: tuple[Path, Path], tmp_path: Path, tmux_socket: str
) -> None:
    box, _ = _clones(checkout, tmp_path, tmux_socket)
    cfg = str(box.root / "tiny.toml")
    box.lander("train", "quiet", "--config", cfg, "--no-git")
    assert box.clean() == "", "a --no-git run shows nowhere in git"
    status = box.lander("status")  # its evaluation shows, marked as this checkout's own
    row = next(line for line in status.splitlines() if " quiet " in line)
    assert "(local)" in row, status
    assert "best here on lander (local, not in git): quiet (bots/quiet.json)" in status, status
    head = git(box.root, "rev-parse", "HEAD")
    box.lander("train", "quiet", "--resume", "quiet", "--config", cfg)  # no flag: stays out
    assert box.clean() == "" and git(box.root, "rev-parse", "HEAD") == head
    box.lander("train", "loud", "--config", cfg)
    committed = git(box.root, "show", "--name-only", "--format=", "HEAD").split()
    assert committed and all(
        name.startswith(("checkpoints/loud/", "logs/loud/", "bots/loud.")) for name in committed
    )
    for champion in committed_champions(box.root).values():
        assert git(box.root, "ls-files", "--error-unmatch", champion.bot or "-")
    assert "quiet" in box.lander("push") and not git(box.root, "ls-files", "checkpoints/quiet")
    box.lander("push", "quiet")
    assert git(box.root, "ls-files", "bots/quiet.json").strip() == "bots/quiet.json"
    assert git(box.root, "rev-parse", "HEAD") == git(checkout[1], "rev-parse", "main")
    box.lander(
        "sweep", "qs", "--trials", "2", "--timesteps-per-trial", "128", "--no-git",
        "--in-process", "--n-parallel", "1", "--agents-per-instance", "4", "--n-steps", "32",
    )  # fmt: skip
    assert box.clean() == "", "a --no-git sweep's trials show nowhere in git"
    box.lander("push", "qs-t0001")
    assert git(box.root, "ls-files", "bots/qs-t0001.json").strip() == "bots/qs-t0001.json"
    assert box.clean() == "", "the sweep's other trial stays out"


def test_another_checkout_may_not_continue_a_run_in_place(
    checkout: tuple[Path, Path], tmp_path: Path, tmux_socket: str
) -> None:
    box, laptop = _clones(checkout, tmp_path, tmux_socket)
    box.lander("train", "mine", "--config", str(box.root / "tiny.toml"))
    git(laptop.root, "pull", "-q")
    env = {**GIT_IDENTITY, "LANDER_HOME": str(laptop.root)}
    refused = CliRunner().invoke(
        app,
        ["train", "mine", "--resume", "mine", "--config", str(laptop.root / "tiny.toml")],
        env=env,
    )
    assert refused.exit_code == 1 and "trained in another checkout" in refused.output
    laptop.lander("train", "mine-b", "--resume", "mine", "--config", str(laptop.root / "tiny.toml"))


def test_two_clones_pushing_at_once_both_land(checkout: tuple[Path, Path], tmp_path: Path) -> None:
    work, remote = checkout
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(remote), str(other))
    for root, name in ((work, "one"), (other, "two")):
        (root / "checkpoints" / name).mkdir(parents=True)
        (root / "checkpoints" / name / "run.json").write_text("{}\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", f"{name}: results")
    barrier = threading.Barrier(2)
    results = {}

    def push_now(root: Path) -> None:
        barrier.wait()
        results[root] = push(root)

    threads = [threading.Thread(target=push_now, args=(root,)) for root in (work, other)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    assert all(result.pushed for result in results.values()), results
    subjects = git(remote, "log", "--format=%s", "main").splitlines()
    assert {"one: results", "two: results"} <= set(subjects)


def test_a_dashboard_of_another_checkout_is_not_reused(tmp_path: Path) -> None:
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    for root in (mine, theirs):
        (root / "logs").mkdir(parents=True)
    port = find_free_port_block(2)
    server = subprocess.Popen(
        tensorboard_command(theirs, "127.0.0.1", port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: serves_logs_of(theirs, "127.0.0.1", port), 90, "TensorBoard")
        choice = choose_dashboard(mine, "127.0.0.1", port)
        assert choice.command is not None and choice.port != port
        assert f"port {port} serves something else" in choice.note
        remembered = choose_dashboard(mine, None, None)
        assert (remembered.host, remembered.port) == ("127.0.0.1", choice.port)
        reused = choose_dashboard(theirs, "127.0.0.1", port)
        assert reused.command is None and reused.port == port
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.timeout(1200)
def test_a_fresh_clone_looks_at_results_without_torch_then_trains(tmp_path: Path) -> None:
    """The laptop's light install: status, play and eval of a bot file work with no torch
    in .venv; the first training command installs the rest, once, and trains."""
    clone = tmp_path / "laptop"
    git(tmp_path, "clone", "-q", str(REPO_ROOT), str(clone))
    (clone / "tiny.toml").write_text(TINY)
    env = {
        key: value for key, value in os.environ.items() if key not in ("LANDER_HOME", "VIRTUAL_ENV")
    }
    env.update(GIT_IDENTITY)
    # A bot to look at, made by the project's full install as a box would have pushed it.
    made = subprocess.run(
        [str(REPO_ROOT / ".venv" / "bin" / "lander"), "train", "seen", "--no-git", "--config", str(clone / "tiny.toml")],
        env={**env, "LANDER_HOME": str(clone)}, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(clone / "lander"), *args], cwd=clone, env=env, capture_output=True, text=True,
            timeout=900, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def imports(module: str) -> bool:
        python = clone / ".venv" / "bin" / "python"
        return subprocess.run([str(python), "-c", f"import {module}"], check=False).returncode == 0

    status = run("status")
    assert status.returncode == 0 and " seen " in status.stdout, status.stdout + status.stderr
    assert "installing lander (light" in status.stderr
    assert not imports("torch") and not imports("stable_baselines3")
    played = run("play", "bots/seen.json", "--seconds", "3", "--record", "flight.png")
    assert played.returncode == 0 and (clone / "flight.png").is_file(), played.stderr
    evaluated = run("eval", "bots/seen.json", "--episodes", "2")
    assert evaluated.returncode == 0 and "mean_reward=" in evaluated.stdout, evaluated.stderr
    exported = run("eval", "seen", "--episodes", "2")  # its bot exists: no torch needed
    assert exported.returncode == 0, exported.stderr
    assert not imports("torch")

    trained = run("train", "fresh", "--no-git", "--config", "tiny.toml")
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert "installing the training stack" in trained.stderr
    assert "run fresh finished" in trained.stdout and imports("torch")
    again = run("status")
    assert again.returncode == 0 and "installing" not in again.stderr
