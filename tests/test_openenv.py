"""lander trains an OpenEnv environment server: the real ``openenv`` package, installed
in a throwaway virtual environment of the tests (lander's own install does not carry
it), serves an environment written from the package's template
(``tests/games/openenv_reach.py``), and lander speaks to it over ``/ws`` with its own
client: spaces from ``/schema``, several sessions at once, its own time limit, every
fault one named fault, restarted like a game's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from game_bridge.errors import BridgeError, InstanceDied
from game_bridge.launcher import LaunchConfig
from game_bridge.openenv_instance import OpenEnvInstance, server_url
from game_bridge.openenv_schema import SchemaError, spaces_of
from game_bridge.vec_env import GameVecEnv
from tests.conftest import GAMES_DIR, LANDER, find_free_port_block, lander, tensorboard_steps

OPENENV_VERSION = "0.10.0"
SERVER_START_S = 60.0


@pytest.fixture(scope="session")
def openenv_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Python with the ``openenv`` package (and its server: FastAPI, uvicorn); one made
    already may be named by ``LANDER_TEST_OPENENV_PYTHON`` (installing takes a minute)."""
    given = os.environ.get("LANDER_TEST_OPENENV_PYTHON")
    if given:
        return Path(given)
    home = tmp_path_factory.mktemp("openenv-venv")
    subprocess.run([sys.executable, "-m", "venv", str(home)], check=True, timeout=300)
    python = home / "bin" / "python"
    # Not byte-compiled at install (its 10,000 files: gradio, pandas, ... 13 s here); the
    # modules its server and client import are compiled once below, by importing them.
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-compile", f"openenv=={OPENENV_VERSION}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    warmed = subprocess.run(
        [str(python), "-c", "import uvicorn, openenv.core, openenv.core.env_server.http_server"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert warmed.returncode == 0, warmed.stderr[-2000:]
    return python


Server = Callable[..., str]


class _Servers:
    """The server processes of one test, each waited on until its ``/health`` answers,
    each stopped at the end."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, command: Callable[[int], list[str]]) -> str:
        """Run ``command(port)`` on a free port; its base URL once it is healthy."""
        port = find_free_port_block(1)
        log = self.folder / f"server-{port}.log"
        process = subprocess.Popen(
            command(port), stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=self.folder
        )
        self.started.append(process)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            assert process.poll() is None, log.read_text()
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as answer:
                    if json.loads(answer.read()).get("status") == "healthy":
                        return url
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"{command(port)[:3]} did not answer within {SERVER_START_S} s")

    def stop(self) -> None:
        for process in self.started:
            process.terminate()
            try:  # a server made to hang may not end on SIGTERM: no test waits on that
                process.wait(timeout=3)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


@pytest.fixture
def reach_server(openenv_python: Path, tmp_path: Path) -> Iterator[Server]:
    """Start the Reach server with arguments; returns its base URL once ``/health`` answers."""
    servers = _Servers(tmp_path)
    script = str(GAMES_DIR / "openenv_reach.py")
    yield lambda *args: servers.start(
        lambda port: [str(openenv_python), script, "--port", str(port), *args]
    )
    servers.stop()


def _env(url: str, sessions: int = 1, **settings: object) -> GameVecEnv:
    """The server's sessions as the trainer drives them (restarts on, as a run has them)."""
    return GameVecEnv(
        LaunchConfig(transport="openenv", game_url=url, n_instances=sessions, **settings),  # type: ignore[arg-type]
        max_restarts_per_minute=3,
    )


def test_the_servers_schema_becomes_spaces_and_sessions_step_together(
    reach_server: Server,
) -> None:
    url = reach_server("--episode", "5")
    env = _env(url, sessions=3, max_episode_steps=1000)
    try:
        assert env.action_space.shape == (1,)
        assert env.observation_space.shape == (2,)  # position, target: the schema's order
        obs = env.reset()
        assert obs.shape == (3, 2) and np.all(np.abs(obs[:, 1]) <= 1.0)
        ended = 0
        for step in range(10):
            obs, rewards, dones, infos = env.step(np.ones((3, 1), dtype=np.float32))
            assert np.all(rewards <= 0.0)
            if step == 4:  # the server's done after 5 steps: a real end, not a time limit
                assert dones.all()
                assert not any(info["TimeLimit.truncated"] for info in infos)
                ended += 1
        assert ended == 1
    finally:
        env.close()


def test_a_sessions_first_reset_carries_its_seed(reach_server: Server) -> None:
    """Instance i's first reset sends seed + i, as a game gets --env_seed: a run's first
    episodes repeat; later ones go on from there."""
    url = reach_server()
    first, again = _env(url, sessions=2, seed=3), _env(url, sessions=2, seed=3)
    try:
        start = first.reset()
        np.testing.assert_array_equal(start, again.reset())
        assert not np.array_equal(start[0], start[1])
    finally:
        first.close()
        again.close()


def test_lander_ends_an_episode_at_its_own_time_limit(reach_server: Server) -> None:
    url = reach_server("--episode", "1000")
    env = _env(url, max_episode_steps=4)
    try:
        env.reset()
        ends = []
        for _ in range(4):
            _, _, dones, infos = env.step(np.zeros((1, 1), dtype=np.float32))
            ends.append(bool(dones[0]))
        assert ends == [False, False, False, True] and infos[0]["TimeLimit.truncated"]
        assert infos[0]["terminal_observation"].shape == (2,)
    finally:
        env.close()


def test_lander_trains_an_openenv_server_and_its_reward_rises(
    reach_server: Server, tmp_path: Path
) -> None:
    url = reach_server("--max-envs", "8")
    trained = lander(
        tmp_path, "train", "reach", "--game-url", url, "--n-parallel", "4",
        "--timesteps", "24000", "--n-steps", "64", "--no-git", timeout=600,
    )  # fmt: skip
    output = trained.stdout + trained.stderr
    assert trained.returncode == 0, output
    assert "Traceback" not in output
    rewards = [r for _, r in tensorboard_steps(tmp_path / "logs" / "reach", "rollout/ep_rew_mean")]
    assert len(rewards) >= 5, rewards
    assert rewards[-1] > rewards[0] + 2.0, rewards  # a random push scores about -15 an episode
    record = json.loads((tmp_path / "checkpoints" / "reach" / "run.json").read_text())
    assert record["config"]["game_url"] == url
    bot = json.loads((tmp_path / "bots" / "reach.json").read_text())
    assert bot["action"]["keys"] == [{"key": "push", "size": 1, "action_type": "continuous"}]
    assert bot["trained_with"]["transport"] == "openenv"


@pytest.mark.parametrize(
    ("fault", "named"),
    [
        ("error", "EXECUTION_ERROR"),
        ("hang", "no reply within"),
    ],
)
def test_a_server_fault_is_named_and_the_session_restarted(
    reach_server: Server, fault: str, named: str
) -> None:
    url = reach_server("--fault", fault, "--after", "6")
    env = _env(url, sessions=2, read_timeout=1.0)
    try:
        env.reset()
        restarted = []
        for _ in range(12):
            infos = env.step(np.zeros((2, 1), dtype=np.float32))[3]
            restarted += [info["game_restarted"] for info in infos if "game_restarted" in info]
        assert len(restarted) == 1 and named in restarted[0], restarted
        assert len(env.restarts) == 1
    finally:
        env.close()


def test_a_server_that_dies_is_one_named_fault(reach_server: Server) -> None:
    url = reach_server("--fault", "die", "--after", "3")
    env = _env(url, read_timeout=2.0)
    try:
        env.reset()
        with pytest.raises(BridgeError, match=r"restarts within a minute.*cannot open a session"):
            for _ in range(10):
                env.step(np.zeros((1, 1), dtype=np.float32))
    finally:
        env.close()


def test_a_session_broken_during_its_opening_handshake_is_a_dead_instance(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A server going down can accept a reconnect, then break the pipe while the client
    sends its upgrade request: websockets raises ``ConnectionClosedError`` from
    ``connect``, which must reach the restart logic as a dead instance (CI once saw it
    escape as a traceback). Staged here because the real race is rare."""
    from websockets.exceptions import ConnectionClosedError
    from websockets.sync import client

    def broken(*args: object, **kwargs: object) -> None:
        raise ConnectionClosedError(None, None)

    monkeypatch.setattr(client, "connect", broken)
    instance = OpenEnvInstance(0, "http://127.0.0.1:9")
    with pytest.raises(InstanceDied, match="cannot open a session"):
        instance.start([], tmp_path / "out.log")


def test_a_server_at_capacity_is_one_named_fault(reach_server: Server) -> None:
    url = reach_server("--max-envs", "1")
    first = _env(url)
    try:
        first.reset()
        with pytest.raises(BridgeError, match="CAPACITY_REACHED"):
            _env(url).reset()
    finally:
        first.close()


def test_a_schema_lander_cannot_map_is_one_line_and_can_be_overridden() -> None:
    schema = {
        "action": {"properties": {"text": {"type": "string"}}},
        "observation": {"properties": {"x": {"type": "number"}, "reward": {}}},
    }
    with pytest.raises(SchemaError, match="action field 'text' \\(string\\) cannot be mapped"):
        spaces_of(schema)
    fixed = spaces_of(schema, {"action": {"text": {"enum": ["left", "right"]}}, "observation": {}})
    assert fixed.action({"text": 1}) == {"text": "right"}
    assert fixed.observation({"x": 2.5}) == [2.5]


@pytest.fixture
def lander_serve(tmp_path: Path) -> Iterator[Server]:
    """``lander serve GAME ...`` started as a user starts it; returns its base URL."""
    servers = _Servers(tmp_path)
    yield lambda *args: servers.start(
        lambda port: [str(LANDER), "serve", *args, "--port", str(port)]
    )
    servers.stop()


_PACKAGE_CLIENT = """
import json, sys
from openenv.core import GenericEnvClient
url, seed, actions = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
played = []
with GenericEnvClient(base_url=url).sync() as env:
    first = env.reset(seed=seed)
    played.append({"obs": first.observation["obs"], "reward": first.reward, "done": first.done})
    for action in actions:
        result = env.step({"action": action})
        played.append({"obs": result.observation["obs"], "reward": result.reward, "done": result.done})
print(json.dumps(played))
"""


def test_the_packages_client_drives_lander_serve_stroke(
    openenv_python: Path, lander_serve: Server
) -> None:
    """The ``openenv`` package's own client resets and steps ``lander serve stroke``; the
    observations and rewards are the stroke game's own (its in-process env, same seed and
    actions)."""
    import gymnasium

    import games.stroke.gym_env  # noqa: F401 (registers Stroke-v0)

    url = lander_serve("stroke")
    with urllib.request.urlopen(url + "/schema", timeout=5) as answer:
        schema = json.loads(answer.read())
    assert spaces_of(schema).env_info()["action_space"] == {
        "action": {"size": 2, "action_type": "continuous"}
    }
    rng = np.random.default_rng(4)
    actions = rng.uniform(-1, 1, (12, 2)).round(3).tolist()
    played = subprocess.run(
        [str(openenv_python), "-c", _PACKAGE_CLIENT, url, "7", json.dumps(actions)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert played.returncode == 0, played.stderr[-3000:]
    steps = json.loads(played.stdout)
    env = gymnasium.make("Stroke-v0")
    obs, _ = env.reset(seed=7)
    np.testing.assert_allclose(steps[0]["obs"], obs, atol=1e-6)
    for action, step in zip(actions, steps[1:], strict=True):
        obs, reward, terminated, truncated, _ = env.step(np.asarray(action, np.float32))
        np.testing.assert_allclose(step["obs"], obs, atol=1e-6)
        assert step["reward"] == pytest.approx(reward, abs=1e-6)
        assert step["done"] == (terminated or truncated)


def test_lander_serve_refuses_a_session_past_its_limit_and_bad_actions(
    lander_serve: Server,
) -> None:
    from websockets.sync.client import connect

    url = lander_serve("lander", "--max-sessions", "2").replace("http", "ws") + "/ws"
    with connect(url) as first, connect(url) as second, connect(url) as third:
        refused = json.loads(third.recv(timeout=10))
        assert refused["type"] == "error" and refused["data"]["code"] == "CAPACITY_REACHED"
        for session in (first, second):
            session.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
            assert json.loads(session.recv(timeout=10))["type"] == "observation"
        first.send(json.dumps({"type": "step", "data": {"action": [5.0, 0.0]}}))
        assert json.loads(first.recv(timeout=10))["data"]["code"] == "VALIDATION_ERROR"
        first.send("not json")
        assert json.loads(first.recv(timeout=10))["data"]["code"] == "INVALID_JSON"
        second.send(json.dumps({"type": "step", "data": {"action": [0.5, 0.0]}}))
        stepped = json.loads(second.recv(timeout=10))
        assert stepped["type"] == "observation" and len(stepped["data"]["observation"]["obs"]) == 7


def test_lander_trains_its_own_game_through_lander_serve(
    lander_serve: Server, tmp_path: Path
) -> None:
    """Both ends lander's: the bundled lander served, trained with --game-url (4 sessions)."""
    url = lander_serve("lander")
    trained = lander(
        tmp_path, "train", "served", "--game-url", url, "--n-parallel", "4",
        "--timesteps", "4096", "--no-git", timeout=600,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert "4 session(s) of the OpenEnv server" in trained.stdout
    bot = json.loads((tmp_path / "bots" / "served.json").read_text())
    assert bot["observation"]["size"] == 7 and bot["action"]["size"] == 2


def test_a_space_id_is_its_spaces_address_and_anything_else_one_line(tmp_path: Path) -> None:
    assert server_url("openenv/echo_env") == "https://openenv-echo-env.hf.space"
    assert server_url("http://127.0.0.1:8000/") == "http://127.0.0.1:8000"
    refused = lander(tmp_path, "train", "x", "--game-url", "not a server", "--no-git")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "--game-url: an OpenEnv server is an http(s):// or ws(s):// URL" in refused.stderr


def test_lander_serve_refuses_what_it_does_not_serve_in_few_lines(
    lander_serve: Server, tmp_path: Path
) -> None:
    """Issue 46, finding 4: POSTs, a HEAD and garbage request lines are answered 405 or 400
    (not a dropped connection), the log grows by a line per peer and minute at most (no
    traceback), and deeply nested JSON is an INVALID_JSON answer, the session kept."""
    import http.client
    import socket

    from websockets.sync.client import connect

    url = lander_serve("stroke")
    port = int(url.rsplit(":", 1)[1])
    for _ in range(30):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("POST", "/reset", body=b"{}")
        assert connection.getresponse().status == 405
        connection.close()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("HEAD", "/health")
    assert connection.getresponse().status == 405
    connection.close()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
        assert raw.recv(64).startswith(b"HTTP/1.1 400")
    with connect(url.replace("http", "ws") + "/ws") as session:
        session.send("[" * 100_000 + "]" * 100_000)
        answer = json.loads(session.recv(timeout=10))
        assert answer["data"]["code"] == "INVALID_JSON"
        session.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
        assert json.loads(session.recv(timeout=10))["type"] == "observation"
    log = next(tmp_path.glob("server-*.log")).read_text()
    assert "Traceback" not in log, log[-3000:]
    assert log.count("refused a request from 127.0.0.1") == 1, log[-3000:]
    with urllib.request.urlopen(url + "/health", timeout=5) as answer:
        assert json.loads(answer.read())["status"] == "healthy"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--port", "70000"], "--port must be from 1 to 65535, got 70000"),
        (["--port", "-1"], "--port must be from 1 to 65535, got -1"),
        (["--host", ""], "--host must name an address"),
    ],
)
def test_lander_serve_refuses_an_address_no_server_should_take(
    tmp_path: Path, args: list[str], said: str
) -> None:
    """Issue 46, finding 4: a port outside 1-65535 and an empty host (every interface,
    silently) are one line and exit 1, before anything listens."""
    from tests.test_files_from_elsewhere import one_line_error

    one_line_error(lander(tmp_path, "serve", "stroke", *args, timeout=60), said)


@pytest.fixture
def hostile_server(tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """``tests/games/hostile_openenv.py --mode MODE`` on a free port; returns its URL once
    it listens."""
    started: list[subprocess.Popen[str]] = []

    def start(mode: str) -> str:
        port = find_free_port_block(1)
        process = subprocess.Popen(
            [sys.executable, str(GAMES_DIR / "hostile_openenv.py"), "--port", str(port),
             "--mode", mode],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        started.append(process)
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "listening"
        return f"http://127.0.0.1:{port}"

    yield start
    for process in started:
        process.kill()
        process.wait(timeout=10)


@pytest.mark.parametrize(
    ("mode", "named"),
    [
        ("endless-schema", "an answer over 4,194,304 bytes"),
        ("trickle-schema", "an answer not done within 10 s"),
        ("nested-schema", "nested too deeply"),
        ("bignum-reward", "the reward is not a number"),
        ("nested-obs", "a message nested too deeply"),
    ],
)
def test_a_hostile_openenv_server_is_a_named_fault_in_bounded_time_and_memory(
    hostile_server: Callable[[str], str], mode: str, named: str
) -> None:
    """Issue 46, finding 5: a /schema that never ends, trickles or nests 100,000 deep, and
    steps whose reward is a 400-digit integer or whose observation nests 100,000 deep, are
    each a named fault (the steps' restarted, within the limit, never recursively) within
    the deadlines: no MemoryError, RecursionError or hang."""
    url = hostile_server(mode)
    started = time.monotonic()
    with pytest.raises(BridgeError, match=named):
        env = _env(url, sessions=1, read_timeout=5.0)
        try:
            env.reset()
            for _ in range(10):
                env.step(np.zeros((1, 1), dtype=np.float32))
        finally:
            env.close()
    assert time.monotonic() - started < 60
