"""Any PettingZoo game as lander's registry knows a game: ``--game pz:MODULE``.

The entry is made per module (:func:`entry_for`) from one table's agents: nothing here
names a game, so a user's own PettingZoo module is a game as much as PettingZoo's are.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from typing import Any

from gymnasium import spaces

from game_bridge.bot_runner import BotRunner
from games import PZ_PREFIX as PREFIX
from games.gym.parts import UnsupportedEnv
from games.gym.view import parse_kwargs
from games.pz.client import make_tables, policy_names
from games.pz.scoring import PettingZooScorer
from games.spec import GameArgs, GameEntry, PlayOptions, PlayResult


class UnknownModule(UnsupportedEnv):
    """A module that is no PettingZoo game lander can play."""


def check_module_args(module: str, game_args: GameArgs) -> None:
    """Make one table with these settings: a keyword the game does not take, or spaces it
    cannot serve, is refused now in one line, not in every game process.

    :raises UnsupportedEnv: naming the module and what is wrong.
    """
    from games.pz.client import AgentSpaces
    from games.pz.tables import GameModuleError

    try:
        (table,) = make_tables(module, parse_kwargs(dict(game_args)), 1)
        for agent in table.agents:
            AgentSpaces(table.env.observation_space(agent), table.env.action_space(agent))
        table.close()
    except (GameModuleError, UnsupportedEnv) as exc:
        raise UnsupportedEnv(f"--game {PREFIX}{module}: {exc}") from None


def _play(module: str) -> Callable[[BotRunner, PlayOptions], PlayResult]:
    def play(bot: BotRunner, options: PlayOptions) -> PlayResult:
        """Play the bot on a few tables (as ``eval`` plays it); their mean score."""
        if options.remote is not None:
            raise ValueError(f"{PREFIX}{module} plays in-process; drop --game-bin")
        scorer = PettingZooScorer.of(module, options.game_args)
        returns, _ = scorer.play(bot.policy(), max(2, options.agents), options.seed)
        against = " against random legal moves" if scorer.rivals() else ""
        against = against or (" beside random play of the other sides" if scorer.sides() else "")
        return PlayResult(
            [
                f"{len(returns)} game(s) of {PREFIX}{module}{against}: mean_reward={returns.mean():.2f}"
            ]
        )

    return play


def _record_name(module: str, game_args: GameArgs) -> str:
    """Other keyword arguments are another game to champion (simple_spread of five agents)."""
    shown = ", ".join(f"{k}={v}" for k, v in sorted(game_args.items()) if k != "agents")
    return f"{PREFIX}{module} ({shown})" if shown else f"{PREFIX}{module}"


@cache
def entry_for(module: str) -> GameEntry:
    """The registry entry of the PettingZoo game ``module``.

    :raises UnknownModule: a module that is no game lander can play.
    """
    from games.pz.client import AgentSpaces
    from games.pz.tables import GameModuleError

    try:
        (table,) = make_tables(module, {}, 1)
        agents = table.agents
        kinds = [
            AgentSpaces(table.env.observation_space(a), table.env.action_space(a)) for a in agents
        ]
        names = policy_names(table)
        table.close()
    except (GameModuleError, UnsupportedEnv) as exc:
        raise UnknownModule(f"--game {PREFIX}{module}: {exc}") from None
    first = kinds[0]
    obs_size = sum(math.prod(part.space.shape or (1,)) for part in first.parts)
    action = first.action
    sides = tuple(dict.fromkeys(names)) if len(set(names)) > 1 else ()

    def in_process(_game_args: GameArgs, _repeat: int | None) -> dict[str, Any]:
        raise ValueError(f"{PREFIX}{module} has many agents: it trains through its game processes")

    return GameEntry(
        name=f"{PREFIX}{module}",
        module="games.pz",
        launch_args=(f"--module={module}",),
        transport="tcp",
        gym_module="games.pz.entry",
        observation_size=obs_size,
        action_size=int(action.shape[0]) if isinstance(action, spaces.Box) else 1,
        game_args={},
        check_args=lambda game_args, _repeat: check_module_args(module, game_args),
        in_process_kwargs=in_process,
        scorer=lambda game_args, _repeat: PettingZooScorer.of(module, game_args),
        record_name=lambda game_args: _record_name(module, game_args),
        play=_play(module),
        page_plays=lambda _game_args: False,
        sides=sides,
        sees_pictures=lambda _game_args: any(part.is_image for part in first.parts),
        continuous_actions=lambda _game_args: isinstance(action, spaces.Box),
    )
