"""The games stepped in halves (training/envs/half_steps.py, rollout_steps.play_in_halves):
real bundled games in their camera mode over TCP, through the wrappers a picture run has."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from game_bridge.launcher import LaunchConfig
from game_bridge.vec_env import GameVecEnv
from tests.conftest import LANDER_GAME
from training.envs.game_monitor import GameMonitor
from training.envs.half_steps import GameHalves, game_halves
from training.ppo.lean_ppo import _play
from training.ppo.rollout_steps import Played, StepDone, play_in_halves


class _FrameActor:
    """Actions, values and log-probabilities as a fixed function of each frame: the two
    loops then play the same games the same way, step for step."""

    def act(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows = obs.reshape(len(obs), -1).astype(np.int64)
        # small pushes, uniform in [-0.35, 0.35) seeded by the frame: some agents land or
        # crash, some fly until the time limit
        actions = np.stack(
            [
                np.random.default_rng(int(row @ np.arange(row.size))).uniform(-0.35, 0.35, 2)
                for row in rows
            ]
        ).astype(np.float32)
        return actions, self.values(obs), -np.abs(actions).sum(axis=1)

    def values(self, obs: np.ndarray) -> np.ndarray:
        return (obs.reshape(len(obs), -1).mean(axis=1) / 10.0).astype(np.float32)


class _Model:
    """What ``_play`` reads of a model: where the games are, the discount, the actions."""

    def __init__(self, obs: np.ndarray, space: spaces.Space[Any]) -> None:
        self._last_obs = obs
        self._last_episode_starts = np.ones(len(obs), dtype=bool)
        self.gamma = 0.9
        self.action_space = space


@contextmanager
def _camera_games(base_port: int, instances: int = 4) -> Iterator[VecEnv]:
    """The bundled lander's camera mode, ``instances`` x 2 agents, under a picture run's
    wrappers (the monitor, rewards scaled, frames as they are)."""
    games = GameVecEnv(
        LaunchConfig(
            **LANDER_GAME,
            n_instances=instances,
            base_port=base_port,
            seed=5,
            game_args={"agents": "2", "observation": "pixels"},
            fast_wire=True,
        )
    )
    try:
        yield VecNormalize(GameMonitor(games), norm_obs=False, norm_reward=True, gamma=0.9)
    finally:
        games.close()


def _buffer(env: VecEnv, steps: int) -> RolloutBuffer:
    return RolloutBuffer(steps, env.observation_space, env.action_space, n_envs=env.num_envs)


def _recording(episodes: list[dict[str, Any]]) -> StepDone:
    """A step's callback that keeps the episodes the monitor recorded."""

    def step_done(rewards: np.ndarray, dones: np.ndarray, infos: list[dict[str, Any]]) -> bool:
        episodes.extend(
            {**info["episode"], "cut": info["TimeLimit.truncated"]}
            for info in infos
            if "episode" in info
        )
        return True

    return step_done


def test_the_halves_store_what_one_batch_stores(port_block: Callable[[int], int]) -> None:
    """The same games played by the one-batch loop and by the halves, the same actor: the
    buffers are equal entry for entry (frames, actions, rewards scaled by the same
    wrappers, starts, values, log-probabilities, time limits' cuts bootstrapped), and so
    are the episodes the monitor recorded."""
    runs: list[tuple[RolloutBuffer, Played, list[dict[str, Any]]]] = []
    for halved in (False, True):
        with _camera_games(port_block(4)) as env:
            model = _Model(env.reset(), env.action_space)
            storage = _buffer(env, 450)  # past the 200-step time limit twice
            episodes: list[dict[str, Any]] = []
            step_done = _recording(episodes)
            if halved:
                halves = game_halves(env)
                assert isinstance(halves, GameHalves)
                assert halves.rows == (slice(0, 4), slice(4, 8))
                box = env.action_space
                assert isinstance(box, spaces.Box)
                played = play_in_halves(
                    (model._last_obs, model._last_episode_starts),
                    _FrameActor(),
                    halves,
                    storage,
                    450,
                    step_done,
                    model.gamma,
                    (box.low, box.high),
                )
            else:
                played = _play(model, _FrameActor(), env, storage, 450, step_done)  # type: ignore[arg-type]
            runs.append((storage, played, episodes))
    (one, one_played, one_episodes), (two, two_played, two_episodes) = runs
    assert one_played.whole and two_played.whole
    for name in ("observations", "actions", "rewards", "episode_starts", "values", "log_probs"):
        np.testing.assert_array_equal(getattr(two, name), getattr(one, name), err_msg=name)
    np.testing.assert_array_equal(two_played.obs, one_played.obs)
    np.testing.assert_array_equal(two_played.last_values, one_played.last_values)
    assert one.episode_starts[1:].sum() >= 16  # every env's episodes ended, twice
    ends = [(e["r"], e["l"], e["cut"]) for e in one_episodes]
    assert [(e["r"], e["l"], e["cut"]) for e in two_episodes] == ends
    assert sum(cut for *_, cut in ends) >= 4, ends  # time limits' cuts, bootstrapped
    assert sum(not cut for *_, cut in ends) >= 4, ends  # landings and crashes


def test_a_rollout_stopped_midway_leaves_no_reply_unread(port_block: Callable[[int], int]) -> None:
    """A callback that stops the rollout while the next step is on its way: the halves
    read it, so the games answer the next whole step as ever."""
    with _camera_games(port_block(4)) as env:
        obs = env.reset()
        halves = game_halves(env)
        assert halves is not None
        box = env.action_space
        assert isinstance(box, spaces.Box)
        calls: list[int] = []

        def stop_at_five(rewards: np.ndarray, dones: np.ndarray, infos: list[dict]) -> bool:
            calls.append(len(calls))
            return len(calls) < 5

        played = play_in_halves(
            (obs, np.ones(8, dtype=bool)),
            _FrameActor(),
            halves,
            _buffer(env, 20),
            20,
            stop_at_five,
            0.9,
            (box.low, box.high),
        )
        assert not played.whole and len(calls) == 5
        after, rewards, _, infos = env.step(np.zeros((8, 2), dtype=np.float32))
        assert after.shape == (8, 3, 36, 48) and after.dtype == np.uint8
        assert rewards.shape == (8,) and len(infos) == 8


@pytest.mark.parametrize("case", ["one game", "frames running-normalized"])
def test_halves_only_where_the_wrappers_cannot_tell(
    port_block: Callable[[int], int], case: str
) -> None:
    """One game process has no halves; nor does a run whose observations the wrappers
    change (running normalization sees the whole batch at once)."""
    with _camera_games(port_block(2), instances=1 if case == "one game" else 2) as env:
        if case == "one game":
            assert game_halves(env) is None
        else:
            assert game_halves(env) is not None
            assert game_halves(VecNormalize(env.venv, norm_obs=True)) is None
