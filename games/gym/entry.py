"""Any Gymnasium environment as lander's registry knows a game: ``--game gym:ENV_ID``.

The entry is made per environment id (:func:`entry_for`), from the spaces of one copy:
nothing here names an environment, so a user's own registered environment is a game as
much as ``LunarLander-v3`` is.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from typing import Any

from gymnasium import spaces

from game_bridge.bot_runner import BotRunner
from games import GYM_PREFIX as PREFIX
from games.gym.scoring import GymScorer
from games.gym.view import UnsupportedEnv, make_view, parse_kwargs
from games.spec import GameArgs, GameEntry, PlayOptions, PlayResult


class UnknownEnv(UnsupportedEnv):
    """An environment id Gymnasium does not know, or one it cannot make with these settings."""


def _in_process_kwargs(game_args: GameArgs, _action_repeat: int | None) -> dict[str, Any]:
    return parse_kwargs(dict(game_args))


def _record_name(env_id: str) -> Callable[[GameArgs], str]:
    def name(game_args: GameArgs) -> str:
        """Other keyword arguments are another game to champion (LunarLander continuous)."""
        shown = ", ".join(f"{k}={v}" for k, v in sorted(game_args.items()) if k != "agents")
        return f"{PREFIX}{env_id} ({shown})" if shown else f"{PREFIX}{env_id}"

    return name


@cache
def _spaces_with(env_id: str, game_args: tuple[tuple[str, str], ...]) -> tuple[bool, bool]:
    """Whether ``env_id`` with these ``--game-arg`` settings sends a picture, and whether
    it acts continuously: the settings can change both (``obs_type=ram`` makes Pong's
    picture 128 numbers, ``continuous=False`` CarRacing's wheel five keys), and each
    decides the defaults a new run starts from. A copy that cannot be made with them
    answers as the id's own (the settings check names what is wrong)."""
    try:
        view = make_view(env_id, parse_kwargs(dict(game_args)))
    except UnsupportedEnv:
        view = make_view(env_id, {})
    try:
        return any(part.is_image for part in view.parts), isinstance(view.action_space, spaces.Box)
    finally:
        view.close()


def _play(env_id: str) -> Callable[[BotRunner, PlayOptions], PlayResult]:
    def play(bot: BotRunner, options: PlayOptions) -> PlayResult:
        """Play the bot's episodes in the environment; draw what it renders."""
        from games.gym.play import play_episodes

        if options.remote is not None:
            raise ValueError(f"{PREFIX}{env_id} plays in-process; drop --game-bin")
        return play_episodes(env_id, bot, options)

    return play


def check_env_args(env_id: str, game_args: GameArgs, repeat: int | None = None) -> None:
    """Make one copy with these settings: a keyword the environment does not take, spaces
    the gym game cannot serve, or an action repeat it cannot take, is refused now in one
    line, not in every game process.

    :raises UnsupportedEnv: naming the environment and what is wrong.
    """
    try:
        make_view(env_id, parse_kwargs(dict(game_args)), repeat=repeat).close()
    except UnsupportedEnv as exc:
        raise UnsupportedEnv(f"--game {PREFIX}{env_id}: {exc}") from None


@cache
def entry_for(env_id: str) -> GameEntry:
    """The registry entry of the Gymnasium environment ``env_id``.

    :raises UnknownEnv: an id Gymnasium cannot make.
    """
    try:
        view = make_view(env_id, {})
    except UnsupportedEnv as exc:
        raise UnknownEnv(f"--game {PREFIX}{env_id}: {exc}") from None
    action_space = view.action_space
    spec = view.spec
    threshold = spec.reward_threshold if spec is not None else None
    obs_size = sum(math.prod(part.space.shape or (1,)) for part in view.parts)
    pictures = any(part.is_image for part in view.parts)
    notes = tuple(f"{PREFIX}{env_id}: {note}" for note in view.notes)
    view.close()
    action_size = int(action_space.shape[0]) if isinstance(action_space, spaces.Box) else 1

    def kind(game_args: GameArgs) -> tuple[bool, bool]:
        """(sends a picture, acts continuously) with these settings; the id's own without."""
        if not game_args:
            return pictures, isinstance(action_space, spaces.Box)
        return _spaces_with(env_id, tuple(sorted(game_args.items())))

    return GameEntry(
        name=f"{PREFIX}{env_id}",
        module="games.gym",
        launch_args=(f"--env_id={env_id}",),
        transport="tcp",
        gym_module="games.gym.view",
        gym_id=env_id,
        env_factory=lambda game_args, repeat: (
            lambda: make_view(env_id, parse_kwargs(dict(game_args)), repeat=repeat)
        ),
        observation_size=obs_size,
        action_size=action_size,
        game_args={},
        check_args=lambda game_args, repeat: check_env_args(env_id, game_args, repeat),
        in_process_kwargs=_in_process_kwargs,
        scorer=lambda game_args, repeat: GymScorer(
            env_id, tuple(sorted(game_args.items())), threshold, repeat
        ),
        record_name=_record_name(env_id),
        play=_play(env_id),
        page_plays=lambda _game_args: False,
        sees_pictures=lambda game_args: kind(game_args)[0],
        continuous_actions=lambda game_args: kind(game_args)[1],
        race_reward=float(threshold) if threshold is not None else None,
        notes=notes,
    )
