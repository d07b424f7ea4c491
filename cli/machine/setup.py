"""``lander setup``: check and fix what a machine needs, as a checklist.

Safe to run again at any time: every step looks before it acts, fixes what it
can (the game binary, a CUDA torch on an NVIDIA machine, tmux through apt-get
when run as root), and a step it cannot fix says how to fix it by hand.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from rich.table import Table

from cli.common.console import console, how
from cli.common.paths import GAME_SETTINGS_NAME, build_dir, game_binary_path, remembered_game_bin
from cli.machine.checklist import CheckResult
from cli.machine.godot_setup import GodotSetup, godot_setup
from cli.results.git_sync import open_repo
from cli.results.lfs import ATTRIBUTES, LfsError, enable_lfs, uses_lfs, write_attributes
from cli.results.publishing import publish_files
from game_bridge.errors import BridgeError, LanderError
from game_bridge.godot_engine import engine_at
from game_bridge.godot_project import ensure_imported, read_project
from game_bridge.launcher import game_command
from game_bridge.ray_token import ensure_token, token_path
from game_bridge.smoke import run_smoke_test
from games import DEFAULT_GAME, game_entry

TORCH_SPEC = "torch>=2.3,<2.14"


def game_launcher_script(python: Path) -> str:
    """The default game's executable: a shell script that runs it with ``python``."""
    module = game_entry(DEFAULT_GAME).module
    return (
        "#!/bin/sh\n"
        "# Written by `lander setup`: starts lander's bundled headless game, so any tool\n"
        "# that launches a game executable by path (like a Godot export) can launch it.\n"
        f"exec '{python}' -m {module} \"$@\"\n"
    )


