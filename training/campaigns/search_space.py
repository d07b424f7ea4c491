"""The hyperparameter search space of ``lander sweep``, read from YAML.

Each key is a ``TrainConfig`` setting; its value says how to sample it:

    learning_rate: {type: float, low: 1.0e-4, high: 1.0e-3, log: true}
    n_steps: {type: categorical, choices: [128, 256, 512]}
    n_epochs: {type: int, low: 3, high: 10}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna

from training.config import FIELD_NAMES, ConfigError, load_yaml

DEFAULT_SPACE: dict[str, dict[str, Any]] = {
    "learning_rate": {"type": "float", "low": 1.0e-4, "high": 1.0e-3, "log": True},
    "ent_coef": {"type": "float", "low": 1.0e-5, "high": 1.0e-2, "log": True},
    "n_steps": {"type": "categorical", "choices": [128, 256, 512]},
    # Whole minibatches of the rollout, not a batch size: a size drawn beside n_steps need
    # not divide n_steps x envs (SB3 then trains on a truncated last minibatch).
    "minibatches": {"type": "categorical", "choices": [2, 4, 8]},
    "clip_range": {"type": "float", "low": 0.1, "high": 0.3},
    "net_width": {"type": "categorical", "choices": [32, 64, 128]},
}
"""Learning rate, entropy, rollout length, minibatches, clip range and network width."""


def load_space(path: Path | None) -> dict[str, dict[str, Any]]:
    """The search space from a YAML file, or :data:`DEFAULT_SPACE`.

    :raises ConfigError: unreadable file, unknown setting or malformed entry.
    """
    if path is None:
        return DEFAULT_SPACE
    space = load_yaml(path, "search space")
    if not isinstance(space, dict) or not space:
        raise ConfigError(f"search space {str(path)!r} must map settings to their ranges")
    for name, spec in space.items():
        if name not in FIELD_NAMES:
            raise ConfigError(f"search space {str(path)!r}: unknown setting {name!r}")
        kind = spec.get("type") if isinstance(spec, dict) else None
        valid = (kind in ("float", "int") and {"low", "high"} <= set(spec)) or (
            kind == "categorical" and isinstance(spec.get("choices"), list) and spec["choices"]
        )
        if not valid:
            raise ConfigError(
                f"search space {str(path)!r}: {name} needs type float|int with low and high, "
                "or type categorical with choices"
            )
    return space


def sample(trial: optuna.Trial, space: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Draw one setting per key of ``space`` for ``trial``."""
    params: dict[str, Any] = {}
    for name, spec in space.items():
        if spec["type"] == "float":
            params[name] = trial.suggest_float(
                name, float(spec["low"]), float(spec["high"]), log=bool(spec.get("log"))
            )
        elif spec["type"] == "int":
            params[name] = trial.suggest_int(
                name, int(spec["low"]), int(spec["high"]), log=bool(spec.get("log"))
            )
        else:
            params[name] = trial.suggest_categorical(name, spec["choices"])
    return params
