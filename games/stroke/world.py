"""Batched stroke physics: K pens drawn together with numpy.

A pen moves along a smooth stroke (a sum of a few slow sinusoids per axis, in
[-1, 1]). A sensor reports it late (a few steps of latency), with Gaussian jitter
and a slow sinusoidal drift. Each step the agent sees a short window of raw
samples and its own recent outputs and moves the corrected point (at most
:data:`MOVE` per axis and step; it starts on the sensor's first sample). Moves,
not positions: holding still or moving at random loses the pen, so neither
scores well, while a filter that steers toward its estimate of the pen does. Two reward
modes: ``step`` (minus the distance to the true pen, each step) and ``delayed``
(nothing until the stroke ends, then a score of the whole corrected stroke against
the true one: mean distance and smoothness). Deterministic for a seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

STROKE_STEPS = 120
"""Steps of one stroke (an episode)."""
WINDOW = 8
"""Raw samples the agent sees (the newest last)."""
OUTPUTS = 4
"""Of its own recent outputs the agent sees."""
OBS_SIZE = 2 * WINDOW + 2 * OUTPUTS
ACTION_SIZE = 2
JITTER = 0.15
"""Standard deviation of the sensor's Gaussian jitter."""
DRIFT = 0.04
"""Amplitude of the sensor's slow sinusoidal drift."""
LATENCIES = (2, 3, 4)
"""Steps the sensor lags, drawn per stroke."""
SMOOTHNESS_WEIGHT = 1.0
"""Weight of the mean second difference of the corrected stroke in the delayed score."""
MOVE = 0.1
"""The farthest the corrected point moves per axis in one step (an action of 1)."""
REWARD_MODES = ("step", "delayed")
_COMPONENTS = 3  # sinusoids per axis of a stroke


@dataclass
class StrokeStep:
    """What one step returns for every pen (arrays of length K)."""

    obs: np.ndarray
    reward: np.ndarray
    done: np.ndarray