def write_game_binary(root: Path) -> CheckResult:
    """Write the default game's executable into ``build/`` unless an identical one is there."""
    path = game_binary_path(root)
    script = game_launcher_script(Path(sys.executable))
    if path.is_file() and path.read_text() == script and os.access(path, os.X_OK):
        return CheckResult("game binary", True, f"{path.relative_to(root)} is up to date")
    build_dir(root).mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(script)
    temporary.chmod(temporary.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    temporary.replace(path)
    return CheckResult("game binary", True, f"wrote {path.relative_to(root)}")


def refresh_game_binary(root: Path) -> None:
    """Rewrite the game executable ``setup`` wrote before, when the code it starts moved
    (the bootstrap script calls this after an upgrade); write none where there was none."""
    if game_binary_path(root).is_file():
        write_game_binary(root)


GAME_CHOICES = ("game", "game_bin", "game_url", "game_project")
"""The settings that name a run's game: one given on the command line replaces the
remembered game."""


def with_remembered_game(root: Path, overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` plus the game ``lander setup --game-bin`` (or ``--game-project``, with
    its scene, engine arguments and preset) remembered, unless the flags name a game."""
    if any(name in overrides for name in GAME_CHOICES):
        return overrides
    remembered = remembered_game_bin(root)
    if remembered is not None:
        return {**overrides, "game_bin": remembered}
    project = remembered_project(root)
    return {**project, **overrides} if project else overrides


def remembered_project(root: Path) -> dict[str, Any]:
    """The Godot project ``lander setup --game-project`` remembered, with its settings
    (empty when none)."""
    try:
        saved = json.loads((build_dir(root) / GAME_SETTINGS_NAME).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(saved, dict) or not isinstance(saved.get("game_project"), str):
        return {}
    names = ("game_project", "scene", "engine_args", "export_preset")
    return {name: saved[name] for name in names if saved.get(name) is not None}


def remember_game_bin(root: Path, game_bin: Path) -> CheckResult:
    """Check a user's game binary and remember it as this checkout's default game."""
    try:
        game_command(game_bin)
    except BridgeError as exc:
        return CheckResult("game binary", False, f"{exc}")
    build_dir(root).mkdir(parents=True, exist_ok=True)
    (build_dir(root) / GAME_SETTINGS_NAME).write_text(
        json.dumps({"game_bin": str(game_bin.resolve())}) + "\n"
    )
    return CheckResult("game binary", True, f"{game_bin} (remembered as this checkout's game)")


GODOT_CANDIDATES = ("godot3-server", "godot4", "godot")


def find_godot() -> str | None:
    """The Godot engine to run projects with: ``GODOT_BIN``, else the first on PATH."""
    override = os.environ.get("GODOT_BIN")
    if override:
        return shutil.which(override) or (override if Path(override).is_file() else None)
    for name in GODOT_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def godot_check(game_bin: Path) -> CheckResult | None:
    """For a launcher beside a ``project.godot``: find the engine and run the project's
    import pass (as a fresh clone needs before its first headless run). None otherwise."""
    project = game_bin.resolve().parent
    if not (project / "project.godot").is_file():
        return None
    godot = find_godot()
    if godot is None and os.geteuid() == 0 and shutil.which("apt-get"):
        tool_check("godot3-server", "godot3-server")
        godot = find_godot()
    if godot is None:
        return CheckResult(
            "godot", False, "no Godot engine: apt-get install godot3-server, or set GODOT_BIN"
        )
    try:
        engine = engine_at(godot)
        ensure_imported(engine, read_project(project))
    except LanderError as exc:  # not an engine, or its import pass failed: the engine's line
        return CheckResult("godot", False, f"{godot}: {exc}")
    return CheckResult("godot", True, f"{godot} {engine.version}; imported {project.name}")


def smoke_test(game_bin: Path, port: int) -> CheckResult:
    """Run the headless smoke test against ``game_bin``."""
    try:
        result = run_smoke_test(game_command(game_bin), port)
    except BridgeError as exc:
        return CheckResult("smoke test", False, f"{exc}. Run the game by hand to see why.")
    return CheckResult(
        "smoke test",
        True,
        f"handshake, reset, {result.steps} steps, close in {result.seconds:.1f} s "
        f"({result.agents} agent(s), obs {result.observation_space}, actions {result.action_space})",
    )


def python_check() -> CheckResult:
    """Python 3.11 or newer runs lander (tomllib, datetime.UTC)."""
    version = ".".join(map(str, sys.version_info[:3]))
    ok = sys.version_info >= (3, 11)
    return CheckResult("python", ok, version if ok else f"{version}: install Python 3.11 or newer")


def venv_check(root: Path) -> CheckResult:
    """lander runs from the checkout's own virtual environment."""
    expected = (root / ".venv").resolve()
    prefix = Path(sys.prefix).resolve()
    if prefix == expected:
        return CheckResult("virtualenv", True, f"{expected}")
    if sys.prefix != sys.base_prefix:
        return CheckResult(
            "virtualenv",
            True,
            f"{prefix} (not this checkout's .venv; ./lander makes that one)",
            True,
        )
    return CheckResult(
        "virtualenv", False, "not in a virtual environment: run ./lander, which creates .venv"
    )


def nvidia_gpu() -> str | None:
    """The first NVIDIA GPU's name, or None without ``nvidia-smi`` or a GPU."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        result = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line for line in result.stdout.splitlines() if line.startswith("GPU")]
    return lines[0] if result.returncode == 0 and lines else None


def _installed_torch() -> tuple[str, str | None]:
    """Version and CUDA version of the torch this interpreter would import, read in a
    fresh process so a reinstall is seen."""
    code = "import torch, json; print(json.dumps([torch.__version__, torch.version.cuda]))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    version, cuda = json.loads(result.stdout.strip().splitlines()[-1])
    return str(version), cuda


def torch_check() -> CheckResult:
    """A CUDA torch where there is an NVIDIA GPU, the CPU build elsewhere."""
    try:
        version, cuda = _installed_torch()
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return CheckResult("torch", False, f"torch does not import: pip install '{TORCH_SPEC}'")
    gpu = nvidia_gpu()
    if gpu is None:
        return CheckResult(
            "torch", True, f"{version} ({'CUDA ' + cuda if cuda else 'CPU build'}); no NVIDIA GPU"
        )
    if cuda:
        return CheckResult("torch", True, f"{version} with CUDA {cuda} for {gpu}")
    console.print(f"  installing a CUDA build of torch for {gpu} (several GB) ...")
    # PyPI's Linux torch wheels are CUDA builds; a local +cpu wheel must not win.
    env = {**os.environ, "PIP_FIND_LINKS": "", "PIP_CONSTRAINT": ""}
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--force-reinstall",
        "--no-deps",
        TORCH_SPEC,
    ]
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    try:
        version, cuda = _installed_torch()
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        cuda = None
    if result.returncode != 0 or not cuda:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or [
            "no CUDA build installed"
        ]
        return CheckResult("torch", False, f"CPU-only torch on a GPU machine; pip said: {tail[0]}. "
                           f"Fix: .venv/bin/pip install --force-reinstall '{TORCH_SPEC}'")  # fmt: skip
    return CheckResult("torch", True, f"installed {version} with CUDA {cuda} for {gpu}")


def tool_check(tool: str, package: str) -> CheckResult:
    """A command-line tool, installed with apt-get when missing and we are root."""
    if shutil.which(tool):
        return CheckResult(tool, True, shutil.which(tool) or tool)
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, env=env, check=False)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", package], capture_output=True, env=env, check=False
        )
        if shutil.which(tool):
            return CheckResult(tool, True, f"installed {package} with apt-get")
    return CheckResult(tool, False, f"{tool} is missing: sudo apt-get install {package}")


def git_check(root: Path) -> CheckResult:
    """A git work tree with a remote, so results travel."""
    repo = open_repo(root)
    if repo is None:
        return CheckResult(
            "git", False, f"{root} is not a git checkout: clone lander with git", True
        )
    if not repo.remotes:
        return CheckResult(
            "git", False, "no remote: results stay here (git remote add origin URL)", True
        )
    remote = repo.remotes[0]
    try:
        subprocess.run(
            ["git", "ls-remote", "--exit-code", "--heads", remote.name],
            cwd=root, capture_output=True, timeout=15, check=True,
        )  # fmt: skip
    except (subprocess.SubprocessError, OSError):
        return CheckResult(
            "git",
            False,
            f"remote {remote.name} ({remote.url}) does not answer: check the URL",
            True,
        )
    return CheckResult("git remote", True, f"remote {remote.name} ({remote.url}) reachable")


def tensorboard_check() -> CheckResult:
    """TensorBoard, for the dashboard."""
    try:
        return CheckResult("tensorboard", True, importlib.metadata.version("tensorboard"))
    except importlib.metadata.PackageNotFoundError:
        return CheckResult("tensorboard", False, "missing: .venv/bin/pip install tensorboard")


def ray_check(make_token: bool = False) -> CheckResult:
    """Ray, for games and sweep trials on a cluster (the ``cluster`` extra); with
    ``make_token``, the cluster's token too (made once, outside the checkout)."""
    try:
        version = importlib.metadata.version("ray")
    except importlib.metadata.PackageNotFoundError:
        return CheckResult("ray", False, "missing: ./lander setup --cluster installs it")
    if not make_token:
        return CheckResult("ray", True, version)
    try:
        made = "made now" if ensure_token() else "kept"
    except OSError as exc:
        return CheckResult("ray", False, f"cannot write the token {token_path()}: {exc.strerror}")
    return CheckResult(
        "ray",
        True,
        f"{version}; token {token_path()} ({made}; every machine of the cluster needs a copy): "
        "start a head with ./lander cluster (docs/cluster.md)",
    )


TEST_TOOLS = (
    ("godot3-server", "godot3-server"),
    ("chromium", "chromium"),
    ("git-lfs", "git-lfs"),
)
"""What the tests run beside lander's own install (``setup --dev``): Debian's headless
Godot 3 for the Godot example game, Debian's chromium for the live page's tests, git-lfs
for a repository that keeps checkpoints in LFS."""


def lfs_check(root: Path, commit: bool) -> CheckResult:
    """Git LFS for checkpoints and bots in this clone (git-lfs installed with apt-get as
    root when missing); with ``commit``, the repository's ``.gitattributes`` says so
    too, committed and pushed like a run's files (``setup --lfs``)."""
    tool = tool_check("git-lfs", "git-lfs")
    if not tool.ok:
        return CheckResult("git lfs", False, tool.detail)
    try:
        done = enable_lfs(root)
    except LfsError as exc:
        return CheckResult("git lfs", False, str(exc))
    if commit and write_attributes(root):
        pushed = publish_files(
            root,
            [ATTRIBUTES],
            "lander setup --lfs: checkpoints and bots in Git LFS",
            finish=how("setup --lfs"),
        )
        if not pushed.pushed:
            return CheckResult(
                "git lfs", False, f"{ATTRIBUTES} committed, not pushed: {pushed.message}", True
            )
        done += f"; {ATTRIBUTES} committed and pushed"
    return CheckResult("git lfs", True, done)


def playwright_check() -> CheckResult:
    """Playwright for Python, which drives the system's chromium in the page's tests."""
    try:
        return CheckResult("playwright", True, importlib.metadata.version("playwright"))
    except importlib.metadata.PackageNotFoundError:
        return CheckResult("playwright", False, "missing: ./lander setup --dev installs it")


def run_setup(
    root: Path,
    game_bin: Path | None,
    port: int,
    cluster: bool = False,
    dev: bool = False,
    lfs: bool = False,
    godot: GodotSetup | None = None,
) -> list[CheckResult]:
    """Run every check in order, printing each line as it completes.

    :param cluster: check Ray too (the bootstrap script installed it for ``--cluster``).
    :param dev: check everything the tests need too (Ray, Playwright, and the
        :data:`TEST_TOOLS`, installed with apt-get as root): the README's test command
        then skips nothing.
    :param lfs: keep checkpoints and bots in Git LFS from now on (:func:`lfs_check`);
        a clone whose repository already does gets LFS set up without it.
    :param godot: a Godot project to ready instead of a game binary (``--game-project``).
    """
    steps: list[Callable[[], CheckResult]] = [
        python_check,
        lambda: venv_check(root),
        torch_check,
        lambda: tool_check("tmux", "tmux"),
        lambda: tool_check("git", "git"),
        lambda: git_check(root),
        *([lambda: lfs_check(root, lfs)] if lfs or uses_lfs(root) else []),
        tensorboard_check,
        *([partial(ray_check, cluster)] if cluster or dev else []),
        *([playwright_check] if dev else []),
        *[partial(tool_check, tool, package) for tool, package in (TEST_TOOLS if dev else ())],
    ]
    if godot is None:
        steps.append(
            (lambda: remember_game_bin(root, game_bin))
            if game_bin is not None
            else (lambda: write_game_binary(root))
        )
    results: list[CheckResult] = []
    for step in steps:
        results.append(step())
        print_result(results[-1])
    if godot is not None:
        for done in godot_setup(root, godot, port):
            results.append(done)
            print_result(done)
        return results
    imported = godot_check(game_bin) if game_bin is not None and results[-1].ok else None
    if imported is not None:
        results.append(imported)
        print_result(imported)
    if all(result.ok or result.warning for result in results[-2:]):
        binary = game_bin or game_binary_path(root)
        results.append(smoke_test(binary, port))
        print_result(results[-1])
    return results


def print_result(result: CheckResult) -> None:
    """One checklist line: a green tick, a yellow warning or a red cross."""
    mark = "[green]✓[/]" if result.ok else ("[yellow]![/]" if result.warning else "[red]✗[/]")
    table = Table.grid(padding=(0, 1))
    table.add_row(mark, f"[bold]{result.name:<12}[/]", result.detail)
    console.print(table)
