"""A Gymnasium environment scored in-process: copies played in lockstep, one episode each,
against a random policy (score 0) and the environment's own ``reward_threshold`` (score 1:
what its authors call solved), where it declares one."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from game_bridge.frame_stack import start_episodes
from game_bridge.protocol import game_score
from games.gym.view import GameView, batch_observations, make_view, parse_kwargs
from games.spec import Policy

MAX_EPISODE_STEPS = 100_000
"""An evaluation episode that has not ended by then is cut (an environment without a time
limit could otherwise play forever)."""


@dataclass(frozen=True)
class GymScorer:
    """The settings an evaluation plays an environment with.

    :param env_id: the Gymnasium id.
    :param game_args: its ``--game-arg`` settings, as text pairs (hashable).
    :param threshold: its ``reward_threshold`` (None: it declares none).
    :param repeat: the run's ``--action-repeat`` (None: the game's own).
    """

    env_id: str
    game_args: tuple[tuple[str, str], ...]
    threshold: float | None
    repeat: int | None = None

    def _views(self, count: int) -> list[GameView]:
        kwargs = parse_kwargs(dict(self.game_args))
        return [make_view(self.env_id, kwargs, repeat=self.repeat) for _ in range(count)]

    def play(
        self, policy: Policy, episodes: int, seed: int
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Play ``episodes`` episodes at once; (their returns, successes where the
        environment reports ``is_success``, else None).

        A policy that keeps nothing of past steps acts only for the games still on: a
        deterministic Atari policy can hold one game in a loop to its 27,000-step limit
        while the others have ended (Breakout's 20-game evaluation took 280 s on one such
        game, acting for all 20 at every step; 27 s acting for it alone). A policy that
        keeps frames or a memory acts for every row, as its state is kept by row, and
        hears where a game went on after a lost life."""
        views = self._views(episodes)
        obs = [view.reset(seed=seed + i)[0] for i, view in enumerate(views)]
        returns = np.zeros(episodes)
        success: list[bool | None] = [None] * episodes
        active = np.ones(episodes, dtype=bool)
        stateful = callable(getattr(policy, "start", None))
        for _ in range(MAX_EPISODE_STEPS):
            if not active.any():
                break
            rows = np.arange(episodes) if stateful else np.flatnonzero(active)
            actions = np.asarray(policy(batch_observations([obs[i] for i in rows.tolist()])))
            restarted = np.zeros(episodes, dtype=bool)
            for i, action in zip(rows.tolist(), actions, strict=True):
                if not active[i]:
                    continue
                ob, reward, terminated, truncated, info = views[i].step(action)
                obs[i] = ob
                returns[i] += reward
                if terminated or truncated:
                    score = game_score(info, returns[i])
                    if score is None:  # a life lost: the game goes on from its reset
                        obs[i] = views[i].reset()[0]
                        restarted[i] = True
                        continue
                    returns[i] = score  # an Atari game's raw score, whole
                    active[i] = False
                    if "is_success" in info:
                        success[i] = bool(info["is_success"])
            if stateful and restarted.any():
                start_episodes(policy, restarted)
        for view in views:
            view.close()
        reported = [s for s in success if s is not None]
        return returns, np.asarray(reported, dtype=float) if reported else None

    def baseline_policies(self, rng: np.random.Generator) -> tuple[Policy, float | None]:
        """Uniform random actions (score 0), and the threshold the environment calls solved
        (score 1; None where it names none)."""
        (view,) = self._views(1)
        space = view.action_space
        view.close()

        def random_actions(obs: np.ndarray) -> np.ndarray:
            count = len(obs)
            if isinstance(space, spaces.Box):
                return rng.uniform(-1.0, 1.0, (count, *space.shape)).astype(np.float32)
            if isinstance(space, spaces.Discrete):
                return rng.integers(0, int(space.n), count)
            assert isinstance(space, spaces.MultiDiscrete)
            return rng.integers(0, space.nvec, (count, len(space.nvec)))

        return random_actions, self.threshold
