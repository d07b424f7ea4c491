"""One peer's Atari run for ``fastest_peers.py``, in the peer's own virtual environment,
with every whole game's raw score written down as it ends.

- ``--side cleanrl``: CleanRL's ``ppo_atari_envpool.py`` (its file, unchanged, copied into
  ``.venv-cleanrl`` by ``fastest_peers.py --setup``), run as its ``__main__`` with its own
  defaults but ``--env-id`` and ``--seed``. Its file was written for EnvPool's old Gym
  interface (``reset`` gives the observations, ``step`` four values); EnvPool 1.2.5, the
  release with a wheel for this Python, gives Gymnasium's (``(obs, info)`` and five
  values, Gymnasium's spaces). ``envpool.make`` is wrapped here to give the old interface
  back, ``done`` being ``terminated or truncated`` as EnvPool 0.8 gave it, with Gym's
  spaces, and nothing else changes.
- ``--side sf``: Sample Factory 2's own Atari example (``sf_examples.atari.train_atari``:
  APPO with its Atari defaults, 8 worker processes) with ``--device cpu``; every Atari id
  is registered again with a maker that wraps the example's own ``make_atari_env``.

Why our own record: CleanRL logs a game only when it ends with no lives left, so a game
cut by EnvPool's 27,000-step limit is never logged and its score runs into the next one;
Sample Factory logs averages. Here a game's end is the emulator's: every life lost, or the
step limit. Each line of ``--games`` is ``{"t": unix time, "score": raw score,
"steps": this process's agent steps so far, "pid": pid}``; Sample Factory's workers are
processes of their own (spawned), each appending its lines.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import time
from pathlib import Path
from typing import Any

GAMES_FILE = "PEER_GAMES_FILE"
"""The environment variable that tells every process (spawned ones too) where to write."""


class GameLog:
    """Appends whole games to the file named by ``PEER_GAMES_FILE``, one line each."""

    def __init__(self) -> None:
        self.handle = open(os.environ[GAMES_FILE], "a")  # noqa: SIM115 - lives as long as the run
        self.steps = 0

    def ended(self, score: float) -> None:
        line = {"t": time.time(), "score": float(score), "steps": self.steps, "pid": os.getpid()}
        self.handle.write(json.dumps(line) + "\n")
        self.handle.flush()


def _old_gym_envpool(env: Any) -> Any:
    """EnvPool 1.2.5's Gymnasium-style pool as the old Gym pool CleanRL's file expects,
    writing every whole game (``info["reward"]`` is the unclipped reward)."""
    import gym
    import numpy as np

    log = GameLog()

    class OldGymPool:
        def __init__(self) -> None:
            self.scores = np.zeros(env.config["num_envs"], dtype=np.float64)
            seen = env.observation_space
            self.observation_space = gym.spaces.Box(seen.low, seen.high, seen.shape, seen.dtype)
            self.action_space = gym.spaces.Discrete(int(env.action_space.n))

        def __getattr__(self, name: str) -> Any:
            return getattr(env, name)

        def reset(self, **kwargs: Any) -> Any:
            obs, _ = env.reset(**kwargs)
            self.scores[:] = 0.0
            return obs

        def step(self, action: Any) -> Any:
            obs, reward, terminated, truncated, info = env.step(action)
            log.steps += len(reward)
            self.scores += info["reward"]
            for index in np.flatnonzero(info["terminated"] | truncated):
                log.ended(self.scores[index])
                self.scores[index] = 0.0
            return obs, reward, terminated | truncated, info

    return OldGymPool()


def run_cleanrl(script: Path, argv: list[str]) -> None:
    """CleanRL's file as its ``__main__``, with EnvPool's old interface."""
    import envpool

    made = envpool.make
    envpool.make = lambda *a, **k: _old_gym_envpool(made(*a, **k))
    sys.argv = [str(script), *argv]
    runpy.run_path(str(script), run_name="__main__")


def recorded_atari_env(env_name: str, cfg: Any, env_config: Any, render_mode: Any = None) -> Any:
    """Sample Factory's own Atari maker, with a wrapper that writes each whole game: its
    ``RecordEpisodeStatistics`` sits on the raw game, so ``info["episode"]`` comes at the
    game's real end (every life lost, or the time limit), with the raw score."""
    import gymnasium as gym
    from sf_examples.atari.atari_utils import make_atari_env

    class GameEnds(gym.Wrapper):
        def __init__(self, env: Any) -> None:
            super().__init__(env)
            self.log = GameLog()

        def step(self, action: Any) -> Any:
            obs, reward, terminated, truncated, info = self.env.step(action)
            self.log.steps += 1
            if "episode" in info:
                self.log.ended(float(info["episode"]["r"]))
            return obs, reward, terminated, truncated, info

    return GameEnds(make_atari_env(env_name, cfg, env_config, render_mode))


def run_sample_factory(argv: list[str]) -> int:
    """Sample Factory's Atari example, its makers swapped for ``recorded_atari_env``."""
    from sample_factory.envs.env_utils import register_env
    from sample_factory.train import run_rl
    from sf_examples.atari.atari_utils import ATARI_ENVS
    from sf_examples.atari.train_atari import parse_atari_args

    for spec in ATARI_ENVS:
        register_env(spec.name, recorded_atari_env)
    return int(run_rl(parse_atari_args(argv)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", choices=("cleanrl", "sf"), required=True)
    parser.add_argument("--games", type=Path, required=True, help="JSON lines, one a game")
    parser.add_argument("--script", type=Path, default=None, help="cleanrl: its file")
    args, rest = parser.parse_known_args()
    os.environ[GAMES_FILE] = str(args.games.resolve())
    if args.side == "cleanrl":
        run_cleanrl(args.script, rest)
    else:
        sys.exit(run_sample_factory(rest))


if __name__ == "__main__":
    main()
