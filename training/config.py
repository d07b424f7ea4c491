"""One typed configuration for a training run.

Built from defaults (or, on a resume, the parent run's saved settings), then a
config file, then command-line flags; saved in ``checkpoints/<run>/run.json`` and
read back on resume. Nothing else parses these settings.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from game_bridge.protocol import DEFAULT_PORT


class ConfigError(ValueError):
    """A configuration file or value that cannot be used."""


MAX_TIMESTEPS = 10**12
"""A trillion steps: beyond any run, and far inside the int64 step counters."""


@dataclass
class TrainConfig:
    """Every setting of a training run, with its default."""

    # -- games -------------------------------------------------------------------
    n_parallel: int = 4  # game instances (processes), each on its own port
    agents_per_instance: int = 8  # agents in each instance (the bundled game's --agents)
    speedup: float | None = None  # game time per wall second; None: the game's own default
    action_repeat: int | None = None  # physics ticks per step; None: the game's own default
    port: int = DEFAULT_PORT  # instance i listens on port + i
    seed: int = 0  # instance i gets seed + i; also seeds PPO
    game_bin: str | None = None  # a game executable; None: the bundled lander game
    game_args: dict[str, str] = field(default_factory=dict)  # extra --key=value for the game
    in_process: bool = (
        False  # train on the in-process Lander-v0 (no TCP): debugging and speed reference
    )
    read_timeout: float = 30.0  # seconds a game may take to answer one message
    fast_wire: bool = False  # offer lander's binary steps (games that do not know them keep JSON)
    max_restarts_per_minute: int = (
        3  # faulty games restarted per minute before the run stops (0: never restart)
    )
    # -- PPO -----------------------------------------------------------------------
    timesteps: int = 600_000  # steps to train in this session (a resume adds this many)
    # Rollout, minibatch and step size were chosen by time to a good bot, not fps
    # (benchmarks/time_to_skill.py; docs/performance.md): short rollouts and a large
    # step make many updates per sample, which reaches skill in far less wall time.
    learning_rate: float = 2e-3  # Adam step size
    n_steps: int = 64  # steps per env per rollout (rollout = n_steps x num_envs)
    batch_size: int = 512  # minibatch size for the PPO update
    n_epochs: int = 10  # passes over each rollout
    gamma: float = 0.99  # discount
    gae_lambda: float = 0.95  # GAE smoothing
    clip_range: float = 0.2  # PPO ratio clip
    ent_coef: float = 0.0  # entropy bonus: higher keeps exploring
    vf_coef: float = 0.5  # value loss weight
    max_grad_norm: float = 0.5  # gradient clipping
    net_width: int = 64  # units in each of the two hidden layers (policy and value)
    log_std_init: float = 0.0  # initial log of the action standard deviation (continuous actions)
    normalize_observations: bool = (
        False  # running mean/std normalisation (saved beside checkpoints)
    )
    device: str = "auto"  # auto (cuda only for image observations), cpu or cuda
    torch_threads: int = 1  # torch CPU threads while collecting; games need the other cores
    update_threads: int = 0  # torch CPU threads during the PPO update (0: every core)
    # -- run ---------------------------------------------------------------------------
    checkpoint_every: int = 100_000  # steps between rotating checkpoints
    keep_checkpoints: int = 3  # rotating checkpoints kept (final.zip is extra)
    eval_every: int = 0  # steps between evaluations during training (0: none)
    eval_episodes: int = 20  # episodes per evaluation
    push_every: int = 0  # checkpoints between mid-run commits and pushes (0: only at the end)

    @property
    def num_envs(self) -> int:
        """Agents stepped together: instances x agents per instance."""
        return self.n_parallel * self.agents_per_instance

    def validate(self) -> TrainConfig:
        """Check ranges, raising :class:`ConfigError` with the offending setting."""
        positive = (
            "n_parallel",
            "agents_per_instance",
            "timesteps",
            "n_steps",
            "batch_size",
            "n_epochs",
        )
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, float) and not math.isfinite(value):
                # nan passes every comparison below: a nan step size or timeout would
                # reach PPO or the socket code and fail far from the cause.
                raise ConfigError(
                    f"{item.name.replace('_', '-')} must be a finite number, got {value}"
                )
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(
                    f"{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}"
                )
        if self.seed < 0:
            raise ConfigError(f"seed must be 0 or more, got {self.seed}")
        if self.timesteps > MAX_TIMESTEPS:
            raise ConfigError(
                f"timesteps must be at most {MAX_TIMESTEPS:,}, got {self.timesteps:,}"
            )
        if not 1 <= self.port <= 65535 - self.n_parallel:
            raise ConfigError(
                f"port must leave room for {self.n_parallel} instances below 65536, got {self.port}"
            )
        if self.speedup is not None and self.speedup <= 0:
            raise ConfigError(f"speedup must be positive, got {self.speedup}")
        if self.action_repeat is not None and self.action_repeat < 1:
            raise ConfigError(f"action-repeat must be at least 1, got {self.action_repeat}")
        if self.learning_rate <= 0:
            raise ConfigError(f"learning-rate must be positive, got {self.learning_rate}")
        if self.ent_coef < 0:
            raise ConfigError(f"ent-coef must be 0 or more, got {self.ent_coef}")
        if self.checkpoint_every < 1 or self.keep_checkpoints < 1:
            raise ConfigError("checkpoint-every and keep-checkpoints must be at least 1")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ConfigError(f"device must be auto, cpu or cuda, got {self.device!r}")
        if self.torch_threads < 1 or self.update_threads < 0:
            raise ConfigError(
                "torch-threads must be at least 1 and update-threads 0 (every core) or more"
            )
        if self.max_restarts_per_minute < 0:
            raise ConfigError(
                f"max-restarts-per-minute must be 0 or more, got {self.max_restarts_per_minute}"
            )
        if self.read_timeout <= 0:
            raise ConfigError(f"read-timeout must be positive, got {self.read_timeout}")
        return self

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every setting."""
        return asdict(self)


