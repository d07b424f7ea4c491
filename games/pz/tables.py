"""One copy of a PettingZoo game (a *table*), the parallel API and the turn-based (AEC) API
behind one step: every agent of the table gives an action; the table says whose action it
used, what each agent earned, which agents left, and whether the game is over.

PettingZoo's agents leave mid-episode (a dead pursuer, a fallen walker) and take turns (a
board game): neither is padded over. An agent whose action a step did not use is *idle*
for that step (not its turn), and an agent that left is *gone* until its table starts
again; the game process marks both in the step's info, and the trainer learns nothing from
those actions (``training/envs/game_monitor.py``).

Imports only the standard library, the registry's pattern of a module path, and the game's
own module.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from games import PZ_MODULE
from games.gym.packages import pip_name

API_ARG = "api"
"""``--game-arg api=aec|parallel``: which of the module's APIs to play (default: parallel
where the module has ``parallel_env``, else ``env``)."""


class GameModuleError(ValueError):
    """A module that is not a PettingZoo game lander can play, in one line."""


def load_module(module: str) -> Any:
    """The game's module, imported.

    :raises GameModuleError: a name that is no module path, a module not installed, or
        one without ``env`` or ``parallel_env``.
    """
    if not PZ_MODULE.fullmatch(module):
        raise GameModuleError(
            f"pz:{module[:60]} is not a module path (pz:pettingzoo.classic.tictactoe_v3)"
        )
    try:
        loaded = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or module
        raise GameModuleError(
            f"pz:{module}: {missing} is not installed (.venv/bin/pip install {pip_name(missing)})"
        ) from None
    except Exception as exc:  # the module's own import code: any error is the module's
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise GameModuleError(f"pz:{module}: importing it failed: {first}") from None
    if not callable(getattr(loaded, "env", None)) and not callable(
        getattr(loaded, "parallel_env", None)
    ):
        raise GameModuleError(f"pz:{module} has no env() or parallel_env(): not a PettingZoo game")
    return loaded


def make_env(module: str, kwargs: dict[str, Any]) -> tuple[Any, bool]:
    """``(env, parallel?)`` of the module with ``kwargs`` (``api`` picks the API).

    :raises GameModuleError: no such module or API, or keyword arguments it refuses.
    """
    loaded = load_module(module)
    settings = dict(kwargs)
    api = settings.pop(API_ARG, None)
    parallel = callable(getattr(loaded, "parallel_env", None)) if api is None else api == "parallel"
    if api not in (None, "aec", "parallel"):
        raise GameModuleError(f"--game-arg api= takes aec or parallel, not {api!r}")
    maker = getattr(loaded, "parallel_env" if parallel else "env", None)
    if not callable(maker):
        raise GameModuleError(f"pz:{module} has no {'parallel_env' if parallel else 'env'}()")
    try:
        return maker(**settings), parallel
    except TypeError as exc:
        raise GameModuleError(f"pz:{module}: {str(exc).splitlines()[0]}") from None


@dataclass
class Moved:
    """What one step of a table did.

    :param rewards: each agent's reward this step.
    :param used: the agents whose action the step used (all live ones in the parallel
        API; the one whose turn it was in a turn-based game).
    :param left: the agents that left this step, each with whether a time limit ended it.
    :param over: the game ended (every agent has left).
    :param infos: each agent's info.
    """

    rewards: dict[str, float]
    used: set[str]
    left: dict[str, bool]
    over: bool
    infos: dict[str, dict[str, Any]] = field(default_factory=dict)


class Table:
    """One copy of a PettingZoo game.

    :param env: the game (an ``AECEnv`` or a ``ParallelEnv``).
    :param parallel: which API ``env`` speaks.
    """

    def __init__(self, env: Any, parallel: bool) -> None:
        self.env = env
        self.parallel = parallel
        self.agents: list[str] = list(env.possible_agents)
        self.live: set[str] = set()
        self._obs: dict[str, Any] = {}

    def reset(self, seed: int | None) -> dict[str, Any]:
        """A new game; every agent's first observation."""
        if self.parallel:
            self._obs, _ = self.env.reset(seed=seed)
        else:
            self.env.reset(seed=seed)
            self._skip_gone()
            self._obs = {agent: self.env.observe(agent) for agent in self.env.agents}
        self.live = set(self.env.agents)
        return dict(self._obs)

    def observation(self, agent: str) -> Any:
        """The agent's newest observation (its last one, once it has left)."""
        return self._obs[agent]

    def to_move(self) -> set[str]:
        """The agents whose actions the next step uses."""
        if self.parallel:
            return set(self.env.agents)
        return {self.env.agent_selection} if self.env.agents else set()

    def step(self, actions: dict[str, Any]) -> Moved:
        """One step: the actions of the agents :meth:`to_move` are played."""
        if self.parallel:
            return self._step_parallel(actions)
        return self._step_turn(actions)

    def _step_parallel(self, actions: dict[str, Any]) -> Moved:
        live = list(self.env.agents)
        obs, rewards, terms, truncs, infos = self.env.step({a: actions[a] for a in live})
        self._obs.update(obs)
        left = {
            a: bool(truncs.get(a)) and not terms.get(a)
            for a in live
            if terms.get(a) or truncs.get(a)
        }
        self.live = set(self.env.agents) - set(left)
        return Moved(
            {a: float(rewards.get(a, 0.0)) for a in self.agents},
            set(live),
            left,
            not self.live,
            {a: dict(infos.get(a) or {}) for a in live},
        )

    def _step_turn(self, actions: dict[str, Any]) -> Moved:
        mover = self.env.agent_selection
        before = set(self.env.agents)
        self.env.step(actions[mover])
        rewards = {a: float(self.env.rewards.get(a, 0.0)) for a in self.agents}
        left: dict[str, bool] = {}
        for agent in before:
            ended_by_rule = bool(self.env.terminations.get(agent))
            cut = bool(self.env.truncations.get(agent))
            if ended_by_rule or cut:
                left[agent] = cut and not ended_by_rule
        infos = {a: dict(self.env.infos.get(a) or {}) for a in before}
        for agent in before:  # their last observation, before the game lets them go
            self._obs[agent] = self.env.observe(agent)
        self._skip_gone()
        self.live = set(self.env.agents) - set(left)
        return Moved(rewards, {mover}, left, not self.live, infos)

    def _skip_gone(self) -> None:
        """Step past the turns of agents that have left (PettingZoo asks a ``None`` of each)."""
        env = self.env
        while env.agents and (
            env.terminations.get(env.agent_selection) or env.truncations.get(env.agent_selection)
        ):
            env.step(None)

    def close(self) -> None:
        self.env.close()
