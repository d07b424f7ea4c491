"""A training session from start to end: configuration, environment, model,
callbacks, learn, and a clean ending on success, Ctrl-C, SIGTERM or a game fault.

Read top to bottom, :func:`train` is the whole flow; each step it takes is a
plain function or an SB3 callback defined elsewhere in ``training``.
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import socket
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

import torch
from gymnasium import spaces
from rich.console import Console
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from game_bridge.errors import BridgeError, Interrupted
from game_bridge.instance import allow_waits, interrupt_waits
from game_bridge.vec_env import GameVecEnv
from training.callbacks import (
    GameHealth,
    ProgressReport,
    PublishBot,
    RotatingCheckpoints,
    StopFlag,
    UpdateThreads,
)
from training.checkpoints import (
    CheckpointError,
    ResumePoint,
    find_resume_point,
    normalization_path,
    remove_temporary_files,
    save_checkpoint,
)
from training.config import (
    RESUMABLE_SETTINGS,
    SESSION_SETTINGS,
    ConfigError,
    TrainConfig,
    apply_overrides,
    load_config_file,
)
from training.environments import (
    game_env_of,
    in_process_env_id,
    launch_config,
    make_vec_env,
    wrap_normalization,
)
from training.errors import game_not_given
from training.eval_callback import PeriodicEvaluation
from training.eval_records import owns_run
from training.evaluation import EvalResult, Policy, evaluate_through_bridge, game_settings
from training.health import KEPT_FINDINGS, Finding, HealthWatch
from training.local_state import checkout_id, keep_damaged_record, live_bot_path
from training.policy_tweaks import reset_action_std
from training.run_paths import RunPaths
from training.run_record import RunRecord, now_iso, placement_summary
from training.tensorboard_log import resilient_logger


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
    :param tags: kept in run.json's ``extra`` (a curriculum stage, a sweep trial).
    :param until_timesteps: train until the run has this many steps, whatever the resumed
        checkpoint's count (an automatic resume finishing the session that died).
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


@dataclass
class TrainOutcome:
    """How a session ended.

    :param status: finished, interrupted or failed.
    :param exit_code: what the command should exit with.
    :param record: the run record as saved.
    :param error: why it failed, when it did.
    :param final_saved: True when this session wrote ``final.zip``.
    """

    status: str
    exit_code: int
    record: RunRecord
    error: str | None = None
    final_saved: bool = False


def plan_training(request: TrainRequest, console: Console | None = None) -> TrainPlan:
    """Resolve a request into a configuration without writing anything.

    :raises ConfigError: a bad setting, a bad config file, or a run that exists.
    :raises CheckpointError: nothing valid to resume from.
    """
    paths = request.paths
    resume_point: ResumePoint | None = None
    previous: RunRecord | None = None
    base = TrainConfig()
    parent: str | None = None
    foreign_game: str | None = None
    damaged = False  # resuming in place a run whose run.json cannot be read
    if request.resume is not None:
        resume_point = find_resume_point(request.root, request.resume, console)
        source_run = resume_point.run or _run_of_checkpoint(request.root, resume_point.model)
        source = paths if source_run == request.run else None
        if source is None and source_run is not None:
            source = RunPaths(request.root, source_run)
        source_record = _readable_record(source, console) if source is not None else None
        if source is not None and source_record is not None:
            base = replace(source_record.config, **SESSION_SETTINGS)
            if base.game_bin is not None and not owns_run(source):
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
    config = base
    if request.config_file is not None:
        config = apply_overrides(
            config, load_config_file(request.config_file), f"config file {request.config_file}"
        )
    config = apply_overrides(config, request.overrides, "flags").validate()
    named_here = "game_bin" in request.overrides
    if foreign_game is not None and config.game_bin == foreign_game and not named_here:
        raise game_not_given(f"run {source_run} (trained in another checkout)", foreign_game)
    if request.reset_std is not None and not request.reset_std > 0:
        raise ConfigError(f"--reset-std must be positive, got {request.reset_std}")
    if request.reset_std is not None and resume_point is None:
        raise ConfigError("--reset-std applies to a resumed policy: add --resume RUN")
    if config.device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(
            f"--device {config.device}: torch {torch.__version__} sees no CUDA device here; "
            "use --device auto or cpu"
        )
    return TrainPlan(paths, config, resume_point, parent, previous, damaged)


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


def _usable_cores() -> int:
    """Cores this process may run on (its affinity where the OS has one, as on Linux)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _device(config: TrainConfig, image_observations: bool) -> str:
    """``auto`` means CUDA only where it pays: small MLPs train faster on the CPU."""
    if config.device != "auto":
        return config.device
    return "cuda" if image_observations and torch.cuda.is_available() else "cpu"


