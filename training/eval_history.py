"""``logs/eval_history.json``: one record per evaluation, and the champion.

The champion is the evaluation with the best mean reward so far; its bot is
kept as ``bots/champion.json`` so every machine plays the best bot after a pull.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.evaluation import EvalResult
from training.run_record import now_iso, write_json_atomic

HISTORY_NAME = "eval_history.json"
CHAMPION_BOT = "champion.json"


def history_path(root: Path) -> Path:
    """Where the evaluation history of a checkout lives."""
    return root / "logs" / HISTORY_NAME


def champion_bot_path(root: Path) -> Path:
    """The copy of the champion's bot."""
    return root / "bots" / CHAMPION_BOT


def load_history(root: Path) -> dict[str, Any]:
    """The history, or an empty one; a corrupt file is an error, not silently replaced."""
    path = history_path(root)
    if not path.exists():
        return {"evaluations": [], "champion": None}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); fix or move it") from None
    data.setdefault("evaluations", [])
    data.setdefault("champion", None)
    return data


@dataclass(frozen=True)
class Recorded:
    """What recording an evaluation did.

    :param index: 1-based number of this evaluation in the history.
    :param champion_changed: True when this evaluation became the champion.
    """

    index: int
    champion_changed: bool


def record_evaluation(
    root: Path,
    run: str | None,
    timesteps: int | None,
    bot: Path | None,
    result: EvalResult,
    commit: str | None,
) -> Recorded:
    """Append an evaluation; make it the champion if its mean reward is the best.

    :param bot: the evaluated bot file (copied to ``bots/champion.json`` on a new champion).
    """
    history = load_history(root)
    bot_text = None
    if bot is not None:
        bot_text = str(bot.relative_to(root)) if bot.is_relative_to(root) else str(bot)
    entry = {
        "run": run,
        "timesteps": timesteps,
        "bot": bot_text,
        "results": result.to_dict(),
        "date": now_iso(),
        "commit": commit,
    }
    history["evaluations"].append(entry)
    index = len(history["evaluations"])
    champion = history["champion"]
    changed = champion is None or result.mean_reward > champion["results"]["mean_reward"]
    if changed:
        history["champion"] = {**entry, "evaluation": index}
        if bot is not None and bot.exists():
            destination = champion_bot_path(root)
            destination.parent.mkdir(parents=True, exist_ok=True)
            temporary = destination.with_name(f".{destination.name}.tmp")
            shutil.copyfile(bot, temporary)
            temporary.replace(destination)
    write_json_atomic(history_path(root), history)
    return Recorded(index, changed)
