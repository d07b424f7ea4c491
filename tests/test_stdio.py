"""The stdio transport with real game processes: the same fault cases as the TCP
bridge (exit, hang, garbage, an oversize line, a trickle, a closed output, a wrong
agent count), restarts, close and orphan handling, and the two bundled games giving
the same steps on either transport."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from game_bridge.launcher import LaunchConfig
from game_bridge.vec_env import GameVecEnv
from games import launch_settings
from tests.conftest import LANDER_GAME, find_free_port_block


@pytest.mark.parametrize("game", ["stroke", "lander"])
def test_a_bundled_game_steps_the_same_over_stdio_and_tcp(game: str) -> None:
    """The transport carries the messages and changes nothing in them."""
    actions = np.random.default_rng(0).uniform(-1, 1, (150, 6, 2)).astype(np.float32)
    outcomes = []
    for transport in ("stdio", "tcp"):
        env = GameVecEnv(
            LaunchConfig(
                command=launch_settings(game)["command"],
                n_instances=2,
                transport=transport,
                base_port=find_free_port_block(2),
                game_args={"agents": "3"},
            )
        )
        try:
            steps = [env.reset()]
            for action in actions:
                obs, reward, done, _ = env.step(action)
                steps.append(np.concatenate([obs.ravel(), reward, done]))
            outcomes.append(np.concatenate([np.ravel(s) for s in steps]))
        finally:
            env.close()
    assert np.array_equal(outcomes[0], outcomes[1])


def test_a_stray_print_of_a_stdio_game_lands_in_its_log(tmp_path: Path) -> None:
    """The game side points file descriptor 1 at stderr once the channel holds stdout: a
    print in game code cannot corrupt the protocol."""
    script = (
        "import sys\n"
        "from game_bridge.game_loop import read_arguments, run_game\n"
        "from games.stroke.client import StrokeGame\n"
        "class Chatty(StrokeGame):\n"
        "    def step(self, message):\n"
        "        print('a stray print from the game')\n"
        "        return super().step(message)\n"
        "sys.exit(run_game(Chatty(2, 0, 'step'), read_arguments(sys.argv[1:]), 'chatty', False))\n"
    )
    env = GameVecEnv(
        LaunchConfig(
            command=[sys.executable, "-c", script],
            transport="stdio",
            output_dir=tmp_path,
            game_args={"agents": "2"},
        )
    )
    try:
        env.reset()
        for _ in range(5):
            env.step(np.zeros((2, 2), dtype=np.float32))
    finally:
        env.close()
    assert "a stray print from the game" in (tmp_path / "game_0.log").read_text()


def test_a_stdio_run_refuses_a_cluster_and_the_fork_server() -> None:
    from game_bridge.errors import LaunchError

    config = LaunchConfig(**LANDER_GAME, transport="stdio")
    assert not config.forks_games and not config.offers_fast_wire
    assert "--transport=stdio" in config.arguments(0)
    assert not any(arg.startswith("--port=") for arg in config.arguments(0))
    with pytest.raises(LaunchError, match="transport must be one of tcp, stdio, openenv"):
        LaunchConfig(**LANDER_GAME, transport="pipes")


def test_the_minimal_game_in_the_docs_trains_over_stdio(tmp_path: Path) -> None:
    """docs/protocol.md's game, copied as a user would, trains with ``--transport stdio``."""
    import json

    from game_bridge.bot_runner import BotRunner
    from tests.conftest import REPO_ROOT, lander

    text = (REPO_ROOT / "docs" / "protocol.md").read_text()
    block = text.split("<!-- stdio-example -->", 1)[1].split("```python\n", 1)[1]
    game = tmp_path / "echo_game.py"
    game.write_text(block.split("```", 1)[0].replace("/usr/bin/env python3", sys.executable))
    game.chmod(0o755)
    result = lander(
        tmp_path, "train", "echo", "--game-bin", str(game), "--transport", "stdio",
        "--timesteps", "100000", "--n-parallel", "4", "--no-git",
        # A game without a reference: its evaluations run on one more instance of it
        # through the bridge, and their mean reward (random: about -13) ends the run.
        "--stop-at-score", "-4", "--eval-every", "4096", timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 echo_game.py instance(s) on stdio" in result.stdout
    record = json.loads((tmp_path / "checkpoints" / "echo" / "run.json").read_text())
    assert record["config"]["transport"] == "stdio" and record["status"] == "finished"
    assert record["extra"]["stopped_at_score"]["score"] >= -4
    assert record["total_timesteps"] < 100_000
    bot = BotRunner.from_file(tmp_path / "bots" / "echo.json")
    targets = np.linspace(-0.9, 0.9, 19, dtype=np.float32).reshape(-1, 1)
    assert np.abs(bot.act(targets).ravel() - targets.ravel()).mean() < 0.25  # it learned
    # Evaluated on its own game, over the transport it trained with; a random policy too.
    evaluated = lander(tmp_path, "eval", "echo", "--episodes", "8")
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    learned = float(evaluated.stdout.split("mean_reward=")[1].split()[0])
    floor = lander(
        tmp_path, "eval", "--policy", "random", "--game-bin", str(game), "--transport", "stdio",
        "--episodes", "8",
    )  # fmt: skip
    assert floor.returncode == 0, floor.stdout + floor.stderr
    assert learned > float(floor.stdout.split("mean_reward=")[1].split()[0]) + 5