def _build_model(plan: TrainPlan, env: VecEnv, request: TrainRequest) -> PPO:
    config = plan.config
    image = env.observation_space.shape is not None and len(env.observation_space.shape) == 3
    device = _device(config, image)
    # The resumable settings are exactly PPO's hyperparameters, named as PPO names them:
    # a new one declared in training/config.py reaches PPO with no line here.
    ppo_settings = {name: getattr(config, name) for name in RESUMABLE_SETTINGS}
    if plan.resume_point is None:
        width = [config.net_width] * 2
        policy_kwargs: dict[str, Any] = {"net_arch": {"pi": width, "vf": width}}
        if isinstance(env.action_space, spaces.Box):  # a Gaussian policy: its initial std
            policy_kwargs["log_std_init"] = config.log_std_init
        return PPO(
            "MultiInputPolicy"
            if env.observation_space.shape is None
            else ("CnnPolicy" if image else "MlpPolicy"),
            env,
            **ppo_settings,
            policy_kwargs=policy_kwargs,
            seed=config.seed,
            device=device,
            verbose=0,
        )
    try:
        model = PPO.load(str(plan.resume_point.model), env=env, device=device, **ppo_settings)
    except (ValueError, KeyError, RuntimeError, OSError, TypeError, AttributeError) as exc:
        # A zip SB3 can open but PPO cannot use (another algorithm's, other spaces).
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise CheckpointError(f"cannot resume from {plan.resume_point.model}: {reason}") from None
    if request.reset_std is not None:
        reset_action_std(model, request.reset_std)
    return model


def _describe(exc: BaseException) -> str:
    """One line for an unexpected exception: its kind and message (an OSError's reason and file)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror + (f" ({exc.filename})" if exc.filename else "")
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


class _LogFile:
    """Appends timestamped plain lines to the run's ``train.log``; a line that cannot be
    written (a full disk) is dropped rather than ending the run."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path

    def __call__(self, line: str) -> None:
        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)  # a removed logs/RUN/ comes back
            with self.path.open("a") as handle:
                handle.write(f"{stamp} {line}\n")
        except OSError:
            pass


