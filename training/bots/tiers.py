"""Graded bots: ``lander export RUN --tiers easy,medium,hard`` picks models of one run
spread by strength and exports each as ``bots/RUN-TIER.json`` (and ONNX).

A self-play run's candidates are its snapshots and its final model, ranked by their Elo
ratings in the run's pool; a run on a one-side bundled game ranks its checkpoints by
normalized score, measured now. The weakest candidate is the first tier, the final model
(the strongest) the last, the others evenly between. Each bot states its rating, and on a
game with sides its measured score against the hardest tier (``lander match`` measures
it again).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from training.errors import ExportError
from training.evaluation.matches import MatchResult
from training.evaluation.ratings import LEARNER
from training.evaluation.scoring import evaluate_in_process, game_settings, model_policy
from training.runs.checkpoints import (
    CheckpointError,
    DamagedSnapshot,
    find_resume_point,
    read_snapshot,
)
from training.runs.run_paths import SNAPSHOT_GLOB, RunPaths
from training.runs.run_record import RunRecord

TIER_NAMES = ("easy", "medium", "hard")


@dataclass(frozen=True)
class Candidate:
    """A model of the run that may become a tier.

    :param name: the snapshot's or checkpoint's name.
    :param path: its file (a snapshot's state dict, or a model .zip).
    :param rating: its strength: Elo in the pool, or a normalized score.
    """

    name: str
    path: Path
    rating: float


@dataclass(frozen=True)
class Tier:
    """One exported tier: its name, the candidate it came from, its bot file and the
    ``rating`` that file states."""

    name: str
    candidate: Candidate
    bot_json: Path
    rating: dict[str, Any]
    versus_hardest: MatchResult | None = None


def parse_tiers(text: str) -> list[str]:
    """``"easy,medium,hard"`` as names, at least two, each usable in a file name.

    :raises ExportError: a single tier, a repeated or unusable name.
    """
    names = [name.strip() for name in text.split(",") if name.strip()]
    if len(names) < 2 or len(set(names)) != len(names):
        raise ExportError(
            f"--tiers names two tiers or more, each once (like easy,medium,hard), not {text!r}"
        )
    for name in names:
        if not name.replace("-", "").replace("_", "").isalnum():
            raise ExportError(f"--tiers: {name!r} is not a plain name (letters, digits, - and _)")
    return names


def _loads(path: Path, console: Console | None) -> bool:
    """Whether snapshot ``path`` reads as a state dict: a damaged one (cut short, edited,
    from elsewhere) is left out of the tiers with one warning, as the pool leaves it out."""
    try:
        read_snapshot(path)
        return True
    except DamagedSnapshot as exc:
        if console is not None:
            console.print(f"[yellow]{exc}; left out[/]")
        return False


def candidates(
    paths: RunPaths, record: RunRecord, final: Path, console: Console | None = None
) -> list[Candidate]:
    """The run's models with their strength, weakest first (``final``, the model it
    exports, last); snapshots that do not load are left out.

    :raises ExportError: a run on a game lander cannot rate (a ``--game-bin`` game that
        trained without self-play).
    """
    state = record.extra.self_play
    if state is not None:
        ratings = state.get("ratings") or {}
        found = [
            Candidate(path.stem, path, float(ratings.get(path.stem, 0.0)))
            for path in sorted(paths.snapshots.glob(SNAPSHOT_GLOB))
            if path.stem in ratings and _loads(path, console)
        ]
        learner = Candidate("final", final, float(ratings.get(LEARNER, 0.0)))
        return [*sorted(found, key=lambda c: c.rating), learner]
    if record.config.own_game is not None:
        raise ExportError(
            "--tiers ranks a run's models by rating (self-play) or by normalized score on a "
            "bundled game; this run trained on a game of your own without --self-play"
        )
    from training.ppo.inference import load_for_inference

    config = record.config
    settings = game_settings(config.game, config.game_args, config.action_repeat)
    scored = []
    for path in sorted(paths.checkpoints.glob("ckpt_*.zip")):
        model, normalizer = load_for_inference(path)
        result = evaluate_in_process(model_policy(model, normalizer), 32, 7, settings)
        scored.append(Candidate(path.stem, path, float(result.normalized_score or 0.0)))
    return [*sorted(scored, key=lambda c: c.rating), Candidate("final", final, float("inf"))]


def pick(found: list[Candidate], names: list[str]) -> list[tuple[str, Candidate]]:
    """The candidates the tiers come from, spread by rating: the weakest, the final model,
    and between them the ones nearest evenly spaced ratings (each used once).

    :raises ExportError: fewer candidates than tiers.
    """
    if len(found) < len(names):
        raise ExportError(
            f"{len(names)} tiers need {len(names)} rated models; run has {len(found)} "
            "(train longer, or keep more snapshots with --snapshot-window)"
        )
    finite = [c.rating for c in found if math.isfinite(c.rating)]
    top = max(finite) if finite else 0.0
    ratings = [c.rating if math.isfinite(c.rating) else top for c in found]
    low, high = ratings[0], ratings[-1]
    chosen = {0, len(found) - 1}
    picks = [0]
    for index in range(1, len(names) - 1):
        goal = low + (high - low) * index / (len(names) - 1)
        free = [i for i in range(len(found)) if i not in chosen]
        nearest = min(free, key=lambda i: (abs(ratings[i] - goal), i))
        chosen.add(nearest)
        picks.append(nearest)
    picks.append(len(found) - 1)
    order = sorted(picks[1:-1], key=lambda i: ratings[i])  # the tiers between, weakest first
    positions = [picks[0], *order, picks[-1]]
    return [(name, found[position]) for name, position in zip(names, positions, strict=True)]


def export_tiers(
    paths: RunPaths,
    names: list[str],
    console: Console | None = None,
    versus: Callable[[Path, Path], MatchResult] | None = None,
) -> list[Tier]:
    """Export one bot per tier name, weakest first; with ``versus`` (a match between two
    bot files on the run's game), each states its score against the hardest.

    :raises CheckpointError, ExportError: nothing to export, too few models, parity failed.
    """
    from training.bots.export import export_policy
    from training.bots.plugin_layout import OnnxLayout
    from training.bots.run_bots import side_note, trained_with
    from training.ppo.inference import load_for_inference

    if not paths.run_json.exists():
        raise CheckpointError(f"run {paths.run!r} has no run.json to rank its models by")
    record = RunRecord.load(paths.run_json)
    final = find_resume_point(paths.root, paths.run, console).model
    chosen = pick(candidates(paths, record, final, console), names)
    tiers = []
    for name, candidate in chosen:
        source = candidate.path if candidate.path.suffix == ".zip" else final
        model, normalizer = load_for_inference(source)
        if candidate.path.suffix == ".pt":
            state = read_snapshot(candidate.path)
            try:
                model.policy.load_state_dict(state)
            except RuntimeError as exc:  # a snapshot of another network's shape
                first = str(exc).splitlines()[0][:120]
                raise ExportError(
                    f"snapshot {candidate.path} does not fit this run's policy ({first})"
                ) from None
        rating: dict[str, Any] = (
            {"elo": candidate.rating}
            if record.extra.self_play is not None
            else {"normalized_score": None if candidate.name == "final" else candidate.rating}
        )
        bot_json = paths.root / "bots" / f"{paths.run}-{name}.json"
        export_policy(
            model,
            normalizer,
            paths.run,
            bot_json,
            bot_json.with_suffix(".onnx"),
            git_commit=record.git_commit,
            trained_with=trained_with(record.config),
            layout=OnnxLayout.of_game(record.extra.game_layout),
            notes={"tier": name, "tier_source": candidate.name, "rating": rating}
            | side_note(record),
        )
        tiers.append(Tier(name, candidate, bot_json, rating))
    if versus is None:
        return tiers
    hardest = tiers[-1].bot_json
    return [
        replace(
            t, versus_hardest=None if t is tiers[-1] else _noted(t, versus(t.bot_json, hardest))
        )
        for t in tiers
    ]


def _noted(tier: Tier, result: MatchResult) -> MatchResult:
    """Write the tier's score against the hardest into its bot file."""
    import json

    from training.runs.run_record import write_json_atomic

    spec = json.loads(tier.bot_json.read_text())
    low, high = result.interval()
    spec["versus_hardest"] = {
        "games": result.games,
        "wins": result.wins,
        "draws": result.draws,
        "losses": result.losses,
        "score": round(result.score, 3),
        "interval_95": [round(low, 3), round(high, 3)],
    }
    write_json_atomic(tier.bot_json, spec, compact=True)
    return result
