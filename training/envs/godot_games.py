"""A run's Godot game as its makers have it: the project from source, a training build
exported from its preset (again whenever the project changed since), or the game a person
runs in the editor; and what the run trained against, for its record.

Everything a run does to its project before the games start happens here, once: the import
pass a fresh clone needs, the export of a stale build. The games then start from what that
left, none of them importing or exporting by itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from game_bridge.godot_engine import (
    GodotEngine,
    GodotEngineError,
    engine_cache,
    find_engine,
)
from game_bridge.godot_project import (
    GodotProject,
    build_folder,
    ensure_imported,
    export_build,
    read_build,
    read_project,
    source_state,
    stale_reason,
)
from games import EDITOR_GAME
from training.config import TrainConfig


@dataclass
class GodotGame:
    """How a run launches its Godot project, and where that came from.

    :param command: the engine (or build) and its arguments, before the plugin's.
    :param origin: what the run trained against, for ``run.json`` (``extra.godot``).
    :param notes: what was done to get there (an import pass, an export), to say once.
    """

    command: list[str]
    origin: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def project_engine(project: GodotProject) -> GodotEngine:
    """The engine that runs ``project``: ``GODOT_BIN``, else one of its version on PATH or
    in lander's cache.

    :raises GodotEngineError: none is there (the line says how ``setup`` fetches one).
    """
    engine = find_engine(project.version)
    if engine is None:
        wanted = f"Godot {project.version}" if project.version else "Godot"
        raise GodotEngineError(
            f"no {wanted} engine for {project.path.name} (GODOT_BIN, PATH, {engine_cache()}): "
            f"./lander setup --game-project {project.path} fetches it"
        )
    return engine


_resolved: dict[tuple[Any, ...], GodotGame] = {}
"""Each project resolved in this process, so a run's later launches (a restart, an
evaluation's own game) reuse what its start exported instead of checking again."""


def forget_godot_games() -> None:
    """Resolve projects afresh from now on: a new session checks its build again (the
    project may have been pulled since the last session of this process)."""
    _resolved.clear()


def godot_game(config: TrainConfig, build_root: Path) -> GodotGame:
    """How ``config``'s project launches, exporting its training build first when the build
    is missing, stale, or made by another engine.

    :param build_root: the checkout's ``build/`` (git-ignored), where builds go.
    :raises GodotProjectError, GodotEngineError: no project, no engine, a failed import or
        export (the engine's own line): no run starts.
    """
    assert config.game_project is not None
    key = (config.game_project, config.scene, tuple(config.engine_args), config.export_preset)
    if key in _resolved:
        return _resolved[key]
    project = read_project(config.game_project)
    engine = project_engine(project)
    origin: dict[str, Any] = {
        "project": str(project.path),
        "engine": engine.path,
        "version": engine.version,
    }
    notes: list[str] = []
    if config.export_preset is None:
        imported, state = ensure_imported(engine, project)
        if imported:
            notes.append(f"imported {project.path.name} with Godot {engine.release} (once)")
        command = engine.run_project(project.path, config.scene, config.engine_args)
        origin.update(way="source", scene=config.scene, commit=state.commit, dirty=state.dirty)
    else:
        folder = build_folder(build_root, project, config.export_preset)
        build = read_build(folder)
        state = source_state(project)
        reason = stale_reason(build, engine, state)
        if reason is not None:
            build = export_build(engine, project, config.export_preset, build_root, state)
            notes.append(
                f"exported {project.path.name}'s preset {config.export_preset!r} as a "
                f"{build.kind} in {build.seconds:.1f} s ({reason})"
            )
        assert build is not None
        command = build.command(engine, config.engine_args)
        origin.update(
            way="build",
            preset=build.preset,
            build=build.game,
            kind=build.kind,
            commit=build.commit,
            dirty=build.dirty,
            made_at=build.made_at,
        )
    resolved = GodotGame(command, origin, notes)
    _resolved[key] = resolved
    return resolved


def trained_against(config: TrainConfig, build_root: Path) -> dict[str, Any] | None:
    """What a run trains against, for its record: the editor, the project's source at a
    commit, or a build made from one (None for any other game)."""
    if config.game == EDITOR_GAME:
        return {"way": "editor", "port": config.port}
    if config.game_project is None:
        return None
    return dict(godot_game(config, build_root).origin)


def describe_origin(origin: dict[str, Any]) -> str:
    """One line for ``train.log`` and ``status``: ``Godot 3.2.3 on godot_lander from source
    at 1a2b3c4d5e``, ``... from a build (preset 'training') made from ...``, ``the game in
    the Godot editor``."""
    way = origin.get("way")
    if way == "editor":
        return f"the game in the Godot editor (port {origin.get('port')})"
    version = GodotEngine(str(origin.get("engine", "")), str(origin.get("version", "?"))).label
    project = Path(str(origin.get("project", "?"))).name
    commit = origin.get("commit")
    at = f"at {str(commit)[:10]}" if commit else "not in git"
    at += " with uncommitted changes" if origin.get("dirty") else ""
    if way == "build":
        return (
            f"Godot {version} on {project} from a {origin.get('kind', 'build')} of preset "
            f"{origin.get('preset')!r} made from the source {at}"
        )
    return f"Godot {version} on {project} from source {at}"


def engine_change(before: dict[str, Any] | None, now: dict[str, Any] | None) -> str | None:
    """A line when a resumed run's Godot engine is not the one its earlier sessions trained
    against (None when it is, or when either is not a Godot project)."""
    if not before or not now or before.get("way") == "editor" or now.get("way") == "editor":
        return None
    if before.get("version") == now.get("version"):
        return None
    return (
        f"this run trained against Godot {before.get('version')} before; this session runs "
        f"Godot {now.get('version')} ({now.get('engine')})"
    )
