"""A Gymnasium environment as the protocol shows it, the same over TCP and in-process:
one flat float32 observation with its bounds per dimension (or one discrete), and an
action the bridge sends in [-1, 1] for a Box (rescaled here to the environment's own
bounds, as the plugin's continuous actions are) or a choice for a Discrete.

Imports only gymnasium and numpy, so the game process stays light.
"""

from __future__ import annotations

import ast
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

OBS_KEY = "obs"
ACTION_KEY = "action"
MAX_OBSERVATION_VALUES = 100_000
"""A flat observation larger than this is a picture, which the gym game does not serve
(a camera key would be the way); refused by name rather than sent as JSON numbers."""


class UnsupportedEnv(ValueError):
    """A Gymnasium environment whose spaces the gym game cannot serve."""


def parse_kwargs(game_args: dict[str, str]) -> dict[str, Any]:
    """The environment's keyword arguments from ``--game-arg KEY=VALUE`` text: a Python
    literal where the text is one (``continuous=True``, ``gravity=-9.8``), else the text."""
    kwargs: dict[str, Any] = {}
    for key, text in game_args.items():
        if key == "agents":  # the bridge's own: copies per instance
            continue
        try:
            kwargs[key] = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            kwargs[key] = text
    return kwargs


def _finite_or_none(values: np.ndarray) -> list[float | None]:
    """Bounds for JSON, which has no infinity: null for an unbounded side."""
    limit = float(np.finfo(np.float32).max)
    return [float(v) if np.isfinite(v) and abs(v) < limit else None for v in values.tolist()]


class GameView(gymnasium.Wrapper[Any, Any, Any, Any]):
    """The environment as the bridge sees it (see the module's docstring).

    :raises UnsupportedEnv: spaces other than Box and Discrete observations, and Box,
        Discrete and MultiDiscrete actions.
    """

    def __init__(self, env: gymnasium.Env[Any, Any]) -> None:
        super().__init__(env)
        inner_obs, inner_action = env.observation_space, env.action_space
        self.discrete_obs = isinstance(inner_obs, spaces.Discrete)
        if self.discrete_obs:
            assert isinstance(inner_obs, spaces.Discrete)
            self._obs_start = int(inner_obs.start)
            self.observation_space = spaces.Discrete(int(inner_obs.n))
        elif isinstance(inner_obs, spaces.Box):
            size = int(np.prod(inner_obs.shape))
            if size > MAX_OBSERVATION_VALUES or size < 1:
                raise UnsupportedEnv(
                    f"its observation has {size:,} values; the gym game serves vectors of "
                    f"1 to {MAX_OBSERVATION_VALUES:,}"
                )
            low = np.asarray(inner_obs.low, dtype=np.float32).reshape(-1)
            high = np.asarray(inner_obs.high, dtype=np.float32).reshape(-1)
            self.observation_space = spaces.Box(low, high, (size,), np.float32)
        else:
            raise UnsupportedEnv(
                f"it observes a {type(inner_obs).__name__} space; the gym game serves Box and "
                "Discrete observations"
            )
        self._scale: tuple[np.ndarray, np.ndarray] | None = None
        self._action_start: np.ndarray | int = 0
        if isinstance(inner_action, spaces.Box):
            size = int(np.prod(inner_action.shape))
            a_low = np.asarray(inner_action.low, dtype=np.float64).reshape(-1)
            a_high = np.asarray(inner_action.high, dtype=np.float64).reshape(-1)
            bounded = np.isfinite(a_low) & np.isfinite(a_high)
            # [-1, 1] onto [low, high] where both are finite; an unbounded side is sent as is.
            centre = np.where(bounded, (a_low + a_high) / 2, 0.0)
            half = np.where(bounded, (a_high - a_low) / 2, 1.0)
            self._scale = (centre, half)
            self._action_shape = inner_action.shape
            self.action_space = spaces.Box(-1.0, 1.0, (size,), np.float32)
        elif isinstance(inner_action, spaces.Discrete):
            self._action_start = int(inner_action.start)
            self.action_space = spaces.Discrete(int(inner_action.n))
        elif isinstance(inner_action, spaces.MultiDiscrete) and inner_action.nvec.ndim == 1:
            self._action_start = np.asarray(inner_action.start, dtype=np.int64)
            self.action_space = spaces.MultiDiscrete(inner_action.nvec)
        else:
            raise UnsupportedEnv(
                f"it acts in a {type(inner_action).__name__} space; the gym game serves Box, "
                "Discrete and MultiDiscrete actions"
            )

    def observation(self, obs: Any) -> Any:
        """The environment's observation as the protocol carries it."""
        if self.discrete_obs:
            return int(obs) - self._obs_start
        return np.asarray(obs, dtype=np.float32).reshape(-1)

    def env_action(self, action: Any) -> Any:
        """The protocol's action as the environment takes it."""
        if self._scale is not None:
            centre, half = self._scale
            values = np.clip(np.asarray(action, dtype=np.float64).reshape(-1), -1.0, 1.0)
            return (centre + half * values).astype(np.float32).reshape(self._action_shape)
        if isinstance(self.action_space, spaces.MultiDiscrete):
            return np.asarray(action, dtype=np.int64).reshape(-1) + self._action_start
        return int(np.asarray(action).reshape(-1)[0]) + int(self._action_start)

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return self.observation(obs), info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(self.env_action(action))
        return self.observation(obs), float(reward), bool(terminated), bool(truncated), info

    def env_info_spaces(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """One agent's observation and action entries of the ``env_info`` reply, its
        bounds per dimension (null where unbounded)."""
        obs_space = self.observation_space
        if isinstance(obs_space, spaces.Discrete):
            observation = {"size": int(obs_space.n), "space": "discrete"}
        else:
            assert isinstance(obs_space, spaces.Box)
            observation = {
                "size": [int(obs_space.shape[0])],
                "space": "box",
                "low": _finite_or_none(obs_space.low),
                "high": _finite_or_none(obs_space.high),
            }
        act_space = self.action_space
        if isinstance(act_space, spaces.Box):
            actions = {ACTION_KEY: {"size": int(act_space.shape[0]), "action_type": "continuous"}}
        elif isinstance(act_space, spaces.Discrete):
            actions = {ACTION_KEY: {"size": int(act_space.n), "action_type": "discrete"}}
        else:
            assert isinstance(act_space, spaces.MultiDiscrete)
            actions = {
                f"{ACTION_KEY}_{i}": {"size": int(n), "action_type": "discrete"}
                for i, n in enumerate(act_space.nvec.tolist())
            }
        return {OBS_KEY: observation}, actions


def make_view(env_id: str, kwargs: dict[str, Any], render_mode: str | None = None) -> GameView:
    """One environment ``env_id`` with ``kwargs``, as the protocol shows it.

    :raises UnsupportedEnv: an environment that cannot be made, or spaces it cannot serve.
    """
    settings: dict[str, Any] = dict(kwargs)
    if render_mode:
        settings["render_mode"] = render_mode
    try:
        env = gymnasium.make(env_id, **settings)
    except gymnasium.error.Error as exc:
        raise UnsupportedEnv(str(exc).splitlines()[0]) from None
    except (TypeError, ValueError, ImportError, ModuleNotFoundError) as exc:
        raise UnsupportedEnv(
            f"gymnasium.make({env_id!r}) failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None
    return GameView(env)
