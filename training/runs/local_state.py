"""What a checkout keeps for itself and never commits: ``.lander/`` (git-ignored).

Several clones share one repository through git (a box, a second box, a laptop;
two clones on one machine in the tests). Each needs an identity of its own, so a
run's files are written only by the checkout that trains the run, and places for
what it computes only for itself: evaluations of other machines' runs, the
dashboard's remembered address.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import time
from pathlib import Path
from typing import Any

from training.runs.run_paths import RunPaths
from training.runs.run_record import write_json_atomic

LOCAL_DIR = ".lander"
CHECKOUT_ID_NAME = "checkout-id"
LOCAL_EVALUATIONS_NAME = "evaluations.jsonl"


def local_dir(root: Path) -> Path:
    """The checkout's untracked folder, made on first use with a ``.gitignore`` of ``*``:
    git ignores it even in a repository whose own ``.gitignore`` does not list it."""
    folder = root / LOCAL_DIR
    if not (folder / ".gitignore").exists():
        folder.mkdir(parents=True, exist_ok=True)
        (folder / ".gitignore").write_text("*\n")
    return folder


def checkout_id(root: Path) -> str:
    """This checkout's identity, ``<host>-<6 hex>``, made once and kept in ``.lander/``.

    Not the host name alone: two clones on one machine are two writers too.
    """
    path = local_dir(root) / CHECKOUT_ID_NAME
    try:
        existing = path.read_text().strip()
    except FileNotFoundError:
        existing = ""
    if existing:
        return existing
    # A lost .lander/ (deleted, git clean -fdX) takes the identity the runs of this
    # folder on this host recorded, so the checkout still owns the runs it trained.
    made = _recorded_identity(root) or f"{socket.gethostname()}-{secrets.token_hex(3)}"
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(made + "\n")
    try:
        # link() fails if another process made the id first; then use that one.
        os.link(temporary, path)
    except FileExistsError:
        made = path.read_text().strip()
    finally:
        temporary.unlink(missing_ok=True)
    return made


def _recorded_identity(root: Path) -> str | None:
    """The checkout id of the newest run session recorded in this folder on this host."""
    host, here = socket.gethostname(), str(root.resolve())
    newest: tuple[str, str] | None = None
    for path in (root / "checkpoints").glob("*/run.json"):
        try:
            sessions = json.loads(path.read_text()).get("sessions") or []
        except (OSError, ValueError, AttributeError):
            continue
        for session in sessions if isinstance(sessions, list) else []:
            if not isinstance(session, dict) or session.get("root") != here:
                continue
            if session.get("host") != host or not isinstance(session.get("checkout"), str):
                continue
            started = str(session.get("started_at", ""))
            if newest is None or started > newest[0]:
                newest = (started, session["checkout"])
    return newest[1] if newest else None


def keep_damaged_record(paths: RunPaths) -> Path:
    """Copy a run's unreadable ``run.json`` into ``.lander/damaged/`` (untracked) before a
    new record replaces it: nothing the user had is lost."""
    folder = local_dir(paths.root) / "damaged"
    folder.mkdir(parents=True, exist_ok=True)
    kept = folder / f"{paths.run}-{int(time.time())}.json"
    shutil.copy2(paths.run_json, kept)
    return kept.relative_to(paths.root)


def local_evaluations_path(root: Path) -> Path:
    """Evaluations this checkout made of runs it does not commit."""
    return local_dir(root) / LOCAL_EVALUATIONS_NAME


def local_matches_path(root: Path) -> Path:
    """The matches this checkout played (``lander ladder``): its own records, never committed."""
    return local_dir(root) / "matches.jsonl"


def live_bot_path(root: Path, run: str) -> Path:
    """Where a training run publishes its current bot for the live page (``lander play
    --web``): replaced in place, never kept beyond the latest, never committed."""
    return local_dir(root) / "live" / f"{run}.json"


def read_local(root: Path, name: str) -> dict[str, Any]:
    """A small JSON setting of this checkout (``{}`` when missing or unreadable)."""
    try:
        data = json.loads((local_dir(root) / name).read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def write_local(root: Path, name: str, data: dict[str, Any]) -> None:
    """Write a small JSON setting of this checkout atomically."""
    write_json_atomic(local_dir(root) / name, data)
