"""The Godot engine as a launcher: which engine runs a project, and its command lines.

Godot 3 and Godot 4 spell the same things differently (``--no-window`` against
``--headless``, ``--editor --quit`` against ``--import``, ``--export`` against
``--export-release``, a scene as a positional argument against ``--scene``); this module
is the one place that knows both, so the rest of lander asks for "run this project" or
"export this preset" and never writes an engine flag itself. It knows no game.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from game_bridge.errors import LanderError

ENGINE_NAMES = ("godot4", "godot", "godot3-server", "godot3")
"""What the engine is called on PATH, the Godot 4 names first (Debian's 3.2 is
``godot3-server``; the official builds are usually installed as ``godot``)."""
VERSION_TIMEOUT_S = 60.0


class GodotEngineError(LanderError):
    """An engine that cannot be found, asked its version, or run as asked."""


_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?\.([a-z]+\d*)")
"""What ``godot --version`` prints: ``4.3.stable.official.77dcf97d8``, ``3.2.3.stable.custom_build``."""


@dataclass(frozen=True)
class GodotEngine:
    """One engine binary and the version it says it is.

    :param path: the executable.
    :param version: its ``--version`` line (``4.3.stable.official.77dcf97d8``).
    """

    path: str
    version: str

    @property
    def numbers(self) -> tuple[int, int, int]:
        """Major, minor and patch (0 where the version has none)."""
        found = _VERSION.match(self.version)
        if found is None:
            return (0, 0, 0)
        return int(found[1]), int(found[2]), int(found[3] or 0)

    @property
    def major(self) -> int:
        """3 or 4."""
        return self.numbers[0]

    @property
    def release(self) -> str:
        """The version as releases name it: ``4.3``, ``3.2.3`` (the patch only when not 0)."""
        major, minor, patch = self.numbers
        return f"{major}.{minor}" + (f".{patch}" if patch else "")

    @property
    def label(self) -> str:
        """Its release and status, as its export templates' folder is named and as lander
        says which engine a run trained on: ``4.3.stable``, ``3.2.3.stable``."""
        found = _VERSION.match(self.version)
        return self.version if found is None else f"{self.release}.{found[4]}"

    def matches(self, wanted: str | None) -> bool:
        """True when this engine is of the version ``wanted`` (``4.3``, ``4.2.2``, ``3``;
        None: any), compared on as many parts as ``wanted`` names."""
        if wanted is None:
            return True
        parts = [int(part) for part in wanted.split(".") if part.isdigit()]
        return list(self.numbers[: len(parts)]) == parts

    @property
    def headless(self) -> list[str]:
        """The flags that run this engine, or a game exported by it, with no window."""
        # Godot 4: --headless is the display and audio drivers off. Godot 3 has no such
        # flag; --no-window keeps a desktop build's window hidden (a server build has none).
        return ["--headless"] if self.major >= 4 else ["--no-window"]

    def run_project(self, project: Path, scene: str | None, engine_args: list[str]) -> list[str]:
        """The command that runs ``project`` from source, headless, at ``scene`` (its main
        scene when None); the plugin's arguments follow it."""
        command = [self.path, *self.headless, "--path", str(project)]
        if scene is not None:
            command += ["--scene", scene] if self.major >= 4 else [scene]
        return [*command, *engine_args]

    def run_pack(self, pack: Path, engine_args: list[str]) -> list[str]:
        """The command that runs an exported pack with this engine, headless."""
        return [self.path, *self.headless, "--main-pack", str(pack), *engine_args]

    def import_project(self, project: Path) -> list[str]:
        """The command that runs a project's import pass and quits (what a fresh clone needs
        before it can run headless): ``--import`` from Godot 4.2, ``--editor --quit`` before."""
        if self.major >= 4 and self.numbers >= (4, 2, 0):
            return [self.path, "--headless", "--path", str(project), "--import"]
        return [self.path, *self.headless, "--path", str(project), "--editor", "--quit"]

    def export(self, project: Path, preset: str, output: Path, pack: bool) -> list[str]:
        """The command that exports ``preset`` of ``project`` to ``output``: a whole game
        (release template) or, with ``pack``, the project's pack alone (no template needed)."""
        if self.major >= 4:
            flag = "--export-pack" if pack else "--export-release"
        else:
            flag = "--export-pack" if pack else "--export"
        return [self.path, *self.headless, "--path", str(project), flag, preset, str(output)]


@cache
def engine_version(path: str) -> str:
    """What the engine at ``path`` says its version is (asked once per process).

    :raises GodotEngineError: it does not run, or prints no version.
    """
    try:
        result = subprocess.run(
            [path, "--version"],
            capture_output=True, text=True, timeout=VERSION_TIMEOUT_S, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        raise GodotEngineError(f"the Godot engine {path} does not run ({exc})") from None
    lines = [line.strip() for line in result.stdout.splitlines() if _VERSION.match(line.strip())]
    if not lines:
        raise GodotEngineError(
            f"{path} --version printed no Godot version (exit code {result.returncode}): "
            "is it a Godot engine?"
        )
    return lines[-1]


def engine_at(path: str | Path) -> GodotEngine:
    """The engine at ``path`` with its version.

    :raises GodotEngineError: not there, or not an engine.
    """
    found = shutil.which(str(path)) or (str(path) if Path(path).is_file() else None)
    if found is None:
        raise GodotEngineError(f"no Godot engine at {path}")
    return GodotEngine(str(Path(found).resolve()), engine_version(str(Path(found).resolve())))


def _candidates() -> list[str]:
    """Where an engine may be besides ``GODOT_BIN``, in the order lander looks: PATH, then
    the engines ``lander setup`` fetched."""
    found = [path for name in ENGINE_NAMES if (path := shutil.which(name)) is not None]
    return [*dict.fromkeys(found), *(str(path) for path in cached_engines())]


def find_engine(wanted: str | None) -> GodotEngine | None:
    """``GODOT_BIN`` (the user's choice, taken whatever its version), else the first engine
    of version ``wanted`` (None: any) on PATH or in lander's cache.

    :raises GodotEngineError: ``GODOT_BIN`` names no engine.
    """
    if os.environ.get("GODOT_BIN"):
        return engine_at(os.environ["GODOT_BIN"])
    for path in _candidates():
        try:
            engine = engine_at(path)
        except GodotEngineError:
            continue
        if engine.matches(wanted):
            return engine
    return None


def engine_cache() -> Path:
    """Where ``lander setup`` keeps the engines it fetched, outside any checkout:
    ``LANDER_GODOT_CACHE``, else ``~/.cache/lander/godot`` (``XDG_CACHE_HOME`` honoured)."""
    override = os.environ.get("LANDER_GODOT_CACHE")
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lander" / "godot"


CACHED_ENGINE_NAME = "godot"
"""Each fetched version's folder holds its engine under this name (``<cache>/4.3/godot``)."""


def cached_engines() -> list[Path]:
    """The engines in :func:`engine_cache`, newest version first."""
    cache = engine_cache()
    if not cache.is_dir():
        return []
    found = [folder / CACHED_ENGINE_NAME for folder in cache.iterdir() if folder.is_dir()]

    def version_key(path: Path) -> tuple[int, ...]:
        return tuple(int(p) if p.isdigit() else -1 for p in path.parent.name.split("."))

    return sorted((p for p in found if p.is_file()), key=version_key, reverse=True)
