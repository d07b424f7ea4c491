"""One timed training run for ``time_to_skill.py``, in whichever interpreter the side needs.

``--side lander`` trains with ``lander train``'s own code and defaults (plus any
``--settings`` JSON); ``--side godot-rl`` builds godot-rl 0.8.2's SB3 example set-up
(``examples/stable_baselines3_example.py``: ``StableBaselinesGodotEnv`` and VecMonitor,
PPO ``MultiInputPolicy`` with ``ent_coef=0.0001, n_steps=32``, everything else SB3's
defaults, torch's default threads) and runs in godot-rl's own virtual environment, so
this file imports nothing from lander at the top.

Both sides report the same events to a JSON-lines file: at every rollout end the clock
(seconds since the parent launched this process, less the time spent writing
snapshots), the steps, ``rollout/ep_rew_mean`` over the last 100 episodes, and the cores
busy (from /proc/stat) during collection and during the update; and at every whole
game's end its score (``kind: game``). A policy snapshot is saved every
``--snapshot-every`` seconds of that clock for evaluation afterwards, so evaluating never
slows the side being timed.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all cores together, from the first line of /proc/stat."""
    with open("/proc/stat") as handle:
        values = [int(v) for v in handle.readline().split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


def _skill_clock_class() -> type:
    """SkillClock, defined once SB3 is imported: lander's side imports it only after its
    games have begun to start, as ``lander train`` does."""
    from stable_baselines3.common.callbacks import BaseCallback

    class SkillClock(BaseCallback):
        """Reports progress and saves snapshots; stops training after ``seconds`` of clock.

        :param launched: ``time.time()`` when the parent started this process.
        :param seconds: clock seconds to train for.
        :param events: the JSON-lines file to append events to.
        :param snapshots: the folder for policy snapshots.
        :param snapshot_every: clock seconds between snapshots.
        :param save: writes a snapshot of the model to a path.
        :param steps: environment steps to train for at most (None: as many as fit).
        :param stop_reward: stop at the first rollout whose training reward reaches it.
        """

        def __init__(
            self,
            launched: float,
            seconds: float,
            events: Path,
            snapshots: Path,
            snapshot_every: float,
            save: Callable[[Any, Path], None],
            steps: int | None = None,
            stop_reward: float | None = None,
        ) -> None:
            super().__init__()
            self.steps = steps
            self.stop_reward = stop_reward
            self.reached = False
            self.launched = launched
            self.seconds = seconds
            self.events = events.open("a")
            self.snapshots = snapshots
            self.snapshot_every = snapshot_every
            self.save = save
            self.paused = 0.0
            self.next_snapshot = snapshot_every
            self.cpu = {"collect": [0, 0], "update": [0, 0]}
            self.wall = {"collect": 0.0, "update": 0.0}
            self._mark = (_cpu_ticks(), time.monotonic())

        def clock(self) -> float:
            """Seconds since launch, less the time spent on snapshots."""
            return time.time() - self.launched - self.paused

        def _phase_ended(self, phase: str) -> None:
            (busy0, total0), wall0 = self._mark
            busy, total = _cpu_ticks()
            self.cpu[phase][0] += busy - busy0
            self.cpu[phase][1] += total - total0
            now = time.monotonic()
            self.wall[phase] += now - wall0
            self._mark = ((busy, total), now)

        def _cores(self, phase: str) -> float | None:
            busy, total = self.cpu[phase]
            return round(busy / total * (os.cpu_count() or 1), 2) if total else None

        def _emit(self, **event: Any) -> None:
            self.events.write(json.dumps(event) + "\n")
            self.events.flush()

        def _on_training_start(self) -> None:
            self._emit(kind="start", t=self.clock())
            self._mark = (_cpu_ticks(), time.monotonic())

        def _on_rollout_start(self) -> None:
            self._phase_ended("update")

        def _on_rollout_end(self) -> None:
            self._phase_ended("collect")
            episodes = list(self.model.ep_info_buffer or ())
            reward = float(sum(e["r"] for e in episodes) / len(episodes)) if episodes else None
            t = self.clock()
            if self.stop_reward is not None and reward is not None:
                self.reached = reward >= self.stop_reward
            self._emit(
                kind="rollout",
                t=t,
                steps=self.num_timesteps,
                reward=reward,
                cores_collect=self._cores("collect"),
                cores_update=self._cores("update"),
                wall_collect=round(self.wall["collect"], 2),
                wall_update=round(self.wall["update"], 2),
            )
            if t >= self.next_snapshot:
                started = time.time()
                path = self.snapshots / f"{self.num_timesteps:012d}.zip"
                self.save(self.model, path)
                self.paused += time.time() - started
                self._emit(kind="snapshot", t=t, steps=self.num_timesteps, path=str(path))
                self.next_snapshot = t + self.snapshot_every

        def _on_step(self) -> bool:
            for info in self.locals.get("infos", ()):
                episode = info.get("episode")
                if episode is not None:  # a whole game's score, as the reward averages
                    self._emit(
                        kind="game",
                        t=self.clock(),
                        steps=self.num_timesteps,
                        score=float(episode["r"]),
                        length=int(episode["l"]),
                    )
            within = self.steps is None or self.num_timesteps < self.steps
            return within and not self.reached and self.clock() < self.seconds

    return SkillClock


def _clock(args: argparse.Namespace, save: Callable[[Any, Path], None]) -> Any:
    return _skill_clock_class()(
        args.launched,
        args.seconds,
        args.events,
        args.snapshots,
        args.snapshot_every,
        save,
        args.steps,
        args.stop_reward,
    )


def _stack_coordinates(frames: int) -> None:
    """Train on each agent's last ``frames`` observations joined, oldest first (what a
    user without memory would try): lander's own frame stack (``game_bridge/frame_stack.py``,
    the first observation repeated at an episode's start) over the coordinates, wrapped
    around the games the trainer opens. A benchmark's side, not a lander setting."""
    import numpy as np
    from gymnasium import spaces
    from stable_baselines3.common.vec_env import VecEnvWrapper

    from game_bridge.frame_stack import FrameStack
    from training.session import trainer

    class CoordinateStack(VecEnvWrapper):
        def __init__(self, venv: Any) -> None:
            space = venv.observation_space
            low, high = np.tile(space.low, frames), np.tile(space.high, frames)
            super().__init__(venv, observation_space=spaces.Box(low, high, dtype=space.dtype))
            self.stack = FrameStack(frames)

        def reset(self) -> Any:
            self.stack.start()
            return self.stack(self.venv.reset())

        def step_wait(self) -> Any:
            obs, rewards, dones, infos = self.venv.step_wait()
            for index in np.flatnonzero(dones):
                terminal = infos[index].get("terminal_observation")
                if terminal is not None:
                    infos[index]["terminal_observation"] = self.stack.with_last(
                        terminal, int(index)
                    )
            self.stack.start(dones)
            return self.stack(obs), rewards, dones, infos

    opened = trainer.make_vec_env
    trainer.make_vec_env = lambda *a, **k: CoordinateStack(opened(*a, **k))


def _run_lander(args: argparse.Namespace) -> None:
    from rich.console import Console

    from training.session.planning import TrainRequest
    from training.session.session_start import begin_session

    settings = json.loads(args.settings)
    stacked = int(settings.pop("stack_coordinates", 1))
    if stacked > 1:
        _stack_coordinates(stacked)
    if "numpy_camera" in settings:  # a benchmark's side, not a lander setting
        from training.ppo.lean_ppo import LeanPPO

        LeanPPO.numpy_camera = bool(settings.pop("numpy_camera"))
    overrides = {
        "timesteps": 10**9,
        "checkpoint_every": 10**9,
        "port": args.port,
        "n_parallel": args.n_parallel,
        **({"agents_per_instance": args.agents} if args.agents is not None else {}),
        "speedup": args.speedup,
        "game_bin": args.binary,
        **settings,
    }
    with tempfile.TemporaryDirectory(prefix="lander-skill-") as root:
        request = TrainRequest(Path(root), "skill", overrides)
        quiet = Console(quiet=True)
        start = begin_session(request, quiet)  # the games start while torch loads, as in the CLI
        from training.runs.checkpoints import save_checkpoint
        from training.session.trainer import train

        def save(model: Any, path: Path) -> None:
            save_checkpoint(model, path, model.get_vec_normalize_env())

        train(request, quiet, extra_callbacks=[_clock(args, save)], start=start)
        with open(args.events, "a") as events:
            events.write(json.dumps({"kind": "startup", "marks": start.clock.marks}) + "\n")


def _run_godot_rl(args: argparse.Namespace) -> None:
    import contextlib
    import io

    from godot_rl.wrappers.stable_baselines_wrapper import StableBaselinesGodotEnv
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env.vec_monitor import VecMonitor

    clock = _clock(args, lambda model, path: model.save(path))
    with contextlib.redirect_stdout(io.StringIO()):  # godot-rl prints per connection
        env = StableBaselinesGodotEnv(
            env_path=args.binary,
            n_parallel=args.n_parallel,
            seed=0,
            speedup=int(args.speedup),  # the example's --speedup is an int
            port=args.port,
            agents=args.agents or 8,
            **({"difficulty": args.difficulty} if args.difficulty is not None else {}),
        )
    env = VecMonitor(env)
    with tempfile.TemporaryDirectory(prefix="godot-rl-skill-") as logs:
        model = PPO(
            "MultiInputPolicy",
            env,
            ent_coef=0.0001,
            n_steps=32,
            learning_rate=0.0003,
            tensorboard_log=logs,  # the example logs to TensorBoard, as lander does
        )
        try:
            model.learn(total_timesteps=10**9, callback=clock)
        finally:
            env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--side", choices=["lander", "godot-rl"], required=True)
    parser.add_argument("--launched", type=float, required=True, help="time.time() at launch")
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--events", type=Path, required=True)
    parser.add_argument("--snapshots", type=Path, required=True)
    parser.add_argument("--snapshot-every", type=float, default=1.0)
    parser.add_argument("--steps", type=int, default=None, help="stop after these many steps")
    parser.add_argument("--stop-reward", type=float, default=None, help="stop once reached")
    parser.add_argument("--binary", default=None, help="game executable (lander: None = bundled)")
    parser.add_argument("--n-parallel", type=int, default=4)
    parser.add_argument(
        "--agents", type=int, default=None, help="agents per instance (lander: the game's default)"
    )
    parser.add_argument("--speedup", type=float, default=1000.0)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--difficulty", type=int, default=None, help="godot-rl: a game argument")
    parser.add_argument("--settings", default="{}", help="lander: JSON of train settings")
    args = parser.parse_args()
    args.snapshots.mkdir(parents=True, exist_ok=True)
    if args.side == "lander":
        _run_lander(args)
    else:
        _run_godot_rl(args)


if __name__ == "__main__":
    main()
