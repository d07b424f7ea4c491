"""A training session from start to end, in named phases: plan, open the games, build
or load the model, start the record, create the callbacks, learn, and end in order on
success, Ctrl-C, SIGTERM or a game fault.

:class:`TrainingSession` reads top to bottom as the whole flow (as RL Zoo's
``ExperimentManager`` does: set up, create callbacks, learn, save); each phase fits on a
screen, and :meth:`TrainingSession.run` alone holds the guarantee that whatever happens
once the games are open, they are closed, ``final.zip`` is saved and run.json says how
the session ended.
"""

from __future__ import annotations

import os
import shutil
import signal
import traceback
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from gymnasium import spaces
from rich.console import Console
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv
from threadpoolctl import threadpool_limits

from game_bridge.errors import BridgeError, GameStopped, Interrupted
from games import EDITOR_GAME
from training.bots.run_bots import trained_with
from training.config import TrainConfig
from training.demos.behaviour_cloning import CloneReport, clone_behaviour
from training.demos.files import DemoError, check_demos
from training.envs.environments import (
    game_env_of,
    make_vec_env,
    wrap_normalization,
    wrapped_env,
)
from training.envs.game_monitor import GameMonitor, IdleRows
from training.envs.godot_games import describe_origin, engine_change, trained_against
from training.envs.sides import SelfPlayEnv
from training.evaluation.scoring import EvalResult, game_settings
from training.runs.checkpoints import (
    FINAL_NAME,
    CheckpointError,
    newest_valid_model,
    normalization_path,
    save_checkpoint,
)
from training.runs.live_progress import LiveProgress, forget_live_progress
from training.runs.local_state import live_bot_path
from training.runs.run_paths import RunPaths
from training.runs.run_record import RunRecord, now_iso, placement_summary
from training.self_play.turns import SideModel, self_play_callbacks
from training.session.callbacks import (
    GameHealth,
    ProgressReport,
    PublishBot,
    RotatingCheckpoints,
    StartupReport,
    StopFlag,
    UpdateThreads,
    stop_on_signals,
)
from training.session.eval_callback import PeriodicEvaluation, bridge_evaluator
from training.session.health import KEPT_FINDINGS, Finding, HealthWatch
from training.session.model_builder import make_ppo_model
from training.session.planning import (
    RunExists,
    RunOfAnotherCheckout,
    TrainPlan,
    TrainRequest,
    plan_training,
)
from training.session.session_log import LogFile, describe_error, session_banner, session_record
from training.session.session_start import SessionStart, begin_session
from training.session.tensorboard_log import resilient_logger

__all__ = [
    "RunExists",
    "RunOfAnotherCheckout",
    "TrainOutcome",
    "TrainPlan",
    "TrainRequest",
    "TrainingSession",
    "plan_training",
    "train",
]

SCORE_REACHED = "score reached"
"""The stop reason of a run ended by ``--stop-at-score``: it finished, it was not interrupted."""
STOP_AT_SCORE_EVERY = 50_000
"""Steps between the evaluations ``--stop-at-score`` needs when ``--eval-every`` is 0."""


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


def train(
    request: TrainRequest,
    console: Console,
    on_checkpoint: Callable[[Path, RunRecord], None] | None = None,
    extra_callbacks: list[BaseCallback] | None = None,
    start: SessionStart | None = None,
) -> TrainOutcome:
    """Run one training session and end it cleanly, whatever happens.

    :param request: what to train.
    :param console: where progress goes.
    :param on_checkpoint: called after each rotating checkpoint with the updated record.
    :param extra_callbacks: more SB3 callbacks (evaluation).
    :param start: the session's torch-free first part, when the caller began it before
        importing this module (:func:`training.session.session_start.begin_session`).
    :raises ConfigError, CheckpointError, BridgeError: before training starts; nothing is
        written to the run's folders in that case.
    """
    return TrainingSession(request, console, on_checkpoint, extra_callbacks, start).run()


