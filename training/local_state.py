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
import socket
from pathlib import Path
from typing import Any

from training.run_record import write_json_atomic

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
    made = f"{socket.gethostname()}-{secrets.token_hex(3)}"
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


def local_evaluations_path(root: Path) -> Path:
    """Evaluations this checkout made of runs it does not commit."""
    return local_dir(root) / LOCAL_EVALUATIONS_NAME


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
