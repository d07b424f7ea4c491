"""A Godot project as its makers keep it: its version, what its tracked files are, the
import pass a fresh clone needs, and training builds exported from its presets.

A build records what it was made from (the engine, the project's commit and a digest of
its tracked files), so a run can tell a stale build and export it again before it trains.
Everything written goes under the checkout's ``build/`` or the project's own import cache,
never into a tracked file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from game_bridge.errors import LanderError
from game_bridge.godot_engine import GodotEngine

PROJECT_FILE = "project.godot"
PRESETS_FILE = "export_presets.cfg"
IMPORT_TIMEOUT_S = 600.0
EXPORT_TIMEOUT_S = 900.0
_CACHE_FOLDERS = {".godot", ".import", ".git", ".mono"}
"""Folders of a project that are the engine's or git's, not the project's source."""
_ENGINE_NOISE = ("Invalid locale", "Unsupported locale", '"patch_list"', "At: ")
"""Lines Godot prints on every headless run that say nothing about a failure."""


class GodotProjectError(LanderError):
    """A project folder, preset, import pass or export that cannot be used."""


@dataclass(frozen=True)
class GodotProject:
    """A folder with a ``project.godot``.

    :param path: the folder, resolved.
    :param name: ``application/config/name``, else the folder's name.
    :param version: the engine version it is made with, from ``config/features``
        (``4.3``); ``3`` for a Godot 3 project (``config_version=4``, which names no more).
    """

    path: Path
    name: str
    version: str | None


def read_project(folder: str | Path) -> GodotProject:
    """The project in ``folder``.

    :raises GodotProjectError: no ``project.godot`` there.
    """
    path = Path(folder).expanduser().resolve()
    settings = path / PROJECT_FILE
    if not settings.is_file():
        raise GodotProjectError(f"{folder} is not a Godot project: it has no {PROJECT_FILE}")
    text = settings.read_text(errors="replace")
    name = re.search(r'^config/name="([^"\n]*)"', text, re.MULTILINE)
    features = re.search(r"^config/features=PackedStringArray\(([^)]*)\)", text, re.MULTILINE)
    version: str | None = None
    if features is not None:
        numbers = re.findall(r'"(\d+\.\d+(?:\.\d+)?)"', features[1])
        version = numbers[0] if numbers else None
    if version is None:
        config_version = re.search(r"^config_version=(\d+)", text, re.MULTILINE)
        if config_version is not None and int(config_version[1]) <= 4:
            version = "3"  # Godot 3's format; its projects do not say which 3.x
        elif config_version is not None:
            version = "4"
    return GodotProject(path, name[1] if name else path.name, version)


def preset_names(project: GodotProject) -> list[str]:
    """The export presets ``export_presets.cfg`` defines, in its order."""
    presets = project.path / PRESETS_FILE
    if not presets.is_file():
        return []
    return re.findall(r'^name="([^"\n]*)"', presets.read_text(errors="replace"), re.MULTILINE)


def check_preset(project: GodotProject, preset: str) -> None:
    """:raises GodotProjectError: ``preset`` is not one of the project's."""
    names = preset_names(project)
    if preset not in names:
        have = (
            f"its presets are {', '.join(repr(n) for n in names)}"
            if names
            else (f"it has no {PRESETS_FILE}: add a preset in the editor (Project > Export)")
        )
        raise GodotProjectError(f"{project.path.name} has no export preset {preset!r}: {have}")


@dataclass(frozen=True)
class SourceState:
    """What a project's source is right now.

    :param digest: SHA-256 over the project's tracked files (each path and the id git gives
        its contents), or over all its files outside the engine's caches when not in git.
    :param commit: the git commit it is at (None outside git).
    :param dirty: tracked files differ from that commit.
    """

    digest: str
    commit: str | None
    dirty: bool


