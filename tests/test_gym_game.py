"""Any Gymnasium environment as a game (``--game gym:ENV_ID``): real game processes over
real TCP serve copies of the environment, PPO learns on them with lander's defaults, the
bot is exported (its parity proved on what the run saw), evaluated against the
environment's own threshold and played into a picture; bad ids and settings are one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from gymnasium import spaces

from game_bridge.launcher import LaunchConfig
from game_bridge.vec_env import GameVecEnv
from games import game_entry, gym_env_factory, launch_settings
from games.gym.view import action_scale, make_view
from tests.conftest import find_free_port_block, godot_style, lander, train_briefly


def test_cartpole_learns_over_tcp_and_its_bot_is_scored_and_played(tmp_path: Path) -> None:
    trained = lander(
        tmp_path, "train", "pole", "--game", "gym:CartPole-v1", "--timesteps", "120000",
        "--no-git", "--port", str(find_free_port_block(4)), timeout=300,
    )  # fmt: skip
    output = trained.stdout + trained.stderr
    assert trained.returncode == 0, output
    assert "gym:CartPole-v1 instance(s) from port" in output
    spec = json.loads((tmp_path / "bots" / "pole.json").read_text())
    assert spec["trained_with"]["game"] == "gym:CartPole-v1"
    bot = str(tmp_path / "bots" / "pole.json")
    scored = lander(tmp_path, "eval", bot, "--episodes", "20")
    assert scored.returncode == 0, scored.stdout + scored.stderr
    mean = float(scored.stdout.split("mean_reward=")[1].split()[0])
    score = float(scored.stdout.split("normalized_score=")[1].split()[0])
    assert mean >= 300, scored.stdout  # CartPole's threshold is 475; random play about 22
    assert score == pytest.approx((mean - 22.0) / (475.0 - 22.0), abs=0.05)
    picture = tmp_path / "pole.gif"
    played = lander(tmp_path, "play", bot, "--record", str(picture), "--seconds", "2")
    assert played.returncode == 0, played.stdout + played.stderr
    assert picture.read_bytes()[:6] == b"GIF89a"


@pytest.mark.parametrize("repeat", [None, 2])
def test_a_time_limit_is_a_truncation_with_its_terminal_observation(
    port_block, repeat: int | None
) -> None:
    """Pendulum's 200 steps over TCP; with ``--action-repeat 2`` each step holds the action
    for two of the game's, so the time limit comes at the 100th."""
    env = GameVecEnv(
        LaunchConfig(
            **launch_settings("gym:Pendulum-v1"),
            n_instances=2,
            base_port=port_block(2),
            game_args={"agents": "3"},
            action_repeat=repeat,
        )
    )
    limit = 200 // (repeat or 1)
    try:
        space = env.observation_space
        assert isinstance(space, spaces.Box)
        assert space.low.tolist() == [-1.0, -1.0, -8.0] and space.high.tolist() == [1, 1, 8]
        assert env.action_space == spaces.Box(-1.0, 1.0, (1,), np.float32)
        env.reset()
        for step in range(limit):  # Pendulum's time limit
            obs, _rewards, dones, infos = env.step(np.ones((6, 1), dtype=np.float32))
            assert dones.all() == (step == limit - 1)
        assert all(info["TimeLimit.truncated"] for info in infos)
        ended = np.stack([info["terminal_observation"] for info in infos])
        assert ended.shape == (6, 3) and not np.array_equal(ended, obs)  # a new episode began
    finally:
        env.close()


def test_in_process_shows_the_spaces_the_games_declare() -> None:
    env = gym_env_factory("gym:LunarLanderContinuous-v3", {})()
    view = make_view("LunarLanderContinuous-v3", {})
    assert env.observation_space == view.observation_space
    assert env.action_space == spaces.Box(-1.0, 1.0, (2,), np.float32)
    entry = game_entry("gym:LunarLanderContinuous-v3")
    assert entry.race_reward == 200.0 and entry.observation_size == 8


