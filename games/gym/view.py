"""A Gymnasium environment as the protocol shows it, the same over TCP and in-process:
one flat float32 observation with its bounds per dimension (or one discrete), a picture
(a uint8 image, channels first, under a camera key), or a dictionary of such parts
(``games/gym/parts.py`` makes them of the spaces environment libraries use), and
an action the bridge sends in [-1, 1] for a Box (rescaled here to the environment's own
bounds, as the plugin's continuous actions are) or a choice for a Discrete. An ALE game
gets the field's standard preprocessing first (``games/gym/atari.py``).

Imports only gymnasium and numpy, so the game process stays light.
"""

from __future__ import annotations

import ast
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from games.gym.parts import IMAGE_KEY, OBS_KEY, ObservationPart, UnsupportedEnv, observation_parts

__all__ = ["IMAGE_KEY", "OBS_KEY", "GameView", "ObservationPart", "UnsupportedEnv", "make_view"]
ACTION_KEY = "action"


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


def batch_observations(rows: list[Any]) -> Any:
    """Observations of several copies as one batch, as a bot takes them: a dictionary's
    keys stacked each."""
    if rows and isinstance(rows[0], dict):
        return {key: np.stack([row[key] for row in rows]) for key in rows[0]}
    return np.asarray(rows)


def action_scale(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(centre, scale below, scale above)`` that take the policy's ``a`` in [-1, 1] to the
    environment's ``centre + scale * a`` per dimension.

    Where a dimension's bounds hold 0, the policy's 0 is the environment's 0 and each side
    of it is scaled to its own bound: a fresh policy, whose actions centre on 0, starts by
    doing nothing, as SB3 and RL Zoo start it (they clip to the bounds). CarRacing's gas
    and brake are ``[0, 1]``: scaled from the middle, a fresh policy held the brake at 0.5
    on average, and the gas too. Bounds around 0 symmetrically (most games) scale as
    before; where they do not hold 0, [-1, 1] is spread over them from their middle; an
    unbounded side is sent as is.
    """
    bounded = np.isfinite(low) & np.isfinite(high)
    holds_zero = bounded & (low <= 0) & (high >= 0)
    middle = bounded & ~holds_zero
    low, high = np.where(bounded, low, 0.0), np.where(bounded, high, 0.0)
    centre = np.where(middle, (low + high) / 2, 0.0)
    half = np.where(middle, (high - low) / 2, 1.0)
    below = np.where(holds_zero, -low, half)
    above = np.where(holds_zero, high, half)
    return centre, below, above


def to_bounds(scale: tuple[np.ndarray, np.ndarray, np.ndarray], sent: Any) -> np.ndarray:
    """The protocol's continuous action in [-1, 1] (clipped) on the bounds ``scale`` was made
    for (:func:`action_scale`), flat, in float64."""
    centre, below, above = scale
    values = np.clip(np.asarray(sent, dtype=np.float64).reshape(-1), -1.0, 1.0)
    return np.asarray(centre + np.where(values < 0, below, above) * values)


class GameView(gymnasium.Wrapper[Any, Any, Any, Any]):
    """The environment as the bridge sees it (see the module's docstring).

    :raises UnsupportedEnv: an observation part ``games/gym/parts.py`` cannot serve, and
        actions other than Box, Discrete and MultiDiscrete.
    """

    def __init__(self, env: gymnasium.Env[Any, Any], frames_per_step: int = 1) -> None:
        super().__init__(env)
        self.frames_per_step = frames_per_step
        """The game's own steps (frames) one step of the view holds an action for."""
        inner_action = env.action_space
        parts, notes = observation_parts(env)
        self.parts = parts
        self.notes = notes
        """What was left out of the observation (a text that never varies), a line each."""
        if parts[0].source:  # a dictionary or a tuple: a key per part, in the env's order
            # A list of pairs keeps the environment's order (a mapping would be sorted).
            self.observation_space = spaces.Dict([(p.key, p.space) for p in parts])
        else:
            self.observation_space = parts[0].space
        self._scale: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._action_start: np.ndarray | int = 0
        if isinstance(inner_action, spaces.Box):
            size = int(np.prod(inner_action.shape))
            a_low = np.asarray(inner_action.low, dtype=np.float64).reshape(-1)
            a_high = np.asarray(inner_action.high, dtype=np.float64).reshape(-1)
            self._scale = action_scale(a_low, a_high)
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
        if isinstance(self.observation_space, spaces.Dict):
            return {part.key: part.convert(part.pick(obs)) for part in self.parts}
        return self.parts[0].convert(obs)

    def env_action(self, action: Any) -> Any:
        """The protocol's action as the environment takes it."""
        if self._scale is not None:
            return to_bounds(self._scale, action).astype(np.float32).reshape(self._action_shape)
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
        """One agent's observation and action entries of the ``env_info`` reply."""
        observations = {part.key: part.entry() for part in self.parts}
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
        return observations, actions


def make_view(
    env_id: str, kwargs: dict[str, Any], render_mode: str | None = None, repeat: int | None = None
) -> GameView:
    """One environment ``env_id`` with ``kwargs``, as the protocol shows it: an ALE game
    preprocessed as the field trains it (``games/gym/atari.py``), another's picture as
    ``games/gym/pictures.py`` shows it, each action held ``repeat`` of the game's steps
    (``--action-repeat``; None: the game's own, 4 frames for ALE, 2 steps for another
    picture game, 1 for vectors).

    :raises UnsupportedEnv: an environment that cannot be made, spaces it cannot serve, or
        an action repeat for an ALE id that skips frames itself.
    """
    from games.gym import atari, pictures

    settings: dict[str, Any] = dict(kwargs)
    if render_mode:
        settings["render_mode"] = render_mode
    if env_id not in gymnasium.registry:
        atari.register_ale()
    try:
        env = gymnasium.make(env_id, **settings)
    except gymnasium.error.Error as exc:
        hint = ""
        if env_id not in gymnasium.registry:
            ale = "" if atari.register_ale() else "Atari ids need ale-py (`./lander setup`); "
            hint = f" ({ale}an id a package registers on import needs --gym-package PACKAGE)"
        raise UnsupportedEnv(str(exc).splitlines()[0] + hint) from None
    except (TypeError, ValueError, ImportError, ModuleNotFoundError) as exc:
        raise UnsupportedEnv(
            f"gymnasium.make({env_id!r}) failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None
    if atari.is_atari(env) and atari.skips_itself(env):
        if repeat is not None:
            env.close()
            raise UnsupportedEnv(
                f"{env_id} skips frames itself: give --game-arg frameskip=N for its frames "
                "a step instead of --action-repeat (or a NoFrameskip-v4 id)"
            )
        return GameView(atari.preprocess(env, frame_skip=1), atari.own_frameskip(env))
    if atari.is_atari(env):
        frames = repeat or atari.FRAME_SKIP
        return GameView(atari.preprocess(env, frames), frames)
    held = pictures.default_repeat(env) if repeat is None else repeat
    return GameView(pictures.preprocess(env, held), held)
