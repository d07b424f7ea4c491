"""The duel as lander's registry knows it: two landers race for one target."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from game_bridge.bot_runner import BotRunner
from games.duel.chase import ChaseWorld
from games.duel.client import MODES
from games.duel.scoring import ChaseSettings, DuelSettings
from games.duel.world import ACTION_SIZE, OBS_SIZE, OUTCOMES, SIDES, DuelWorld
from games.lander.entry import WEB as LANDER_WEB
from games.spec import BUNDLED_TUNING, GameArgs, GameEntry, PlayOptions, PlayResult


def _in_process_kwargs(game_args: GameArgs, action_repeat: int | None) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"mode": game_args.get("mode", "race")}
    return kwargs | ({"action_repeat": action_repeat} if action_repeat is not None else {})


def _play(bot: BotRunner, options: PlayOptions) -> PlayResult:
    """The bot flies red against the scripted pilot, one round per match: the tally, and a
    picture of both landers' paths."""
    if options.remote is not None:
        raise ValueError("a duel bot plays in the bundled duel game only")
    from games.lander.play import PlayTrace, record_picture

    settings = DuelSettings.from_game(options.game_args, options.action_repeat)
    trace = PlayTrace()

    def watch(world: DuelWorld | ChaseWorld) -> None:
        trace.positions.append(world.physics.pos.copy())
        trace.targets.append(world.physics.target.copy())

    returns, outcomes = settings.rounds(
        bot.policy(), settings.scripted_opponent, options.agents, options.seed, watch
    )
    opponent = "prey" if isinstance(settings, ChaseSettings) else "pilot"
    tally = {name: int(np.sum(outcomes == value)) for value, name in OUTCOMES.items()}
    score = f"wins={tally['win']} draws={tally['draw']} losses={tally['loss']}"
    lines = [
        f"{len(outcomes)} round(s) against the scripted {opponent}: {score} "
        f"mean_reward={returns.mean():.2f}"
    ]
    if options.record is None:
        return PlayResult(lines)
    title = f"{options.title} against the scripted {opponent}: {score}"
    steps_per_second = 60 / settings.action_repeat
    return PlayResult(
        lines, record_picture(trace, options.record, title=title, steps_per_second=steps_per_second)
    )


ENTRY = GameEntry(
    name="duel",
    module="games.duel",
    fork_main="games.duel.client",
    transport="tcp",
    gym_module="games.duel.gym_env",
    observation_size=OBS_SIZE,
    action_size=ACTION_SIZE,
    game_args={"agents": None, "mode": MODES},
    in_process_kwargs=_in_process_kwargs,
    scorer=DuelSettings.from_game,
    record_name=lambda game_args: "duel-chase" if game_args.get("mode") == "chase" else "duel",
    play=_play,
    sides=SIDES,
    train_defaults=BUNDLED_TUNING,
    page_plays=lambda game_args: game_args.get("mode", "race") == "race",
    web_files=(
        Path(__file__).resolve().parent / "web" / "index.html",
        LANDER_WEB / "physics.js",
        LANDER_WEB / "bot.js",
        Path(__file__).resolve().parent / "web" / "duel.js",
    ),
)
