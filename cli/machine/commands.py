"""The command that readies this machine and its checkout: ``setup``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.common.console import console, fail
from cli.common.paths import project_root
from game_bridge.protocol import DEFAULT_PORT


def setup(
    game_bin: Annotated[
        Path | None,
        typer.Option(
            help="A game executable that speaks the Godot RL Agents protocol "
            "(default: the bundled lander game, written to build/).",
            envvar="LANDER_GAME_BIN",
        ),
    ] = None,
    port: Annotated[
        int, typer.Option(help="TCP port for the smoke test's game instance.")
    ] = DEFAULT_PORT,
    cluster: Annotated[
        bool,
        typer.Option(
            "--cluster",
            help="Also install Ray, to run games or sweep trials on a cluster (docs/cluster.md).",
        ),
    ] = False,
    dev: Annotated[
        bool,
        typer.Option(
            "--dev",
            help="Also install everything the tests need: Ray, Playwright, and (with apt-get, "
            "as root) Debian's godot3-server, chromium and git-lfs.",
        ),
    ] = False,
    lfs: Annotated[
        bool,
        typer.Option(
            "--lfs",
            help="Keep checkpoints and bots in Git LFS from now on (.gitattributes, committed "
            "and pushed): history holds pointers, a clone fetches only the current files.",
        ),
    ] = False,
) -> None:
    """Check and fix this machine: Python, venv, torch (CUDA on a GPU), tmux, git, TensorBoard,
    the game binary and a headless smoke test. Safe to re-run."""
    from cli.machine.setup import run_setup

    results = run_setup(project_root(), game_bin, port, cluster, dev, lfs)
    failed = [result.name for result in results if not result.ok and not result.warning]
    if failed:
        fail(f"setup incomplete: {', '.join(failed)} failed (see above)")
    console.print("[green]setup complete[/]")