class TrainingSession:
    """One session of a run, its phases in the order :meth:`run` calls them.

    :param request: what to train (planned at once: a mistake raises before anything runs).
    :param console: where progress goes.
    :param on_checkpoint: called after each rotating checkpoint with the updated record.
    :param extra_callbacks: more SB3 callbacks.
    :param start: the plan made and the games' launch begun (else both are done here).
    """

    def __init__(
        self,
        request: TrainRequest,
        console: Console,
        on_checkpoint: Callable[[Path, RunRecord], None] | None = None,
        extra_callbacks: list[BaseCallback] | None = None,
        start: SessionStart | None = None,
    ) -> None:
        self.request, self.console = request, console
        self.on_checkpoint = on_checkpoint
        self.extra_callbacks = extra_callbacks or []
        self.start = start or begin_session(request, console)
        self.start.clock.mark("training stack imported")
        self.plan: TrainPlan = self.start.plan
        self.config: TrainConfig = self.plan.config
        self.paths = self.plan.paths
        self.stop = StopFlag()
        self.closers: list[Callable[[], None]] = []
        """What the end closes besides the games (an evaluation's own game)."""
        self.status, self.exit_code = "finished", 0
        self.error: str | None = None
        self.final_saved = False

    def run(self) -> TrainOutcome:
        """Every phase in order. Once the games are open they are closed whatever happens;
        once learning starts, ``final.zip`` and run.json's ending are written whatever
        happens (a second signal aside)."""
        torch.set_num_threads(self.config.torch_threads)
        # numpy's BLAS (the update's and the rollout's matrices, training/ppo/numpy_policy.py)
        # on one thread: faster for these sizes (0.86 against 1.36 ms per minibatch with
        # two here) and the games keep the other cores.
        threadpool_limits(1, user_api="blas")
        self.open_games()
        try:
            self.build_model()
            self.clone_from_demos()
            self.start_record(self.start.leftovers)
            callbacks = self.create_callbacks()
        except BaseException as exc:
            self.env.close()
            if isinstance(exc, DemoError) and self.start.new_run:
                shutil.rmtree(self.paths.logs, ignore_errors=True)  # refused: nothing left
            raise
        with stop_on_signals(self.stop, self.console) as received:
            self.learn(callbacks)
            self.note_stop(received.get("signal"))
            self.end_in_order()
        return self.report()

    # -- phases ---------------------------------------------------------------------------

    def open_games(self) -> None:
        """Launch the games (or the in-process env); a new run whose games never started
        leaves nothing behind. A game that declares its own agents per instance (a Godot
        scene ignores ``--agents``) sets the run's count."""
        games = self.start.games
        try:
            self.env: VecEnv = make_vec_env(self.config, self.paths.games_log_dir, games)
        except BaseException:
            if self.start.new_run:
                shutil.rmtree(self.paths.logs, ignore_errors=True)
            raise
        self.start.clock.mark("games connected")
        self.game_env = game_env_of(self.env)
        view = wrapped_env(self.env, SelfPlayEnv)
        self.own_side = view.learner_side if view is not None else None
        """The side this run's model plays (self-play), else None."""
        self.partner_env = _partner_view(self.env)
        declared = self.game_env.agents_per_instance if self.game_env is not None else None
        self.agents_note: str | None = None
        if declared is not None and self.config.game_url is not None:
            self.config.agents_per_instance = declared  # one agent a session: nothing to say
        elif declared is not None and self.config.game == EDITOR_GAME:
            self.config.agents_per_instance = declared  # the scene's own: nothing to say
        elif declared is not None and declared != self.config.agents_per_instance:
            self.agents_note = (
                f"the game declares {declared} agent(s) per instance "
                f"(--agents-per-instance {self.config.agents_per_instance} applies to the "
                "bundled game)"
            )
            self.config.agents_per_instance = declared

    def build_model(self) -> None:
        """Wrap the normaliser (a resume's statistics) and build or load PPO."""
        resume = self.plan.resume_point
        saved_normalizer = normalization_path(resume.model) if resume else None
        self.env, self.normalizer = wrap_normalization(self.env, self.config, saved_normalizer)
        self.model = make_ppo_model(
            self.config, self.env, resume.model if resume else None, self.request.reset_std
        )
        self.partner: tuple[str, SideModel] | None = None
        if self.partner_env is not None:
            self.partner = self.build_partner(self.partner_env)
        if self.request.until_timesteps is not None:
            self.config.timesteps = max(1, self.request.until_timesteps - self.model.num_timesteps)
        self.start.clock.mark("model built")

    def clone_from_demos(self) -> None:
        """Check the demos against the game's spaces, then clone the new policy from them
        (``training.demos.behaviour_cloning``) before any step is played.

        :raises DemoError: demos of other spaces, or an action out of range.
        """
        self.cloned: CloneReport | None = None
        if not self.plan.demos:
            return
        for demo in self.plan.demos:
            check_demos(demo, self.env.observation_space, self.env.action_space)
        self.cloned = clone_behaviour(
            self.model, self.plan.demos, self.config.bc_epochs, self.config.seed, self.normalizer
        )
        self.start.clock.mark("policy cloned")

    def start_record(self, leftovers: list[Path]) -> None:
        """Open train.log and TensorBoard, write run.json for this session, say what runs."""
        self.log = LogFile(self.paths.train_log)
        forget_live_progress(self.paths.root, self.paths.run)  # the last session's numbers
        for leftover in leftovers:
            self.log(f"removed a crash leftover: {leftover.name}")
        self.model.set_logger(resilient_logger(self.paths.logs, self.warn))
        self.record = session_record(self.plan, self.request, self.model)
        if self.game_env is not None:  # an export lays out its ONNX file by these keys
            info = self.game_env.env_info
            self.record.extra.game_layout = info.side(self.own_side or "").layout()
            if self.partner is not None:
                self.record.extra.side_layouts = {
                    self.partner[0]: info.side(self.partner[0]).layout()
                }
        if self.cloned is not None:
            self.record.extra.demos = {
                "files": [demo.summary() for demo in self.plan.demos],
                "cloning": self.cloned.to_dict(),
            }
        self.note_placements()
        earlier = self.plan.previous.extra.godot if self.plan.previous is not None else None
        self.record.extra.godot = trained_against(self.config, self.paths.root / "build")
        self.record.save(self.paths.run_json)
        self.say(session_banner(self.plan, self.request, self.model))
        if self.record.extra.godot is not None:
            self.say(f"trains against {describe_origin(self.record.extra.godot)}")
        if (changed := engine_change(earlier, self.record.extra.godot)) is not None:
            self.warn(changed)
        if self.cloned is not None:
            self.say(self.cloned.line())
        if self.agents_note is not None:
            self.warn(self.agents_note)
        if self.partner is not None:
            side = self.partner[0]
            folder = self.paths.side_checkpoints(side).relative_to(self.paths.root)
            self.say(
                f"sides with their own spaces: this run's model plays {self.own_side}, {side} "
                f"has its own ({folder}); each learns {self.config.team_change:,} steps in turn"
            )
        if self.record.extra.cluster:
            self.say(placement_summary(self.record.extra.cluster))
        if self.game_env is not None and self.game_env.config.base_port != self.config.port:
            self.warn(
                f"ports {self.config.port}+ were taken: the games use ports "
                f"{self.game_env.config.base_port}+"
            )

    def create_callbacks(self) -> list[BaseCallback]:
        """The SB3 callbacks of the session, in the order they run each step."""
        config = self.config
        self.progress = ProgressReport(self.console, self.log, config.timesteps, self.write_live)
        self.health = GameHealth(self.game_env, self.log, self.restarted, self.warn)
        checkpoints = RotatingCheckpoints(
            self.paths.checkpoints,
            config.checkpoint_every,
            config.keep_checkpoints,
            self.normalizer,
            self.checkpoint_saved,
        )
        return [
            StartupReport(self.start.clock, self.log, self.say if config.verbose else None),
            UpdateThreads(config.torch_threads, self.update_threads()),
            IdleRows(),
            self.stop,
            self.progress,
            self.health,
            HealthWatch(config, self.paths.run, self.found, self.game_env),
            checkpoints,
            self.live_publisher(),
            *self.self_play_pool(),
            *self.periodic_evaluation(),
            *self.extra_callbacks,
        ]

    def write_live(self, progress: LiveProgress) -> None:
        """Rewrite the run's live progress for ``lander status``; a full disk costs the
        live numbers, never the training."""
        with suppress(OSError):
            progress.write(self.paths.root, self.paths.run)

    def update_threads(self) -> int:
        """Torch threads for the update: ``--update-threads``, else every core, except
        when the games play during the update (async), which need the other cores."""
        if self.config.update_threads:
            return self.config.update_threads
        return self.config.torch_threads if self.config.collector == "async" else _usable_cores()

    def learn(self, callbacks: list[BaseCallback]) -> None:
        """PPO's learning loop; whatever ends it is turned into the session's status: a
        stop asked for, a game fault, a checkpoint that cannot be written, a second
        signal, or anything else inside PPO or a callback (its traceback to train.log)."""
        try:
            self.model.learn(
                total_timesteps=self.config.timesteps,
                callback=callbacks,
                reset_num_timesteps=False,
            )
        except Interrupted:
            pass  # the stop requested by the signal, see note_stop
        except GameStopped as exc:
            # The person stopped the game in the editor: the run's end, done in order.
            self.status, self.exit_code = "interrupted", 0
            self.say(f"{exc.detail}: the run ends here")
        except BridgeError as exc:
            self.status, self.error, self.exit_code = "failed", f"a game failed: {exc}", 1
        except CheckpointError as exc:
            self.status, self.error, self.exit_code = "failed", str(exc), 1
        except KeyboardInterrupt:
            self.status, self.error = "interrupted", "aborted by a second signal"
            self.exit_code = 130
        except Exception as exc:
            self.status, self.error, self.exit_code = "failed", describe_error(exc), 1
            self.log("".join(traceback.format_exception(exc)).rstrip())

    def note_stop(self, signum: int | None) -> None:
        """A run stopped by a signal (not by ``--stop-at-score``) is interrupted: exit 0 for
        Ctrl-C, 128 + N for another signal."""
        if self.status == "finished" and self.stop.reason not in (None, SCORE_REACHED):
            self.status = "interrupted"
            self.exit_code = 0 if signum == signal.SIGINT else 128 + (signum or 0)

    def end_in_order(self) -> None:
        """Count the last restarts, save ``final.zip``, then close the games and whatever
        else the session opened, even when the save fails."""
        self.health.catch_up()  # restarts after the last step (the one past the limit) count
        try:
            save_checkpoint(self.model, self.paths.final, self.normalizer)
            self.record.last_checkpoint = self.paths.final.name
            if self.partner is not None:
                side, other = self.partner
                final = self.paths.side_checkpoints(side) / FINAL_NAME
                save_checkpoint(other.model, final, other.normalizer)
            self.final_saved = True
        except CheckpointError as exc:
            self.failed_also(str(exc))
        finally:
            self.env.close()
            for close in self.closers:
                close()

    def report(self) -> TrainOutcome:
        """Write the session's end into run.json and say it in one line."""
        record = self.record
        self.note_progress()
        record.status, record.error = self.status, self.error
        record.sessions[-1].update(
            ended_at=now_iso(), status=self.status, end_timesteps=self.model.num_timesteps
        )
        try:
            record.save(self.paths.run_json)
        except OSError as exc:
            self.failed_also(f"run.json could not be written ({describe_error(exc)})")
        message = f"run {self.paths.run} {self.status} at {self.model.num_timesteps:,} steps"
        message += f": {self.error}" if self.error else ""
        self.log(message)
        color = {"finished": "[green]", "interrupted": "[yellow]"}.get(self.status, "[red]")
        self.console.print(color + message)
        return TrainOutcome(self.status, self.exit_code, record, self.error, self.final_saved)

    # -- what the callbacks report --------------------------------------------------------

    def say(self, line: str) -> None:
        """A line for train.log and the console."""
        self.log(line)
        self.console.print(line)

    def warn(self, line: str) -> None:
        """A warning for train.log and the console (yellow)."""
        self.log(line)
        self.console.print(f"[yellow]{line}[/]")

    def failed_also(self, error: str) -> None:
        """The session failed (also) for ``error``: kept after any earlier reason."""
        self.status, self.exit_code = "failed", 1
        self.error = f"{self.error}; also {error}" if self.error else error

    def checkpoint_saved(self, path: Path) -> None:
        """A rotating checkpoint was written: run.json says so, then ``on_checkpoint``."""
        self.note_progress()
        self.record.last_checkpoint = path.name
        self.record.save(self.paths.run_json)
        if self.on_checkpoint is not None:
            self.on_checkpoint(path, self.record)

    def restarted(self, count: int) -> None:
        """Games were restarted: their count, and where each now runs."""
        self.record.extra.restarts = count
        self.note_placements()  # a restart may have moved a game to another node

    def found(self, finding: Finding) -> None:
        """A health finding: warned, and kept in run.json (the newest few)."""
        self.warn(f"health: {finding.message}")
        health = self.record.extra.health
        self.record.extra.health = [*health, finding.to_dict()][-KEPT_FINDINGS:]
        self.record.save(self.paths.run_json)

    def note_placements(self) -> None:
        """Where each game instance runs, in run.json, for a run whose games are on a cluster."""
        cluster = self.game_env.config.cluster if self.game_env is not None else None
        if cluster is not None:
            self.record.extra.cluster = {
                "address": cluster.address,
                "instances": cluster.describe(),
            }

    def note_progress(self) -> None:
        """The latest steps, fps, reward and success, in the record."""
        extra, progress = self.record.extra, self.progress
        self.record.total_timesteps = self.model.num_timesteps
        extra.last_fps = round(progress.last_fps, 1)
        extra.last_reward, extra.last_success = progress.last_reward, progress.last_success

    # -- callbacks that need the session ---------------------------------------------------

    def evaluated(self, steps: int, result: EvalResult) -> None:
        """A periodic evaluation: logged, the best kept, and ``--stop-at-score`` checked."""
        self.log(f"evaluation at {steps} steps: {result.line()}")
        extra, goal = self.record.extra, self.config.stop_at_score
        if (
            extra.best_evaluation is None
            or result.mean_reward > extra.best_evaluation["mean_reward"]
        ):
            extra.best_evaluation = {"timesteps": steps, **result.to_dict()}
        normalized = result.normalized_score
        score = normalized if normalized is not None else result.mean_reward
        if goal is not None and score >= goal and self.stop.reason is None:
            what = "normalized score" if normalized is not None else "mean reward"
            extra.stopped_at_score = {"timesteps": steps, "score": score, "goal": goal}
            self.say(
                f"{what} {score:.3f} at {steps:,} steps reached --stop-at-score {goal:g}: "
                "ending the run"
            )
            self.stop.request(SCORE_REACHED)

    def periodic_evaluation(self) -> list[BaseCallback]:
        """``--eval-every`` (and ``--stop-at-score``): evaluations kept in TensorBoard and
        run.json, on a bundled game's physics, or for a ``--game-bin`` game on one more
        instance of it through the bridge (closed at the end)."""
        config = self.config
        every = config.eval_every or (
            STOP_AT_SCORE_EVERY if config.stop_at_score is not None else 0
        )
        if every <= 0:
            return []
        if config.own_game is None:
            settings: Any = game_settings(config.game, config.game_args, config.action_repeat)
        else:
            settings = bridge_evaluator(config, self.closers)
        return [
            PeriodicEvaluation(
                every, config.eval_episodes, settings, self.normalizer, self.evaluated
            )
        ]

    def build_partner(self, view: VecEnv) -> tuple[str, SideModel]:
        """The model of the other side of a game whose sides have their own spaces: new, or
        from its folder of the run resumed (``checkpoints/RUN/sides/SIDE``). ``--reset-std``
        applies to it too where its actions are continuous."""
        side = _side_of(view)
        resume = self.plan.resume_point
        model_path = None
        if resume is not None and resume.run is not None:
            folder = RunPaths(self.paths.root, resume.run).side_checkpoints(side)
            model_path = newest_valid_model(folder, self.console)
        saved = normalization_path(model_path) if model_path else None
        env, normalizer = wrap_normalization(view, self.config, saved)
        config = replace(self.config, seed=self.config.seed + 1)
        continuous = isinstance(env.action_space, spaces.Box)
        reset_std = self.request.reset_std if continuous else None
        model = make_ppo_model(config, env, model_path, reset_std)
        model.set_logger(resilient_logger(self.paths.logs / "sides" / side, self.warn))
        return side, SideModel(model, normalizer)

    def self_play_pool(self) -> list[BaseCallback]:
        """``--self-play``: the snapshots, the opponent and the ratings, kept in run.json;
        for a game whose sides have their own spaces, the other side's turns too."""
        if wrapped_env(self.env, SelfPlayEnv) is None:
            return []

        def keep(state: dict[str, Any]) -> None:
            self.record.extra.self_play = state

        return self_play_callbacks(
            self.config,
            SideModel(self.model, self.normalizer),
            self.paths,
            self.record.extra.self_play,
            keep,
            self.partner,
            lambda: self.stop.reason is not None,
            lambda folder, normalizer: RotatingCheckpoints(
                folder, self.config.checkpoint_every, self.config.keep_checkpoints, normalizer
            ),
            self.warn,
        )

    def live_publisher(self) -> PublishBot:
        """Publishes the policy as it trains, for the live page (``--publish-every``)."""
        from training.bots.bot_spec import build_bot_spec
        from training.bots.plugin_layout import OnnxLayout

        plan, record = self.plan, self.record

        def build() -> dict[str, Any]:
            layout = OnnxLayout.of_game(record.extra.game_layout)
            return build_bot_spec(
                self.model,
                self.normalizer,
                plan.paths.run,
                self.request.git_commit,
                trained_with(plan.config),
                layout,
            )

        path = live_bot_path(plan.paths.root, plan.paths.run)
        return PublishBot(plan.config.publish_every, path, build, self.log)


def _usable_cores() -> int:
    """Cores this process may run on (its affinity where the OS has one, as on Linux)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _partner_view(env: VecEnv) -> VecEnv | None:
    """The other side's view of a self-play game whose sides have their own spaces
    (monitored like the run's own), or None."""
    view = wrapped_env(env, SelfPlayEnv)
    if view is None or not view.rival_sides:
        return None
    return GameMonitor(view.view(view.rival_sides[0]))


def _side_of(env: VecEnv) -> str:
    view = wrapped_env(env, SelfPlayEnv)
    assert view is not None
    return view.learner_side
