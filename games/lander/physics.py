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
GLIMPSE_S = 0.5
"""With ``observation=glimpse``: how long a new target is shown before it is hidden."""
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


_STATE_COLUMNS = 10
"""An agent's state row: position (0-1), velocity (2-3), this step's acceleration (4-5),
a constant 1 (6), its target (7-8) and the ticks left before the target moves (9)."""
_ACTION_GAIN = np.array([LATERAL_ACCEL, 0.5 * MAIN_ACCEL])
_ACTION_OFFSET = np.array([0.0, 0.5 * MAIN_ACCEL - GRAVITY])
_DISCRETE_ACCEL = np.array(
    [
        [0.0, -GRAVITY],
        [0.0, MAIN_ACCEL - GRAVITY],
        [-LATERAL_ACCEL, -GRAVITY],
        [LATERAL_ACCEL, -GRAVITY],
    ]
)
"""Acceleration of each discrete action: coast, main engine, push left, push right."""

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


_CENTRE = np.array([WIDTH / 2, HEIGHT / 2])
_REACH = _CENTRE - HULL
"""A position p is inside the arena while every |p - _CENTRE| / _REACH is at most 1."""


@dataclass(frozen=True)
class _StepMatrix:
    """The closed form of one step as one matrix, for ``ticks`` ticks.

    With r = 1 - DRAG * dt and the thrust a fixed over the step, the tick
    recurrence ``v_t = r v_{t-1} + a dt``, ``p_t = p_{t-1} + v_t dt`` gives
    ``v_t = grow[t] v_0 + h[t] a`` and ``p_t = p_0 + p[t] v_0 + q[t] a``: linear in
    the state row's ``[px, py, vx, vy, ax, ay, 1]`` (its target and timer columns
    have zero rows here). ``state @ matrix`` yields, per agent,
    the arena-scaled position ``(p_t - _CENTRE) / _REACH`` of every tick (x and y
    interleaved, 2 x ticks columns) followed by the final position and velocity.
    """

    matrix: np.ndarray
    grow: np.ndarray  # r^t, t = 1..ticks (velocity at a crash tick, gusts)
    shrink: np.ndarray  # r^-t (gusts)
    h: np.ndarray  # dt (1 - r^t) / (1 - r) (velocity at a crash tick)

    @classmethod
    def for_ticks(cls, ticks: int, dt: float) -> _StepMatrix:
        ratio = 1.0 - DRAG * dt
        exponents = np.arange(1, ticks + 1, dtype=np.float64)
        grow = ratio**exponents
        h = dt * (1.0 - grow) / (1.0 - ratio)
        p, q = dt * np.cumsum(grow), dt * np.cumsum(h)  # dt sum_{s<=t} r^s, dt sum_{s<=t} h[s]
        matrix = np.zeros((_STATE_COLUMNS, 2 * ticks + 4))
        for axis in (0, 1):
            scaled = slice(axis, 2 * ticks, 2)  # this axis's columns of every tick
            matrix[axis, scaled] = 1.0 / _REACH[axis]
            matrix[2 + axis, scaled] = p / _REACH[axis]
            matrix[4 + axis, scaled] = q / _REACH[axis]
            matrix[6, scaled] = -_CENTRE[axis] / _REACH[axis]
            final_pos, final_vel = 2 * ticks + axis, 2 * ticks + 2 + axis
            matrix[[axis, 2 + axis, 4 + axis], final_pos] = [1.0, p[-1], q[-1]]
            matrix[[2 + axis, 4 + axis], final_vel] = [grow[-1], h[-1]]
        return cls(matrix, grow, ratio**-exponents, h)