def test_box_actions_are_rescaled_from_the_unit_range_to_the_environments_own() -> None:
    view = make_view("Pendulum-v1", {})  # torque in [-2, 2]
    assert view.env_action(np.array([1.0])).tolist() == [2.0]
    assert view.env_action(np.array([-0.5])).tolist() == [-1.0]
    assert view.env_action(np.array([7.0])).tolist() == [2.0]  # clipped, as the bridge clips


def test_bounds_that_hold_zero_keep_the_policys_zero_as_the_environments() -> None:
    """CarRacing's steering is [-1, 1], its gas and brake [0, 1]: a policy's 0 is no gas and
    no brake (each side scaled to its own bound), not half of each; bounds without 0 are
    spread from their middle; an unbounded side passes as it is."""
    low, high = np.array([-1.0, 0.0, 0.0, 1.0, -np.inf]), np.array([1.0, 1.0, 1.0, 3.0, np.inf])
    centre, below, above = action_scale(low, high)

    def scaled(action: list[float]) -> list[float]:
        values = np.asarray(action)
        return (centre + np.where(values < 0, below, above) * values).tolist()

    assert scaled([0.0, 0.0, 0.0, 0.0, 0.0]) == [0.0, 0.0, 0.0, 2.0, 0.0]
    assert scaled([-1.0, -1.0, -0.5, -1.0, -3.0]) == [-1.0, 0.0, 0.0, 1.0, -3.0]
    assert scaled([1.0, 1.0, 0.25, 1.0, 3.0]) == [1.0, 1.0, 0.25, 3.0, 3.0]
    view = make_view("CarRacing-v3", {})
    assert view.env_action(np.zeros(3)).tolist() == [0.0, 0.0, 0.0]
    assert view.env_action(np.array([-0.5, 0.5, -1.0])).tolist() == [-0.5, 0.5, 0.0]
    view.close()


def test_keyword_arguments_reach_the_environment() -> None:
    view = make_view("LunarLander-v3", {"continuous": True})
    assert isinstance(view.action_space, spaces.Box)
    assert game_entry("gym:LunarLander-v3").record_name({"continuous": "True"}) == (
        "gym:LunarLander-v3 (continuous=True)"
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--game", "gym:NoSuchGame-v0"], "NoSuchGame"),
        (["--game", "gym:CartPole-v1", "--game-arg", "wings=3"], "wings"),
        (["--game", "gym:"], "gym:ENV_ID for a Gymnasium environment"),
        # Gymnasium's module:Env form imports a module: not from a name in a file from elsewhere
        (["--game", "gym:os:CartPole-v1"], "gym:ENV_ID for a Gymnasium environment"),
    ],
)
def test_a_game_gymnasium_cannot_serve_is_one_line(
    tmp_path: Path, args: list[str], said: str
) -> None:
    refused = lander(tmp_path, "train", "bad", *args, "--no-git", "--timesteps", "64")
    assert refused.returncode != 0
    assert said in refused.stdout + refused.stderr
    assert "Traceback" not in refused.stdout + refused.stderr
    assert not (tmp_path / "checkpoints" / "bad").exists()


