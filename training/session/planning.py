"""What a training session is asked for and what it resolves to, before anything is
written: the request, its plan (settings, resume point, parent), and the checks that
refuse a run that cannot start (a taken name, another checkout's run, a bad setting).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from games import BUNDLED_GAMES, EDITOR_GAME, PZ_PREFIX, game_entry
from games.gym.packages import import_packages
from training.bots.run_bots import trained_with
from training.config import (
    CONTINUOUS_PICTURE_DEFAULTS,
    MANY_AGENT_DEFAULTS,
    PICTURE_DEFAULTS,
    SESSION_SETTINGS,
    SHAPE_SETTINGS,
    ConfigError,
    TrainConfig,
    apply_overrides,
    check_config,
    load_config_file,
)
from training.demos.files import Demos, check_game, load_demos
from training.errors import game_not_given
from training.evaluation.records import game_name, owns_run
from training.runs.checkpoints import ResumePoint, find_resume_point
from training.runs.run_paths import RunPaths
from training.runs.run_record import RunRecord


class RunExists(ConfigError):
    """Starting a run whose name is taken, without ``--resume`` or ``--force``."""


class RunOfAnotherCheckout(ConfigError):
    """Writing into a run that another checkout trained: its files have one writer."""


@dataclass
class TrainRequest:
    """What the user asked for.

    :param root: the checkout.
    :param run: the run to train (validated).
    :param overrides: settings given explicitly as flags.
    :param config_file: a settings file applied before the flags.
    :param resume: a run name or checkpoint path to continue from.
    :param force: start over even though the run exists (its old files are removed).
    :param reset_std: set the action standard deviation after loading.
    :param git_commit: the code's commit, recorded in run.json.
    :param tags: :class:`~training.runs.run_record.RunExtras` fields to set in run.json (a
        curriculum stage, a sweep trial).
    :param until_timesteps: train until the run has this many steps, whatever the resumed
        checkpoint's count (an automatic resume finishing the session that died).
    :param demos: demonstration files a new run's policy is cloned from before PPO.
    """

    root: Path
    run: str
    overrides: dict[str, Any] = field(default_factory=dict)
    config_file: Path | None = None
    resume: str | None = None
    force: bool = False
    reset_std: float | None = None
    git_commit: str | None = None
    tags: dict[str, Any] = field(default_factory=dict)
    until_timesteps: int | None = None
    demos: tuple[Path, ...] = ()
    paths: RunPaths = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # The run object every layer below receives: the name validated once, here.
        self.paths = RunPaths(self.root, self.run)


@dataclass
class TrainPlan:
    """A request resolved: the configuration and where the model comes from."""

    paths: RunPaths
    config: TrainConfig
    resume_point: ResumePoint | None
    parent: str | None
    previous: RunRecord | None
    damaged_record: bool = False
    """The run's own run.json could not be read: it is kept aside, and a new one written."""
    demos: list[Demos] = field(default_factory=list)
    """The demonstrations read and checked as far as the files alone tell (the game they
    name); their spaces are checked against the game's once it answers."""


def _given_settings(
    base: TrainConfig,
    file_settings: dict[str, Any],
    request: TrainRequest,
    recorded_by: str | None = None,
) -> TrainConfig:
    """``base`` under the request's config file (read once, by the caller), then its flags;
    the ``--gym-package``s imported (the game's ids exist only then).

    :param recorded_by: the run whose record from another checkout ``base`` is, or None
        (its packages are imported only where the user names them again).
    """
    config = base
    if request.config_file is not None:
        config = apply_overrides(config, file_settings, f"config file {request.config_file}")
    config = apply_overrides(config, request.overrides, "flags")
    named = {*file_settings, *request.overrides}
    if config.game == EDITOR_GAME and "n_parallel" not in named:
        config = replace(config, n_parallel=1)  # one game: the one a person runs
    if recorded_by is not None and "gym_packages" not in named and config.gym_packages:
        raise ConfigError(
            f"run {recorded_by} (trained in another checkout) imported "
            f"{', '.join(config.gym_packages)}: a record from elsewhere imports nothing by "
            f"itself; name {'them' if len(config.gym_packages) > 1 else 'it'} here: "
            + " ".join(f"--gym-package {name}" for name in config.gym_packages)
        )
    import_packages(config.gym_packages)
    return check_config(config)


