"""Parity: an exported bot proven equal to the model before it is written.

Over 10,000 random observations (2,000 for camera keys; whole episodes for a bot with
memory) the numpy runner and onnxruntime give the same deterministic actions as SB3
``predict``: continuous within 1e-5 (1e-4 with camera keys), discrete identical except at
true ties."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecNormalize

from game_bridge.bot_runner import BotRunner
from game_bridge.frame_stack import start_episodes
from training.bots.onnx_export import OnnxPlayer, onnx_output
from training.bots.plugin_layout import OnnxLayout, action_starts
from training.ppo.camera_policy import is_camera

PARITY_SAMPLES = 10_000


CAMERA_PARITY_SAMPLES = 2_000
"""Observations compared for a policy with camera keys: each is thousands of values."""


CONTINUOUS_TOLERANCE = 1e-5


CAMERA_TOLERANCE = 1e-4
"""A camera bot's: float32 sums over a frame's thousands of pixels (a random frame's map
masses reach hundreds) round at 1e-5 of an action in SB3's own forward; a layout or
scaling error shows at 1e-2 and more."""


TIE_TOLERANCE = 1e-6
"""Two logits closer than this are a tie that float32 rounding breaks arbitrarily
(about 1 observation in 200,000 for a barely trained policy)."""


@dataclass(frozen=True)
class ParityReport:
    """How close an exported policy is to the model.

    :param samples: observations compared.
    :param max_abs_diff: largest difference of a continuous action (0 for discrete).
    :param agreement: discrete: fraction of identical actions among decisive observations
        (1.0 for continuous within tolerance).
    :param near_ties: discrete: observations whose two best logits lie within
        :data:`TIE_TOLERANCE`, where float32 rounding may pick either; not counted.
    """

    samples: int
    max_abs_diff: float
    agreement: float
    near_ties: int = 0
    tolerance: float = CONTINUOUS_TOLERANCE
    """The largest difference of a continuous action that passes."""

    def passed(self, discrete: bool) -> bool:
        """True when the export may be written."""
        return self.agreement == 1.0 if discrete else self.max_abs_diff <= self.tolerance


def parity_observations(
    model: PPO, normalizer: VecNormalize | None, samples: int, seed: int
) -> Any:
    """Observations to prove the export on: an array, or a dict of arrays for several keys.

    Where the run normalised observations, three quarters are drawn from what it saw (its
    running mean and spread, out to several spreads either side: a physics game's
    positions may be hundreds, far outside any box it declares) and a quarter from the
    declared space; elsewhere all from the declared space (10 where it is unbounded)."""
    rng = np.random.default_rng(seed)
    rms = normalizer.obs_rms if normalizer is not None and normalizer.norm_obs else None

    def draw(key: str | None, space: spaces.Space[Any]) -> np.ndarray:
        assert isinstance(space, spaces.Box)
        if is_camera(space):
            # Half any bytes, half dark frames with a few lit pixels (a small game's frame).
            frames = rng.integers(0, 256, (samples, *space.shape), dtype=np.uint8)
            dark = rng.random((samples // 2, *space.shape)) > 0.01
            frames[: samples // 2][dark] = 0
            return frames
        low = np.where(np.isfinite(space.low), space.low, -10.0)
        high = np.where(np.isfinite(space.high), space.high, 10.0)
        drawn = rng.uniform(low, high, (samples, space.shape[0]))
        stats = rms.get(key) if isinstance(rms, dict) else rms
        if stats is not None:
            seen = samples - samples // 4
            spread = np.sqrt(np.asarray(stats.var, dtype=np.float64).reshape(-1))
            drawn[:seen] = np.asarray(stats.mean, dtype=np.float64).reshape(-1) + spread * (
                3.0 * rng.standard_normal((seen, space.shape[0]))
            )
        return drawn.astype(np.float32)

    space = model.observation_space
    if isinstance(space, spaces.Dict):
        return {key: draw(key, sub) for key, sub in space.spaces.items()}
    return draw(None, space)


def decisive(bot: BotRunner, obs: Any) -> np.ndarray:
    """Mask of observations whose discrete choice is not a near-tie (see :data:`TIE_TOLERANCE`),
    among the moves a masked bot may pick."""
    return _decisive_output(bot, bot.masked(bot.network_output(obs), obs))


def _decisive_output(bot: BotRunner, output: np.ndarray) -> np.ndarray:
    """:func:`decisive` of the network's raw outputs."""
    segments = [bot.action_size] if bot.action_type == "discrete" else bot.nvec
    mask = np.ones(len(output), dtype=bool)
    for start, stop in itertools.pairwise(np.cumsum([0, *segments])):
        ranked = np.sort(output[:, start:stop], axis=1)
        mask &= ranked[:, -1] - ranked[:, -2] > TIE_TOLERANCE
    return mask


