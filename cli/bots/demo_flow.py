"""``lander record``: a demonstration file from a bot, a run or a reference controller
playing through the real bridge (``training.demos.recording``), in lander's own layout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from cli.bots.bot_flow import bot_path, checkout_game_for
from cli.common.console import console, fail
from game_bridge.bot_runner import BotRunner
from game_bridge.launcher import LaunchConfig
from games import game_entry
from games.spec import Policy
from training.bots.run_bots import bot_facts
from training.config import check_bundled_game_args
from training.demos.files import write_demos
from training.demos.recording import record_episodes
from training.envs.game_launch import game_launch
from training.errors import game_not_given
from training.evaluation.records import checkout_relative, game_name
from training.evaluation.scoring import game_settings


def _player(
    root: Path, target: str | None, policy: str, game: str, game_args: dict[str, str], seed: int
) -> tuple[Policy, dict[str, Any], str]:
    """Who plays, the settings it plays on, and what the file says recorded it."""
    if policy == "reference":
        if target is not None:
            fail("--policy reference plays the game's own controller: drop the bot or run")
        check_bundled_game_args(game, game_args)  # as `train --game-arg` checks them
        settings = game_settings(game, game_args)
        _, reference = settings.baseline_policies(np.random.default_rng(seed))
        if not callable(reference):
            fail(f"{game} has no reference controller to record: record a bot")
        return reference, {"game": game, "game_args": game_args}, "reference"
    if game_args:
        fail("a bot plays on the settings it trained with: drop --game-arg")
    if policy != "model":
        fail(f"--policy must be model or reference, got {policy!r}")
    if target is None:
        fail("name a run or a bot .json file to record (or use --policy reference)")
    path = bot_path(root, target)
    bot = BotRunner.from_file(path)
    trained = bot_facts(bot, path).trained
    # policy(): a bot with memory keeps each agent's state (reset where episodes start)
    return bot.policy(), trained, checkout_relative(root, path) or path.name


def record_and_report(
    root: Path,
    target: str | None,
    policy: str,
    episodes: int,
    out: Path,
    game: str,
    game_args: dict[str, str],
    game_bin: Path | None,
    port: int,
    seed: int,
    agents: int,
) -> None:
    """Record ``episodes`` episodes of a player through the bridge into ``out``."""
    if episodes < 1 or agents < 1:
        fail("--episodes and --agents must be at least 1")
    if out.suffix.lower() != ".json":
        fail(f"--out writes a .json demo file, not {out.name!r}")
    player, trained, recorded_by = _player(root, target, policy, game, game_args, seed)
    named = trained.get("game_bin")
    chosen = game_bin or checkout_game_for(root, trained)
    if chosen is None and isinstance(named, str):
        raise game_not_given(f"bot {target}", named)
    game_args = dict(trained.get("game_args") or {})
    played = str(trained.get("game") or game)
    launch = LaunchConfig(
        **game_launch(played, chosen),
        transport=trained.get("transport") or game_entry(played).transport,
        base_port=port,
        seed=seed,
        action_repeat=trained.get("action_repeat"),
        game_args={**game_args, "agents": str(agents)},
    )
    try:
        recording = record_episodes(player, launch, episodes)
    except ValueError as exc:
        fail(str(exc))
    on = game_name(trained, chosen)
    write_demos(
        out,
        recording.episodes,
        on,
        game_args,
        recording.observation_space,
        recording.action_space,
        recorded_by,
    )
    console.print(
        f"recorded {len(recording.episodes)} episode(s), {recording.steps:,} steps, mean return "
        f"{recording.mean_return:.1f} ({recorded_by} on {on}) in {out}"
    )
