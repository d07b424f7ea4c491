"""``lander tune``: short training runs over a grid of settings (instances, agents per
instance, speedup, rollout length, minibatch), to find the best one for this machine
and game.

Two objectives. ``fps``: each setting trains for a few seconds in a scratch folder
(nothing is kept) and is scored by its steady training fps (steps after the first
rollout over the time they took), the way operators compare smoke runs by hand.
``time``: each setting races from launch (the games' start counted) to a training
reward (``rollout/ep_rew_mean``), and the fastest to get there wins: samples that do
not teach do not count.
"""

from __future__ import annotations

import itertools
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from stable_baselines3.common.callbacks import BaseCallback

from game_bridge.errors import BridgeError
from games import DEFAULT_GAME, game_entry
from training.config import TUNED, ConfigError, TrainConfig
from training.session.callbacks import mean_episode_reward
from training.session.trainer import TrainRequest, train

OBJECTIVES = ("fps", "time")
DEFAULT_LISTS = {
    # what each objective tries of a setting not given ("default": the run's own value)
    "fps": {"n_parallel": "2,4,8", "agents_per_instance": "4,8,16", "n_steps": "default"},
    "time": {"n_parallel": "2,4", "agents_per_instance": "8,16", "n_steps": "32,64"},
}


@dataclass(frozen=True)
class RacePlan:
    """What ``tune`` races: the settings, each for at most ``seconds``, to ``target``
    (a training reward; None races for fps)."""

    races: list[TuneSetting]
    seconds: float
    target: float | None
    overrides: dict[str, Any]


def parse_values(text: str, kind: type) -> list[Any]:
    """``"2,4,default"`` as ``[2, 4, None]`` (None keeps the run's own value).

    :raises ConfigError: on an item that is not a number.
    """
    try:
        return [
            None if item.strip() == "default" else kind(item)
            for item in text.split(",")
            if item.strip()
        ]
    except ValueError:
        raise ConfigError(f"expected comma-separated numbers, got {text!r}") from None


def plan_races(
    objective: str,
    seconds: float,
    reward: float | None,
    lists: dict[str, str | None],
    overrides: dict[str, Any],
) -> RacePlan:
    """The races ``tune`` runs for the lists given (``"2,4,8"`` per tuned setting; None:
    the objective's default list) and the race target: ``reward``, else the game's own
    (its registry entry's ``race_reward``) for ``--objective time``.

    :raises ConfigError: a bad objective, duration, list, or a race with no target.
    """
    if objective not in OBJECTIVES:
        raise ConfigError(f"--objective must be time or fps, got {objective!r}")
    if reward is not None and objective != "time":
        raise ConfigError("--reward is the target of --objective time; add --objective time")
    if seconds <= 0:
        raise ConfigError("--seconds must be positive")
    target = None
    if objective == "time":
        game = game_entry(overrides.get("game", DEFAULT_GAME))
        own = game.race_reward if overrides.get("game_bin") is None else None
        target = reward if reward is not None else own
        if target is None:
            where = "a game of your own" if overrides.get("game_bin") else f"the {game.name} game"
            raise ConfigError(f"--objective time on {where} needs --reward R (a training reward)")
    chosen = {
        name: lists.get(name) or DEFAULT_LISTS[objective].get(name, "default") for name in TUNED
    }
    races = grid(
        *(parse_values(chosen[name], float if name == "speedup" else int) for name in TUNED)
    )
    return RacePlan(races, seconds, target, overrides)


@dataclass(frozen=True)
class TuneSetting:
    """One point of the grid; None keeps the run's own value."""

    n_parallel: int
    agents_per_instance: int
    speedup: float | None = None
    n_steps: int | None = None
    batch_size: int | None = None

    def flags(self) -> str:
        """The command-line flags that select this setting."""
        parts = [
            f"--n-parallel {self.n_parallel}",
            f"--agents-per-instance {self.agents_per_instance}",
        ]
        for flag, value in (
            ("speedup", self.speedup),
            ("n-steps", self.n_steps),
            ("batch-size", self.batch_size),
        ):
            if value is not None:
                parts.append(f"--{flag} {value:g}")
        return " ".join(parts)

    def describe(self) -> str:
        """A short label for progress lines."""
        return (
            f"n_parallel={self.n_parallel} agents={self.agents_per_instance} "
            f"speedup={self.speedup if self.speedup is not None else 'game default'} "
            f"n_steps={self.n_steps or 'default'} batch={self.batch_size or 'default'}"
        )


