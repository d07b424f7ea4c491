"""``checkpoints/<run>/run.json``: what a run is, where it stands, where it came from.

Written atomically on every change of state, so ``lander status`` on any machine
(after ``git pull``) reads a consistent record even if the trainer was killed.
"""

from __future__ import annotations

import copy
import errno
import itertools
import json
import os
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from game_bridge.file_input import read_bounded_text
from training.config import ConfigError, TrainConfig, from_dict

COMPACT_JSON = orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE
"""orjson's options for a compact file: Python's key conversion, a final newline."""

STATUSES = ("running", "finished", "interrupted", "failed")
FULL_DISK = frozenset((errno.ENOSPC, errno.EDQUOT, errno.EFBIG))


def now_iso() -> str:
    """The current UTC time, to the second, ISO 8601."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


TEMPORARY_SUFFIX = ".tmp"
_TEMPORARIES = itertools.count()
MAX_RECORD_BYTES = 16 * 2**20
"""A run.json larger than this is refused unread (lander's own are a few KB)."""
"""What a file being written is called until it is complete (removed at the next start
if a crash left it)."""


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary file beside ``path``, fsync it, then rename over ``path``:
    a crash leaves the old file or the new one, never half of one. The one atomic
    writer of lander (run records, checkpoints, local settings, published bots)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # A name of this writer's own: two writers of one file (two exports at once) never
    # share a temporary, and the last rename wins whole.
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{next(_TEMPORARIES)}{TEMPORARY_SUFFIX}")
    try:
        with temporary.open("xb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError:
        temporary.unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any, *, compact: bool = False) -> None:
    """:func:`write_bytes_atomic` of ``data`` as JSON: indented for the records people
    read, ``compact`` (by orjson) for bot files, whose weights are up to millions of
    numbers: a Nature CNN's bot at 512 features is 36 MB compact and half as much again
    indented, against the 64 MB a bot file may have, and took 1.80 s in Python's indented
    JSON against orjson's 0.11 s (docs/performance.md, "Games that see, twelfth part").
    orjson writes a number that is not finite as ``null`` (a bot reader refuses it as it
    refused Python's ``NaN``); keys that are not strings become strings, as in Python's."""
    if compact:
        write_bytes_atomic(path, orjson.dumps(data, option=COMPACT_JSON))
        return
    write_bytes_atomic(path, (json.dumps(data, indent=2) + "\n").encode())


def load_runs(root: Path) -> list[RunRecord]:
    """Every readable run record of the checkout (``checkpoints/*/run.json``), the one
    scan of runs that status, push and ``resume`` without a name share."""
    return scan_runs(root)[0]


def scan_runs(root: Path) -> tuple[list[RunRecord], dict[str, str]]:
    """The readable run records, and for each run whose record is damaged (cut short,
    edited by hand, wrong types) why it cannot be read: one bad record hides nothing else."""
    records, damaged = [], {}
    for path in sorted((root / "checkpoints").glob("*/run.json")):
        try:
            records.append(RunRecord.load(path))
        except ValueError as exc:
            damaged[path.parent.name] = str(exc)
    return records, damaged


_OPTIONAL_TEXT = ("parent", "resumed_from", "git_commit", "last_checkpoint", "error")
_TEXT = ("run", "started_at", "updated_at", "status")


def _check_types(data: dict[str, Any]) -> None:
    """Refuse a record whose fields have the wrong types, so no reader meets them later.

    :raises TypeError: naming the field.
    """
    for name in _TEXT:
        if name in data and not isinstance(data[name], str):
            raise TypeError(f"{name} must be text, not {data[name]!r:.40}")
    for name in _OPTIONAL_TEXT:
        if data.get(name) is not None and not isinstance(data[name], str):
            raise TypeError(f"{name} must be text or null, not {data[name]!r:.40}")
    steps = data.get("total_timesteps", 0)
    if type(steps) is not int or steps < 0:
        raise TypeError(f"total_timesteps must be a whole number of steps, not {steps!r:.40}")
    if data.get("status", "running") not in STATUSES:
        raise TypeError(f"status must be one of {', '.join(STATUSES)}, not {data['status']!r:.40}")
    sessions = data.get("sessions", [])
    if not isinstance(sessions, list) or not all(isinstance(item, dict) for item in sessions):
        raise TypeError("sessions must be a list of objects")
    if not isinstance(data.get("extra", {}), dict):
        raise TypeError("extra must be an object")


@dataclass
class RunExtras:
    """What lander notes in a run's record beyond its core, written as ``run.json``'s
    ``extra`` object (only the fields that hold something, as before they were typed).

    :param last_fps: training steps per second at the latest report.
    :param last_reward: mean episode return at the latest report (None: no episode yet).
    :param last_success: success rate at the latest report (None: the game reports none).
    :param restarts: game instances restarted in the latest session.
    :param health: the latest session's health findings (``training.session.health``).
    :param best_evaluation: the best periodic evaluation: its steps and results.
    :param stopped_at_score: where ``--stop-at-score`` ended the latest session.
    :param game_layout: the game's declared observation keys (an export lays ONNX by them).
    :param cluster: where each instance runs on a Ray cluster (address, instances).
    :param auto_resumes: each automatic restart of the trainer (``--auto-resume``).
    :param sweep: the sweep and trial this run is (name, trial, params).
    :param curriculum: the plan and stage this run is.
    :param trained_on: the cluster node a sweep trial trained on.
    :param self_play: the self-play pool: the learner's side, every rating, rounds played,
        the opponent of the moment (``training.self_play``).
    :param side_layouts: the keys of each other side of a game whose sides have their own
        spaces (``game_layout`` is the run's own side's), for their bots' exports.
    :param demos: the demonstrations the run's policy was cloned from (each file's path,
        hash, episodes and steps) and what the cloning did (``training.demos.behaviour_cloning``).
    :param godot: what a Godot run trained against: the editor, the project's source at a
        commit, or a training build made from one, with the engine and its version
        (``training.envs.godot_games``).
    :param other: keys this version does not know (a newer lander's), kept as read.
    """

    last_fps: float = 0.0
    last_reward: float | None = None
    last_success: float | None = None
    restarts: int = 0
    health: list[dict[str, Any]] = field(default_factory=list)
    best_evaluation: dict[str, Any] | None = None
    stopped_at_score: dict[str, Any] | None = None
    game_layout: dict[str, Any] | None = None
    cluster: dict[str, Any] | None = None
    auto_resumes: list[dict[str, Any]] = field(default_factory=list)
    sweep: dict[str, Any] | None = None
    curriculum: dict[str, Any] | None = None
    trained_on: dict[str, Any] | None = None
    self_play: dict[str, Any] | None = None
    side_layouts: dict[str, Any] | None = None
    demos: dict[str, Any] | None = None
    godot: dict[str, Any] | None = None
    other: dict[str, Any] = field(default_factory=dict)
    legacy_git: bool | None = field(default=None, repr=False)
    """``extra.git`` of a record written before ``.git/info/exclude`` alone said whether
    git carries a run: read (``cli.results.publishing.in_git`` moves it there), never written."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunExtras:
        """Read ``extra`` of any lander's record, checking the type of each known key.

        :raises TypeError: naming a key of the wrong type.
        """
        known = {name: data[name] for name in _EXTRA_KINDS if name in data}
        for name, value in known.items():
            if not _EXTRA_KINDS[name](value):
                raise TypeError(f"extra.{name} is not what lander writes ({value!r:.40})")
        other = {k: v for k, v in data.items() if k not in _EXTRA_KINDS and k != "git"}
        git = data.get("git")
        return cls(**known, other=other, legacy_git=git if isinstance(git, bool) else None)

    def to_dict(self) -> dict[str, Any]:
        """The ``extra`` object: the fields that hold something, then the unknown keys."""
        written = {
            name: getattr(self, name)
            for name in _EXTRA_KINDS
            if getattr(self, name) is not None and getattr(self, name) != []
        }
        return {**self.other, **written}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _objects(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _object_or_none(value: Any) -> bool:
    return value is None or isinstance(value, dict)


def _self_play_pool(value: Any) -> bool:
    """A pool as ``training.self_play`` writes it: ratings by name, a count of rounds."""
    if value is None:
        return True
    if not isinstance(value, dict):
        return False
    ratings, rounds = value.get("ratings", {}), value.get("rounds", 0)
    numbers = isinstance(ratings, dict) and all(_number(r) for r in ratings.values())
    return numbers and type(rounds) is int and rounds >= 0


_EXTRA_KINDS = {
    "last_fps": _number,
    "last_reward": lambda value: value is None or _number(value),
    "last_success": lambda value: value is None or _number(value),
    "restarts": lambda value: type(value) is int and value >= 0,
    "health": _objects,
    "best_evaluation": _object_or_none,
    "stopped_at_score": _object_or_none,
    "game_layout": _object_or_none,
    "cluster": _object_or_none,
    "auto_resumes": _objects,
    "sweep": _object_or_none,
    "curriculum": _object_or_none,
    "trained_on": _object_or_none,
    "godot": _object_or_none,
    "self_play": _self_play_pool,
    "side_layouts": _object_or_none,
    "demos": _object_or_none,
}
"""Each typed field of :class:`RunExtras` and the check its value must pass."""


@dataclass
class RunRecord:
    """The run record saved as ``run.json``.

    :param run: the run's name.
    :param config: the settings of its latest session.
    :param status: running, finished, interrupted or failed.
    :param total_timesteps: environment steps taken, across every session and its parents.
    :param parent: the run this one was branched from, if any.
    :param resumed_from: the checkpoint the latest session started from.
    :param git_commit: the code's commit when the latest session started.
    :param started_at: when the run was first started.
    :param updated_at: when this record was last written.
    :param last_checkpoint: the newest checkpoint file name.
    :param error: why the run failed, when it did.
    :param sessions: one entry per session: start, end, steps, status.
    :param extra: what other parts of lander note of the run (:class:`RunExtras`).
    """

    run: str
    config: TrainConfig
    status: str = "running"
    total_timesteps: int = 0
    parent: str | None = None
    resumed_from: str | None = None
    git_commit: str | None = None
    started_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)
    last_checkpoint: str | None = None
    error: str | None = None
    sessions: list[dict[str, Any]] = field(default_factory=list)
    extra: RunExtras = field(default_factory=RunExtras)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["config"] = self.config.to_dict()
        data["extra"] = self.extra.to_dict()
        return copy.deepcopy(data)  # a copy the caller may change, as asdict made

    def save(self, path: Path) -> None:
        """Write atomically, stamping ``updated_at``. On a full disk, where the temporary
        copy cannot be written, overwrite the record in place (its own blocks are reused),
        so a run's final status and the reason still reach ``run.json``."""
        self.updated_at = now_iso()
        try:
            write_json_atomic(path, self.to_dict())
        except OSError as exc:
            if exc.errno not in FULL_DISK or not path.exists():
                raise
            text = json.dumps(self.to_dict(), indent=2) + "\n"
            try:
                with path.open("r+") as handle:
                    handle.write(text)
                    handle.truncate()
                    handle.flush()
                    os.fsync(handle.fileno())
            except OSError:
                raise exc from None

    @classmethod
    def load(cls, path: Path) -> RunRecord:
        """Read a record.

        :raises ConfigError: when the file is missing or not a run record.
        """
        try:
            data = json.loads(read_bounded_text(path, MAX_RECORD_BYTES))
            if not isinstance(data, dict):
                raise TypeError("not a JSON object")
            _check_types(data)
            config = from_dict(data.pop("config"), f"{path}")
            known = {
                name: data[name]
                for name in cls.__dataclass_fields__
                if name in data and name not in ("config", "extra")
            }
            return cls(config=config, extra=RunExtras.from_dict(data.get("extra", {})), **known)
        except FileNotFoundError:
            raise ConfigError(f"no run record at {path}") from None
        except OSError as exc:  # a folder, a FIFO, a link to a device, too large, unreadable
            raise ConfigError(f"{path} cannot be read ({exc.strerror or exc})") from None
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            raise ConfigError(f"{path} is not a lander run record ({exc})") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{path} is not a lander run record (not UTF-8 text)") from None


def placement_summary(cluster: dict[str, Any]) -> str:
    """One line: which instances run on which node of the cluster."""
    by_node: dict[str, list[int]] = {}
    hosts: dict[str, str] = {}
    for entry in cluster.get("instances", []):
        node = str(entry.get("node", "?"))
        by_node.setdefault(node, []).append(int(entry.get("instance", -1)))
        hosts[node] = str(entry.get("host", "?"))
    nodes = "; ".join(
        f"node {node[:8]} ({hosts[node]}): instances {', '.join(map(str, sorted(indices)))}"
        for node, indices in sorted(by_node.items())
    )
    return f"games on the Ray cluster at {cluster.get('address')}: {nodes}"
