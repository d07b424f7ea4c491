"""The flags of a training run, declared once and shared by every command that
trains (``train``, ``start``, ``resume``): each maps to a ``TrainConfig`` field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from training.config import ConfigError, TrainConfig

_DEFAULT = TrainConfig()

Timesteps = Annotated[
    int | None,
    typer.Option(
        help="Environment steps to train (on a resume: additional steps). [default: 600000]"
    ),
]
NParallel = Annotated[
    int | None, typer.Option(help="Game instances (processes) to run. [default: 4]")
]
AgentsPerInstance = Annotated[
    int | None, typer.Option(help="Agents in each instance (bundled game's --agents). [default: 8]")
]
Speedup = Annotated[
    float | None,
    typer.Option(
        help="Game seconds per wall second (physics ticks/s = 60 x speedup). [default: game's own]"
    ),
]
ActionRepeat = Annotated[
    int | None, typer.Option(help="Physics ticks per step. [default: game's own]")
]
Port = Annotated[
    int | None, typer.Option(help="Base TCP port: instance i listens on port + i. [default: 11008]")
]
Seed = Annotated[
    int | None,
    typer.Option(help="Seed of PPO and of instance 0 (instance i gets seed + i). [default: 0]"),
]
GameBin = Annotated[
    Path | None,
    typer.Option(
        help="A game executable speaking the Godot RL Agents protocol. [default: the bundled game]"
    ),
]
GameArg = Annotated[
    list[str] | None,
    typer.Option(help="Game setting KEY=VALUE, passed to the game as --KEY=VALUE (repeatable)."),
]
InProcess = Annotated[
    bool | None,
    typer.Option(
        "--in-process",
        help="Train on the in-process Lander-v0 (no TCP): debugging, speed reference.",
    ),
]
EntCoef = Annotated[
    float | None,
    typer.Option(help="Entropy bonus coefficient; takes effect on a resume. [default: 0]"),
]
LearningRate = Annotated[
    float | None,
    typer.Option(
        help=f"Adam learning rate; takes effect on a resume. [default: {_DEFAULT.learning_rate:g}]"
    ),
]
NSteps = Annotated[
    int | None,
    typer.Option(
        help="Steps per env per rollout (rollout = n-steps x instances x agents). "
        f"[default: {_DEFAULT.n_steps}]"
    ),
]
BatchSize = Annotated[
    int | None, typer.Option(help=f"PPO minibatch size. [default: {_DEFAULT.batch_size}]")
]
CheckpointEvery = Annotated[
    int | None, typer.Option(help="Steps between rotating checkpoints. [default: 100000]")
]
EvalEvery = Annotated[
    int | None,
    typer.Option(help="Steps between evaluations during training (0: none). [default: 0]"),
]
PushEvery = Annotated[
    int | None,
    typer.Option(
        help="Checkpoints between mid-run commits and pushes (0: only at the end). [default: 0]"
    ),
]
Device = Annotated[
    str | None,
    typer.Option(help="auto (CUDA only for image observations), cpu or cuda. [default: auto]"),
]
MaxRestarts = Annotated[
    int | None,
    typer.Option(
        help="Faulty games restarted per minute before the run stops (0: never restart). [default: 3]"
    ),
]
FastWire = Annotated[
    bool | None,
    typer.Option(
        "--fast-wire",
        help="Offer lander's binary step encoding; games that do not speak it (Godot) keep JSON.",
    ),
]
ReadTimeout = Annotated[
    float | None, typer.Option(help="Seconds a game may take to answer. [default: 30]")
]
ConfigFile = Annotated[
    Path | None,
    typer.Option("--config", help="Settings file (.toml or .json), applied before flags."),
]
Resume = Annotated[
    str | None,
    typer.Option(help="Continue from a run name (its final or newest checkpoint) or a .zip path."),
]
ResetStd = Annotated[
    float | None, typer.Option(help="On resume, set the action standard deviation to this value.")
]
Force = Annotated[
    bool,
    typer.Option(
        "--force", help="Start the run over even though it exists (removes its old files)."
    ),
]
Git = Annotated[
    bool | None,
    typer.Option(
        "--git/--no-git",
        help="Pull, commit and push (default), or keep the run out of git. A resumed run "
        "keeps the choice of the run it continues unless given.",
    ),
]


CONFIG_FLAGS = frozenset(
    {
        "timesteps", "n_parallel", "agents_per_instance", "speedup", "action_repeat", "port", "seed",
        "game_bin", "game_arg", "in_process", "ent_coef", "learning_rate", "n_steps", "batch_size",
        "checkpoint_every", "eval_every", "push_every", "device", "read_timeout", "max_restarts_per_minute", "fast_wire",
    }
)  # fmt: skip
"""The train flags that are ``TrainConfig`` settings (the rest steer the session)."""


def parse_game_args(pairs: list[str] | None) -> dict[str, str]:
    """``["difficulty=2", "level=a"]`` to ``{"difficulty": "2", "level": "a"}``.

    :raises ConfigError: on a pair without ``=`` or with an unsafe key.
    """
    result: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        key = key.strip().removeprefix("--")
        if not sep or not key or not key.replace("_", "").replace("-", "").isalnum():
            raise ConfigError(f"--game-arg expects KEY=VALUE with a plain key, got {pair!r}")
        result[key] = value
    return result


def overrides_from(params: dict[str, Any]) -> dict[str, Any]:
    """The settings among a parsed train command's parameters (the rest steer the session)."""
    return collect_overrides(
        **{name: value for name, value in params.items() if name in CONFIG_FLAGS}
    )


def collect_overrides(**flags: Any) -> dict[str, Any]:
    """The settings a user gave explicitly (None means "not given")."""
    overrides = {
        name: value for name, value in flags.items() if value is not None and name != "game_arg"
    }
    if flags.get("game_arg"):
        overrides["game_args"] = parse_game_args(flags["game_arg"])
    if "game_bin" in overrides:
        overrides["game_bin"] = str(Path(overrides["game_bin"]).resolve())
    return overrides