@dataclass(frozen=True)
class TuneResult:
    """One setting and what it measured (None where it did not get there).

    :param fps: steady training steps per second.
    :param seconds_to_reward: wall seconds from launch to the target reward (objective time).
    :param note: why it failed, when it did.
    """

    setting: TuneSetting
    fps: float | None
    seconds_to_reward: float | None = None
    note: str = ""


class _Timer(BaseCallback):
    """Measures fps after the first rollout and, with a target, the time to reach it.

    Stops training after ``seconds`` from ``started``, or once the target is reached.
    """

    def __init__(self, started: float, seconds: float, reward: float | None) -> None:
        super().__init__()
        self.started = started
        self.seconds = seconds
        self.reward = reward
        self.steady_from: tuple[float, int] | None = None
        self.fps: float | None = None
        self.reached: float | None = None

    def _on_rollout_end(self) -> None:
        now = time.monotonic()
        if self.steady_from is None:
            self.steady_from = (now, self.num_timesteps)
        else:
            then, steps = self.steady_from
            self.fps = (self.num_timesteps - steps) / max(now - then, 1e-9)
        mean = mean_episode_reward(self.model)
        reached = self.reward is not None and mean is not None and mean >= self.reward
        if reached and self.reached is None:
            self.reached = now - self.started

    def _on_step(self) -> bool:
        return self.reached is None and time.monotonic() - self.started < self.seconds


def grid(
    n_parallel: list[int],
    agents: list[int],
    speedups: list[float | None],
    n_steps: list[int | None],
    batch_sizes: list[int | None],
) -> list[TuneSetting]:
    """Every combination, in a stable order."""
    return [
        TuneSetting(*values)
        for values in itertools.product(n_parallel, agents, speedups, n_steps, batch_sizes)
    ]


def tune(
    settings: list[TuneSetting],
    seconds: float,
    base_overrides: dict[str, Any],
    console: Console,
    reward: float | None = None,
) -> list[TuneResult]:
    """Measure every setting; print each as it completes.

    :param seconds: the longest any setting trains (for ``fps``, how long each trains).
    :param reward: the target of the ``time`` objective; None measures fps only.
    """
    # The first optimizer step imports torch._dynamo (about a second): import it now, so
    # that the first setting's race does not pay a cost the others are spared.
    import torch._dynamo  # noqa: F401

    results = []
    for setting in settings:
        overrides: dict[str, Any] = {
            **base_overrides,
            "n_parallel": setting.n_parallel,
            "agents_per_instance": setting.agents_per_instance,
            "speedup": setting.speedup,
            "timesteps": 10**9,
            "checkpoint_every": 10**9,
        }
        if setting.n_steps is not None:
            overrides["n_steps"] = setting.n_steps
        elif reward is None:  # fps: short rollouts, so several fit in the measuring time
            num_envs = setting.n_parallel * setting.agents_per_instance
            wanted = int(base_overrides.get("n_steps", TrainConfig.n_steps))
            overrides["n_steps"] = max(32, min(wanted, 4096 // num_envs or 32))
        if setting.batch_size is not None:
            overrides["batch_size"] = setting.batch_size
        started = time.monotonic()
        timer = _Timer(started, seconds, reward)
        with tempfile.TemporaryDirectory(prefix="lander-tune-") as scratch:
            try:
                outcome = train(
                    TrainRequest(Path(scratch), "tune", overrides),
                    Console(quiet=True),
                    extra_callbacks=[timer],
                )
                note = "" if outcome.status != "failed" else (outcome.error or "failed")
            except (BridgeError, ConfigError) as exc:
                note = str(exc)
        if reward is not None and timer.reached is None and not note:
            note = f"reward {reward:g} not reached in {seconds:g} s"
        result = TuneResult(setting, timer.fps, timer.reached, note)
        results.append(result)
        console.print(f"{setting.describe()}: {_shown(result, reward)}")
    return results


def _shown(result: TuneResult, reward: float | None) -> str:
    if result.seconds_to_reward is not None:
        return f"reward {reward:g} in {result.seconds_to_reward:.1f} s"
    if result.fps is None:
        return "failed: " + (result.note or "no full rollout in the time given")
    return result.note or f"{result.fps:,.0f} fps"


def best(results: list[TuneResult], objective: str = "fps") -> TuneResult | None:
    """The fastest setting that worked: most fps, or least time to the reward."""
    if objective == "time":
        reached = [r for r in results if r.seconds_to_reward is not None]
        return min(reached, key=lambda r: r.seconds_to_reward or 0.0) if reached else None
    working = [r for r in results if r.fps is not None]
    return max(working, key=lambda r: r.fps or 0.0) if working else None
