"""A run watching its own health from what it already logs: action std outside a healthy
band, entropy near zero, a mean reward that stopped improving, updates far larger than
normal, fps well below the run's own median, and storms of game restarts.

Each finding says what was seen, when, and what a user would do about it, as a line
("std 0.07 at 18.2M steps: collapsed ...: resume with --reset-std 0.3 --ent-coef 0.001").
:class:`HealthMonitor` holds the rules and no SB3 (unit-testable); :class:`HealthWatch`
feeds it after every rollout and reports each finding once, until its cause clears.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from stable_baselines3.common.callbacks import BaseCallback

from game_bridge.vec_env import GameVecEnv
from training.config import TrainConfig
from training.ppo.policy_tweaks import action_std
from training.runs.run_record import now_iso
from training.session.callbacks import mean_episode_reward
from training.session.tensorboard_log import ResilientTensorBoard

STORM_WINDOW_S = 600.0
"""Game restarts are counted over the last ten minutes."""
FPS_WARMUP_ROLLOUTS = 5
"""Rollouts before the fps median means anything (the first ones include start-up)."""
KEPT_FINDINGS = 20
"""Findings kept in ``run.json`` (the newest)."""


def steps_text(steps: int) -> str:
    """18,200,000 as ``18.2M``, 350,000 as ``350k``."""
    if steps >= 1_000_000:
        return f"{steps / 1_000_000:.1f}M"
    if steps >= 10_000:
        return f"{steps / 1000:.0f}k"
    return f"{steps:,}"


@dataclass(frozen=True)
class Finding:
    """One thing wrong with a run.

    :param kind: ``std_collapsed``, ``std_exploded``, ``no_entropy``, ``flat_reward``,
        ``large_updates``, ``slow`` or ``restart_storm``.
    :param timesteps: the run's steps when it was seen.
    :param value: the measured value (std, entropy, reward, approx_kl, fps, restarts).
    :param message: the line a user reads, with the advice.
    :param at: when it was seen (ISO time).
    """

    kind: str
    timesteps: int
    value: float
    message: str
    at: str = field(default_factory=now_iso)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the value a plain float, whatever numpy type measured it)."""
        return {**asdict(self), "value": float(self.value)}


def _number(value: Any) -> float | None:
    """A logged value as a plain float (SB3 logs numpy scalars), None when absent."""
    return None if value is None else float(value)


@dataclass(frozen=True)
class RolloutStats:
    """What one rollout (and the update before it) logged: None where unknown."""

    timesteps: int
    std: float | None = None
    entropy: float | None = None
    reward: float | None = None
    approx_kl: float | None = None
    clip_fraction: float | None = None
    fps: float | None = None
    recent_restarts: int = 0


