"""The stroke game as lander's registry knows it: correcting a noisy tracking signal."""

from __future__ import annotations

from typing import Any

from game_bridge.bot_runner import BotRunner
from games.spec import (
    BUNDLED_CAMERA_TUNING,
    BUNDLED_TUNING,
    GameArgs,
    GameEntry,
    PlayOptions,
    PlayResult,
    pixels_observed,
)
from games.stroke.camera import OBSERVATIONS, compose_scope
from games.stroke.scoring import StrokeSettings
from games.stroke.world import ACTION_SIZE, OBS_SIZE, REWARD_MODES


def _in_process_kwargs(game_args: GameArgs, _action_repeat: int | None) -> dict[str, Any]:
    return {key: game_args[key] for key in ("reward_mode", "observation") if key in game_args}


def _record_name(game_args: GameArgs) -> str:
    """Strokes scored at their end are another game to champion, and so are strokes seen
    through the scope (its bots read frames)."""
    parts = []
    mode = game_args.get("reward_mode", "step")
    if mode != "step":
        parts.append(f"{mode} rewards")
    if game_args.get("observation") == "pixels":
        parts.append("pixels")
    return f"stroke ({', '.join(parts)})" if parts else "stroke"


def _play(bot: BotRunner, options: PlayOptions) -> PlayResult:
    """One stroke per pen, its score, and the picture."""
    from games.stroke.play import play_strokes, record_strokes

    if options.remote is not None:
        raise ValueError("a stroke bot corrects strokes in the bundled stroke game only")
    settings = StrokeSettings.from_game(options.game_args)
    policy = bot.policy()
    if settings.pixels:  # the bot reads the scope of the numbers the picture is drawn from
        policy = compose_scope(policy)
    trace = play_strokes(policy, options.agents, options.seed, settings.reward_mode)
    mean = sum(trace.returns) / len(trace.returns)
    score = options.normalize(mean)
    assert score is not None  # the stroke game has its reference filter
    lines = [f"{len(trace.returns)} stroke(s): mean_reward={mean:.2f} normalized_score={score:.3f}"]
    if options.record is None:
        return PlayResult(lines)
    title = (
        f"{options.title}, {settings.reward_mode} rewards: mean return {mean:.1f}, "
        f"normalized {score:.2f}"
    )
    return PlayResult(lines, record_strokes(trace, options.record, title))


ENTRY = GameEntry(
    name="stroke",
    module="games.stroke",
    transport="stdio",
    gym_module="games.stroke.gym_env",
    observation_size=OBS_SIZE,
    action_size=ACTION_SIZE,
    game_args={"reward_mode": REWARD_MODES, "observation": OBSERVATIONS, "agents": None},
    in_process_kwargs=_in_process_kwargs,
    scorer=StrokeSettings.from_game,
    record_name=_record_name,
    play=_play,
    train_defaults=BUNDLED_TUNING,
    # Its scope was measured with the general 64-step rollouts, as its numbers are.
    arg_defaults={("observation", "pixels"): {**BUNDLED_CAMERA_TUNING, "n_steps": 64}},
    sees_pictures=pixels_observed,
)
