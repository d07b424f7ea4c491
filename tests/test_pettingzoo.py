"""PettingZoo's many-agent games (``--game pz:MODULE``): agents alike share one policy,
two rivals train by self-play, turns and agents that leave are marked and teach nothing,
and the moves a game forbids (``action_mask``) are never picked, in training and by the
exported bot."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo import ParallelEnv

from game_bridge.bot_runner import BotRunner
from game_bridge.protocol import GONE, IDLE
from games.pz.client import MASK_KEY, PettingZooGame
from games.pz.tables import Table, make_env
from tests.conftest import find_free_port_block, lander

TICTACTOE = "pz:pettingzoo.classic.tictactoe_v3"
SPREAD = "pz:mpe2.simple_spread_v3"


class Leaving(ParallelEnv):  # type: ignore[misc]
    """Three runners; ``runner_1`` leaves after two steps, the game ends after four."""

    metadata: ClassVar[dict[str, str]] = {"name": "leaving_v0"}

    def __init__(self) -> None:
        self.possible_agents = ["runner_0", "runner_1", "runner_2"]
        self.t = 0

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        return spaces.Box(0.0, 10.0, (1,), np.float32)

    def action_space(self, agent: str) -> spaces.Space[Any]:
        return spaces.Discrete(2)

    def _obs(self) -> dict[str, np.ndarray]:
        return {a: np.array([self.t], np.float32) for a in self.agents}

    def reset(self, seed: int | None = None, options: Any = None) -> tuple[Any, Any]:
        self.agents = list(self.possible_agents)
        self.t = 0
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, int]) -> tuple[Any, ...]:
        assert set(actions) == set(self.agents), "only live agents are asked to act"
        self.t += 1
        obs = self._obs()
        rewards = {a: 1.0 for a in self.agents}
        ended = {a: self.t >= 4 or (a == "runner_1" and self.t == 2) for a in self.agents}
        truncated = dict.fromkeys(self.agents, False)
        self.agents = [a for a in self.agents if not ended[a]]
        return obs, rewards, ended, truncated, {a: {} for a in ended}


def _step(game: PettingZooGame, choice: int = 0) -> dict[str, Any]:
    """One step of every chair, its numbers as lists (as the JSON on the wire reads)."""
    reply = game.step({"action": [{"action": choice}] * len(game.slots)})
    return json.loads(json.dumps(reply, default=lambda value: np.asarray(value).tolist()))


def test_an_agent_that_leaves_ends_once_then_waits_gone_until_its_table_ends() -> None:
    game = PettingZooGame([Table(Leaving(), True)], seed=0)
    info = game.env_info()
    assert info["agent_policy_names"] == ["runner"] * 3, "agents alike share one policy"
    game.reset()
    first, second = _step(game), _step(game)
    assert first["done"] == [False, False, False]
    assert second["done"] == [False, True, False], "it ends on the step it leaves"
    assert second["info"][1]["terminal_observation"] == {"obs": [2.0]}
    third = _step(game)
    assert third["done"] == [False, False, False]
    assert third["info"][1] == {GONE: True} and third["reward"][1] == 0.0
    last = _step(game)
    assert last["done"] == [True, True, True], "the table ends for every chair, and restarts"
    assert last["info"][1][GONE] is True and GONE not in last["info"][0]
    assert last["obs"][0] == {"obs": [0.0]}


def _play(game: PettingZooGame, first: int, second: int) -> dict[str, Any]:
    reply = game.step({"action": [{"action": first}, {"action": second}]})
    return json.loads(json.dumps(reply, default=lambda value: np.asarray(value).tolist()))


def test_turns_mark_the_agent_not_to_move_idle_and_it_is_told_every_move() -> None:
    game = PettingZooGame([Table(*make_env("pettingzoo.classic.tictactoe_v3", {}))], seed=0)
    assert game.env_info()["agent_policy_names"] == ["player_a", "player_b"]
    reset = json.loads(json.dumps(game.reset(), default=lambda v: np.asarray(v).tolist()))
    assert reset["obs"][0][MASK_KEY] == [1.0] * 9 and reset["obs"][1][MASK_KEY] == [1.0] * 9
    moved = _play(game, 0, 8)
    assert IDLE not in moved["info"][0] and moved["info"][1][IDLE] is True
    assert moved["obs"][1][MASK_KEY][0] == 0.0, "the corner is taken: not a move any more"
    # Play the game out: X (chair a) takes the top row while O answers in the middle row.
    for x, o in ((1, 3), (2, 4)):
        _play(game, o, o)  # O's turn
        last = _play(game, x, x)  # X's turn
    assert last["done"] == [True, True] and last["reward"] == [1.0, -1.0]
    assert game.seats(0) == ["player_2", "player_1"], "the rivals change chairs every game"


def test_idle_rows_teach_the_policy_nothing_and_gone_rows_nothing_at_all() -> None:
    from training.envs.game_monitor import IdleRows

    rng = np.random.default_rng(0)
    buffer = SimpleNamespace(
        buffer_size=4,
        advantages=rng.normal(size=(4, 2)).astype(np.float32),
        returns=rng.normal(size=(4, 2)).astype(np.float32),
        values=rng.normal(size=(4, 2)).astype(np.float32),
    )
    model = SimpleNamespace(rollout_buffer=buffer, normalize_advantage=True)
    rows = IdleRows()
    rows.model = model  # type: ignore[assignment]
    rows._on_training_start()
    rows._on_rollout_start()
    marks = [[{}, {IDLE: True}], [{}, {}], [{GONE: True}, {}], [{GONE: True}, {IDLE: True}]]
    for infos in marks:
        rows.locals = {"infos": infos}
        rows._on_step()
    returns_before = buffer.returns.copy()
    rows._on_rollout_end()
    idle = np.array([[0, 1], [0, 0], [1, 0], [1, 1]], bool)
    assert np.all(buffer.advantages[idle] == 0.0) and rows.rows_idle == 4
    kept = buffer.advantages[~idle]
    assert abs(kept.mean()) < 1e-6 and abs(kept.std() - 1.0) < 1e-3, "normalised among themselves"
    assert model.normalize_advantage is False, "the update must not move the zeros"
    gone = np.array([[0, 0], [0, 0], [1, 0], [1, 0]], bool)
    assert np.array_equal(buffer.returns[gone], buffer.values[gone])
    assert np.array_equal(buffer.returns[~gone], returns_before[~gone]), "idle rows keep theirs"


def test_the_masked_policy_never_samples_a_forbidden_move() -> None:
    import gymnasium
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    from training.ppo.action_heads import MaskedPolicy

    class Masked(gymnasium.Env[Any, int]):
        observation_space = spaces.Dict(
            {MASK_KEY: spaces.Box(0, 1, (5,), np.float32), "cells": spaces.Box(0, 1, (3,))}
        )
        action_space = spaces.Discrete(5)

        def reset(self, **kwargs: Any) -> tuple[Any, Any]:
            return self.observation_space.sample(), {}

        def step(self, action: int) -> tuple[Any, ...]:
            return self.observation_space.sample(), 0.0, False, False, {}

    model = PPO(MaskedPolicy, make_vec_env(Masked, 1), n_steps=16, batch_size=16, seed=0)
    mask = torch.tensor([[0, 1, 0, 0, 1]] * 500, dtype=torch.float32)
    obs = {MASK_KEY: mask, "cells": torch.rand(500, 3)}
    actions, _, log_prob = model.policy(obs)
    assert set(actions.tolist()) <= {1, 4} and torch.isfinite(log_prob).all()
    _, evaluated, entropy = model.policy.evaluate_actions(obs, actions)
    assert torch.allclose(evaluated, log_prob) and torch.all(entropy <= np.log(2) + 1e-5)


def test_a_module_outside_pettingzoo_imports_only_where_its_package_is_named(
    tmp_path: Path,
) -> None:
    refused = lander(tmp_path, "train", "x", "--game", "pz:os.path", "--no-git")
    assert refused.returncode != 0 and "Traceback" not in refused.stdout + refused.stderr
    assert "only where its package is named: --gym-package os" in refused.stderr
    missing = lander(
        tmp_path, "train", "x", "--game", "pz:pettingzoo.classic.nosuch_v0", "--no-git"
    )
    assert missing.returncode != 0 and "Traceback" not in missing.stdout + missing.stderr
    assert "nosuch_v0" in missing.stderr


def _ratings(home: Path, run: str) -> dict[str, float]:
    record = json.loads((home / "checkpoints" / run / "run.json").read_text())
    return dict(record["extra"]["self_play"]["ratings"])


def test_tictactoe_trains_by_self_play_its_rating_rises_and_its_bot_plays_only_legal_moves(
    tmp_path: Path,
) -> None:
    trained = lander(
        tmp_path, "train", "ttt", "--game", TICTACTOE, "--self-play", "--timesteps", "60000",
        "--port", str(find_free_port_block(8)), "--no-git", timeout=600,
    )  # fmt: skip
    output = trained.stdout + trained.stderr
    assert trained.returncode == 0 and "exported bots/ttt.json" in output, output
    ratings = _ratings(tmp_path, "ttt")
    snapshots = [value for name, value in sorted(ratings.items()) if name.startswith("snap_")]
    assert len(snapshots) >= 3 and snapshots[-1] > snapshots[0] + 150, ratings
    bot_path = tmp_path / "bots" / "ttt.json"
    spec = json.loads(bot_path.read_text())
    assert spec["action"]["mask"] == MASK_KEY and spec["version"] == 3, (
        "players of 1 and 2 refuse it"
    )
    bot = BotRunner.from_file(bot_path)
    rng = np.random.default_rng(0)
    mask = (rng.random((2000, 9)) < 0.3).astype(np.float32)
    mask[np.arange(2000), rng.integers(0, 9, 2000)] = 1.0  # one move at least
    cells = rng.integers(0, 2, (2000, 18)).astype(np.float32)
    picked = bot.act({MASK_KEY: mask, "observation": cells})
    assert np.all(mask[np.arange(2000), picked] == 1.0), "a forbidden move was picked"
    scored = lander(tmp_path, "eval", str(bot_path), "--episodes", "50")
    assert scored.returncode == 0, scored.stdout + scored.stderr
    found = re.search(r"mean_reward=(-?[0-9.]+)", scored.stdout)
    assert found and float(found.group(1)) > 0.3, scored.stdout  # against random legal moves
    match = lander(
        tmp_path, "match", str(bot_path), str(bot_path), "--games", "10",
        "--port", str(find_free_port_block(4)),
    )  # fmt: skip
    assert match.returncode == 0 and "10 rounds" in match.stdout, match.stdout + match.stderr
    played = lander(tmp_path, "play", str(bot_path))
    assert played.returncode == 0 and "against random legal moves" in played.stdout


def test_agents_alike_train_one_shared_policy(tmp_path: Path) -> None:
    """simple_spread's three agents, one policy: its reward rises above random play's."""
    trained = lander(
        tmp_path, "train", "spread", "--game", SPREAD, "--timesteps", "300000",
        "--port", str(find_free_port_block(8)), "--no-git", timeout=600,
    )  # fmt: skip
    output = trained.stdout + trained.stderr
    assert trained.returncode == 0 and "exported bots/spread.json" in output, output
    spec = json.loads((tmp_path / "bots" / "spread.json").read_text())
    assert spec["trained_with"]["game"] == SPREAD
    model = lander(tmp_path, "eval", "spread", "--episodes", "40")
    random = lander(tmp_path, "eval", "--policy", "random", "--game", SPREAD, "--episodes", "40")
    assert model.returncode == 0 and random.returncode == 0, model.stderr + random.stderr
    rewards = [
        float(re.search(r"mean_reward=(-?[0-9.]+)", done.stdout).group(1))  # type: ignore[union-attr]
        for done in (model, random)
    ]
    assert rewards[0] > rewards[1] + 3, rewards
    played = lander(tmp_path, "play", str(tmp_path / "bots" / "spread.json"))
    assert played.returncode == 0 and "game(s) of pz:mpe2.simple_spread_v3" in played.stdout


@pytest.mark.parametrize("game", [TICTACTOE])
def test_a_pettingzoo_game_cannot_train_in_process(tmp_path: Path, game: str) -> None:
    refused = lander(tmp_path, "train", "x", "--game", game, "--in-process", "--no-git")
    assert refused.returncode != 0 and "has many agents" in refused.stderr


def test_sides_of_their_own_spaces_train_a_model_each_and_evaluate(tmp_path: Path) -> None:
    """simple_speaker_listener: a speaker and a listener of different spaces are sides with
    models of their own; each exports, and the run's own is scored beside random play."""
    trained = lander(
        tmp_path, "train", "talk", "--game", "pz:mpe2.simple_speaker_listener_v4",
        "--self-play", "--timesteps", "8192", "--port", str(find_free_port_block(8)),
        "--no-git", timeout=600,
    )  # fmt: skip
    output = trained.stdout + trained.stderr
    assert trained.returncode == 0 and "Traceback" not in output, output
    assert "exported bots/talk-listener.json" in output and "evaluation: mean_reward=" in output
    played = lander(tmp_path, "play", str(tmp_path / "bots" / "talk.json"))
    assert "beside random play of the other sides" in played.stdout, played.stdout + played.stderr