def _git(project: Path, *args: str) -> str | None:
    try:
        result = subprocess.run(
            ["git", *args], cwd=project, capture_output=True, timeout=60, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.decode(errors="replace") if result.returncode == 0 else None


def _blob_id(path: Path) -> bytes:
    """The id git gives a file's contents (what ``ls-files -s`` shows once it is staged), so
    a change staged or not names the same source."""
    try:
        data = path.read_bytes()
    except OSError:
        return b"<missing>"  # deleted in the work tree: a change too
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest().encode()


def _tracked_digests(project: Path) -> tuple[dict[str, bytes], str | None, bool] | None:
    """Each tracked file's blob id from git's index (a file the work tree changed: the id of
    its contents now), the commit, and whether the work tree differs from it: a large
    project's assets are not read again at every run. None outside a git work tree."""
    listed = _git(project, "ls-files", "-s", "-z", "--", ".")
    if listed is None:
        return None
    files: dict[str, bytes] = {}
    for entry in filter(None, listed.split("\0")):
        meta, _, name = entry.partition("\t")
        files[name] = meta.split()[1].encode()
    # `git diff`, not diff-files: it looks past a file whose stat alone changed.
    changed = _git(project, "diff", "--name-only", "--relative", "-z", "--", ".") or ""
    for name in filter(None, changed.split("\0")):
        files[name] = _blob_id(project / name)
    commit = (_git(project, "rev-parse", "HEAD") or "").strip() or None
    return files, commit, bool(changed.strip("\0")) or _staged(project)


def _staged(project: Path) -> bool:
    return bool((_git(project, "diff", "--cached", "--name-only", "--", ".") or "").strip())


def source_state(project: GodotProject) -> SourceState:
    """The project's source now: the digest of its tracked files (every file outside the
    engine's caches when it is not in git), its commit, whether it differs from that commit."""
    tracked = _tracked_digests(project.path)
    if tracked is None:
        names = []
        for folder, dirs, found in os.walk(project.path):
            dirs[:] = [d for d in dirs if d not in _CACHE_FOLDERS]
            names += [str(Path(folder, n).relative_to(project.path)) for n in found]
        files = {name: _blob_id(project.path / name) for name in names}
        commit, dirty = None, False
    else:
        files, commit, dirty = tracked
    digest = hashlib.sha256()
    for name in sorted(files):
        if Path(name).parts and Path(name).parts[0] in _CACHE_FOLDERS:
            continue
        digest.update(name.encode() + b"\0" + files[name])
    return SourceState(digest.hexdigest(), commit, dirty)


def engine_error(output: str, fallback: str) -> str:
    """The engine's own line for a failure: its last ``ERROR:`` that is not start-up noise,
    preferring one that speaks of the export."""
    errors = [
        line.strip().removeprefix("ERROR:").strip()
        for line in output.splitlines()
        if ("ERROR" in line) and not any(noise in line for noise in _ENGINE_NOISE)
    ]
    telling = [line for line in errors if "export" in line.lower()] or errors
    return (telling[-1] if telling else fallback)[:400]


def _run_engine(command: list[str], timeout: float, what: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise GodotProjectError(f"{what} took over {timeout:.0f} s: {' '.join(command)}") from None
    except OSError as exc:
        raise GodotProjectError(f"{what}: {command[0]} does not run ({exc})") from None


def _import_marker(engine: GodotEngine, project: GodotProject) -> Path:
    cache = ".godot" if engine.major >= 4 else ".import"
    return project.path / cache / "lander-import.json"


def ensure_imported(
    engine: GodotEngine, project: GodotProject, state: SourceState | None = None
) -> tuple[bool, SourceState]:
    """Run the project's import pass once, before any instance starts, when the engine's
    cache is missing (a fresh clone) or was made by another engine or from other source;
    return whether it ran, and the source as the pass left it. The instances then start
    from the imported cache, none of them importing by itself.

    :param state: the source now, where the caller has read it already.
    :raises GodotProjectError: the import pass failed (the engine's own line).
    """
    marker = _import_marker(engine, project)
    state = state or source_state(project)
    try:
        if json.loads(marker.read_text()) == {"engine": engine.version, "digest": state.digest}:
            return False, state
    except (OSError, ValueError):
        pass
    result = _run_engine(engine.import_project(project.path), IMPORT_TIMEOUT_S, "the import pass")
    if result.returncode != 0:
        line = engine_error(result.stdout + result.stderr, f"exit code {result.returncode}")
        raise GodotProjectError(f"the import pass of {project.path.name} failed: {line}")
    # The pass may rewrite tracked files (a Godot 4 asset's .import file): the marker names
    # the source it left, so the next run finds it current.
    state = source_state(project)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"engine": engine.version, "digest": state.digest}) + "\n")
    return True, state


