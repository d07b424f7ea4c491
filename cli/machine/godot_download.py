"""Fetching the Godot engine a project is made with (and its export templates), as a
Godot team's setup script does: the official Linux build of that version, checked against
the release's published SHA-512 sums, unpacked atomically into lander's cache outside the
checkout (:func:`game_bridge.godot_engine.engine_cache`). Idempotent: what is there is kept.

A machine that cannot reach the releases can be given the files by hand (``downloads/``
in the cache) or a mirror (``--godot-mirror`` / ``LANDER_GODOT_MIRROR``).
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import stat
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from game_bridge.errors import LanderError
from game_bridge.godot_engine import CACHED_ENGINE_NAME, GodotEngine, engine_at, engine_cache

OFFICIAL_RELEASES = "https://github.com/godotengine/godot-builds/releases/download"
"""Where Godot's official builds are published, one folder per release tag (``4.3-stable``)."""
MIRROR_VARIABLE = "LANDER_GODOT_MIRROR"
SUMS_FILE = "SHA512-SUMS.txt"
DOWNLOAD_TIMEOUT_S = 60.0
CHUNK = 1 << 20
SELF_CONTAINED_MARK = "._sc_"
"""A file beside the engine that keeps its editor data (export templates) beside it too,
in ``editor_data/``, instead of the user's home (Godot's self-contained mode)."""


class GodotDownloadError(LanderError):
    """An engine or templates that could not be fetched, or failed their checksum."""


@dataclass(frozen=True)
class Release:
    """One Godot release and the files lander fetches of it.

    :param version: ``4.3``, ``4.2.2``, ``3.5.3``.
    """

    version: str

    @property
    def tag(self) -> str:
        """The release's tag: ``4.3-stable``."""
        return f"{self.version}-stable"

    @property
    def major(self) -> int:
        """3 or 4."""
        return int(self.version.split(".")[0])

    @property
    def engine_file(self) -> str:
        """The Linux engine's archive: the editor build for Godot 4 (it runs ``--headless``),
        the headless build for Godot 3."""
        if self.major >= 4:
            return f"Godot_v{self.tag}_linux.x86_64.zip"
        return f"Godot_v{self.tag}_linux_headless.64.zip"

    @property
    def templates_file(self) -> str:
        """The export templates' archive."""
        return f"Godot_v{self.tag}_export_templates.tpz"

    @property
    def templates_folder(self) -> str:
        """Where the engine looks for them in self-contained mode."""
        kind = "export_templates" if self.major >= 4 else "templates"
        return f"editor_data/{kind}/{self.version}.stable"


def release_base() -> str:
    """The address release folders are under: the mirror when one is named."""
    return (os.environ.get(MIRROR_VARIABLE) or OFFICIAL_RELEASES).rstrip("/")


def downloads_folder() -> Path:
    """Where a file fetched by hand may be put instead of downloading it."""
    return engine_cache() / "downloads"


def _url(release: Release, name: str) -> str:
    return f"{release_base()}/{release.tag}/{name}"


def _fetch(release: Release, name: str, into: Path) -> Path:
    """``name`` of ``release``: from :func:`downloads_folder` when a person put it there,
    else downloaded into ``into``. A download cut short raises and leaves nothing.

    :raises GodotDownloadError: it cannot be had; the line names the file, the address and
        where to put it by hand.
    """
    by_hand = downloads_folder() / name
    if by_hand.is_file():
        return by_hand
    url = _url(release, name)
    target = into / name
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response:
            expected = response.headers.get("Content-Length")
            with open(target, "wb") as out:
                while chunk := response.read(CHUNK):
                    out.write(chunk)
        if expected is not None and target.stat().st_size != int(expected):
            raise OSError(f"got {target.stat().st_size:,} of {int(expected):,} bytes")
    except (OSError, urllib.error.URLError, http.client.HTTPException, ValueError) as exc:
        target.unlink(missing_ok=True)
        reason = getattr(exc, "reason", None) or exc
        raise GodotDownloadError(
            f"cannot download {name} from {url} ({reason}): put the file in "
            f"{downloads_folder()}/ by hand, or point {MIRROR_VARIABLE} (or --godot-mirror) "
            "at a mirror"
        ) from None
    return target


