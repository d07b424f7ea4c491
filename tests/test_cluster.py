"""Game instances and sweep trials on a real Ray cluster of two nodes on this machine
(``ray start`` with --node-ip-address=127.0.0.1 and a private temp dir)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from game_bridge.cluster import ClusterError, Node, RelayedInstance, plan_placement
from game_bridge.relay import PREAMBLE
from tests.conftest import (
    GIT_IDENTITY,
    LANDER,
    SMALL,
    find_free_port_block,
    git,
    lander,
    wait_until,
)
from tests.test_files_from_elsewhere import one_line_error
from training.evaluation.records import owns_run
from training.runs.run_paths import RunPaths
from training.runs.run_record import RunRecord
from training.session.trainer import TrainRequest, plan_training

ray = pytest.importorskip(
    "ray", reason="Ray is not installed: ./lander setup --cluster installs it"
)

from tests.ray_cluster import LocalRayCluster  # noqa: E402  (after the skip: it needs the ray CLI)


def test_placement_follows_free_cpus_or_a_cap_per_node() -> None:
    big, small = Node("big", "10.0.0.1", 4.0), Node("small", "10.0.0.2", 2.0)
    chosen = plan_placement([big, small], 6)
    assert [node.id for node in chosen].count("big") == 4
    assert [node.id for node in chosen].count("small") == 2
    capped = plan_placement([big, small], 3, per_node=2)
    assert [node.id for node in capped] == ["big", "big", "small"]
    with pytest.raises(ClusterError, match="do not fit 2 node"):
        plan_placement([big, small], 5, per_node=2)
    with pytest.raises(ClusterError, match="no live node"):
        plan_placement([], 1)


def test_a_relayed_port_admits_only_a_relay_from_a_node_with_the_runs_secret(
    port_block: Callable[[int], int],
) -> None:
    secret = os.urandom(32)
    nodes = {"127.0.0.1"}  # a stranger's address on this box is 127.0.0.2
    instance = RelayedInstance(0, port_block(1), "127.0.0.1", secret, nodes.__contains__)
    address = ("127.0.0.1", instance.port)
    try:
        for stranger in (b"GET / HTTP/1.0\r\n\r\n" + b" " * 40, PREAMBLE + os.urandom(32), b""):
            with socket.create_connection(address) as conn:
                conn.sendall(stranger)
                if not stranger:
                    conn.shutdown(socket.SHUT_WR)
                wait_until(lambda: instance.try_accept() or instance.refused > 0, 10, "a verdict")
                assert not instance.connected
                instance.refused = 0
        # The secret itself, from an address that is none of the cluster's nodes: refused.
        with socket.create_connection(address, source_address=("127.0.0.2", 0)) as conn:
            conn.sendall(PREAMBLE + secret)
            wait_until(lambda: instance.try_accept() or instance.refused > 0, 10, "a verdict")
            assert not instance.connected and instance.refused == 1
        # A node's connection that says nothing is dropped at its deadline...
        with socket.create_connection(address) as silent:
            began = time.monotonic()
            wait_until(lambda: instance.try_accept() or instance.refused > 1, 10, "the deadline")
            assert time.monotonic() - began >= 1.5 and not instance.connected
            silent.settimeout(5)
            assert silent.recv(1) == b"", "the silent connection is closed"
        # ...and holds up no relay meanwhile.
        silent = socket.create_connection(address)
        assert not instance.try_accept()
        began = time.monotonic()
        with socket.create_connection(address) as relay:
            relay.sendall(PREAMBLE + secret)
            wait_until(instance.try_accept, 10, "the relay to be admitted")
            assert time.monotonic() - began < 1.0, "the relay waited behind the silent one"
        silent.settimeout(5)
        assert silent.recv(1) == b"", "the silent connection is closed"
        silent.close()
        # The relay is in: the port is closed to everyone.
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(address, source_address=("127.0.0.2", 0), timeout=5)
    finally:
        instance.close()


@contextmanager
def lander_in_background(home: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """``lander ARGS`` running in ``home`` (its output on a pipe); killed if still running
    when the block ends."""
    env = {**os.environ, **GIT_IDENTITY, "LANDER_HOME": str(home)}
    process = subprocess.Popen(
        [str(LANDER), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRayCluster]:
    started = LocalRayCluster().start()
    try:
        started.add_node()
        yield started
    finally:
        started.stop()


def _cluster_of(work: Path, run: str) -> dict[str, object]:
    placements: dict[str, object] = RunRecord.load(RunPaths(work, run).run_json).extra.cluster
    return placements


def test_a_run_places_its_games_on_both_nodes_and_trains(
    cluster: LocalRayCluster, tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    result = lander(
        tmp_path, "train", "c1", "--cluster", cluster.address, "--timesteps", "20000",
        "--n-parallel", "4", "--agents-per-instance", "4", "--port", str(port_block(4)), "--no-git",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "games on the Ray cluster at" in result.stdout
    record = RunRecord.load(RunPaths(tmp_path, "c1").run_json)
    assert record.status == "finished" and record.total_timesteps >= 20000
    instances = record.extra.cluster["instances"]
    assert sorted(entry["instance"] for entry in instances) == [0, 1, 2, 3]
    assert {entry["node"] for entry in instances} == {node.node_id for node in cluster.nodes}
    assert (tmp_path / "bots" / "c1.json").is_file()
    # A resume takes the run's settings but not where its games ran: it says so anew.
    resumed = plan_training(TrainRequest(tmp_path, "c1b", {}, resume="c1")).config
    assert resumed.cluster is None and resumed.n_parallel == 4


def test_a_sweep_runs_trials_side_by_side_on_both_nodes_and_commits_them_once(
    cluster: LocalRayCluster, checkout: tuple[Path, Path], port_block: Callable[[int], int]
) -> None:
    work, remote = checkout
    before = git(remote, "rev-list", "--count", "main")
    result = lander(
        work, "sweep", "cs", "--cluster", cluster.address, "--parallel", "2", "--trials", "4",
        "--timesteps-per-trial", "1024", "--push-every", "0", "--port", str(port_block(2)), *SMALL,
        timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    trials = [json.loads(line) for line in (work / "logs/cs/trials.jsonl").read_text().splitlines()]
    assert sorted(t["run"] for t in trials) == [f"cs-t000{i}" for i in range(4)]
    assert all(t["state"] == "finished" and "mean_reward" in t for t in trials)
    assert {t["node"] for t in trials} == {node.node_id for node in cluster.nodes}
    pushed = git(remote, "ls-tree", "-r", "--name-only", "main").splitlines()
    for trial in trials:
        paths = RunPaths(work, trial["run"])
        assert owns_run(paths), "the driver's checkout alone writes the trial's files"
        assert RunRecord.load(paths.run_json).extra.trained_on["node"] == trial["node"]
        for name in (f"checkpoints/{trial['run']}/run.json", f"bots/{trial['run']}.json"):
            assert name in pushed
        assert any(p.startswith(f"logs/{trial['run']}/events.out") for p in pushed)
    assert int(git(remote, "rev-list", "--count", "main")) == int(before) + 1
    assert git(work, "status", "--porcelain") == ""


def test_a_node_lost_mid_run_moves_its_games_and_the_run_finishes(
    cluster: LocalRayCluster, tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    worker = cluster.nodes[1]
    base = port_block(4)
    with lander_in_background(
        tmp_path, "train", "c2", "--cluster", cluster.address, "--timesteps", "30000",
        "--n-parallel", "4", "--agents-per-instance", "4", "--port", str(base),
        "--checkpoint-every", "5000", "--no-git",
    ) as trainer:  # fmt: skip
        run_json = RunPaths(tmp_path, "c2").run_json

        def placed_and_stepping() -> bool:
            if not run_json.exists():
                return False
            record = RunRecord.load(run_json)
            return record.total_timesteps > 0 and record.extra.cluster is not None

        wait_until(placed_and_stepping, 120, "the run to place its games and checkpoint")
        instances = _cluster_of(tmp_path, "c2")["instances"]
        assert isinstance(instances, list)
        on_worker = [e for e in instances if e["node"] == worker.node_id]
        assert on_worker, "placement by CPUs puts games on the second node"
        for entry in instances:  # each game process was started by its node's raylet
            assert cluster.node_of_process(int(entry["pid"])) == entry["node"]
        status = lander(tmp_path, "status")
        assert f"node {worker.node_id[:8]}" in status.stdout, status.stdout
        for port in range(base, base + 4):  # a stranger on the games' ports while it trains
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", port), 5, ("127.0.0.2", 0))
        cluster.kill_node(worker)
        output, _ = trainer.communicate(timeout=600)  # a busy machine: Ray and 4 games on 2 cores
    assert trainer.returncode == 0, output
    record = RunRecord.load(run_json)
    assert record.status == "finished" and record.total_timesteps >= 30000
    assert record.extra.restarts == len(on_worker), output
    assert all(e["node"] != worker.node_id for e in record.extra.cluster["instances"])
    log = RunPaths(tmp_path, "c2").train_log.read_text()
    assert log.count("restarted game instance") == len(on_worker)


def test_an_unreachable_cluster_is_one_line(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    started = time.monotonic()
    result = lander(
        tmp_path, "train", "c3", "--cluster", f"127.0.0.1:{port_block(1)}", "--timesteps", "1000",
        "--no-git",
    )  # fmt: skip
    assert result.returncode != 0
    assert "cannot reach the Ray cluster" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr + result.stdout
    assert time.monotonic() - started < 120
    assert not RunPaths(tmp_path, "c3").exists()


def _gcs_status(address: str, token: str | None) -> str:
    """What the head's GCS answers a client's first call, with or without a token."""
    import grpc

    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    with grpc.insecure_channel(address) as channel:
        try:
            channel.unary_unary("/ray.rpc.NodeInfoGcsService/GetClusterId")(
                b"", timeout=10, metadata=metadata
            )
        except grpc.RpcError as exc:
            return str(exc.code().name)
    return "OK"


def test_the_cluster_lander_started_refuses_a_client_without_its_token(
    cluster: LocalRayCluster, tmp_path: Path
) -> None:
    token = cluster.token_path.read_text().strip()
    assert cluster.token_path.stat().st_mode & 0o077 == 0, "the token is its owner's alone"
    assert _gcs_status(cluster.address, None) == "UNAUTHENTICATED"
    assert _gcs_status(cluster.address, "a" * 64) == "UNAUTHENTICATED"
    assert _gcs_status(cluster.address, token) == "OK"
    wrong = tmp_path / "wrong_token"
    wrong.write_text("b" * 64)
    for path, expected in (
        (wrong, "refuses this machine's Ray token"),
        (tmp_path / "none", "no Ray token"),
    ):
        result = lander(
            tmp_path, "train", "c4", "--cluster", cluster.address, "--timesteps", "1000",
            "--no-git", env={"RAY_AUTH_TOKEN_PATH": str(path)},
        )  # fmt: skip
        error = one_line_error(result, expected)
        assert "docs/cluster.md" in error
    assert not RunPaths(tmp_path, "c4").exists()


def test_a_cluster_without_token_authentication_is_named_in_one_line(tmp_path: Path) -> None:
    bare = LocalRayCluster()
    try:
        port = port_of_a_bare_head(bare)
        result = lander(
            tmp_path, "train", "c5", "--cluster", f"127.0.0.1:{port}", "--timesteps", "1000",
            "--no-git", env={"RAY_AUTH_TOKEN_PATH": str(bare.token_path)},
        )  # fmt: skip
        one_line_error(result, "runs without token authentication", "./lander cluster")
    finally:
        bare.stop()


def port_of_a_bare_head(cluster: LocalRayCluster) -> int:
    """A head started by ``ray start`` with authentication off (as before Ray 2.59)."""
    port = find_free_port_block(2)
    cluster.token_path.parent.mkdir(parents=True, exist_ok=True)
    cluster.token_path.write_text("c" * 64)
    ray = Path(sys.executable).with_name("ray")
    result = subprocess.run(
        [str(ray), "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
         f"--temp-dir={cluster.temp_dir}", "--num-cpus=1", "--include-dashboard=false",
         "--disable-usage-stats", f"--ray-client-server-port={port + 1}"],
        env={**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return port


def _game_processes_of(cluster: LocalRayCluster, node_id: str) -> list[int]:
    """The bundled game's processes that the node ``node_id`` started."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes()
        except OSError:
            continue
        if b"games.lander" in text:  # a game, or the fork server of a trial's games
            pid = int(cmdline.parent.name)
            if cluster.node_of_process(pid) == node_id:
                found.append(pid)
    return found


