"""``lander setup``: check and fix what a machine needs, as a checklist.

Safe to run again at any time: every step looks before it acts, and a step that
cannot be fixed says how to fix it by hand.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from cli.console import console
from cli.paths import build_dir, game_binary_path
from game_bridge.errors import BridgeError
from game_bridge.launcher import game_command
from game_bridge.smoke import run_smoke_test


@dataclass
class CheckResult:
    """One line of the checklist.

    :param name: what was checked.
    :param ok: True when it holds now (after any fix).
    :param detail: what was found or done; on failure, how to fix it.
    """

    name: str
    ok: bool
    detail: str


def game_launcher_script(python: Path) -> str:
    """The bundled game's executable: a shell script that runs it with ``python``."""
    return (
        "#!/bin/sh\n"
        "# Written by `lander setup`: starts lander's bundled headless game, so any tool\n"
        "# that launches a game executable by path (like a Godot export) can launch it.\n"
        f"exec '{python}' -m game_bridge.lander_game \"$@\"\n"
    )


def write_game_binary(root: Path) -> CheckResult:
    """Write ``build/lander_game.x86_64`` unless an identical one is already there."""
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
    """Python 3.10 or newer runs lander."""
    version = ".".join(map(str, sys.version_info[:3]))
    ok = sys.version_info >= (3, 10)
    return CheckResult("python", ok, version if ok else f"{version}: install Python 3.10 or newer")


def run_setup(root: Path, game_bin: Path | None, port: int) -> list[CheckResult]:
    """Run every check in order, printing each line as it completes."""
    results: list[CheckResult] = []
    steps: list[Callable[[], CheckResult]] = [python_check, lambda: write_game_binary(root)]
    for step in steps:
        results.append(step())
        print_result(results[-1])
    binary = game_bin or game_binary_path(root)
    results.append(smoke_test(binary, port))
    print_result(results[-1])
    return results


def print_result(result: CheckResult) -> None:
    """One checklist line: a green tick or a red cross, the check, the detail."""
    mark = "[green]✓[/]" if result.ok else "[red]✗[/]"
    table = Table.grid(padding=(0, 1))
    table.add_row(mark, f"[bold]{result.name:<14}[/]", result.detail)
    console.print(table)
