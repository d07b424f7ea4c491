"""SB3 callbacks of a run: rotating checkpoints, a stop flag for signals, and the
progress a person watches (rich in the terminal, plain lines in ``train.log``).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecNormalize

from game_bridge.instance import interrupt_waits
from game_bridge.vec_env import GameVecEnv
from training.errors import ExportError
from training.ppo.policy_tweaks import action_std
from training.runs.checkpoints import checkpoint_name, rotate_checkpoints, save_checkpoint
from training.runs.live_progress import LiveProgress
from training.runs.run_record import write_json_atomic
from training.session.session_start import StartupClock


def mean_episode_reward(model: BaseAlgorithm) -> float | None:
    """``rollout/ep_rew_mean`` as SB3 logs it: the mean return of the last 100 episodes
    (None before the first ends)."""
    episodes = model.ep_info_buffer
    return float(np.mean([info["r"] for info in episodes])) if episodes else None


class EveryNSteps(BaseCallback):
    """Calls :meth:`_on_due` once each time the step counter passes a multiple of
    ``every`` (counted from where a resumed model starts)."""

    def __init__(self, every: int) -> None:
        super().__init__()
        self.every = every
        self._next_at = 0

    def _schedule(self) -> None:
        self._next_at = (self.num_timesteps // self.every + 1) * self.every

    def _on_training_start(self) -> None:
        self._schedule()

    def _on_step(self) -> bool:
        if self.num_timesteps >= self._next_at:
            self._schedule()
            self._on_due()
        return True

    def _on_due(self) -> None:
        raise NotImplementedError


class RotatingCheckpoints(EveryNSteps):
    """Save ``ckpt_<steps>.zip`` every ``every`` steps, keep the newest ``keep``.

    :param folder: the run's checkpoints folder.
    :param every: steps between checkpoints.
    :param keep: rotating checkpoints kept.
    :param normalizer: observation statistics to save beside each checkpoint.
    :param on_saved: called with the path after each save (updates run.json, pushes).
    """

    def __init__(
        self,
        folder: Path,
        every: int,
        keep: int,
        normalizer: VecNormalize | None = None,
        on_saved: Callable[[Path], None] | None = None,
    ) -> None:
        super().__init__(every)
        self.folder = folder
        self.keep = keep
        self.normalizer = normalizer
        self.on_saved = on_saved

    def _on_due(self) -> None:
        path = save_checkpoint(
            self.model, self.folder / checkpoint_name(self.num_timesteps), self.normalizer
        )
        rotate_checkpoints(self.folder, self.keep)
        if self.on_saved is not None:
            self.on_saved(path)


class StopFlag(BaseCallback):
    """Ends ``learn()`` at the next step once :meth:`request` was called (from a signal handler)."""

    def __init__(self) -> None:
        super().__init__()
        self.reason: str | None = None

    def request(self, reason: str) -> None:
        """Ask training to stop after the current step."""
        self.reason = reason

    def _on_step(self) -> bool:
        return self.reason is None


class ProgressReport(BaseCallback):
    """A rich progress bar (steps, fps, ETA) and a line with the steps, mean reward,
    success rate, percent done and ETA, echoed to ``train.log``: after a rollout, at most
    one every :attr:`LINE_EVERY_S` seconds in a terminal and every
    :attr:`PLAIN_LINE_EVERY_S` without one (a log file or CI, where the line is all there
    is and short rollouts would flood a long run's log), and always after the last. The
    same numbers go to the run's live file every :attr:`LIVE_EVERY_S` seconds, for
    ``lander status``.

    :param console: where the live display goes.
    :param log: writes a plain line to the run's log file.
    :param session_steps: steps this session will train.
    :param live: writes the live progress (None: nothing written).
    """

    LINE_EVERY_S = 2.0
    PLAIN_LINE_EVERY_S = 10.0
    LIVE_EVERY_S = 2.0

    def __init__(
        self,
        console: Console,
        log: Callable[[str], None],
        session_steps: int,
        live: Callable[[LiveProgress], None] | None = None,
    ) -> None:
        super().__init__()
        self.console = console
        self.log = log
        self.session_steps = session_steps
        self.live = live
        self._progress: Progress | None = None
        self._task = TaskID(0)
        self._start_steps = 0
        self._started = 0.0
        self.last_fps = 0.0
        self.last_reward: float | None = None
        self.last_success: float | None = None
        self._pending: str | None = None
        self._last_line_at = -float("inf")
        self._last_live_at = -float("inf")

    @property
    def line_every_s(self) -> float:
        """Seconds between progress lines on this console."""
        return self.LINE_EVERY_S if self.console.is_terminal else self.PLAIN_LINE_EVERY_S

    def _on_training_start(self) -> None:
        self._start_steps = self.num_timesteps
        self._started = time.monotonic()
        self._progress = Progress(
            TextColumn("[bold]training[/]"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.completed:,.0f}/{task.total:,.0f} steps"),
            TextColumn("{task.fields[fps]:,.0f} fps"),
            TextColumn("reward {task.fields[reward]}"),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
        )
        self._task = self._progress.add_task("train", total=self.session_steps, fps=0.0, reward="-")
        self._progress.start()

    def _on_step(self) -> bool:
        if self._progress is not None and self.n_calls % 16 == 0:
            done = self.num_timesteps - self._start_steps
            self.last_fps = done / max(time.monotonic() - self._started, 1e-9)
            self._progress.update(self._task, completed=done, fps=self.last_fps)
        return True

    def _on_rollout_end(self) -> None:
        self.last_reward = mean_episode_reward(self.model)
        successes = self.model.ep_success_buffer
        if successes:
            self.last_success = float(np.mean(successes))
        done = self.num_timesteps - self._start_steps
        self.last_fps = done / max(time.monotonic() - self._started, 1e-9)
        snapshot = self.snapshot()
        reward = "-" if self.last_reward is None else f"{self.last_reward:.1f}"
        # A game that never judged an episode (no is_success) shows no rate at all.
        success = "" if self.last_success is None else f" success_rate={self.last_success:.2f}"
        std = action_std(self.model)
        std_text = "" if std is None else f" std={np.mean(std):.3f}"
        line = (
            f"steps={self.num_timesteps} fps={self.last_fps:.0f} ep_rew_mean={reward}"
            f"{success}{std_text} done={snapshot.percent:.1f}% "
            f"eta={snapshot.eta_text()}"
        )
        if self._progress is not None:
            self._progress.update(self._task, completed=done, fps=self.last_fps, reward=reward)
        self._pending = line
        now = time.monotonic()
        if now - self._last_line_at >= self.line_every_s:
            self._emit(now)
        if self.live is not None and now - self._last_live_at >= self.LIVE_EVERY_S:
            self._last_live_at = now
            self.live(snapshot)

    def snapshot(self) -> LiveProgress:
        """Where the session stands now."""
        done = self.num_timesteps - self._start_steps
        return LiveProgress(
            steps=self.num_timesteps,
            target=self._start_steps + self.session_steps,
            session_steps=done,
            session_target=self.session_steps,
            fps=self.last_fps,
            reward=self.last_reward,
            success=self.last_success,
            updated_at=time.time(),
        )

    def _emit(self, now: float) -> None:
        """Write the newest rollout's line to the log and the console."""
        if self._pending is None:
            return
        self.log(self._pending)
        if self._progress is not None:
            self._progress.console.print(self._pending)
        self._pending = None
        self._last_line_at = now

    def _on_training_end(self) -> None:
        self._emit(time.monotonic())  # the last rollout's line, whenever the one before was
        if self.live is not None:
            self.live(self.snapshot())
        # SB3 dumps the log before each update, so the last update's train/*
        # values would never reach TensorBoard without this flush.
        self.model.logger.dump(step=self.num_timesteps)
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


SLOW_GAME_FRACTION = 0.5
"""Games ticking below this fraction of 60 x --speedup get a warning."""


class StartupReport(BaseCallback):
    """Stamps the first step on the start-up clock and reports every phase once: to
    train.log always, to the console with ``--verbose``.

    :param clock: the session's start-up clock.
    :param log: writes a line to train.log.
    :param say: prints a line to the console and to train.log, or None.
    """

    def __init__(
        self,
        clock: StartupClock,
        log: Callable[[str], None],
        say: Callable[[str], None] | None,
    ) -> None:
        super().__init__()
        self.clock, self.log, self.say = clock, log, say
        self.reported = False

    def _on_step(self) -> bool:
        if not self.reported:
            self.reported = True
            self.clock.mark("first step")
            (self.say or self.log)(self.clock.summary())  # say writes train.log too
        return True


class GameHealth(BaseCallback):
    """Logs game restarts (``games/restarts`` in TensorBoard) and reports each one.

    :param game_env: the bridge (None in-process: nothing to watch).
    :param log: writes a line to the run's log.
    :param on_change: called with the restart count when it grows.
    :param warn: says something the user should act on (the log and the console).
    """

    def __init__(
        self,
        game_env: GameVecEnv | None,
        log: Callable[[str], None],
        on_change: Callable[[int], None],
        warn: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__()
        self.game_env = game_env
        self.log = log
        self.warn = warn or log
        self.on_change = on_change
        self._seen = 0
        self._moves = 0
        self._speed_warned = False

    def _on_step(self) -> bool:
        self.catch_up()
        return True

    def catch_up(self) -> None:
        """Report the restarts not reported yet (also after training ended mid-step)."""
        if self.game_env is not None and len(self.game_env.restarts) > self._seen:
            for restart in self.game_env.restarts[self._seen :]:
                self.log(f"restarted game instance {restart.instance}: {restart.reason}")
            self._seen = len(self.game_env.restarts)
            self.on_change(self._seen)
        while self.game_env is not None and len(self.game_env.port_moves) > self._moves:
            index, old, new = self.game_env.port_moves[self._moves]
            self.log(f"game instance {index} moved from port {old} to {new}: {old} was taken")
            self._moves += 1

    def _on_rollout_end(self) -> None:
        if self.game_env is not None:
            self.logger.record("games/restarts", len(self.game_env.restarts))
            self._check_speed()

    def _check_speed(self) -> None:
        """Warn once when the games tick far slower than 60 x --speedup: the engine is
        CPU-bound, or it ignores --speedup (the plugin's godot3 branch reads it before
        parsing the command line: only the Sync node's speed_up applies there)."""
        config = self.game_env.config if self.game_env is not None else None
        rate = self.game_env.game_ticks_per_second() if self.game_env is not None else None
        if self._speed_warned or config is None or config.speedup is None or rate is None:
            return
        wanted = 60.0 * config.speedup
        if rate < SLOW_GAME_FRACTION * wanted:
            self._speed_warned = True
            self.warn(
                f"the games run {rate:,.0f} physics ticks/s, far below 60 x --speedup = "
                f"{wanted:,.0f}: the engine is CPU-bound, or it ignores --speedup "
                "(Godot RL Agents' godot3 branch: set the Sync node's speed_up; docs/godot.md)"
            )
            self.logger.record("games/ticks_per_second", rate)


class UpdateThreads(BaseCallback):
    """Torch threads by phase: few while the games step, every core for the update.

    While a rollout is collected the games need the cores and the policy's forward
    pass is tiny; during the update the games wait, so torch may take every core.

    :param collect: torch threads while collecting a rollout.
    :param update: torch threads during the PPO update.
    """

    def __init__(self, collect: int, update: int) -> None:
        super().__init__()
        self.collect = collect
        self.update = update

    def _on_training_start(self) -> None:
        torch.set_num_threads(self.collect)

    def _on_rollout_start(self) -> None:
        torch.set_num_threads(self.collect)

    def _on_rollout_end(self) -> None:
        torch.set_num_threads(self.update)

    def _on_training_end(self) -> None:
        torch.set_num_threads(self.collect)

    def _on_step(self) -> bool:
        return True


class PublishBot(BaseCallback):
    """Publishes the policy being trained as a bot JSON every ``every`` steps, atomically
    (temporary file, fsync, rename: a reader sees the old bot or the new one, never half),
    for a page that flies it live (``lander play --web``). Only the latest is kept.

    Compact JSON by orjson (``write_json_atomic``): a Nature CNN's bot in Python's
    indented JSON took 8.5% of its run's trainer at one every 20,000 steps.

    :param build: makes the bot document of the model as it is now.
    :param path: where the bot goes (``.lander/live/RUN.json``).
    :param log: says once why publishing stopped, if it had to.
    """

    def __init__(
        self,
        every: int,
        path: Path,
        build: Callable[[], dict[str, Any]],
        log: Callable[[str], None],
    ) -> None:
        super().__init__()
        self.every = every
        self.path = path
        self.build = build
        self.log = log
        self._next: int | None = None
        self.published = 0

    def _on_step(self) -> bool:
        if self.every <= 0:
            return True  # publishing is off (--publish-every 0), or stopped
        if self._next is None:
            self._next = (self.num_timesteps // self.every + 1) * self.every
        if self.num_timesteps >= self._next:
            self._next = (self.num_timesteps // self.every + 1) * self.every
            self.publish()
        return True

    def _on_training_end(self) -> None:
        self.publish()  # the last policy of the session too

    def publish(self) -> None:
        """Write the current bot now; a bot that cannot be built stops publishing."""
        if self.every <= 0:
            return
        try:
            write_json_atomic(self.path, self.build(), compact=True)
        except (ExportError, OSError) as exc:
            self.every = 0
            self.log(f"live bot not published: {exc}")
            return
        self.published += 1


@contextmanager
def stop_on_signals(stop: StopFlag, console: Console) -> Iterator[dict[str, int]]:
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