def compare_actions(
    expected: np.ndarray,
    actual: np.ndarray,
    decisive_mask: np.ndarray | None,
    tolerance: float = CONTINUOUS_TOLERANCE,
) -> ParityReport:
    """Compare actions: within tolerance (continuous) or identical where decisive (discrete)."""
    if decisive_mask is not None:
        same = np.all(
            expected.reshape(len(expected), -1) == actual.reshape(len(actual), -1), axis=1
        )
        agreement = float(np.mean(same[decisive_mask])) if decisive_mask.any() else 1.0
        return ParityReport(len(expected), 0.0, agreement, int((~decisive_mask).sum()))
    diff = float(np.max(np.abs(expected.astype(np.float64) - actual.astype(np.float64))))
    tolerance = scaled_tolerance(tolerance, expected)
    return ParityReport(len(expected), diff, 1.0 if diff <= tolerance else 0.0, 0, tolerance)


def scaled_tolerance(tolerance: float, expected: np.ndarray) -> float:
    """``tolerance`` for actions of size up to 1, in proportion beyond: float32 rounds at
    about 1e-7 of a value, so a head whose raw actions reach 300 (clipped later by the game)
    differs from float64 by 3e-5 with nothing wrong (a self-play tier's export failed so)."""
    size = float(np.max(np.abs(expected))) if expected.size else 0.0
    return tolerance * max(1.0, size)


def mixed_parity(
    path: Path, obs: Any, expected: np.ndarray, layout: OnnxLayout, tolerance: float
) -> ParityReport:
    """A mixed policy's ONNX file read with the plugin's rule against the model's actions
    as the games receive them: continuous within tolerance, discrete keys identical
    except where two clipped slots lie within :data:`TIE_TOLERANCE` of each other."""
    actual = layout.plugin_read(onnx_output(path, obs, layout.input_names))
    wanted = layout.game_read(expected)
    discrete_columns, decisive_rows = [], np.ones(len(expected), dtype=bool)
    column = 0
    for start, (_, size, discrete) in action_starts(layout.actions):
        if discrete:
            ranked = np.sort(np.clip(expected[:, start : start + size], -1, 1), axis=1)
            gap = ranked[:, -1] - ranked[:, -2]
            decisive_rows &= (gap == 0) | (gap > TIE_TOLERANCE)
            discrete_columns.append(column)
            column += 1
        else:
            column += size
    continuous = [c for c in range(wanted.shape[1]) if c not in discrete_columns]
    diff = (
        float(np.max(np.abs(wanted[:, continuous] - actual[:, continuous]))) if continuous else 0.0
    )
    same = np.all(wanted[:, discrete_columns] == actual[:, discrete_columns], axis=1)
    agreement = float(np.mean(same[decisive_rows])) if decisive_rows.any() else 1.0
    tolerance = scaled_tolerance(tolerance, wanted[:, continuous])
    if diff > tolerance:
        agreement = 0.0
    return ParityReport(len(expected), diff, agreement, int((~decisive_rows).sum()), tolerance)


EPISODE_STEPS = 100
"""A bot with memory is compared over episodes of this many steps (its state carried from
step to step), not single observations: a state that drifts shows only over time."""


def parity_episodes(obs: np.ndarray) -> np.ndarray:
    """The parity observations as ``[steps, agents, ...]``: episodes of
    :data:`EPISODE_STEPS` played side by side (the agents a batch)."""
    agents = max(1, len(obs) // EPISODE_STEPS)
    steps = len(obs) // agents
    return np.asarray(obs[: steps * agents]).reshape(steps, agents, *np.shape(obs)[1:])


def _restarts(step: int, agents: int) -> np.ndarray | None:
    """Agents whose episode starts anew at ``step`` (every other one half-way through),
    so the comparison covers a state reset while the others carry theirs."""
    if step != EPISODE_STEPS // 2:
        return None
    return np.arange(agents) % 2 == 0


def played_episodes(
    model_player: Any, bot: BotRunner, episodes: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The model's and the bot's actions over whole episodes, each keeping its own state:
    (the model's, the bot's, the decisive mask for a discrete bot)."""
    bot_player = bot.policy()
    start_episodes(model_player)
    start_episodes(bot_player)
    expected, actual, masks = [], [], []
    state: np.ndarray | None = None
    for step, obs in enumerate(episodes):
        restarted = _restarts(step, len(obs))
        if restarted is not None:
            start_episodes(model_player, restarted)
            start_episodes(bot_player, restarted)
            if state is not None:  # the decisive mask's own copy of the state
                state = np.where(restarted[:, None], 0.0, state)
        expected.append(np.asarray(model_player(obs)))
        actual.append(np.asarray(bot_player(obs)))
        if bot.action_type != "continuous":
            output, state = bot.step(obs, state)
            masks.append(_decisive_output(bot, output))
        else:
            state = None
    mask = np.concatenate(masks) if masks else None
    return np.concatenate(expected), np.concatenate(actual), mask


def onnx_episodes(
    path: Path, bot: BotRunner, episodes: np.ndarray, layout: OnnxLayout
) -> np.ndarray:
    """The ONNX file's actions over the same episodes, its state fed back step by step as a
    game keeps it (zeros where an episode starts)."""
    player = OnnxPlayer(path, layout.input_names)
    state = np.zeros((episodes.shape[1], player.units), dtype=np.float32)
    actions = []
    for step, obs in enumerate(episodes):
        restarted = _restarts(step, len(obs))
        if restarted is not None:
            state[restarted] = 0.0
        output, state = player.step(obs, state)
        actions.append(bot.read_actions(output))
    return np.concatenate(actions)