def _check_shape_kept(recorded: TrainConfig, config: TrainConfig, run: str | None) -> None:
    """Refuse a resume whose flags or config file name another network shape than its
    run's (``--cnn-features 128`` on a run of 512): the checkpoint's network keeps its own,
    so the value would be silently ignored.

    :raises ConfigError: the setting, both values, and what to do instead.
    """
    for name in SHAPE_SETTINGS:
        kept, given = getattr(recorded, name), getattr(config, name)
        if given != kept:
            flag = "--" + name.replace("_", "-")
            raise ConfigError(
                f"{flag} {given}: run {run}'s policy has {flag} {kept} (the network's shape, "
                f"fixed when a run starts): drop {flag}, or start a new run"
            )


MEMORY_N_STEPS = 128
"""Steps per agent a rollout of a policy with memory holds at least (unless --n-steps says
otherwise): the sequences its update learns over are that long, and a memory is learned only
across the steps one sequence spans. On the glimpse lander (a target hidden 35 steps of
every 40) sequences of 32 never learned to remember (0.4 at 950k steps); 128 did
(docs/performance.md, "Bots that remember"). sb3-contrib's RecurrentPPO and CleanRL's LSTM
PPO use 128 too."""
MEMORY_N_EPOCHS = 5
"""Passes over each rollout of a policy with memory (unless --n-epochs says otherwise): each
pass replays every sequence through the GRU, so half the passes is nearly half the update,
and the states the rollout stored at each sequence's start age less. On the glimpse lander's
two slowest seeds, 10 passes peaked at 0.62 and 0.73 in 150 s; 5 passed 0.8 at 78 s and 89 s
(256 steps and 10 passes: 82 s on the first; 256 and 5: 0.49 at 100 s)."""


def game_defaults(config: TrainConfig) -> dict[str, Any]:
    """The settings a new run of a bundled game starts from (its registry entry's
    ``train_defaults``, and its ``arg_defaults`` for the run's ``--game-arg`` values: its
    camera modes keep what they were measured with, not the defaults for pictures chosen
    on games nobody here drew); for a ``gym:`` or ``pz:`` game that sends pictures, the
    defaults for pictures (and for continuous actions from pictures where it acts so); for
    a ``pz:`` game, the defaults for many agents under them; none for a game binary or
    server, which is another game."""
    if config.own_game is not None:
        return {}
    entry = game_entry(config.game)
    if config.game not in BUNDLED_GAMES:
        many = dict(MANY_AGENT_DEFAULTS) if config.game.startswith(PZ_PREFIX) else {}
        if not entry.sees_pictures(config.game_args):
            return many
        if entry.continuous_actions(config.game_args):
            return {**many, **PICTURE_DEFAULTS, **CONTINUOUS_PICTURE_DEFAULTS}
        return {**many, **PICTURE_DEFAULTS}
    tuned = dict(entry.train_defaults)
    for (name, value), settings in entry.arg_defaults.items():
        if config.game_args.get(name) == value:
            tuned.update(settings)
    return tuned