def test_a_sweep_trial_whose_node_is_lost_fails_and_the_sweep_goes_on(
    cluster: LocalRayCluster, checkout: tuple[Path, Path], port_block: Callable[[int], int]
) -> None:
    import optuna

    work, _ = checkout
    cluster.add_node()
    workers = [node for node in cluster.nodes[1:] if node.alive]

    def trial_on_a_worker() -> bool:
        return any(_game_processes_of(cluster, node.node_id) for node in workers)

    with lander_in_background(
        work, "sweep", "lost", "--cluster", cluster.address, "--parallel", "2", "--trials", "2",
        "--timesteps-per-trial", "40000", "--push-every", "0", "--port", str(port_block(2)), *SMALL,
    ) as sweep:  # fmt: skip
        wait_until(trial_on_a_worker, 180, "a trial on a node other than the head")
        cluster.kill_node(next(n for n in workers if _game_processes_of(cluster, n.node_id)))
        output, _ = sweep.communicate(timeout=400)
    assert sweep.returncode == 0, output
    assert "failed: its worker was lost" in output
    trials = [
        json.loads(line) for line in (work / "logs/lost/trials.jsonl").read_text().splitlines()
    ]
    assert sorted(t["state"] for t in trials) == ["failed", "finished"]
    study = optuna.load_study(study_name="lost", storage=f"sqlite:///{work / 'logs/lost/sweep.db'}")
    states = sorted(trial.state.name for trial in study.trials)
    assert states == ["COMPLETE", "FAIL"]
    assert git(work, "status", "--porcelain") == ""
