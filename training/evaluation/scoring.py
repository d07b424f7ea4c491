"""Scoring a policy on a bundled game: mean and spread of episode returns,
success rate, and a normalized score where the random policy is 0 and the
game's reference controller is 1 (each game's scorer, from its registry entry,
plays the episodes and names both baselines).

Episodes run batched in-process on the game's own physics, one agent per
episode, so an evaluation of 64 episodes costs about one episode of wall time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # only types here: a bot is evaluated on a light install, without torch
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from game_bridge.frame_stack import FrameStack, StackedPolicy, start_episodes
from games import DEFAULT_GAME, game_entry
from games.spec import Policy, Scorer


@dataclass(frozen=True)
class EvalResult:
    """The outcome of an evaluation.

    :param mean_reward: mean episode return.
    :param std_reward: standard deviation of episode returns.
    :param success_rate: fraction of episodes ending on target; None when the game never
        reported success (``info["is_success"]``): then no rate is printed at all.
    :param episodes: episodes played.
    :param normalized_score: (mean - random) / (reference - random); None off the bundled games.
    """

    mean_reward: float
    std_reward: float
    success_rate: float | None
    episodes: int
    normalized_score: float | None = None

    def line(self) -> str:
        """The one-line summary ``lander eval`` prints."""
        score = "n/a" if self.normalized_score is None else f"{self.normalized_score:.3f}"
        success = "" if self.success_rate is None else f"success_rate={self.success_rate:.3f} "
        return (
            f"mean_reward={self.mean_reward:.2f} std_reward={self.std_reward:.2f} "
            f"{success}normalized_score={score}"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


GameSettings = Scorer
"""The settings of a bundled game, which knows how to play episodes in-process."""


def game_settings(
    game: str, game_args: Mapping[str, str], action_repeat: int | None = None
) -> GameSettings:
    """The evaluation settings of the bundled ``game`` as a run configured it."""
    return game_entry(game).scorer(game_args, action_repeat)


BASELINE_PRECISION = 0.01
"""The random policy's mean is known well enough against a threshold once its standard
error is this share of the way from it to the threshold: the normalized score's own
standard error from the baseline, about 0.01."""
FIRST_ROUND = 5
"""Episodes of the random policy's first round against a threshold (later rounds double)."""


def random_mean_against(
    settings: GameSettings, policy: Policy, threshold: float, episodes: int, seed: int
) -> float:
    """The random policy's mean return on a game whose score 1 is a threshold (a ``gym:``
    game), from at most ``episodes`` episodes: played in doubling rounds, stopping once the
    mean is within :data:`BASELINE_PRECISION` of the way to the threshold.

    Why not all of them: such a game's episodes can be dear. 200 random CarRacing episodes
    render 200,000 frames, about 20 minutes here, for a mean that 5 episodes give within
    0.7% of its way to 900; ``lander eval car --episodes 2`` would wait on them. The seeds
    are those one round of ``episodes`` would play, so the mean depends only on the game.
    """
    played = np.empty(0)
    while len(played) < episodes:
        size = min(max(FIRST_ROUND, len(played)), episodes - len(played))
        returns, _ = settings.play(policy, size, seed + len(played))
        played = np.concatenate([played, returns])
        if len(played) < 2:
            continue
        error = float(played.std(ddof=1)) / np.sqrt(len(played))
        if error <= BASELINE_PRECISION * abs(threshold - float(played.mean())):
            break
    return float(played.mean())


@cache
def baselines(episodes: int, seed: int, settings: GameSettings) -> tuple[float, float | None]:
    """Mean returns of the random policy and of the reference controller (or the return a
    game without one counts as solved; None where it names none, and then the random
    policy plays nothing: 200 random Atari games would cost a minute for a score of n/a).
    Against a threshold the random policy plays only the episodes its mean needs
    (:func:`random_mean_against`)."""
    random_policy, reference = settings.baseline_policies(np.random.default_rng(seed))
    if reference is None:
        return float("nan"), None
    if isinstance(reference, float | int):
        threshold = float(reference)
        return random_mean_against(settings, random_policy, threshold, episodes, seed), threshold
    random_returns, _ = settings.play(random_policy, episodes, seed)
    reference_returns, _ = settings.play(reference, episodes, seed)
    return float(random_returns.mean()), float(reference_returns.mean())


def normalized_score(
    mean_reward: float, settings: GameSettings, episodes: int = 200, seed: int = 12345
) -> float | None:
    """Where ``mean_reward`` lies between the random policy (0) and the reference controller
    (1); None on a game with no known score 1."""
    random_mean, reference_mean = baselines(episodes, seed, settings)
    if reference_mean is None or reference_mean == random_mean:
        return None
    return (mean_reward - random_mean) / (reference_mean - random_mean)


def evaluate_in_process(
    policy: Policy, episodes: int, seed: int = 1000, settings: GameSettings | None = None
) -> EvalResult:
    """Evaluate ``policy`` on ``episodes`` episodes of a bundled game (the default game's
    default settings unless given)."""
    settings = settings or game_settings(DEFAULT_GAME, {})
    start_episodes(policy)
    returns, successes = settings.play(policy, episodes, seed)
    mean = float(returns.mean())
    return EvalResult(
        mean,
        float(returns.std()),
        None if successes is None else float(successes.mean()),
        episodes,
        normalized_score(mean, settings),
    )


def model_policy(
    model: BaseAlgorithm, normalizer: VecNormalize | None = None, *, stacked: bool = False
) -> Policy:
    """The deterministic policy of ``model`` as a batch function, normalising observations
    if needed. A model trained on stacked camera frames (``--frame-stack``) keeps the
    game's frames itself (tell it where episodes start: :func:`start_episodes`).

    :param stacked: the observations come stacked already (an export's samples).
    """

    def act(obs: np.ndarray) -> np.ndarray:
        inputs = normalizer.normalize_obs(obs) if normalizer is not None else obs
        actions, _ = model.predict(inputs, deterministic=True)
        return np.asarray(actions)

    player = getattr(model.policy, "player", None)
    if callable(player):  # a policy with memory (training/ppo/recurrent_policy.py)
        prepare = normalizer.normalize_obs if normalizer is not None else None
        return player(model.action_space, prepare)

    extractor = model.policy.features_extractor
    frames = int(getattr(extractor, "frames", 1))
    if stacked or frames == 1:
        return act
    return StackedPolicy(act, FrameStack(frames, getattr(extractor, "camera_keys", ())))


def evaluate_through_bridge(policy: Policy, env: VecEnv, episodes: int) -> EvalResult:
    """Evaluate on any protocol game: play until ``episodes`` episodes have ended.

    The games keep running their own episodes, so the first ``episodes`` to end
    are counted, whichever agents they came from. No normalized score: only the
    bundled game has known baselines.
    """
    running = np.zeros(env.num_envs)
    returns: list[float] = []
    successes: list[bool] = []
    reported = False  # a game that never says is_success has no success rate
    obs = env.reset()
    start_episodes(policy)
    while len(returns) < episodes:
        obs, rewards, dones, infos = env.step(policy(obs))  # an array, or a dict of keys
        start_episodes(policy, dones)
        running += rewards
        for index in np.flatnonzero(dones):
            returns.append(float(running[index]))
            reported = reported or "is_success" in infos[index]
            successes.append(bool(infos[index].get("is_success", False)))
            running[index] = 0.0
    kept = np.asarray(returns[:episodes])
    rate = float(np.mean(successes[:episodes])) if reported else None
    return EvalResult(float(kept.mean()), float(kept.std()), rate, episodes, None)