@contextmanager
def _stop_on_signals(stop: StopFlag, console: Console) -> Iterator[dict[str, int]]:
    """Turn SIGINT and SIGTERM into a graceful stop; a second signal aborts at once."""
    received: dict[str, int] = {}

    def handler(signum: int, _frame: FrameType | None) -> None:
        if received:
            raise KeyboardInterrupt
        received["signal"] = signum
        name = signal.Signals(signum).name
        console.print(
            f"[yellow]{name}: stopping after this step; saving final.zip (again to abort)[/]"
        )
        stop.request(name)
        interrupt_waits()  # a step waiting on a hung game ends now, not at its deadline

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def train(
    request: TrainRequest,
    console: Console,
    on_checkpoint: Callable[[Path, RunRecord], None] | None = None,
    extra_callbacks: list[BaseCallback] | None = None,
) -> TrainOutcome:
    """Run one training session and end it cleanly, whatever happens.

    :param request: what to train.
    :param console: where progress goes.
    :param on_checkpoint: called after each rotating checkpoint with the updated record.
    :param extra_callbacks: more SB3 callbacks (evaluation).
    :raises ConfigError, CheckpointError, BridgeError: before training starts; nothing is
        written to the run's folders in that case.
    """
    plan = plan_training(request, console)
    config, paths = plan.config, plan.paths
    allow_waits()
    torch.set_num_threads(config.torch_threads)
    if request.force and plan.previous is None and paths.exists():
        # --force replaces the run: the user asked for it by name.
        shutil.rmtree(paths.checkpoints, ignore_errors=True)
        shutil.rmtree(paths.logs, ignore_errors=True)
    if plan.damaged_record:
        kept = keep_damaged_record(paths)
        console.print(f"[yellow]the damaged run.json is kept as {kept}[/]")
    leftovers = remove_temporary_files(paths.checkpoints)
    new_run = not paths.logs.exists()
    try:
        env = make_vec_env(config, paths.games_log_dir)
    except BaseException:
        if new_run:  # a run whose games never started leaves nothing behind
            shutil.rmtree(paths.logs, ignore_errors=True)
        raise
    game_env = game_env_of(env)
    declared = game_env.agents_per_instance if game_env is not None else None
    agents_note = None
    if declared is not None and declared != config.agents_per_instance:
        # A game with its own fixed agents (a Godot scene) ignores --agents: the run,
        # its banner and its bot record what the game declared.
        agents_note = (
            f"the game declares {declared} agent(s) per instance "
            f"(--agents-per-instance {config.agents_per_instance} applies to the bundled game)"
        )
        config.agents_per_instance = declared
    try:
        saved_normalizer = (
            normalization_path(plan.resume_point.model) if plan.resume_point else None
        )
        env, normalizer = wrap_normalization(env, config, saved_normalizer)
        model = _build_model(plan, env, request)
        if request.until_timesteps is not None:
            config.timesteps = max(1, request.until_timesteps - model.num_timesteps)
    except BaseException:
        env.close()
        raise
    log = _LogFile(paths.train_log)
    for leftover in leftovers:
        log(f"removed a crash leftover: {leftover.name}")

    def warn(line: str) -> None:
        log(line)
        console.print(f"[yellow]{line}[/]")

    model.set_logger(resilient_logger(paths.logs, warn))
    record = _start_record(plan, request, model)
    _note_layout(record, game_env)
    _note_placements(record, game_env)
    record.save(paths.run_json)
    _announce(console, log, plan, request, model)
    if agents_note is not None:
        log(agents_note)
        console.print(f"[yellow]{agents_note}[/]")
    if record.extra.get("cluster"):
        where = placement_summary(record.extra["cluster"])
        log(where)
        console.print(where)

    stop = StopFlag()
    progress = ProgressReport(console, log, config.timesteps)

    def saved(path: Path) -> None:
        _note_progress(record, model, progress)
        record.last_checkpoint = path.name
        record.save(paths.run_json)
        if on_checkpoint is not None:
            on_checkpoint(path, record)

    if game_env is not None and game_env.config.base_port != config.port:
        shifted = (
            f"ports {config.port}+ were taken: the games use ports {game_env.config.base_port}+"
        )
        log(shifted)
        console.print(f"[yellow]{shifted}[/]")

    def restarted(count: int) -> None:
        record.extra["restarts"] = count
        _note_placements(record, game_env)  # a restart may have moved a game to another node

    def say(line: str) -> None:
        log(line)
        console.print(line)

    closers: list[Callable[[], None]] = []
    evaluations = _periodic_evaluation(config, normalizer, record, log, say, stop, closers)

    health = GameHealth(game_env, log, restarted, warn)

    def found(finding: Finding) -> None:
        warn(f"health: {finding.message}")
        record.extra["health"] = [*record.extra.get("health", []), finding.to_dict()][
            -KEPT_FINDINGS:
        ]
        record.save(paths.run_json)

    watch = HealthWatch(config, found, game_env)
    publishing = _live_publisher(plan, request, model, normalizer, record, log)
    checkpoints = RotatingCheckpoints(
        paths.checkpoints, config.checkpoint_every, config.keep_checkpoints, normalizer, saved
    )
    status, error, exit_code = "finished", None, 0
    with _stop_on_signals(stop, console) as received:
        try:
            model.learn(
                total_timesteps=config.timesteps,
                callback=[
                    UpdateThreads(config.torch_threads, config.update_threads or _usable_cores()),
                    stop,
                    progress,
                    health,
                    watch,
                    checkpoints,
                    publishing,
                    *evaluations,
                    *(extra_callbacks or []),
                ],
                reset_num_timesteps=False,
            )
        except Interrupted:
            pass  # the stop requested by the signal, below
        except BridgeError as exc:
            status, error, exit_code = "failed", f"a game failed: {exc}", 1
        except CheckpointError as exc:
            status, error, exit_code = "failed", str(exc), 1
        except KeyboardInterrupt:
            status, error, exit_code = "interrupted", "aborted by a second signal", 130
        except Exception as exc:
            # Whatever else breaks inside PPO or a callback (a full disk, a bug, a
            # library error) ends like a game fault: games closed, final.zip, a status
            # and its reason in run.json, one line. The traceback goes to train.log.
            status, error, exit_code = "failed", _describe(exc), 1
            log("".join(traceback.format_exception(exc)).rstrip())
        if status == "finished" and stop.reason not in (None, SCORE_REACHED):
            status = "interrupted"
            exit_code = (
                0 if received.get("signal") == signal.SIGINT else 128 + received.get("signal", 0)
            )
        health.catch_up()  # restarts after the last step (the one past the limit) count too
        final_saved = False
        try:
            save_checkpoint(model, paths.final, normalizer)
            record.last_checkpoint = paths.final.name
            final_saved = True
        except CheckpointError as exc:
            status, exit_code = "failed", 1
            error = f"{error}; also {exc}" if error else str(exc)
        finally:
            env.close()
            for close in closers:
                close()
    _note_progress(record, model, progress)
    record.status, record.error = status, error
    record.sessions[-1].update(ended_at=now_iso(), status=status, end_timesteps=model.num_timesteps)
    try:
        record.save(paths.run_json)
    except OSError as exc:
        status, exit_code = "failed", 1
        error = (
            f"{error}; also run.json could not be written ({_describe(exc)})"
            if error
            else (f"run.json could not be written ({_describe(exc)})")
        )
    message = f"run {paths.run} {status} at {model.num_timesteps:,} steps" + (
        f": {error}" if error else ""
    )
    log(message)
    console.print(
        ("[green]" if status == "finished" else "[yellow]" if status == "interrupted" else "[red]")
        + message
    )
    return TrainOutcome(status, exit_code, record, error, final_saved)


