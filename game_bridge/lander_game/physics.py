"""Batched lander physics: K agents stepped together with numpy.

Each agent is a point-mass lander under gravity with a main (upward) thruster and
a lateral thruster. Its target jumps to a new random place every few game
seconds; the lander must fly there and hover without touching the ground, the
ceiling or the walls. Physics runs at 60 ticks per game second; one step applies
the action for ``action_repeat`` ticks. Everything is deterministic for a seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TICKS_PER_SECOND = 60
WIDTH = 20.0
HEIGHT = 15.0
GRAVITY = 5.0
MAIN_ACCEL = 2.0 * GRAVITY
"""Full main thrust: an action of 0 (the middle of [-1, 1]) exactly cancels gravity."""
LATERAL_ACCEL = 0.6 * GRAVITY
DRAG = 0.2
HULL = 0.3
"""Half the lander's size: touching a boundary within this distance is a crash."""
TARGET_PERIOD_S = 4.0
EPISODE_S = 20.0
SUCCESS_RADIUS = 1.0
CLOSENESS_RANGE = 8.0
CRASH_PENALTY = 10.0
POS_SCALE = 15.0
VEL_SCALE = 10.0
OBS_SIZE = 7
ACTION_SIZE = 2
N_DISCRETE_ACTIONS = 4
"""Discrete mode: 0 coast, 1 main engine, 2 push left, 3 push right."""

_ARENA_SCALE = np.array([2.0 / WIDTH, 2.0 / HEIGHT])
"""Maps a position in metres to [-1, 1] across the arena (after subtracting 1)."""

DIFFICULTY_LEVELS = {
    # difficulty: (target period in seconds, lateral gust acceleration)
    0: (6.0, 0.0),
    1: (TARGET_PERIOD_S, 0.0),
    2: (3.0, 0.8),
}


@dataclass
class StepResult:
    """What one step returns for every agent (arrays of length K)."""

    obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    success: np.ndarray


