"""The command that readies this machine and its checkout: ``setup``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cli.common.console import console, fail
from cli.common.paths import project_root
from game_bridge.protocol import DEFAULT_PORT

if TYPE_CHECKING:
    from cli.machine.godot_setup import GodotSetup

GameProject = Annotated[
    Path | None,
    typer.Option(
        help="A Godot project folder (with project.godot) to train from source: setup finds "
        "or fetches the engine of its version, runs its import pass, smoke-tests it and "
        "remembers it (instead of --game-bin).",
        rich_help_panel="Godot",
    ),
]
Scene = Annotated[
    str | None,
    typer.Option(help="With --game-project: the scene to run.", rich_help_panel="Godot"),
]
EngineArg = Annotated[
    list[str] | None,
    typer.Option(
        metavar="ARG",
        help="With --game-project: an argument for the engine (repeatable: "
        "--engine-arg=--verbose).",
        rich_help_panel="Godot",
    ),
]
ExportPreset = Annotated[
    str | None,
    typer.Option(
        help="With --game-project: export a training build from this preset into build/ "
        "(runs re-export it when the project changed).",
        rich_help_panel="Godot",
    ),
]
GodotVersion = Annotated[
    str | None,
    typer.Option(
        help="The Godot release to fetch when none is found (4.3, 3.5.3) [default: the "
        "project's config/features].",
        rich_help_panel="Godot",
    ),
]
GodotMirror = Annotated[
    str | None,
    typer.Option(
        help="Fetch Godot releases from this address instead of the official one "
        "(RELEASE-TAG/FILE under it).",
        envvar="LANDER_GODOT_MIRROR",
        rich_help_panel="Godot",
    ),
]


def _godot_request(
    game_bin: Path | None,
    game_project: Path | None,
    scene: str | None,
    engine_arg: list[str] | None,
    export_preset: str | None,
    release: tuple[str | None, str | None],
) -> GodotSetup | None:
    """The Godot project ``setup`` was asked to ready, its flags checked (None: none)."""
    godot_version, godot_mirror = release
    if game_project is not None and game_bin is not None:
        fail("--game-project and --game-bin each name the game: give one")
    if game_project is None and (scene or engine_arg or export_preset or godot_version):
        fail("--scene, --engine-arg, --export-preset and --godot-version need --game-project")
    if export_preset is not None and scene is not None:
        fail("--scene runs the source; a build's scene is its preset's (custom_features)")
    if godot_mirror:
        os.environ["LANDER_GODOT_MIRROR"] = godot_mirror  # where godot_download reads it
    if game_project is None:
        return None
    from cli.machine.godot_setup import GodotSetup

    return GodotSetup(game_project, scene, list(engine_arg or []), export_preset, godot_version)


def setup(
    game_bin: Annotated[
        Path | None,
        typer.Option(
            help="A game executable that speaks the Godot RL Agents protocol "
            "(default: the bundled lander game, written to build/).",
            envvar="LANDER_GAME_BIN",
        ),
    ] = None,
    game_project: GameProject = None,
    scene: Scene = None,
    engine_arg: EngineArg = None,
    export_preset: ExportPreset = None,
    godot_version: GodotVersion = None,
    godot_mirror: GodotMirror = None,
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
    the game (binary, or a Godot project with its engine) and a headless smoke test. Safe to
    re-run."""
    from cli.machine.setup import run_setup

    godot = _godot_request(
        game_bin, game_project, scene, engine_arg, export_preset, (godot_version, godot_mirror)
    )
    results = run_setup(project_root(), game_bin, port, cluster, dev, lfs, godot)
    failed = [result.name for result in results if not result.ok and not result.warning]
    if failed:
        fail(f"setup incomplete: {', '.join(failed)} failed (see above)")
    console.print("[green]setup complete[/]")


def cluster(
    join: Annotated[
        str | None,
        typer.Option(
            metavar="HEAD:PORT",
            help="Join the Ray head at this address (its token copied here first); "
            "without it, start a head on this machine.",
        ),
    ] = None,
    port: Annotated[int, typer.Option(help="The head's port (with no --join).")] = 6379,
    node_ip_address: Annotated[
        str | None,
        typer.Option(help="The address the other nodes reach this one at (default: Ray's choice)."),
    ] = None,
    dashboard_host: Annotated[
        str,
        typer.Option(
            help="Where Ray's dashboard listens (it runs jobs: code). 127.0.0.1: this machine "
            "only; reach it over SSH (ssh -L 8265:127.0.0.1:8265 HEAD)."
        ),
    ] = "127.0.0.1",
    stop_it: Annotated[
        bool, typer.Option("--stop", help="Stop this machine's Ray nodes (ray stop).")
    ] = False,
    ray_args: Annotated[
        list[str] | None,
        typer.Argument(metavar="[-- RAY_START_ARGS]", help="More options for `ray start`."),
    ] = None,
) -> None:
    """Make this machine a node of a Ray cluster for `--cluster` runs, with Ray's token
    authentication: a head here, or --join one (docs/cluster.md)."""
    from cli.machine.ray_nodes import start_node, stop_nodes

    if stop_it:
        stop_nodes()
        return
    if not 1 <= port <= 65535:
        fail(f"--port must be from 1 to 65535, got {port}")
    start_node(join, port, node_ip_address, dashboard_host, list(ray_args or []))
