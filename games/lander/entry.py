"""The lander as lander's registry knows it: a 2D lander that follows a moving target."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from game_bridge.bot_runner import BotRunner
from games.lander.camera import OBSERVATIONS
from games.lander.physics import ACTION_SIZE, OBS_SIZE
from games.lander.scoring import LanderSettings
from games.spec import (
    BUNDLED_CAMERA_TUNING,
    BUNDLED_TUNING,
    GameArgs,
    GameEntry,
    PlayOptions,
    PlayResult,
    pixels_observed,
)

WEB = Path(__file__).resolve().parent / "web"
"""The lander's page: its physics and the bot runner in JavaScript (the duel's page uses them)."""


def _in_process_kwargs(game_args: GameArgs, action_repeat: int | None) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if "action_type" in game_args:
        kwargs["action_type"] = game_args["action_type"]
    if "difficulty" in game_args:
        kwargs["difficulty"] = int(game_args["difficulty"])
    if "observation" in game_args:
        kwargs["observation"] = game_args["observation"]
    if action_repeat is not None:
        kwargs["action_repeat"] = action_repeat
    return kwargs


def _record_name(game_args: GameArgs) -> str:
    """A harder lander is another game to champion, and so is the lander seen through
    its camera (its bots read frames, not coordinates) or in glimpses (its bots must
    remember where the target was)."""
    parts = []
    difficulty = str(game_args.get("difficulty", "1"))
    if difficulty != "1":
        parts.append(f"difficulty {difficulty}")
    if game_args.get("observation") in ("pixels", "glimpse"):
        parts.append(str(game_args["observation"]))
    return f"lander ({', '.join(parts)})" if parts else "lander"


def _play(bot: BotRunner, options: PlayOptions) -> PlayResult:
    """Fly the bot in the game's physics (or in ``options.remote``), print its episodes and
    draw its trajectories."""
    from games.lander.play import RemoteFlight, play_bot, record_picture

    settings = LanderSettings.from_game(options.game_args, options.action_repeat)
    flight = RemoteFlight(options.remote) if options.remote is not None else None
    trace = play_bot(
        bot,
        options.agents,
        options.seconds,
        options.seed,
        settings.action_repeat,
        settings.difficulty,
        options.console,
        options.speed,
        flight,
        settings.pixels,
        settings.glimpse,
    )
    lines: list[str] = []
    score = "no episode ended"
    if trace.returns:
        mean = sum(trace.returns) / len(trace.returns)
        rate = sum(trace.successes) / len(trace.successes)
        lines.append(
            f"{len(trace.returns)} episode(s): mean_reward={mean:.2f} success_rate={rate:.2f}"
        )
        score = f"mean return {mean:.1f}, success {rate:.0%} over {len(trace.returns)} episode(s)"
    else:
        lines.append(f"no episode ended in {options.seconds:g} game seconds (longer: --seconds)")
    if options.record is None:
        return PlayResult(lines)
    picture = record_picture(
        trace,
        options.record,
        title=f"{options.title}: {score}",
        steps_per_second=60 / settings.action_repeat,
    )
    return PlayResult(lines, picture)


ENTRY = GameEntry(
    name="lander",
    module="games.lander",
    fork_main="games.lander.client",
    transport="tcp",
    gym_module="games.lander.gym_env",
    observation_size=OBS_SIZE,
    action_size=ACTION_SIZE,
    game_args={
        "action_type": ("continuous", "discrete"),
        "difficulty": ("0", "1", "2"),
        "observation": OBSERVATIONS,
        "agents": None,
    },
    in_process_kwargs=_in_process_kwargs,
    scorer=LanderSettings.from_game,
    record_name=_record_name,
    play=_play,
    plays_remote=True,
    web_files=tuple(WEB / name for name in ("index.html", "physics.js", "bot.js", "page.js")),
    # The page draws the arena and feeds coordinates: a camera run's bot reads frames.
    page_plays=lambda game_args: game_args.get("observation", "vector") == "vector",
    build_name="lander_game.x86_64",
    race_reward=200.0,
    # Rollouts of 32 steps: 0.90 of the time to reward 200 with 45,056 samples against
    # 59,392 at 64 (benchmarks/time_to_skill.py, docs/performance.md). Not for every game:
    # the stroke game's delayed rewards scored 0.13 against 0.79 (median of 4 seeds).
    train_defaults={**BUNDLED_TUNING, "n_steps": 32},
    # In glimpses, half lander's step: with memory, 0.8 at 90 s where 0.002 peaked at 0.72
    # and fell back to 0.6 (docs/performance.md, "Bots that remember"). Through its camera
    # the general step: with the whitened centroids 0.002 and 0.001 pass 0.8 alike (22.5 s
    # and 21.9 s, median of 3 seeds) and hold to 240 s (docs/performance.md, "The camera,
    # third part"), where before the whitening 0.002 fell back.
    arg_defaults={
        ("observation", "glimpse"): {"learning_rate": 1e-3},
        ("observation", "pixels"): BUNDLED_CAMERA_TUNING,
    },
    sees_pictures=pixels_observed,
)