def test_the_export_proves_parity_on_observations_the_run_saw(tmp_path: Path) -> None:
    from training.bots.parity import parity_observations
    from training.ppo.inference import load_for_inference

    trained = lander(
        tmp_path, "train", "moon", "--game", "gym:LunarLander-v3", "--timesteps", "8192",
        "--no-git", "--port", str(find_free_port_block(4)), timeout=300,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stdout + trained.stderr
    model, normalizer = load_for_inference(tmp_path / "checkpoints" / "moon" / "final.zip")
    assert normalizer is not None and normalizer.norm_obs
    samples = parity_observations(model, normalizer, 4000, 0)
    seen = samples[:3000]
    mean = np.asarray(normalizer.obs_rms.mean)
    spread = np.sqrt(np.asarray(normalizer.obs_rms.var))
    # Centred on the run's observations, as wide as they were (out to several spreads),
    # not spread evenly over LunarLander's declared box (velocities of +-10).
    assert np.all(np.abs(np.median(seen, axis=0) - mean) < 0.3 * spread + 1e-6)
    assert np.allclose(seen.std(axis=0), 3 * spread, rtol=0.15)


BOUNDS = [
    # (the observation's declared bounds, trains?, what the one line says when not)
    ({"low": [-1, None, -2, 0], "high": [1, None, 2, 1e39]}, True, ""),
    ({"low": None, "high": None}, True, ""),
    ({"low": [[-1, -1], [-1, -1]], "high": [[1, 1], [1, 1]]}, True, ""),
    ({"low": [0, 0, 3, 0], "high": [1, 1, 1, 1]}, False, "declares low 3 above high 1"),
    ({"low": "low"}, False, "low bound must be a number or null, got 'low'"),
    ({"high": [1, 1]}, False, "declares 2 high bounds for 4 values"),
]


@pytest.mark.parametrize(("bounds", "trains", "said"), BOUNDS)
def test_a_game_declaring_bounds_per_value_or_null_trains_and_bad_ones_are_one_line(
    tmp_path: Path, bounds: dict, trains: bool, said: str
) -> None:
    """A game process over TCP (the Godot-style test game) declaring its observation's
    bounds as Gymnasium spaces have them: per value, nested, null; or broken."""
    game = godot_style(tmp_path, f"--bounds={json.dumps(bounds)}")
    result = train_briefly(tmp_path, "bounded", game, find_free_port_block(1), "--no-git")
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    if trains:
        assert result.returncode == 0, output
        assert (tmp_path / "bots" / "bounded.json").exists()
        return
    assert result.returncode != 0
    (line,) = [text for text in result.stderr.splitlines() if said in text]
    assert "game instance 0" in line


DECLARED = [
    # (the game's arguments, what the one line says)
    (['--bounds={"size": [1e9]}'], "size of 'obs' is 1,000,000,000: lander takes at most"),
    (
        ['--bounds={"size": [100000, 100000, 3]}'],
        "declares 30,000,000,000 values per agent (shape [100000, 100000, 3])",
    ),
    (
        ["--declared_agents=10000000000"],
        "n_agents is 10,000,000,000: one step of that many agents needs at least",
    ),
]


@pytest.mark.parametrize(("args", "said"), DECLARED)
def test_a_game_declaring_sizes_beyond_the_machine_is_one_named_line(
    tmp_path: Path, args: list[str], said: str
) -> None:
    """Issue 46, finding 3: a game process declaring a size of 10^9, a camera of 3 x 10^10
    values or more agents than this machine's memory holds is one named protocol fault
    before any array is made (it was a MemoryError); the line has the figures."""
    game = godot_style(tmp_path, *args)
    result = train_briefly(tmp_path, "huge", game, find_free_port_block(1), "--no-git")
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in output, output
    assert "MemoryError" not in output
    (line,) = [text for text in result.stderr.splitlines() if said in text]
    assert "game instance 0" in line


def test_a_discrete_observation_trains_and_exports_one_hot(tmp_path: Path) -> None:
    """FrozenLake observes a square's number: the gym game sends it one-hot (what SB3's
    policies make of a Discrete), so the run's bot is vectors, which every player reads."""
    trained = lander(
        tmp_path, "train", "lake", "--game", "gym:FrozenLake-v1", "--in-process",
        "--timesteps", "2048", "--no-git",
    )  # fmt: skip
    output = trained.stdout + trained.stderr
    assert trained.returncode == 0, output
    assert "run lake finished" in output and "Traceback" not in output
    assert "exported bots/lake.json" in output, output
    bot = json.loads((tmp_path / "bots" / "lake.json").read_text())
    assert bot["observation"]["size"] == 16, "the 16 squares, one-hot"
