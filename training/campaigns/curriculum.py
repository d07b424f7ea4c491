"""``lander curriculum PLAN.yaml``: stages of training, each resuming from the
one before, each with its own game settings, budget and exploration.

    name: lander-course          # the plan's name (shown by lander status)
    from: run03                  # optional: the first stage resumes from this run
    stages:
      - run: course-easy
        timesteps: 200000
        game_args: {difficulty: 0}
        ent_coef: 0.01
      - run: course-hard
        timesteps: 200000
        game_args: {difficulty: 2}
        reset_std: 0.5           # any train setting, plus reset_std

The plan stops at the first stage that fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training.config import FIELD_NAMES, ConfigError, load_yaml
from training.runs.run_paths import InvalidRunName, validate_run_name

STAGE_KEYS = FIELD_NAMES | {"run", "reset_std"}


@dataclass(frozen=True)
class Stage:
    """One stage: a run name, its settings and an optional std reset."""

    run: str
    overrides: dict[str, Any]
    reset_std: float | None = None


@dataclass(frozen=True)
class Plan:
    """A curriculum plan."""

    name: str
    stages: list[Stage]
    start_from: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def load_plan(path: Path) -> Plan:
    """Read and check a plan.

    :raises ConfigError: unreadable, not YAML, no stages, a bad run name or an unknown key.
    """
    data = load_yaml(path, "plan")
    if not isinstance(data, dict) or not isinstance(data.get("stages"), list) or not data["stages"]:
        raise ConfigError(f"plan {str(path)!r} needs a list of stages")
    stages = []
    try:
        name = validate_run_name(str(data.get("name") or path.stem))
        start_from = validate_run_name(str(data["from"])) if data.get("from") else None
        for index, raw in enumerate(data["stages"], start=1):
            if not isinstance(raw, dict) or "run" not in raw:
                raise ConfigError(f"plan {str(path)!r}: stage {index} needs a run name")
            unknown = sorted(set(raw) - STAGE_KEYS)
            if unknown:
                raise ConfigError(
                    f"plan {str(path)!r}: stage {index} has unknown setting(s) {', '.join(unknown)}"
                )
            overrides = {k: v for k, v in raw.items() if k in FIELD_NAMES}
            if "game_args" in overrides:
                overrides["game_args"] = {str(k): str(v) for k, v in overrides["game_args"].items()}
            reset_std = float(raw["reset_std"]) if raw.get("reset_std") is not None else None
            stages.append(Stage(validate_run_name(str(raw["run"])), overrides, reset_std))
    except InvalidRunName as exc:
        raise ConfigError(f"plan {str(path)!r}: {exc}") from None
    if len({stage.run for stage in stages}) != len(stages):
        raise ConfigError(f"plan {str(path)!r}: every stage needs its own run name")
    return Plan(name, stages, start_from)


def run_plan(
    plan: Plan,
    run_stage: Callable[[Stage, str | None, int], int],
    report: Callable[[str], None],
) -> int:
    """Run the stages in order, each resuming from the one before; stop at a failure.

    :param run_stage: trains one stage given (stage, resume source, 1-based index)
        and returns its exit code.
    :return: 0 when every stage finished, else the failing stage's exit code.
    """
    previous = plan.start_from
    for index, stage in enumerate(plan.stages, start=1):
        report(f"curriculum {plan.name}: stage {index}/{len(plan.stages)} ({stage.run})")
        code = run_stage(stage, previous, index)
        if code != 0:
            report(f"curriculum {plan.name}: stage {index} ({stage.run}) failed; stopping")
            return code
        previous = stage.run
    report(f"curriculum {plan.name}: all {len(plan.stages)} stages done")
    return 0