class LanderPhysics:
    """The lander world for ``n_agents`` independent agents.

    :param n_agents: number of landers stepped together.
    :param seed: seed of the world's random generator.
    :param action_repeat: physics ticks per step.
    :param discrete: True for the 4-action discrete mode.
    :param difficulty: 0 (slow targets), 1 (default) or 2 (fast targets and gusts).
    """

    def __init__(
        self,
        n_agents: int = 1,
        seed: int | None = None,
        action_repeat: int = 6,
        discrete: bool = False,
        difficulty: int = 1,
    ) -> None:
        if n_agents < 1:
            raise ValueError(f"n_agents must be at least 1, got {n_agents}")
        if action_repeat < 1:
            raise ValueError(f"action_repeat must be at least 1, got {action_repeat}")
        if difficulty not in DIFFICULTY_LEVELS:
            raise ValueError(
                f"difficulty must be one of {sorted(DIFFICULTY_LEVELS)}, got {difficulty}"
            )
        self.n_agents = n_agents
        self.action_repeat = action_repeat
        self.discrete = discrete
        period_s, self.gust = DIFFICULTY_LEVELS[difficulty]
        self.target_period_ticks = round(period_s * TICKS_PER_SECOND)
        self.episode_ticks = round(EPISODE_S * TICKS_PER_SECOND)
        self.dt = 1.0 / TICKS_PER_SECOND
        self.rng = np.random.default_rng(seed)
        self._power_cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.pos = np.zeros((n_agents, 2))
        self.vel = np.zeros((n_agents, 2))
        self.target = np.zeros((n_agents, 2))
        self.target_timer = np.zeros(n_agents, dtype=np.int64)
        self.ticks = np.zeros(n_agents, dtype=np.int64)
        self.reset_agents(np.ones(n_agents, dtype=bool))

    def seed(self, seed: int | None) -> None:
        """Restart the random generator (the gymnasium ``reset(seed=...)`` contract)."""
        self.rng = np.random.default_rng(seed)

    def _new_targets(self, count: int) -> np.ndarray:
        return np.column_stack(
            [self.rng.uniform(3.0, WIDTH - 3.0, count), self.rng.uniform(3.0, HEIGHT - 3.0, count)]
        )

    def reset_agents(self, mask: np.ndarray) -> None:
        """Put the agents selected by ``mask`` at a fresh random start."""
        count = int(mask.sum())
        if count == 0:
            return
        self.pos[mask] = np.column_stack(
            [self.rng.uniform(4.0, WIDTH - 4.0, count), self.rng.uniform(5.0, HEIGHT - 4.0, count)]
        )
        self.vel[mask] = self.rng.uniform(-1.0, 1.0, (count, 2))
        self.target[mask] = self._new_targets(count)
        self.target_timer[mask] = self.target_period_ticks
        self.ticks[mask] = 0

    def observe(self) -> np.ndarray:
        """Observations in [-1, 1], shape (K, 7).

        ``[dx, dy, vx, vy, x, y, t]``: offset to the target, velocity, position in
        the arena (centre 0) and the time left before the target moves.
        """
        # Few, large array operations: this runs every step of every game.
        obs = np.empty((self.n_agents, OBS_SIZE))
        np.subtract(self.target, self.pos, out=obs[:, 0:2])
        obs[:, 0:2] *= 1.0 / POS_SCALE
        np.multiply(self.vel, 1.0 / VEL_SCALE, out=obs[:, 2:4])
        np.multiply(self.pos, _ARENA_SCALE, out=obs[:, 4:6])
        obs[:, 4:6] -= 1.0
        np.multiply(self.target_timer, 2.0 / self.target_period_ticks, out=obs[:, 6])
        obs[:, 6] -= 1.0
        np.minimum(obs, 1.0, out=obs)
        np.maximum(obs, -1.0, out=obs)
        return obs.astype(np.float32)

    def _accelerations(self, actions: np.ndarray) -> np.ndarray:
        accel = np.empty((self.n_agents, 2))
        if self.discrete:
            choice = np.asarray(actions).reshape(self.n_agents).astype(np.int64)
            accel[:, 0] = np.where(choice == 2, -LATERAL_ACCEL, 0.0) + np.where(
                choice == 3, LATERAL_ACCEL, 0.0
            )
            accel[:, 1] = np.where(choice == 1, MAIN_ACCEL, 0.0)
        else:
            act = np.asarray(actions, dtype=np.float64).reshape(self.n_agents, ACTION_SIZE)
            act = np.maximum(np.minimum(act, 1.0), -1.0)
            accel[:, 0] = act[:, 1] * LATERAL_ACCEL
            accel[:, 1] = (act[:, 0] + 1.0) * 0.5 * MAIN_ACCEL
        accel[:, 1] -= GRAVITY
        return accel

    def _powers(self, ticks: int) -> tuple[np.ndarray, np.ndarray]:
        """``r**t`` and ``r**-t`` for t = 1..ticks, with r = 1 - DRAG * dt (cached per length)."""
        cached = self._power_cache.get(ticks)
        if cached is None:
            exponents = np.arange(1, ticks + 1, dtype=np.float64)
            ratio = 1.0 - DRAG * self.dt
            cached = (ratio**exponents, ratio**-exponents)
            self._power_cache[ticks] = cached
        return cached

    def step(self, actions: np.ndarray) -> StepResult:
        """Apply one action per agent for ``action_repeat`` ticks.

        Each tick is a semi-implicit Euler step with linear drag,
        ``v += (thrust - DRAG * v) * dt; p += v * dt``. With the thrust fixed for
        the whole step the recurrence has a closed form, so every tick of every
        agent is computed in a few array operations instead of a Python loop over
        ticks; an agent that leaves the arena stops at the tick it crashed.

        Agents that end (crash or time limit) are not reset here: the caller reads
        their terminal observation first, then calls :meth:`reset_agents`.
        """
        ticks, k = self.action_repeat, self.n_agents
        thrust = self._accelerations(actions)
        grow, shrink = self._powers(ticks)
        # u[t] = acceleration input of tick t+1 times dt; gusts push sideways per tick.
        inputs = np.empty((ticks, k, 2))
        inputs[:] = thrust * self.dt
        if self.gust:
            inputs[:, :, 0] += self.rng.uniform(-self.gust, self.gust, (ticks, k)) * self.dt
        # v_t = r^t (v_0 + sum_{s<=t} r^-s u_s);  p_t = p_0 + dt * sum_{s<=t} v_s
        velocity = grow[:, None, None] * (
            self.vel + np.cumsum(shrink[:, None, None] * inputs, axis=0)
        )
        position = self.pos + np.cumsum(velocity, axis=0) * self.dt
        x, y = position[:, :, 0], position[:, :, 1]
        outside = (x < HULL) | (x > WIDTH - HULL) | (y < HULL) | (y > HEIGHT - HULL)
        crashed = np.asarray(outside.any(axis=0), dtype=bool)
        last = np.where(crashed, outside.argmax(axis=0), ticks - 1)
        agents = np.arange(k)
        self.pos = position[last, agents]
        self.vel = velocity[last, agents]
        lived = last + 1
        # The target moves when its timer runs out, except on the episode's last
        # tick, so success is judged on a settled target.
        move_tick = self.ticks + self.target_timer  # tick count at which the timer hits 0
        self.ticks += lived
        self.target_timer -= lived
        while True:
            moved = (self.target_timer <= 0) & (move_tick < self.episode_ticks)
            if not moved.any():
                break
            self.target[moved] = self._new_targets(int(moved.sum()))
            self.target_timer[moved] += self.target_period_ticks
            move_tick = np.where(moved, move_tick + self.target_period_ticks, move_tick)
        offset = self.target - self.pos
        distance = np.hypot(offset[:, 0], offset[:, 1])
        inside = distance < SUCCESS_RADIUS
        closeness = np.maximum(np.minimum(1.0 - distance / CLOSENESS_RANGE, 1.0), 0.0)
        # Scaled by game time so the return does not depend on action_repeat.
        scale = ticks / TICKS_PER_SECOND * 10.0
        reward = (closeness + inside) * scale - crashed * CRASH_PENALTY
        truncated = ~crashed & (self.ticks >= self.episode_ticks)
        return StepResult(
            obs=self.observe(),
            reward=reward.astype(np.float32),
            terminated=crashed,
            truncated=truncated,
            success=inside & ~crashed,
        )
