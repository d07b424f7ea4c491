"""The house's layout (docs/architecture.md): training/ in packages with no import circle,
commands in modules by group, what a user already has still loading, and the light
install running its commands without torch."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from stable_baselines3 import PPO

from tests.conftest import find_free_port_block
from training.bots.run_bots import export_run
from training.runs.run_paths import RunPaths
from training.session.trainer import TrainRequest, train

ROOT = Path(__file__).resolve().parent.parent
BEFORE_PACKAGES = ROOT / "tests" / "fixtures" / "before_packages"
MAX_MODULES = 12
"""The most modules one folder of training/ or cli/ holds."""
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
PRODUCT_PACKAGES = ("cli", "training", "game_bridge", "games")


def test_the_import_rule_holds_and_is_checked() -> None:
    """``lint-imports`` (the contracts in pyproject.toml: cli over training over games over
    the bridge, training's packages in layers, cli's command groups in layers, no circle
    among a package's modules) passes on the tree as it is."""
    done = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "lint-imports")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert "4 kept, 0 broken" in done.stdout


def test_folders_stay_small_and_the_app_only_registers() -> None:
    """Every folder of training/ and cli/ holds at most 12 modules; cli/app.py only wires the
    commands (no command lives there: each is in the ``commands`` module of its group)."""
    for top in (ROOT / "training", ROOT / "cli"):
        for folder in [top, *(p for p in top.iterdir() if p.is_dir())]:
            if folder.name == "__pycache__":
                continue
            modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
            assert len(modules) <= MAX_MODULES, (folder, len(modules))
    app = ast.parse((ROOT / "cli" / "app.py").read_text())
    functions = [node.name for node in app.body if isinstance(node, ast.FunctionDef)]
    assert functions == ["_root", "main"], functions
    assert len((ROOT / "cli" / "app.py").read_text().splitlines()) <= 100


def _product_modules() -> list[Path]:
    return [
        path
        for package in PRODUCT_PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "__pycache__" not in path.parts
    ]


def test_no_module_or_function_grows_past_a_screenful() -> None:
    """No module of the product packages is over 600 lines and no function over 80: a
    module holds one concept and a function fits on a screen (docs/architecture.md)."""
    long_modules = []
    long_functions = []
    for path in _product_modules():
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            long_modules.append((str(path.relative_to(ROOT)), len(text.splitlines())))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions.append((str(path.relative_to(ROOT)), node.name, length))
    assert not long_modules, long_modules
    assert not long_functions, long_functions


@pytest.mark.parametrize(("run", "steps"), [("cam", 512), ("vec", 1024)])
def test_checkpoints_from_before_the_packages_resume_and_export(
    tmp_path: Path, run: str, steps: int
) -> None:
    """Runs trained by main before training/ had packages (a camera checkpoint storing the
    class path ``training.camera_policy.CameraExtractor``, and a normalized gym run with its
    statistics) resume through real games, go on counting, and export with parity."""
    shutil.copytree(BEFORE_PACKAGES, tmp_path, dirs_exist_ok=True)
    saved = PPO.load(tmp_path / "checkpoints" / run / "final.zip", device="cpu")
    overrides = {"timesteps": steps, "port": find_free_port_block(2)}
    outcome = train(TrainRequest(tmp_path, "again", overrides, resume=run), Console(quiet=True))
    assert outcome.status == "finished", outcome.error
    resumed = PPO.load(tmp_path / "checkpoints" / "again" / "final.zip", device="cpu")
    assert resumed.num_timesteps == saved.num_timesteps + steps
    assert (
        type(resumed.policy.features_extractor).__name__
        == type(saved.policy.features_extractor).__name__
    )
    exported = export_run(RunPaths(tmp_path, "again"))
    assert exported.bot_json.exists() and exported.bot_onnx.exists()
    assert exported.bot_parity.samples > 0 and exported.onnx_parity.samples > 0


LIGHT = """
import importlib.abc, sys
class NoTrainingStack(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"torch", "stable_baselines3", "onnx", "onnxruntime", "optuna"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
from cli.app import main
sys.meta_path.insert(0, NoTrainingStack())
sys.argv = ["lander", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["status"], "champion on lander: old1"),
        (["play", "bots/old1.json", "--seconds", "2"], "game seconds"),
        (["eval", "bots/old1.json", "--episodes", "2"], "mean_reward="),
    ],
)
def test_the_light_install_runs_without_the_training_stack(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    """``status``, ``play`` and ``eval`` of a bot file run in a process where torch, SB3,
    ONNX and Optuna cannot be imported (the light install): none of the packages they use
    reaches for them."""
    shutil.copytree(ROOT / "tests" / "fixtures" / "old_layout", tmp_path, dirs_exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", LIGHT, *args],
        cwd=tmp_path,
        env={**os.environ, "LANDER_HOME": str(tmp_path), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert expected in done.stdout + done.stderr