class HealthMonitor:
    """The rules, fed one :class:`RolloutStats` per rollout.

    A band check (std, entropy, update size, fps) reports once its condition held for
    ``config.health_rollouts`` rollouts in a row; a finding is reported again only after
    its condition cleared. The advice names the run's own settings and files.

    :param config: the run's settings (the bands, and the values advice starts from).
    :param run: the run's name, for the folders the advice points at.
    """

    def __init__(self, config: TrainConfig, run: str) -> None:
        self.config = config
        self.run = run
        self._streaks: dict[str, int] = {}
        self._active: set[str] = set()
        self._fps: list[float] = []
        self._best_reward: float | None = None
        self._best_at = 0

    def observe(self, stats: RolloutStats) -> list[Finding]:
        """The findings this rollout brings that were not already reported."""
        checks = [
            self._std(stats),
            self._entropy(stats),
            self._updates(stats),
            self._speed(stats),
        ]
        found: list[Finding] = []
        for kind, finding in checks:
            if kind is None:
                continue
            streak = self._streaks.get(kind, 0) + 1 if finding is not None else 0
            self._streaks[kind] = streak
            if finding is None:
                self._active.discard(kind)
            elif streak >= self.config.health_rollouts and kind not in self._active:
                self._active.add(kind)
                found.append(finding)
        for kind, once in (
            ("flat_reward", self._flat(stats)),
            ("restart_storm", self._storm(stats)),
        ):
            if once is None:
                self._active.discard(kind)
            elif kind not in self._active:
                self._active.add(kind)
                found.append(once)
        return found

    # -- the rules -------------------------------------------------------------------

    def _std(self, stats: RolloutStats) -> tuple[str | None, Finding | None]:
        if stats.std is None:
            return None, None
        c, at = self.config, steps_text(stats.timesteps)
        band = f"healthy {c.health_std_low:g}-{c.health_std_high:g}"
        if stats.std < c.health_std_low:
            entropy = max(c.ent_coef * 10, 0.001)
            text = (
                f"std {stats.std:.3g} at {at} steps: collapsed ({band}), no exploration left: "
                f"resume with --reset-std 0.3 --ent-coef {entropy:g}"
            )
            return "std", Finding("std_collapsed", stats.timesteps, stats.std, text)
        if stats.std > c.health_std_high:
            text = (
                f"std {stats.std:.3g} at {at} steps: exploded ({band}), near-random play: "
                f"resume with --reset-std 0.5 --ent-coef {c.ent_coef / 5:g}"
            )
            return "std", Finding("std_exploded", stats.timesteps, stats.std, text)
        return "std", None

    def _entropy(self, stats: RolloutStats) -> tuple[str | None, Finding | None]:
        """Discrete policies (continuous ones are judged by their std)."""
        if stats.std is not None or stats.entropy is None:
            return None, None
        if stats.entropy >= self.config.health_entropy_low:
            return "entropy", None
        entropy = max(self.config.ent_coef * 10, 0.01)
        text = (
            f"entropy {stats.entropy:.3g} at {steps_text(stats.timesteps)} steps: the policy "
            f"always picks the same actions: resume with --ent-coef {entropy:g}"
        )
        return "entropy", Finding("no_entropy", stats.timesteps, stats.entropy, text)

    def _updates(self, stats: RolloutStats) -> tuple[str | None, Finding | None]:
        c = self.config
        if stats.approx_kl is None and stats.clip_fraction is None:
            return None, None
        kl, clip = stats.approx_kl or 0.0, stats.clip_fraction or 0.0
        if kl <= c.health_kl_high and clip <= c.health_clip_high:
            return "updates", None
        measured = (
            f"approx_kl {kl:.3g} (band <= {c.health_kl_high:g})"
            if kl > c.health_kl_high
            else f"clip fraction {clip:.2f} (band <= {c.health_clip_high:g})"
        )
        text = (
            f"{measured} at {steps_text(stats.timesteps)} steps: updates far larger than "
            f"normal: resume with --learning-rate {c.learning_rate / 3:.3g} "
            f"or --n-epochs {max(1, c.n_epochs // 2)}"
        )
        value = kl if kl > c.health_kl_high else clip
        return "updates", Finding("large_updates", stats.timesteps, value, text)

    def _speed(self, stats: RolloutStats) -> tuple[str | None, Finding | None]:
        if stats.fps is None or stats.fps <= 0:
            return None, None
        self._fps.append(stats.fps)
        if len(self._fps) <= FPS_WARMUP_ROLLOUTS:
            return None, None
        median = statistics.median(self._fps[FPS_WARMUP_ROLLOUTS - 1 :])
        if stats.fps >= self.config.health_fps_drop * median:
            return "fps", None
        text = (
            f"fps {stats.fps:,.0f} at {steps_text(stats.timesteps)} steps, under "
            f"{self.config.health_fps_drop:g} of this run's median {median:,.0f}: the machine "
            f"is busy or a game slowed down (see lander status and logs/{self.run}/games/)"
        )
        return "fps", Finding("slow", stats.timesteps, stats.fps, text)

    def _flat(self, stats: RolloutStats) -> Finding | None:
        if stats.reward is None:
            return None
        margin = 0.01 * max(abs(self._best_reward or 0.0), 1.0)
        if self._best_reward is None or stats.reward > self._best_reward + margin:
            self._best_reward, self._best_at = stats.reward, stats.timesteps
            return None
        flat_for = stats.timesteps - self._best_at
        if flat_for < self.config.health_flat_steps:
            return None
        text = (
            f"mean reward flat at {stats.reward:.4g} for {steps_text(flat_for)} steps (best "
            f"{self._best_reward:.4g} at {steps_text(self._best_at)}): it stopped improving: "
            f"stop here if that is good enough (--stop-at-score), or resume with "
            f"--learning-rate {self.config.learning_rate / 3:.3g}"
        )
        return Finding("flat_reward", stats.timesteps, stats.reward, text)

    def _storm(self, stats: RolloutStats) -> Finding | None:
        if stats.recent_restarts < self.config.health_restarts:
            return None
        text = (
            f"{stats.recent_restarts} game restarts in the last {STORM_WINDOW_S / 60:.0f} minutes "
            f"at {steps_text(stats.timesteps)} steps: a game keeps failing; see "
            f"logs/{self.run}/games/ and logs/{self.run}/train.log"
        )
        return Finding("restart_storm", stats.timesteps, stats.recent_restarts, text)


def write_text_entry(model: Any, tag: str, text: str, steps: int) -> None:
    """A text entry in the run's TensorBoard log (SB3's logger writes scalars only)."""
    for output in model.logger.output_formats:
        if isinstance(output, ResilientTensorBoard):
            output.add_text(tag, text, steps)


class HealthWatch(BaseCallback):
    """Feeds :class:`HealthMonitor` after every rollout and reports what it finds.

    The update's ``train/*`` values are read at the next rollout's start, when SB3 has
    recorded them and not yet dumped them.

    :param run: the run's name (its advice names the run's folders).
    :param report: receives each new finding (console, ``train.log``, ``run.json``).
    :param game_env: the games, for restart storms (None in-process).
    """

    def __init__(
        self,
        config: TrainConfig,
        run: str,
        report: Callable[[Finding], None],
        game_env: GameVecEnv | None = None,
    ) -> None:
        super().__init__()
        self.monitor = HealthMonitor(config, run)
        self.report = report
        self.game_env = game_env
        self._last: tuple[float, int] | None = None  # (time, steps) at the last rollout's start

    def _on_step(self) -> bool:
        return True

    def _on_rollout_start(self) -> None:
        now, steps = time.monotonic(), self.num_timesteps
        last, self._last = self._last, (now, steps)
        if last is None:  # before the first update: nothing of train/* yet
            return
        values = self.model.logger.name_to_value
        std = action_std(self.model)
        entropy_loss = values.get("train/entropy_loss")
        fps = (steps - last[1]) / max(now - last[0], 1e-9) if steps > last[1] else None
        recent = 0
        if self.game_env is not None:
            recent = sum(1 for r in self.game_env.restarts if now - r.at <= STORM_WINDOW_S)
        stats = RolloutStats(
            timesteps=steps,
            std=None if std is None else sum(std) / len(std),
            entropy=None if entropy_loss is None else -float(entropy_loss),
            reward=_number(mean_episode_reward(self.model)),
            approx_kl=_number(values.get("train/approx_kl")),
            clip_fraction=_number(values.get("train/clip_fraction")),
            fps=fps,
            recent_restarts=recent,
        )
        for finding in self.monitor.observe(stats):
            write_text_entry(self.model, "health", finding.message, steps)
            self.report(finding)