FIELD_NAMES = frozenset(f.name for f in fields(TrainConfig))
_FIELD_TYPES = {f.name: str(f.type) for f in fields(TrainConfig)}


def _check_type(name: str, value: Any, source: str) -> Any:
    """Refuse a value of the wrong kind (a config file's ``n_parallel = "four"``)."""
    kind = _FIELD_TYPES[name]
    if value is None and kind.endswith("| None"):
        return value
    base = kind.split(" |")[0]
    ok = {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, int | float) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "str": isinstance(value, str),
        "dict[str, str]": isinstance(value, dict),
    }.get(base, True)
    if not ok:
        raise ConfigError(f"{source}: {name} must be {kind}, got {value!r}")
    if base == "float":
        return float(value)
    if base == "dict[str, str]":
        return {str(k): str(v) for k, v in value.items()}
    return value


def apply_overrides(base: TrainConfig, overrides: dict[str, Any], source: str) -> TrainConfig:
    """A copy of ``base`` with ``overrides`` applied; unknown keys are an error.

    :param source: where the overrides came from, for the error message.
    :raises ConfigError: on an unknown key.
    """
    unknown = sorted(set(overrides) - FIELD_NAMES)
    if unknown:
        raise ConfigError(f"{source}: unknown setting(s) {', '.join(unknown)}")
    checked = {name: _check_type(name, value, source) for name, value in overrides.items()}
    return TrainConfig(**{**base.to_dict(), **checked})


def from_dict(values: dict[str, Any], source: str) -> TrainConfig:
    """Rebuild a config saved by :meth:`TrainConfig.to_dict` (older keys are refused)."""
    return apply_overrides(TrainConfig(), values, source)


def load_config_file(path: Path) -> dict[str, Any]:
    """Read settings from a ``.toml`` or ``.json`` file (dashes or underscores in keys).

    :raises ConfigError: missing file, bad syntax or unknown key.
    """
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    try:
        if path.suffix == ".json":
            values = json.loads(path.read_text())
        elif path.suffix == ".toml":
            values = tomllib.loads(path.read_text())
        else:
            raise ConfigError(f"config file {str(path)!r}: use a .toml or .json file")
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {str(path)!r} is not valid: {exc}") from None
    if not isinstance(values, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a table of settings")
    normalised = {str(key).replace("-", "_"): value for key, value in values.items()}
    apply_overrides(
        TrainConfig(), normalised, f"config file {str(path)!r}"
    )  # checks keys and kinds now
    return normalised


def load_yaml(path: Path, what: str) -> Any:
    """Parse a YAML file (a search space, a curriculum plan).

    :param what: what the file is, for the error message.
    :raises ConfigError: when the file cannot be read or is not valid YAML.
    """
    import yaml

    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{what} {str(path)!r}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what} {str(path)!r} is not valid YAML: {exc}") from None
