"""A Godot game as its makers have it: the project from source, a training build lander
exports (again when the project changed), the game a person starts in the editor, and the
engine fetched by setup. The real engine here is Debian's godot3-server (Godot 3.2); Godot
4's command lines are held to its documentation by a stand-in engine
(tests/games/godot4_standin.py); the download by a loopback HTTP server."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import GAMES_DIR, GIT_IDENTITY, LANDER, REPO_ROOT, git, lander, wait_until
from training.runs.run_record import RunRecord

EXAMPLE = REPO_ROOT / "examples" / "godot_lander"
GODOT3 = shutil.which("godot3-server")
needs_godot3 = pytest.mark.skipif(GODOT3 is None, reason="no Godot engine (godot3-server)")
QUICK = ["--no-git", "--n-parallel", "2", "--n-steps", "256", "--speedup", "1000"]
EDITOR_PORT = 11008
"""Where the plugin's Sync node connects when the command line names no port, as in the editor."""


def godot_project(folder: Path) -> Path:
    """A fresh clone of the example Godot 3 project, in a git repository of its own (as a
    team keeps its game), with no import cache."""
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns(".import", "lander.x86_64"))
    git(folder, "init", "-q", "-b", "main")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "the game")
    return folder


def wide_lander(
    home: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """The CLI as :func:`tests.conftest.lander` runs it, its output read as words: rich
    wraps a checklist line at the console's width, and a path in a temporary folder is
    long enough to push the words a test looks for onto the next line."""
    done = lander(home, *args, env=env, timeout=timeout)
    done.stdout = " ".join(done.stdout.split())
    return done


def record(home: Path, run: str) -> RunRecord:
    return RunRecord.load(home / "checkpoints" / run / "run.json")


@needs_godot3
def test_a_godot_3_project_trains_from_source_with_no_launcher_script(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    project = godot_project(tmp_path / "game")
    home = tmp_path / "home"
    home.mkdir()
    trained = wide_lander(
        home, "train", "src", "--game-project", str(project), "--timesteps", "2048",
        "--port", str(port_block(2)), *QUICK, timeout=300,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stdout + trained.stderr
    # The import pass ran once, before the instances (a fresh clone has no .import/).
    assert trained.stdout.count("imported game with Godot 3.2") == 1
    assert (project / ".import" / "lander-import.json").is_file()
    origin = record(home, "src").extra.godot
    head = git(project, "rev-parse", "HEAD").strip()
    assert origin is not None and origin["way"] == "source"
    assert origin["version"].startswith("3.2") and origin["commit"] == head and not origin["dirty"]
    assert f"from source at {head[:10]}" in (home / "logs" / "src" / "train.log").read_text()
    assert (home / "bots" / "src.json").is_file()
    status = wide_lander(home, "status")
    assert f"src: trained against Godot 3.2.3.stable on game from source at {head[:10]}" in (
        status.stdout
    )
    again = wide_lander(
        home, "train", "src2", "--game-project", str(project), "--timesteps", "512",
        "--port", str(port_block(2)), *QUICK, timeout=300,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    assert "imported" not in again.stdout, "an imported project is not imported again"
    resumed = wide_lander(
        home, "train", "src", "--resume", "src", "--timesteps", "512",
        "--port", str(port_block(2)), "--no-git", timeout=300,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    again_origin = record(home, "src").extra.godot
    assert again_origin is not None and again_origin["way"] == "source"
    assert again_origin["project"] == str(project) and record(home, "src").total_timesteps >= 2560
    # A session on another engine than the run's earlier ones says so.
    other = wide_lander(
        home, "train", "src", "--resume", "src", "--timesteps", "256", "--no-git",
        "--port", str(port_block(2)), env={"GODOT_BIN": str(standin_engine(tmp_path))},
    )  # fmt: skip
    assert other.returncode == 0, other.stdout + other.stderr
    assert (
        "this run trained against Godot 3.2.3.stable.custom_build before; this session runs "
        "Godot 4.3.stable.official.77dcf97d8"
    ) in other.stdout


@needs_godot3
def test_setup_exports_a_pack_that_trains_and_a_changed_project_is_exported_again(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    project = godot_project(tmp_path / "game")
    home = tmp_path / "home"
    home.mkdir()
    setup = wide_lander(
        home, "setup", "--game-project", str(project), "--export-preset", "training",
        "--port", str(port_block(1)), timeout=300,
    )  # fmt: skip
    assert setup.returncode == 0, setup.stdout + setup.stderr
    pack = home / "build" / "godot" / "game-training" / "game.pck"
    assert pack.is_file() and "(pack, preset 'training')" in setup.stdout
    made = json.loads((pack.parent / "build.json").read_text())
    head = git(project, "rev-parse", "HEAD").strip()
    assert made["commit"] == head and made["kind"] == "pack"

    first = wide_lander(
        home, "train", "b1", "--timesteps", "1024", "--port", str(port_block(2)), *QUICK
    )
    assert first.returncode == 0, first.stdout + first.stderr
    assert "exported" not in first.stdout.split("run b1")[0], "the build was current"
    origin = record(home, "b1").extra.godot
    assert origin is not None and origin["way"] == "build" and origin["build"] == str(pack)
    assert origin["commit"] == head and origin["kind"] == "pack"

    with open(project / "main.gd", "a") as script:
        script.write("\n# a change pulled from a teammate\n")
    second = wide_lander(
        home, "train", "b2", "--timesteps", "1024", "--port", str(port_block(2)), *QUICK
    )
    assert second.returncode == 0, second.stdout + second.stderr
    assert "(the project's tracked files changed since the build)" in second.stdout
    remade = json.loads((pack.parent / "build.json").read_text())
    assert remade["made_at"] > made["made_at"] and remade["digest"] != made["digest"]
    assert remade["dirty"] and record(home, "b2").extra.godot["dirty"]  # type: ignore[index]
    # `next` (like start and resume: every run goes through a session's start) too.
    git(project, "commit", "-q", "-am", "the change, committed")
    (project / "sync.gd").write_text((project / "sync.gd").read_text() + "\n# another\n")
    following = wide_lander(
        home, "next", "--from", "b2", "--timesteps", "512", "--no-git",
        "--port", str(port_block(2)),
    )  # fmt: skip
    assert following.returncode == 0, following.stdout + following.stderr
    assert "next run: b3" in following.stdout
    assert "(the project's tracked files changed since the build)" in following.stdout
    assert record(home, "b3").extra.godot["commit"] == git(project, "rev-parse", "HEAD").strip()  # type: ignore[index]


@needs_godot3
def test_an_export_preset_the_project_lacks_is_one_line_and_no_run_starts(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    project = godot_project(tmp_path / "game")
    home = tmp_path / "home"
    home.mkdir()
    refused = wide_lander(
        home, "train", "nope", "--game-project", str(project), "--export-preset", "release",
        "--port", str(port_block(2)), *QUICK,
    )  # fmt: skip
    assert refused.returncode == 1
    assert refused.stderr.strip().count("\n") == 0 and "Traceback" not in refused.stderr
    assert "has no export preset 'release': its presets are 'training'" in refused.stderr
    assert not (home / "checkpoints" / "nope").exists() and not (home / "logs" / "nope").exists()


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class EditorRun:
    """``lander train RUN --game editor`` in the background, its output collected."""

    def __init__(self, home: Path, run: str, *args: str) -> None:
        wait_until(lambda: _port_free(EDITOR_PORT), 120, f"port {EDITOR_PORT} to be free")
        env = {**os.environ, **GIT_IDENTITY, "LANDER_HOME": str(home)}
        self.process = subprocess.Popen(
            [str(LANDER), "train", run, "--game", "editor", *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            text=True, env=env,
        )  # fmt: skip
        self.lines: list[str] = []
        assert self.process.stdout is not None
        stream = self.process.stdout
        threading.Thread(
            target=lambda: self.lines.extend(iter(stream.readline, "")), daemon=True
        ).start()

    def said(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def output(self) -> str:
        return "".join(self.lines)

    def finish(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout=timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()


def press_play(project: Path) -> subprocess.Popen[bytes]:
    """The engine on the project as the editor's Play starts it: no lander arguments."""
    assert GODOT3 is not None
    return subprocess.Popen(
        [GODOT3, "--path", str(project)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.fixture
def editor_project(tmp_path: Path) -> Iterator[Path]:
    project = godot_project(tmp_path / "game")
    assert GODOT3 is not None
    subprocess.run([GODOT3, "--path", str(project), "--editor", "--quit"],
                   capture_output=True, timeout=120, check=False)  # fmt: skip
    yield project


@needs_godot3
def test_the_editor_way_waits_for_the_game_a_person_starts_and_trains_it(
    tmp_path: Path, editor_project: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    run = EditorRun(home, "ed", "--no-git", "--timesteps", "512", "--n-steps", "64")
    game = None
    try:
        wait_until(lambda: run.said("press Play in the Godot editor"), 120, "lander to wait")
        assert run.process.poll() is None, run.output()
        game = press_play(editor_project)
        code = run.finish(timeout=240)
        assert code == 0, run.output()
        game.wait(timeout=30)  # the trainer's close ends the game
    finally:
        if game is not None and game.poll() is None:
            game.kill()
    out = run.output()
    assert out.count("press Play in the Godot editor") == 1
    saved = record(home, "ed")
    assert saved.status == "finished" and saved.total_timesteps >= 512
    assert saved.extra.godot == {"way": "editor", "port": EDITOR_PORT}
    assert "eval ed --game editor" in out and (home / "bots" / "ed.json").is_file()
    # Evaluating against the editor waits the same way for the game a person starts.
    env = {**os.environ, **GIT_IDENTITY, "LANDER_HOME": str(home)}
    evaluation = subprocess.Popen(
        [str(LANDER), "eval", "ed", "--game", "editor", "--episodes", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
        env=env,
    )  # fmt: skip
    said: list[str] = []
    assert evaluation.stdout is not None
    stream = evaluation.stdout
    threading.Thread(target=lambda: said.extend(iter(stream.readline, "")), daemon=True).start()
    game = None
    try:
        wait_until(lambda: any("press Play" in line for line in said), 120, "eval to wait")
        game = press_play(editor_project)
        assert evaluation.wait(timeout=240) == 0, "".join(said)
    finally:
        for process in (evaluation, game):
            if process is not None and process.poll() is None:
                process.kill()
    assert any(line.startswith("mean_reward=") for line in said), "".join(said)
    assert "recorded in checkpoints/ed/evaluations.jsonl" in "".join(said)


@needs_godot3
def test_stopping_the_game_in_the_editor_ends_the_run_in_order_with_its_export_and_push(
    checkout: tuple[Path, Path], editor_project: Path
) -> None:
    work, remote = checkout
    run = EditorRun(work, "ed2", "--timesteps", "100000000", "--n-steps", "64")
    game = None
    try:
        wait_until(lambda: run.said("press Play in the Godot editor"), 120, "lander to wait")
        game = press_play(editor_project)
        wait_until(lambda: run.said("steps="), 120, "the run to train on the game")
        game.terminate()  # the person stops the scene
        code = run.finish(timeout=240)
    finally:
        if game is not None and game.poll() is None:
            game.kill()
    out = run.output()
    assert code == 0, out
    assert "the game was stopped (it closed its connection): the run ends here" in out
    assert "Traceback" not in out and out.count("waiting on port") == 1, "no restart loop"
    saved = record(work, "ed2")
    assert saved.status == "interrupted" and saved.last_checkpoint == "final.zip"
    assert (work / "checkpoints" / "ed2" / "final.zip").is_file()
    assert (work / "bots" / "ed2.json").is_file() and (work / "bots" / "ed2.onnx").is_file()
    pushed = git(remote, "ls-tree", "-r", "--name-only", "main")
    assert "bots/ed2.json" in pushed and "checkpoints/ed2/final.zip" in pushed


def test_the_editor_way_gives_up_after_its_deadline_in_one_line(tmp_path: Path) -> None:
    wait_until(lambda: _port_free(EDITOR_PORT), 120, f"port {EDITOR_PORT} to be free")
    started = time.monotonic()
    given_up = wide_lander(
        tmp_path, "train", "lonely", "--game", "editor", "--editor-wait", "2", "--no-git"
    )
    assert given_up.returncode == 1 and time.monotonic() - started < 120
    assert "press Play in the Godot editor" in given_up.stdout
    assert given_up.stderr.strip().count("\n") == 0 and "Traceback" not in given_up.stderr
    assert f"no game connected to port {EDITOR_PORT} within 2 s" in given_up.stderr
    refused = wide_lander(tmp_path, "train", "many", "--game", "editor", "--n-parallel", "4")
    assert refused.returncode == 1 and "the editor runs one game" in refused.stderr


# -- Godot 4's command lines, against a stand-in engine -------------------------------------


def standin_engine(folder: Path) -> Path:
    """An executable Godot 4 stand-in (tests/games/godot4_standin.py)."""
    engine = folder / "godot4-standin"
    engine.write_text(
        f"#!/bin/sh\nexec '{sys.executable}' '{GAMES_DIR / 'godot4_standin.py'}' \"$@\"\n"
    )
    engine.chmod(0o755)
    return engine


def godot4_project(folder: Path) -> Path:
    folder.mkdir()
    (folder / "project.godot").write_text(
        'config_version=5\n\n[application]\n\nconfig/name="four"\n'
        'run/main_scene="res://main.tscn"\nconfig/features=PackedStringArray("4.3", "Forward Plus")\n'
    )
    (folder / "export_presets.cfg").write_text(
        '[preset.0]\n\nname="training"\nplatform="Linux"\ncustom_features="training"\n\n'
        '[preset.1]\n\nname="broken"\nplatform="Linux"\n'
    )
    (folder / "main.tscn").write_text("[gd_scene format=3]\n")
    return folder


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_godot_4_runs_imports_and_exports_with_its_own_command_lines(
    tmp_path: Path, port_block: Callable[[int], int]
) -> None:
    project = godot4_project(tmp_path / "four")
    log = tmp_path / "engine.jsonl"
    env = {"GODOT_BIN": str(standin_engine(tmp_path)), "STANDIN_LOG": str(log)}
    home = tmp_path / "home"
    home.mkdir()
    source = wide_lander(
        home, "train", "four", "--game-project", str(project), "--scene", "res://main.tscn",
        "--engine-arg=--verbose", "--timesteps", "512", "--port", str(port_block(2)), *QUICK, env=env,
    )  # fmt: skip
    assert source.returncode == 0, source.stdout + source.stderr
    seen = calls(log)
    imports = [c for c in seen if "--import" in c]
    runs = [c for c in seen if any(a.startswith("--port=") for a in c)]
    assert imports == [["--headless", "--path", str(project), "--import"]]
    assert len(runs) == 2 and all(
        c[:6] == ["--headless", "--path", str(project), "--scene", "res://main.tscn", "--verbose"]
        for c in runs
    )
    assert record(home, "four").extra.godot["version"].startswith("4.3")  # type: ignore[index]

    log.unlink()
    built = wide_lander(
        home, "train", "four-b", "--game-project", str(project), "--export-preset", "training",
        "--timesteps", "512", "--port", str(port_block(2)), *QUICK, env=env,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    pack = home / "build" / "godot" / "four-training" / "game.pck"
    seen = calls(log)
    assert ["--headless", "--path", str(project), "--export-pack", "training",
            str(pack.parent.with_name("four-training.exporting") / "game.pck")] in seen  # fmt: skip
    runs = [c for c in seen if any(a.startswith("--port=") for a in c)]
    assert runs and all(c[:3] == ["--headless", "--main-pack", str(pack)] for c in runs)

    broken = wide_lander(
        home, "train", "four-x", "--game-project", str(project), "--export-preset", "broken",
        "--port", str(port_block(2)), *QUICK, env=env,
    )  # fmt: skip
    assert broken.returncode == 1 and "Traceback" not in broken.stderr
    assert broken.stderr.strip().count("\n") == 0
    assert 'Cannot export project with preset "broken"' in broken.stderr
    assert not (home / "checkpoints" / "four-x").exists()


def test_a_godot_4_export_uses_its_release_template_where_the_engine_has_one(
    tmp_path: Path,
) -> None:
    from game_bridge.godot_engine import GodotEngine

    engine = GodotEngine(str(standin_engine(tmp_path)), "4.3.stable.official.77dcf97d8")
    assert engine.export(Path("/p"), "training", Path("/o/game.x86_64"), pack=False) == [
        engine.path, "--headless", "--path", "/p", "--export-release", "training", "/o/game.x86_64",
    ]  # fmt: skip
    older = GodotEngine("/e", "4.1.3.stable.official")
    assert older.import_project(Path("/p"))[1:] == [
        "--headless",
        "--path",
        "/p",
        "--editor",
        "--quit",
    ]
    three = GodotEngine("/e", "3.5.3.stable.official")
    assert three.export(Path("/p"), "t", Path("/o/g"), pack=False)[1:] == [
        "--no-window", "--path", "/p", "--export", "t", "/o/g",
    ]  # fmt: skip
    assert three.run_project(Path("/p"), "res://t.tscn", [])[1:] == [
        "--no-window", "--path", "/p", "res://t.tscn",
    ]  # fmt: skip


# -- the engine from setup, against a loopback HTTP server ----------------------------------


class Releases(http.server.ThreadingHTTPServer):
    """Serves ``/4.3-stable/<file>`` from ``files``; counts requests; may cut a file short."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.requests: list[str] = []
        self.cut_short: set[str] = set()
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Releases

    def do_GET(self) -> None:
        self.server.requests.append(self.path)
        name = self.path.rsplit("/", 1)[-1]
        body = self.server.files.get(name) if self.path.startswith("/4.3-stable/") else None
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: len(body) // 2] if name in self.server.cut_short else body)

    def log_message(self, *args: object) -> None:
        pass


ENGINE_ZIP = "Godot_v4.3-stable_linux.x86_64.zip"
TEMPLATES_TPZ = "Godot_v4.3-stable_export_templates.tpz"


@pytest.fixture
def releases(tmp_path: Path) -> Iterator[Releases]:
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        info = zipfile.ZipInfo("Godot_v4.3-stable_linux.x86_64")
        info.external_attr = 0o755 << 16
        zipped.writestr(info, standin_engine(tmp_path).read_text())
    body = archive.getvalue()
    templates = io.BytesIO()
    with zipfile.ZipFile(templates, "w") as zipped:
        zipped.writestr("templates/version.txt", "4.3.stable")
        zipped.writestr("templates/linux_release.x86_64", "a release template")
    sums = (
        f"{hashlib.sha512(body).hexdigest()}  {ENGINE_ZIP}\n"
        f"{hashlib.sha512(templates.getvalue()).hexdigest()}  {TEMPLATES_TPZ}\n"
    )
    server = Releases(
        {ENGINE_ZIP: body, TEMPLATES_TPZ: templates.getvalue(), "SHA512-SUMS.txt": sums.encode()}
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def _no_godot4_path(tmp_path: Path) -> dict[str, str]:
    """Environment for lander with an empty cache and no Godot 4 on PATH (Debian's 3.2 may
    be there: the wrong version for the project)."""
    return {"LANDER_GODOT_CACHE": str(tmp_path / "cache"), "GODOT_BIN": ""}


def test_setup_fetches_the_projects_engine_once_checked_against_the_published_sums(
    tmp_path: Path, releases: Releases, port_block: Callable[[int], int]
) -> None:
    project = godot4_project(tmp_path / "four")
    home = tmp_path / "home"
    home.mkdir()
    env = {**_no_godot4_path(tmp_path), "STANDIN_LOG": str(tmp_path / "engine.jsonl")}
    args = ["setup", "--game-project", str(project), "--godot-mirror", releases.url,
            "--port", str(port_block(1))]  # fmt: skip
    first = wide_lander(home, *args, env=env, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    engine = tmp_path / "cache" / "4.3" / "godot"
    assert engine.is_file() and f"fetched from {releases.url}" in first.stdout, first.stdout
    assert sorted(releases.requests) == sorted(
        [f"/4.3-stable/{ENGINE_ZIP}", "/4.3-stable/SHA512-SUMS.txt"]
    )
    assert not list((tmp_path / "cache").glob(".*")), "no staging left behind"
    second = wide_lander(home, *args, env=env, timeout=300)
    assert second.returncode == 0, second.stdout + second.stderr
    assert len(releases.requests) == 2, "a second setup downloads nothing"
    assert "up to date" in second.stdout and "fetched" not in second.stdout
    trained = wide_lander(home, "train", "f1", "--timesteps", "512", "--port", str(port_block(2)),
                     *QUICK, env=env)  # fmt: skip
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert record(home, "f1").extra.godot["engine"] == str(engine.resolve())  # type: ignore[index]


def test_setup_fetches_the_templates_a_preset_needs_and_exports_the_whole_game(
    tmp_path: Path, releases: Releases, port_block: Callable[[int], int]
) -> None:
    project = godot4_project(tmp_path / "four")
    home = tmp_path / "home"
    home.mkdir()
    log = tmp_path / "engine.jsonl"
    env = {**_no_godot4_path(tmp_path), "STANDIN_LOG": str(log)}
    args = ["setup", "--game-project", str(project), "--export-preset", "training",
            "--godot-mirror", releases.url, "--port", str(port_block(1))]  # fmt: skip
    first = wide_lander(home, *args, env=env, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    templates = tmp_path / "cache" / "4.3" / "editor_data" / "export_templates" / "4.3.stable"
    assert (templates / "linux_release.x86_64").is_file()
    assert f"/4.3-stable/{TEMPLATES_TPZ}" in releases.requests
    game = home / "build" / "godot" / "four-training" / "game.x86_64"
    assert game.is_file() and "(executable, preset 'training')" in first.stdout
    assert any("--export-release" in call for call in calls(log))
    asked = len(releases.requests)
    second = wide_lander(home, *args, env=env, timeout=300)
    assert second.returncode == 0 and len(releases.requests) == asked, second.stdout
    trained = wide_lander(home, "train", "t1", "--timesteps", "512", "--port", str(port_block(2)),
                     *QUICK, env=env)  # fmt: skip
    assert trained.returncode == 0, trained.stdout + trained.stderr
    origin = record(home, "t1").extra.godot
    assert origin is not None and origin["kind"] == "executable" and origin["build"] == str(game)


def test_a_wrong_checksum_or_a_cut_download_installs_nothing(
    tmp_path: Path, releases: Releases, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cli.machine.godot_download import GodotDownloadError, Release, install_engine

    monkeypatch.setenv("LANDER_GODOT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LANDER_GODOT_MIRROR", releases.url)
    good = releases.files[ENGINE_ZIP]
    releases.files[ENGINE_ZIP] = good[:-1] + bytes([good[-1] ^ 1])
    with pytest.raises(GodotDownloadError, match="does not match its published SHA-512"):
        install_engine(Release("4.3"))
    assert [p.name for p in (tmp_path / "cache").iterdir()] == []
    releases.files[ENGINE_ZIP] = good
    releases.cut_short.add(ENGINE_ZIP)
    with pytest.raises(
        GodotDownloadError, match=f"cannot download {ENGINE_ZIP} from {releases.url}"
    ):
        install_engine(Release("4.3"))
    assert [p.name for p in (tmp_path / "cache").iterdir()] == []
    releases.cut_short.clear()
    engine, fetched = install_engine(Release("4.3"))
    assert fetched and engine.version.startswith("4.3.stable")
    assert install_engine(Release("4.3"))[1] is False


def test_a_machine_that_cannot_reach_the_download_is_told_what_to_fetch_and_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cli.machine.godot_download import GodotDownloadError, Release, install_engine

    monkeypatch.setenv("LANDER_GODOT_CACHE", str(tmp_path / "cache"))
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("LANDER_GODOT_MIRROR", f"http://127.0.0.1:{port}")
    with pytest.raises(GodotDownloadError) as refused:
        install_engine(Release("4.3"))
    line = str(refused.value)
    assert "\n" not in line and "SHA512-SUMS.txt" in line
    assert f"http://127.0.0.1:{port}/4.3-stable/SHA512-SUMS.txt" in line
    assert str(tmp_path / "cache" / "downloads") in line


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        ({"scene": "res://t.tscn"}, "--scene applies to a Godot project"),
        ({"export_preset": "training"}, "--export-preset applies to a Godot project"),
        ({"game_project": "/g", "game_bin": "/bin/true"}, "--game-bin another: give one"),
        ({"game_project": "/g", "game": "stroke"}, "--game stroke another"),
        ({"game_project": "/g", "export_preset": "t", "scene": "res://t.tscn"}, "custom_features"),
        ({"game_project": "/g", "transport": "stdio"}, "plugin speaks TCP"),
        ({"game_project": "/g", "cluster": "10.0.0.5:6379"}, "--game-bin"),
        ({"game": "editor", "speedup": 8.0}, "--speedup (the scene's own applies)"),
        ({"game": "editor", "game_args": {"a": "1"}}, "--game-arg"),
        ({"game": "editor", "eval_every": 1000}, "--eval-every"),
    ],
)
def test_the_godot_settings_are_refused_in_one_line_where_they_do_not_apply(
    settings: dict[str, object], refusal: str
) -> None:
    from training.config import ConfigError, TrainConfig, apply_overrides, check_config

    base = {"n_parallel": 1} if settings.get("game") == "editor" else {}
    with pytest.raises(ConfigError, match=re.escape(refusal)):
        check_config(apply_overrides(TrainConfig(), {**base, **settings}, "flags"))


def test_the_source_digest_follows_the_tracked_files_staged_or_not(tmp_path: Path) -> None:
    """What a build records it was made from: a change to a tracked file changes it, staging
    or committing the same change does not (no needless export), an untracked file does not."""
    from game_bridge.godot_project import read_project, source_state

    project = godot_project(tmp_path / "game")
    clean = source_state(read_project(project))
    assert clean.commit == git(project, "rev-parse", "HEAD").strip() and not clean.dirty
    (project / "notes.txt").write_text("not tracked\n")
    assert source_state(read_project(project)).digest == clean.digest
    with open(project / "main.gd", "a") as script:
        script.write("\n# changed\n")
    changed = source_state(read_project(project))
    assert changed.digest != clean.digest and changed.dirty
    git(project, "add", "main.gd")
    assert source_state(read_project(project)).digest == changed.digest
    git(project, "commit", "-q", "-m", "a change")
    committed = source_state(read_project(project))
    assert committed.digest == changed.digest and not committed.dirty
    assert committed.commit != clean.commit