def plan_training(request: TrainRequest, console: Console | None = None) -> TrainPlan:
    """Resolve a request into a configuration without writing anything.

    :raises ConfigError: a bad setting, a bad config file, or a run that exists.
    :raises CheckpointError: nothing valid to resume from.
    """
    paths = request.paths
    resume_point: ResumePoint | None = None
    previous: RunRecord | None = None
    base = TrainConfig()
    recorded: TrainConfig | None = None  # the resumed run's own settings, where readable
    parent: str | None = None
    foreign_game: str | None = None
    foreign_record: str | None = None  # the resumed run, where another checkout recorded it
    damaged = False  # resuming in place a run whose run.json cannot be read
    if request.resume is not None:
        resume_point = find_resume_point(request.root, request.resume, console)
        source_run = resume_point.run or _run_of_checkpoint(request.root, resume_point.model)
        source = paths if source_run == request.run else None
        if source is None and source_run is not None:
            source = RunPaths(request.root, source_run)
        source_record = _readable_record(source, console) if source is not None else None
        if source is not None and source_record is not None:
            base = recorded = replace(source_record.config, **SESSION_SETTINGS)
            if not owns_run(source):
                foreign_record = source.run
                foreign_game = base.game_bin  # named by a record from elsewhere
        if source_run != request.run:
            parent = source_run
        elif source_record is not None:
            previous = source_record
            parent = previous.parent
        else:
            damaged = paths.exists()
        if source_run != request.run and paths.exists() and not request.force:
            raise RunExists(
                f"run {request.run!r} already exists: pick a new name for the branch or add --force to replace it"
            )
    elif paths.exists() and not request.force:
        raise RunExists(
            f"run {request.run!r} already exists: continue it with `resume {request.run}` "
            f"(or --resume {request.run}), or start over with --force"
        )
    if paths.exists() and not damaged and not owns_run(paths):
        # Two checkouts writing one run's files would collide in git.
        raise RunOfAnotherCheckout(
            f"run {request.run!r} was trained in another checkout, which alone writes its files: "
            f"continue it there, or branch it here with: lander resume {request.run} --as NEW_NAME"
        )
    file_settings = load_config_file(request.config_file) if request.config_file else {}
    config = _given_settings(base, file_settings, request, foreign_record)
    if recorded is not None:
        _check_shape_kept(recorded, config, source_run)
    if resume_point is None:
        tuned = game_defaults(config)
        if config.memory:
            tuned["n_steps"] = max(int(tuned.get("n_steps", base.n_steps)), MEMORY_N_STEPS)
            tuned["n_epochs"] = MEMORY_N_EPOCHS
        if tuned:  # a new run: no record from elsewhere
            config = _given_settings(
                apply_overrides(base, tuned, f"the {config.game} game"), file_settings, request
            )
    named_here = "game_bin" in request.overrides
    if foreign_game is not None and config.game_bin == foreign_game and not named_here:
        raise game_not_given(f"run {source_run} (trained in another checkout)", foreign_game)
    if request.reset_std is not None and not request.reset_std > 0:
        raise ConfigError(f"--reset-std must be positive, got {request.reset_std}")
    if request.reset_std is not None and resume_point is None:
        raise ConfigError("--reset-std applies to a resumed policy: add --resume RUN")
    if config.device.startswith("cuda") and not _cuda_available():
        raise ConfigError(
            f"--device {config.device}: torch sees no CUDA device here; use --device auto or cpu"
        )
    if config.opponent is not None:
        from game_bridge.bot_runner import BotRunner

        BotRunner.from_file(Path(config.opponent))  # a bad --opponent is one line, before any game
    demos = _read_demos(request, config, resume_point)
    return TrainPlan(paths, config, resume_point, parent, previous, damaged, demos)


def _read_demos(
    request: TrainRequest, config: TrainConfig, resume_point: ResumePoint | None
) -> list[Demos]:
    """The demo files, read and refused (one line) before any game starts: a bad file, or
    one recorded on another game than the run's."""
    if not request.demos:
        return []
    if resume_point is not None:
        raise ConfigError(
            "--demos clone a new run's policy before PPO: a resumed policy has learned "
            "already (drop --demos, or start a new run with them)"
        )
    if config.self_play:
        raise ConfigError("--demos teach one player: they do not combine with --self-play")
    if config.memory:
        raise ConfigError(
            "--memory with --demos: not supported yet (cloning teaches single steps, not "
            "what to remember); train the policy with memory without --demos"
        )
    game = game_name(trained_with(config))
    demos = [load_demos(path) for path in request.demos]
    for demo in demos:
        check_game(demo, game)
    return demos


def _readable_record(source: RunPaths, console: Console | None) -> RunRecord | None:
    """The run's record, or None when it has none or it is damaged (cut short, hand-edited):
    its checkpoints still resume, with the default settings and the flags given."""
    if not source.exists():
        return None
    try:
        return RunRecord.load(source.run_json)
    except ConfigError as exc:
        if console is not None:
            console.print(
                f"[yellow]warning:[/] {exc}; resuming from its checkpoint with the default "
                "settings and the flags given"
            )
        return None


def _run_of_checkpoint(root: Path, model: Path) -> str | None:
    """The run a checkpoint path belongs to, when it lies in ``checkpoints/<run>/``."""
    try:
        relative = model.resolve().relative_to((root / "checkpoints").resolve())
    except ValueError:
        return None
    return relative.parts[0] if len(relative.parts) == 2 else None


def _cuda_available() -> bool:
    """Whether torch sees a CUDA device; torch is imported only for this question, so a
    plan is made while torch loads in a run that does not ask for CUDA."""
    import torch

    return bool(torch.cuda.is_available())
