"""``lander setup --game-project``: ready a Godot project to train, as the team's own setup
script would: the engine of the project's version (found, or fetched), the import pass a
fresh clone needs, the training build when a preset is named, a headless smoke test, and
the project remembered as this checkout's game.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cli.common.paths import GAME_SETTINGS_NAME, build_dir
from cli.machine.checklist import CheckResult
from cli.machine.godot_download import (
    GodotDownloadError,
    Release,
    install_engine,
    install_templates,
    release_base,
)
from game_bridge.errors import BridgeError, LanderError
from game_bridge.godot_engine import GodotEngine, engine_cache, find_engine
from game_bridge.godot_project import (
    GodotProject,
    check_preset,
    ensure_imported,
    export_build,
    has_templates,
    read_project,
)
from game_bridge.smoke import run_smoke_test


@dataclass
class GodotSetup:
    """What ``setup`` was asked for a Godot project.

    :param project: the folder with ``project.godot``.
    :param scene: the scene to run from source (None: the main scene).
    :param engine_args: arguments for the engine itself.
    :param export_preset: train a build of this preset instead of the source.
    :param version: the engine version to use, where the project does not say (Godot 3).
    """

    project: Path
    scene: str | None = None
    engine_args: list[str] = field(default_factory=list)
    export_preset: str | None = None
    version: str | None = None

    def remembered(self) -> dict[str, Any]:
        """The settings a new run of this checkout takes from it."""
        settings: dict[str, Any] = {"game_project": str(self.project.resolve())}
        if self.scene is not None:
            settings["scene"] = self.scene
        if self.engine_args:
            settings["engine_args"] = list(self.engine_args)
        if self.export_preset is not None:
            settings["export_preset"] = self.export_preset
        return settings


def _engine(project: GodotProject, asked: GodotSetup) -> tuple[GodotEngine, str, bool]:
    """The engine for ``project``: found, else fetched; with what to say and whether lander's
    cache holds it (then its templates can be fetched beside it)."""
    wanted = asked.version or project.version
    found = find_engine(wanted)
    if found is not None:
        cached = Path(found.path).is_relative_to(engine_cache().resolve())
        return found, f"{found.path} ({found.version})", cached
    if wanted is None or "." not in wanted:
        raise GodotDownloadError(
            f"no {'Godot ' + wanted if wanted else 'Godot'} engine found (GODOT_BIN, PATH, "
            f"{engine_cache()}) and "
            f"{project.path.name} does not say which release it is made with: give "
            "--godot-version (3.5.3, 4.3, ...)"
        )
    engine, fetched = install_engine(Release(wanted))
    what = "fetched" if fetched else "cached"
    return engine, f"{engine.path} ({engine.version}; {what} from {release_base()})", True


def godot_setup(root: Path, asked: GodotSetup, port: int) -> list[CheckResult]:
    """Every Godot step in order; stops at the first that fails (each later one needs it)."""
    steps: list[CheckResult] = []
    try:
        project = read_project(asked.project)
        steps.append(
            CheckResult(
                "project", True, f"{project.name} ({project.path}), Godot {project.version or '?'}"
            )
        )
        if asked.export_preset is not None:
            check_preset(project, asked.export_preset)
        engine, said, cached = _engine(project, asked)
        steps.append(CheckResult("godot", True, said))
        if asked.export_preset is not None and cached and not has_templates(engine):
            fetched = install_templates(Release(engine.release))
            steps.append(CheckResult("templates", True, "fetched" if fetched else "in the cache"))
        imported, state = ensure_imported(engine, project)
        steps.append(CheckResult("import", True, "imported" if imported else "up to date"))
        if asked.export_preset is not None:
            build = export_build(engine, project, asked.export_preset, build_dir(root), state)
            steps.append(
                CheckResult(
                    "export",
                    True,
                    f"{Path(build.game).relative_to(root)} ({build.kind}, preset "
                    f"{build.preset!r}) in {build.seconds:.1f} s",
                )
            )
            command = build.command(engine, asked.engine_args)
        else:
            command = engine.run_project(project.path, asked.scene, asked.engine_args)
    except LanderError as exc:
        steps.append(CheckResult("godot", False, str(exc)))
        return steps
    try:
        result = run_smoke_test(command, port)
    except BridgeError as exc:
        steps.append(CheckResult("smoke test", False, f"{exc}. Run the game by hand to see why."))
        return steps
    steps.append(
        CheckResult(
            "smoke test",
            True,
            f"handshake, reset, {result.steps} steps, close in {result.seconds:.1f} s "
            f"({result.agents} agent(s), obs {result.observation_space}, actions "
            f"{result.action_space})",
        )
    )
    build_dir(root).mkdir(parents=True, exist_ok=True)
    (build_dir(root) / GAME_SETTINGS_NAME).write_text(json.dumps(asked.remembered()) + "\n")
    steps.append(
        CheckResult("game", True, f"{project.path.name} (remembered as this checkout's game)")
    )
    return steps
