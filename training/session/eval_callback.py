"""Evaluation during training (``--eval-every``): the deterministic policy on the
bundled game's physics (or on a game of the user's through the bridge), logged to
TensorBoard as ``eval/*``."""

from __future__ import annotations

from collections.abc import Callable

from stable_baselines3.common.vec_env import VecNormalize

from game_bridge.vec_env import GameVecEnv
from training.config import TrainConfig
from training.envs.environments import launch_config
from training.evaluation.scoring import (
    EvalResult,
    GameSettings,
    Policy,
    evaluate_in_process,
    evaluate_through_bridge,
    model_policy,
)
from training.session.callbacks import EveryNSteps


class PeriodicEvaluation(EveryNSteps):
    """Evaluate every ``every`` steps and log the result.

    :param every: steps between evaluations.
    :param episodes: episodes per evaluation.
    :param settings: the bundled game's settings (which game, and how it was configured),
        or a function that evaluates a policy on that many episodes elsewhere (a
        ``--game-bin`` game through the bridge).
    :param normalizer: observation statistics of the training env, if any.
    :param on_result: receives (timesteps, result) after each evaluation.
    """

    def __init__(
        self,
        every: int,
        episodes: int,
        settings: GameSettings | Callable[[Policy, int], EvalResult],
        normalizer: VecNormalize | None = None,
        on_result: Callable[[int, EvalResult], None] | None = None,
    ) -> None:
        super().__init__(every)
        self.episodes = episodes
        self.settings = settings
        self.normalizer = normalizer
        self.on_result = on_result
        self.results: list[tuple[int, EvalResult]] = []

    def _on_due(self) -> None:
        policy = model_policy(self.model, self.normalizer)
        result = (
            self.settings(policy, self.episodes)
            if callable(self.settings)
            else evaluate_in_process(policy, self.episodes, settings=self.settings)
        )
        self.results.append((self.num_timesteps, result))
        self.logger.record("eval/mean_reward", result.mean_reward)
        self.logger.record("eval/std_reward", result.std_reward)
        if result.success_rate is not None:
            self.logger.record("eval/success_rate", result.success_rate)
        if result.normalized_score is not None:
            self.logger.record("eval/normalized_score", result.normalized_score)
        if self.on_result is not None:
            self.on_result(self.num_timesteps, result)


def bridge_evaluator(
    config: TrainConfig, closers: list[Callable[[], None]]
) -> Callable[[Policy, int], EvalResult]:
    """Evaluation on one more instance of the run's own game (one more session of an
    OpenEnv server), started at the first evaluation on the ports after the training
    games' and kept for the run."""
    games: list[GameVecEnv] = []

    def evaluate(policy: Policy, episodes: int) -> EvalResult:
        if not games:
            launch = launch_config(config)
            launch.n_instances, launch.seed = 1, config.seed + 10_000
            launch.base_port = config.port + config.n_parallel
            games.append(GameVecEnv(launch))
            closers.append(games[0].close)
        return evaluate_through_bridge(policy, games[0], episodes)

    return evaluate