def _observation_matrix(target_period_ticks: int) -> np.ndarray:
    """``state @ matrix`` is the observation before clipping (see :meth:`LanderPhysics.observe`)."""
    matrix = np.zeros((_STATE_COLUMNS, OBS_SIZE))
    for axis, size in ((0, WIDTH), (1, HEIGHT)):
        matrix[7 + axis, axis] = 1.0 / POS_SCALE  # (target - pos) / POS_SCALE
        matrix[axis, axis] = -1.0 / POS_SCALE
        matrix[2 + axis, 2 + axis] = 1.0 / VEL_SCALE
        matrix[axis, 4 + axis] = 2.0 / size  # pos scaled to [-1, 1] across the arena
        matrix[6, 4 + axis] = -1.0
    matrix[9, 6] = 2.0 / target_period_ticks
    matrix[6, 6] = -1.0
    return matrix


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
        glimpse: bool = False,
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
        self.glimpse_ticks = round(GLIMPSE_S * TICKS_PER_SECOND) if glimpse else 0
        self.dt = 1.0 / TICKS_PER_SECOND
        self.rng = np.random.default_rng(seed)
        self._step_matrix = _StepMatrix.for_ticks(action_repeat, self.dt)
        self._observation_matrix = _observation_matrix(self.target_period_ticks)
        self._state = np.zeros((n_agents, _STATE_COLUMNS))
        self._state[:, 6] = 1.0
        # Views: the state is updated in place, so one product steps or observes it all.
        self.pos = self._state[:, 0:2]
        self.vel = self._state[:, 2:4]
        self._accel = self._state[:, 4:6]
        self.target = self._state[:, 7:9]
        self.target_timer = self._state[:, 9]
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

    def coordinates(self) -> np.ndarray:
        """Observations in [-1, 1], shape (K, 7), the target always in view.

        ``[dx, dy, vx, vy, x, y, t]``: offset to the target, velocity, position in
        the arena (centre 0) and the time left before the target moves.
        """
        obs = self._state @ self._observation_matrix
        np.minimum(obs, 1.0, out=obs)  # not np.clip: its Python wrapper costs more than both
        np.maximum(obs, -1.0, out=obs)
        return obs.astype(np.float32)

    def observe(self) -> np.ndarray:
        """What the agents see: :meth:`coordinates`, except that in the glimpse mode the
        offset to the target reads 0 once the target has been shown for ``GLIMPSE_S``,
        until it moves again (``t`` tells a policy which it is): a policy that remembers
        where the target was keeps flying to it, one that forgets drifts."""
        obs = self.coordinates()
        if self.glimpse_ticks:
            hidden = self.target_period_ticks - self.target_timer >= self.glimpse_ticks
            obs[hidden, 0:2] = 0.0
        return obs

    def _set_accelerations(self, actions: np.ndarray) -> None:
        if self.discrete:
            choice = np.asarray(actions).reshape(self.n_agents).astype(np.int64)
            unknown = (choice < 0) | (choice >= N_DISCRETE_ACTIONS)  # coast, as the game always did
            self._accel[:] = _DISCRETE_ACCEL[np.where(unknown, 0, choice)]
            return
        act = np.asarray(actions, dtype=np.float64).reshape(self.n_agents, ACTION_SIZE)
        act = np.maximum(np.minimum(act, 1.0), -1.0)
        # [lateral, main] from [main, lateral]: main thrust maps [-1, 1] to [0, MAIN_ACCEL].
        np.multiply(act[:, ::-1], _ACTION_GAIN, out=self._accel)
        self._accel += _ACTION_OFFSET

    def step(self, actions: np.ndarray) -> StepResult:
        """Apply one action per agent for ``action_repeat`` ticks.

        Each tick is a semi-implicit Euler step with linear drag,
        ``v += (thrust - DRAG * v) * dt; p += v * dt``. With the thrust fixed for
        the whole step the recurrence has a closed form (see :class:`_StepMatrix`),
        so every tick of every agent comes from one matrix product instead of a
        Python loop over ticks; an agent that leaves the arena stops at the tick it
        crashed. At a few agents per game the cost of a step is the number of numpy
        calls, not their size: hence one product and few calls.

        Agents that end (crash or time limit) are not reset here: the caller reads
        their terminal observation first, then calls :meth:`reset_agents`.
        """
        ticks, k, m = self.action_repeat, self.n_agents, self._step_matrix
        self._set_accelerations(actions)
        result = self._state @ m.matrix
        scaled = result[:, : 2 * ticks]
        gust_velocity = None
        if self.gust:
            # Gusts push sideways with a new value each tick: their part of the
            # recurrence is summed tick by tick (v_t = r^t sum_s r^-s g_s dt).
            gusts = self.rng.uniform(-self.gust, self.gust, (ticks, k)) * self.dt
            gust_velocity = m.grow[:, None] * np.cumsum(m.shrink[:, None] * gusts, axis=0)
            gust_position = np.cumsum(gust_velocity, axis=0) * self.dt
            scaled[:, 0::2] += gust_position.T / _REACH[0]
            result[:, 2 * ticks] += gust_position[-1]
            result[:, 2 * ticks + 2] += gust_velocity[-1]
        # Reductions through the ufuncs: ndarray.max() and .any() add a Python wrapper each.
        reach = np.abs(scaled)  # above 1: outside the arena
        crashed = np.maximum.reduce(reach, axis=1) > 1.0
        lived: np.ndarray | int = ticks
        if np.logical_or.reduce(crashed):
            lived = self._crash_ticks(scaled, reach, crashed, gust_velocity)
        else:
            self._state[:, 0:4] = result[:, 2 * ticks :]
        self.ticks += lived
        self.target_timer -= lived
        if np.minimum.reduce(self.target_timer) <= 0:
            self._move_targets()
        offset = self.target - self.pos
        distance = np.hypot(offset[:, 0], offset[:, 1])
        inside = distance < SUCCESS_RADIUS
        closeness = np.maximum(1.0 - distance / CLOSENESS_RANGE, 0.0)  # at most 1: distance >= 0
        # Scaled by game time so the return does not depend on action_repeat.
        scale = ticks / TICKS_PER_SECOND * 10.0
        reward = (closeness + inside) * scale - crashed * CRASH_PENALTY
        flying = ~crashed
        return StepResult(
            obs=self.observe(),
            reward=reward.astype(np.float32),
            terminated=crashed,
            truncated=flying & (self.ticks >= self.episode_ticks),
            success=inside & flying,
        )

    def _move_targets(self) -> None:
        """Give a new target to each agent whose timer ran out, except on the
        episode's last tick, so success is judged on a settled target."""
        # ticks + timer is constant between moves: the tick count at which the timer hit 0.
        move_tick = self.ticks + self.target_timer
        while True:
            moved = (self.target_timer <= 0) & (move_tick < self.episode_ticks)
            if not moved.any():
                return
            self.target[moved] = self._new_targets(int(moved.sum()))
            self.target_timer[moved] += self.target_period_ticks
            move_tick = np.where(moved, move_tick + self.target_period_ticks, move_tick)

    def _crash_ticks(
        self,
        scaled: np.ndarray,
        reach: np.ndarray,
        crashed: np.ndarray,
        gust_velocity: np.ndarray | None,
    ) -> np.ndarray:
        """Move crashed agents to where they left the arena, the others to the step's
        end; return the ticks each agent lived."""
        ticks, m = self.action_repeat, self._step_matrix
        outside = (reach[crashed] > 1.0).reshape(-1, ticks, 2).any(axis=2)
        last = np.full(self.n_agents, ticks - 1)
        last[crashed] = outside.argmax(axis=1)
        agents = np.arange(self.n_agents)
        position = scaled.reshape(self.n_agents, ticks, 2)[agents, last] * _REACH + _CENTRE
        velocity = m.grow[last, None] * self.vel + m.h[last, None] * self._accel
        if gust_velocity is not None:
            velocity[:, 0] += gust_velocity[last, agents]
        self.pos[:] = position
        self.vel[:] = velocity
        return last + 1