SCORE_REACHED = "score reached"
"""The stop reason of a run ended by ``--stop-at-score``: it finished, it was not interrupted."""
STOP_AT_SCORE_EVERY = 50_000
"""Steps between the evaluations ``--stop-at-score`` needs when ``--eval-every`` is 0."""


def _periodic_evaluation(
    config: TrainConfig,
    normalizer: VecNormalize | None,
    record: RunRecord,
    log: Callable[[str], None],
    say: Callable[[str], None],
    stop: StopFlag,
    closers: list[Callable[[], None]],
) -> list[BaseCallback]:
    """``--eval-every`` (and ``--stop-at-score``): evaluations kept in TensorBoard and
    run.json, on a bundled game's physics, or for a ``--game-bin`` game on one more
    instance of it through the bridge (closed through ``closers`` at the end)."""
    every = config.eval_every or (STOP_AT_SCORE_EVERY if config.stop_at_score is not None else 0)
    if every <= 0:
        return []

    def keep(steps: int, result: EvalResult) -> None:
        log(f"evaluation at {steps} steps: {result.line()}")
        best = record.extra.get("best_evaluation")
        if best is None or result.mean_reward > best["mean_reward"]:
            record.extra["best_evaluation"] = {"timesteps": steps, **result.to_dict()}
        goal = config.stop_at_score
        score = (
            result.normalized_score if result.normalized_score is not None else result.mean_reward
        )
        if goal is not None and score >= goal and stop.reason is None:
            what = "normalized score" if result.normalized_score is not None else "mean reward"
            record.extra["stopped_at_score"] = {"timesteps": steps, "score": score, "goal": goal}
            say(
                f"{what} {score:.3f} at {steps:,} steps reached --stop-at-score {goal:g}: ending the run"
            )
            stop.request(SCORE_REACHED)

    if config.game_bin is None:
        settings: Any = game_settings(config.game, config.game_args, config.action_repeat)
    else:
        settings = _bridge_evaluator(config, closers)
    return [PeriodicEvaluation(every, config.eval_episodes, settings, normalizer, keep)]


def _bridge_evaluator(
    config: TrainConfig, closers: list[Callable[[], None]]
) -> Callable[[Policy, int], EvalResult]:
    """Evaluation on one more instance of the run's own game, started at the first
    evaluation on the ports after the training games' and kept for the run."""
    games: list[GameVecEnv] = []

    def evaluate(policy: Policy, episodes: int) -> EvalResult:
        if not games:
            launch = launch_config(config)
            launch.n_instances, launch.seed = 1, config.seed + 10_000
            launch.base_port = config.port + config.n_parallel
            games.append(GameVecEnv(launch))
            closers.append(games[0].close)
        return evaluate_through_bridge(policy, games[0], episodes)

    return evaluate


