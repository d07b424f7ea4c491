"""Where a training session stands right now: steps, fps, reward, percent and ETA.

The trainer rewrites ``.lander/progress/RUN.json`` (untracked) every few seconds, so
``lander status`` shows a running run's live numbers instead of its last checkpoint's,
which may be 100,000 steps behind. The same numbers make the plain progress line of a
log without a terminal.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from training.runs.local_state import local_dir
from training.runs.run_record import write_json_atomic


def live_progress_path(root: Path, run: str) -> Path:
    """The run's live progress in this checkout (``.lander/progress/RUN.json``)."""
    return local_dir(root) / "progress" / f"{run}.json"


@dataclass(frozen=True)
class LiveProgress:
    """One session's progress, as the trainer last wrote it.

    :param steps: the run's steps so far (a resumed run counts its earlier ones).
    :param target: the run's steps when this session ends.
    :param session_steps: steps this session trained so far.
    :param session_target: steps this session trains.
    :param fps: this session's steps per second.
    :param reward: the mean return of the last 100 episodes, None before one ends.
    :param success: the success rate of the last 100 episodes, None without one.
    :param updated_at: when it was written (seconds since the epoch).
    """

    steps: int
    target: int
    session_steps: int
    session_target: int
    fps: float
    reward: float | None
    success: float | None
    updated_at: float

    @property
    def percent(self) -> float:
        """Of this session's steps, done so far (0-100)."""
        return 100.0 * min(1.0, self.session_steps / max(1, self.session_target))

    @property
    def eta_s(self) -> float | None:
        """Seconds left at this session's pace, None before it has one."""
        if self.fps <= 0:
            return None
        return max(0, self.session_target - self.session_steps) / self.fps

    def eta_text(self) -> str:
        """``3m12s``, or ``-`` before there is a pace."""
        eta = self.eta_s
        return "-" if eta is None else format_duration(eta)

    def write(self, root: Path, run: str) -> None:
        """Replace the run's live file atomically (a reader never sees half of one)."""
        write_json_atomic(live_progress_path(root, run), asdict(self))


def format_duration(seconds: float) -> str:
    """``45s``, ``3m10s``, ``2h05m``: short enough for a status cell."""
    whole = math.ceil(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole // 60 % 60:02d}m"


def read_live_progress(root: Path, run: str) -> LiveProgress | None:
    """The run's live progress in this checkout, or None when there is none or it cannot
    be read (a file from an older lander, or edited by hand)."""
    try:
        data = json.loads(live_progress_path(root, run).read_text())
        return LiveProgress(
            steps=int(data["steps"]),
            target=int(data["target"]),
            session_steps=int(data["session_steps"]),
            session_target=int(data["session_target"]),
            fps=float(data["fps"]),
            reward=None if data["reward"] is None else float(data["reward"]),
            success=None if data["success"] is None else float(data["success"]),
            updated_at=float(data["updated_at"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def forget_live_progress(root: Path, run: str) -> None:
    """Remove the run's live file: a new session starts without the last one's numbers."""
    live_progress_path(root, run).unlink(missing_ok=True)