@dataclass(frozen=True)
class TrainingBuild:
    """A training build lander exported, and what it was made from.

    :param game: the exported game (a pack, run with the engine, or an executable).
    :param kind: ``pack`` or ``executable``.
    :param preset: the export preset.
    :param engine: the engine that exported it (and runs a pack).
    :param version: that engine's version.
    :param digest: :attr:`SourceState.digest` of the source it was made from.
    :param commit: that source's commit (None outside git).
    :param dirty: the source had uncommitted changes.
    :param made_at: when (seconds since the epoch).
    :param seconds: how long the export took.
    """

    game: str
    kind: str
    preset: str
    engine: str
    version: str
    digest: str
    commit: str | None
    dirty: bool
    made_at: float
    seconds: float

    def command(self, engine: GodotEngine, engine_args: list[str]) -> list[str]:
        """The command that runs this build, headless."""
        if self.kind == "pack":
            return engine.run_pack(Path(self.game), engine_args)
        return [self.game, *engine.headless, *engine_args]


def build_folder(build_root: Path, project: GodotProject, preset: str) -> Path:
    """Where a preset's training build goes: ``build/godot/<project>-<preset>/``."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{project.path.name}-{preset}").strip("-")
    return build_root / "godot" / slug


def _record_path(folder: Path) -> Path:
    return folder / "build.json"


def read_build(folder: Path) -> TrainingBuild | None:
    """The build in ``folder`` as its record says, None when there is none whole."""
    try:
        data: dict[str, Any] = json.loads(_record_path(folder).read_text())
        build = TrainingBuild(**data)
    except (OSError, ValueError, TypeError):
        return None
    return build if Path(build.game).is_file() else None


def has_templates(engine: GodotEngine) -> bool:
    """Whether ``engine`` has its Linux release export template, where Godot looks: beside a
    self-contained engine (``editor_data/``), else the user's data folder."""
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    folder = "export_templates" if engine.major >= 4 else "templates"
    beside = Path(engine.path).parent / "editor_data" / folder / engine.label
    shared = data / "godot" / folder / engine.label
    name = "linux_release.x86_64" if engine.major >= 4 else "linux_x11_64_release"
    return any((place / name).is_file() for place in (beside, shared))


def export_build(
    engine: GodotEngine,
    project: GodotProject,
    preset: str,
    build_root: Path,
    state: SourceState | None = None,
) -> TrainingBuild:
    """Export ``preset`` headless into ``build/``: the whole game where the engine has its
    export templates, else the project's pack (run with ``--main-pack``). The build and its
    record replace the old ones only once the export succeeded.

    :param state: the source now, where the caller has read it already.
    :raises GodotProjectError: no such preset, or the export failed (the engine's own line).
    """
    check_preset(project, preset)
    _, state = ensure_imported(engine, project, state)
    folder = build_folder(build_root, project, preset)
    staging = folder.with_name(folder.name + ".exporting")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    pack = not has_templates(engine)
    output = staging / ("game.pck" if pack else "game.x86_64")
    started = time.monotonic()
    try:
        result = _run_engine(
            engine.export(project.path, preset, output, pack), EXPORT_TIMEOUT_S, "the export"
        )
        if result.returncode != 0 or not output.is_file():
            line = engine_error(result.stdout + result.stderr, f"exit code {result.returncode}")
            raise GodotProjectError(
                f"exporting {project.path.name}'s preset {preset!r} failed: {line}"
            )
        build = TrainingBuild(
            game=str(folder / output.name),
            kind="pack" if pack else "executable",
            preset=preset,
            engine=engine.path,
            version=engine.version,
            digest=state.digest,
            commit=state.commit,
            dirty=state.dirty,
            made_at=time.time(),
            seconds=round(time.monotonic() - started, 2),
        )
        _record_path(staging).write_text(json.dumps(asdict(build), indent=1) + "\n")
        old = folder.with_name(folder.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if folder.exists():
            folder.rename(old)
        staging.rename(folder)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return build


def stale_reason(
    build: TrainingBuild | None, engine: GodotEngine, state: SourceState
) -> str | None:
    """Why ``build`` must be exported again before a run (None: it is current)."""
    if build is None:
        return "no training build yet"
    if build.version != engine.version:
        return f"the build was exported by Godot {build.version}, the engine is {engine.version}"
    if build.digest != state.digest:
        return "the project's tracked files changed since the build"
    return None