def _published_sum(release: Release, name: str, into: Path) -> str:
    sums = _fetch(release, SUMS_FILE, into).read_text(errors="replace")
    for line in sums.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("*") == name:
            return parts[0].lower()
    raise GodotDownloadError(f"{SUMS_FILE} of Godot {release.tag} lists no {name}: not installed")


def _checked(release: Release, name: str, into: Path) -> Path:
    """``name`` fetched and checked against the release's published SHA-512.

    :raises GodotDownloadError: a wrong checksum (the file is removed, nothing installed).
    """
    expected = _published_sum(release, name, into)
    path = _fetch(release, name, into)
    digest = hashlib.sha512()
    with open(path, "rb") as file:
        while chunk := file.read(CHUNK):
            digest.update(chunk)
    if digest.hexdigest() != expected:
        if path.parent == into:
            path.unlink(missing_ok=True)
        raise GodotDownloadError(
            f"{name} does not match its published SHA-512 ({SUMS_FILE} of {release.tag}): "
            "refused, nothing installed"
        )
    return path


def _staging(name: str) -> Path:
    """A fresh folder beside the cache's entries to build one in (renamed into place)."""
    cache = engine_cache()
    cache.mkdir(parents=True, exist_ok=True)
    for old in cache.glob(f".{name}.staging-*"):  # a fetch killed before it finished
        shutil.rmtree(old, ignore_errors=True)
    staging = cache / f".{name}.staging-{os.getpid()}"
    staging.mkdir()
    return staging


def _unpacked(release: Release, name: str, staging: Path) -> Path:
    """``name`` of ``release`` fetched, checked and unpacked into ``staging/unpacked``; the
    archive and the sums file are removed from ``staging`` once unpacked.

    :raises GodotDownloadError: it cannot be fetched, fails its checksum, or does not unpack.
    """
    archive = _checked(release, name, staging)
    unpacked = staging / "unpacked"
    try:
        with zipfile.ZipFile(archive) as zipped:
            zipped.extractall(unpacked)
    except (zipfile.BadZipFile, OSError) as exc:
        raise GodotDownloadError(f"{name} does not unpack ({exc})") from None
    for fetched in (archive, staging / SUMS_FILE):
        if fetched.parent == staging:  # not a file a person put in downloads/
            fetched.unlink(missing_ok=True)
    return unpacked


def install_engine(release: Release) -> tuple[GodotEngine, bool]:
    """The engine of ``release`` in lander's cache, fetched and unpacked when it is not
    there yet; returns it and whether it was fetched now.

    :raises GodotDownloadError: it cannot be fetched, or fails its checksum.
    """
    folder = engine_cache() / release.version
    binary = folder / CACHED_ENGINE_NAME
    if binary.is_file():
        return engine_at(binary), False
    staging = _staging(release.version)
    try:
        unpacked = _unpacked(release, release.engine_file, staging)
        files = [p for p in unpacked.rglob("*") if p.is_file() and "Godot" in p.name]
        if not files:
            raise GodotDownloadError(f"{release.engine_file} holds no Godot engine")
        engine_file = staging / CACHED_ENGINE_NAME
        files[0].rename(engine_file)
        engine_file.chmod(engine_file.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        (staging / SELF_CONTAINED_MARK).touch()
        shutil.rmtree(unpacked)
        staging.rename(folder)  # atomic: the version's folder is whole or absent
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return engine_at(binary), True


def install_templates(release: Release) -> bool:
    """The export templates of ``release`` beside its cached engine, fetched when they are
    not there yet; returns whether they were fetched now.

    :raises GodotDownloadError: they cannot be fetched, or fail their checksum.
    """
    target = engine_cache() / release.version / release.templates_folder
    if target.is_dir() and any(target.iterdir()):
        return False
    staging = _staging(f"{release.version}-templates")
    try:
        templates = _unpacked(release, release.templates_file, staging) / "templates"
        if not templates.is_dir():
            raise GodotDownloadError(f"{release.templates_file} holds no templates/ folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        templates.rename(target)  # atomic within the cache's file system
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return True