class StrokeWorld:
    """``n_agents`` pens, each drawing its own strokes.

    :param reward_mode: ``step`` or ``delayed`` (see the module's text).
    """

    def __init__(
        self, n_agents: int = 1, seed: int | None = None, reward_mode: str = "step"
    ) -> None:
        if n_agents < 1:
            raise ValueError(f"n_agents must be at least 1, got {n_agents}")
        if reward_mode not in REWARD_MODES:
            raise ValueError(
                f"reward_mode must be one of {', '.join(REWARD_MODES)}, got {reward_mode!r}"
            )
        self.n = n_agents
        self.delayed = reward_mode == "delayed"
        self.rng = np.random.default_rng(seed)
        margin = max(LATENCIES) + WINDOW
        self._length = STROKE_STEPS + margin  # the stroke is drawn from -margin on
        self._margin = margin
        self.true = np.zeros((n_agents, self._length, 2))
        self.raw = np.zeros((n_agents, self._length, 2))
        self.outputs = np.zeros((n_agents, STROKE_STEPS + OUTPUTS, 2))
        self.t = np.zeros(n_agents, dtype=np.int64)
        self.reset_agents(np.ones(n_agents, dtype=bool))

    def seed(self, seed: int | None) -> None:
        """Restart the random generator (the gymnasium ``reset(seed=...)`` contract)."""
        self.rng = np.random.default_rng(seed)

    def reset_agents(self, mask: np.ndarray) -> None:
        """Give the selected pens a new stroke and a new sensor."""
        count = int(mask.sum())
        if count == 0:
            return
        steps = np.arange(self._length) - self._margin
        # A smooth stroke: a few slow sinusoids per axis, scaled into [-0.8, 0.8].
        freq = self.rng.uniform(0.004, 0.015, (count, 1, 2, _COMPONENTS)) * 2 * np.pi
        phase = self.rng.uniform(0, 2 * np.pi, (count, 1, 2, _COMPONENTS))
        amp = self.rng.uniform(0.2, 1.0, (count, 1, 2, _COMPONENTS))
        waves = amp * np.sin(freq * steps[None, :, None, None] + phase)
        true = 0.8 * waves.sum(axis=3) / amp.sum(axis=3)
        drift_freq = self.rng.uniform(0.005, 0.015, (count, 1, 2)) * 2 * np.pi
        drift = DRIFT * np.sin(
            drift_freq * steps[None, :, None] + self.rng.uniform(0, 6.3, (count, 1, 2))
        )
        latency = self.rng.choice(LATENCIES, count)
        lagged = np.stack(
            [np.roll(stroke, lag, axis=0) for stroke, lag in zip(true, latency, strict=True)]
        )
        raw = lagged + drift + self.rng.normal(0.0, JITTER, true.shape)
        self.true[mask] = true
        self.raw[mask] = np.clip(raw, -1.0, 1.0)
        # The corrected point starts on the sensor's first sample (its history likewise).
        self.outputs[mask] = self.raw[mask][:, self._margin : self._margin + 1]
        self.t[mask] = 0

    def observe(self) -> np.ndarray:
        """Per pen: the last :data:`WINDOW` raw samples (x, y interleaved, newest last), then
        its last :data:`OUTPUTS` outputs; all in [-1, 1], float32."""
        t = np.minimum(self.t, STROKE_STEPS - 1)  # a finished pen shows its last step
        index = t + self._margin  # the sample of this step is raw[index]
        window = index[:, None] + np.arange(-WINDOW + 1, 1)[None, :]
        raw = self.raw[np.arange(self.n)[:, None], window].reshape(self.n, -1)
        mine = t[:, None] + np.arange(OUTPUTS)[None, :]
        outputs = self.outputs[np.arange(self.n)[:, None], mine].reshape(self.n, -1)
        return np.concatenate([raw, outputs], axis=1).astype(np.float32)

    def pens(self) -> np.ndarray:
        """Where each pen truly is at this step (what the corrected point should be)."""
        t = np.minimum(self.t, STROKE_STEPS - 1)
        return self.true[np.arange(self.n), t + self._margin].astype(np.float32)

    def corrected(self) -> np.ndarray:
        """Each pen's corrected point now (its latest output)."""
        return self.outputs[np.arange(self.n), self.t + OUTPUTS - 1].astype(np.float32)

    def step(self, actions: np.ndarray) -> StrokeStep:
        """Move each pen's corrected point by ``MOVE`` x its action (clipped to [-1, 1]), and
        keep it in [-1, 1]."""
        moves = np.clip(np.asarray(actions, dtype=np.float64).reshape(self.n, 2), -1.0, 1.0)
        agents = np.arange(self.n)
        previous = self.outputs[agents, self.t + OUTPUTS - 1]
        points = np.clip(previous + MOVE * moves, -1.0, 1.0)
        self.outputs[agents, self.t + OUTPUTS] = points
        truth = self.true[agents, self.t + self._margin]
        distance = np.hypot(*(points - truth).T)
        self.t += 1
        done = self.t >= STROKE_STEPS
        reward = np.where(done, self.stroke_score(), 0.0) if self.delayed else -distance
        return StrokeStep(self.observe(), reward.astype(np.float32), done)

    def stroke_score(self) -> np.ndarray:
        """The delayed reward of each pen's whole stroke so far: minus the mean distance to
        the true stroke and the weighted mean second difference (jerkiness) of its own.
        Over a full stroke it is on the per-step mode's scale: the sum of its rewards."""
        corrected = self.outputs[:, OUTPUTS : OUTPUTS + STROKE_STEPS]
        truth = self.true[:, self._margin : self._margin + STROKE_STEPS]
        distance = np.hypot(*(corrected - truth).transpose(2, 0, 1)).mean(axis=1)
        second = corrected[:, 2:] - 2 * corrected[:, 1:-1] + corrected[:, :-2]
        jerk = np.hypot(*second.transpose(2, 0, 1)).mean(axis=1)
        return -(distance + SMOOTHNESS_WEIGHT * jerk) * STROKE_STEPS