def _start_record(plan: TrainPlan, request: TrainRequest, model: PPO) -> RunRecord:
    record = plan.previous or RunRecord(run=plan.paths.run, config=plan.config, parent=plan.parent)
    record.config = plan.config
    record.status = "running"
    record.error = None
    record.git_commit = request.git_commit
    record.total_timesteps = model.num_timesteps
    record.resumed_from = str(plan.resume_point.model) if plan.resume_point else None
    record.extra.update(request.tags)
    # This session's findings and stop (earlier sessions' stay in train.log and TensorBoard).
    record.extra.pop("health", None)
    record.extra.pop("stopped_at_score", None)
    record.sessions.append(
        {
            "started_at": now_iso(),
            "start_timesteps": model.num_timesteps,
            "resumed_from": record.resumed_from,
            "reset_std": request.reset_std,
            "git_commit": request.git_commit,
            "host": socket.gethostname(),
            "checkout": checkout_id(plan.paths.root),
            "root": str(plan.paths.root.resolve()),
        }
    )
    return record


def _live_publisher(
    plan: TrainPlan,
    request: TrainRequest,
    model: PPO,
    normalizer: VecNormalize | None,
    record: RunRecord,
    log: Callable[[str], None],
) -> PublishBot:
    """Publishes the policy as it trains, for the live page (``--publish-every``)."""
    from training.bots import trained_with
    from training.export import OnnxLayout, build_bot_spec

    def build() -> dict[str, Any]:
        layout = OnnxLayout.of_game(record.extra.get("game_layout"))
        return build_bot_spec(
            model, normalizer, plan.paths.run, request.git_commit, trained_with(plan.config), layout
        )

    path = live_bot_path(plan.paths.root, plan.paths.run)
    return PublishBot(plan.config.publish_every, path, build, log)


def _note_layout(record: RunRecord, game_env: GameVecEnv | None) -> None:
    """The game's declared keys, in run.json: an export lays out its ONNX file by them."""
    if game_env is not None:
        record.extra["game_layout"] = game_env.env_info.layout()


def _note_placements(record: RunRecord, game_env: GameVecEnv | None) -> None:
    """Where each game instance runs, in run.json, for a run whose games are on a cluster."""
    cluster = game_env.config.cluster if game_env is not None else None
    if cluster is not None:
        record.extra["cluster"] = {"address": cluster.address, "instances": cluster.describe()}


def _note_progress(record: RunRecord, model: PPO, progress: ProgressReport) -> None:
    record.total_timesteps = model.num_timesteps
    record.extra["last_fps"] = round(progress.last_fps, 1)
    record.extra["last_reward"] = progress.last_reward
    record.extra["last_success"] = progress.last_success


def _announce(
    console: Console, log: Callable[[str], None], plan: TrainPlan, request: TrainRequest, model: PPO
) -> None:
    config = plan.config
    game = Path(config.game_bin).name if config.game_bin else config.game
    if config.in_process:
        where = f"in-process {in_process_env_id(config.game)}"
    elif config.game_transport == "stdio":
        where = f"{config.n_parallel} {game} instance(s) on stdio"
    else:
        where = f"{config.n_parallel} {game} instance(s) from port {config.port}"
    origin = (
        f"resuming from {plan.resume_point.model} at {model.num_timesteps:,} steps"
        if plan.resume_point
        else "new"
    )
    line = (
        f"run {plan.paths.run}: {origin}; {config.num_envs} envs on {where}; "
        f"{config.timesteps:,} steps; lr={config.learning_rate:g} ent_coef={config.ent_coef:g} device={model.device}"
        + (f"; std reset to {request.reset_std:g}" if request.reset_std is not None else "")
    )
    log(line)
    console.print(line)


def load_for_inference(model_path: Path) -> tuple[PPO, VecNormalize | None]:
    """Load a checkpoint on the CPU with its normalisation statistics, if any (for export and evaluation)."""
    model = PPO.load(str(model_path), device="cpu")
    stats = normalization_path(model_path)
    normalizer = None
    if stats.exists():
        with stats.open("rb") as handle:
            normalizer = pickle.load(handle)
    return model, normalizer
