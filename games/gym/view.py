"""A Gymnasium environment as the protocol shows it, the same over TCP and in-process:
one flat float32 observation with its bounds per dimension (or one discrete), a picture
(a uint8 image, channels first, under a camera key), or a dictionary of such parts, and
an action the bridge sends in [-1, 1] for a Box (rescaled here to the environment's own
bounds, as the plugin's continuous actions are) or a choice for a Discrete. An ALE game
gets the field's standard preprocessing first (``games/gym/atari.py``).

Imports only gymnasium and numpy, so the game process stays light.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

OBS_KEY = "obs"
IMAGE_KEY = "obs_2d"
"""The key of an observation that is a picture: ``2d`` in a key is the plugin's mark of a
camera, which lander's policies see through a camera encoder."""
ACTION_KEY = "action"
MAX_OBSERVATION_VALUES = 100_000
"""A flat vector larger than this is refused by name rather than sent as JSON numbers (a
picture, a uint8 image, is a camera key instead and is not counted here)."""


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


@dataclass(frozen=True)
class ObservationPart:
    """One key of the observation as the protocol carries it.

    :param key: the key on the wire (:data:`IMAGE_KEY` or ``<name>_2d`` for a picture).
    :param source: the environment's own key in a dictionary observation (None: the
        observation is this part).
    :param space: the part as the bridge declares it (Discrete, float32 Box, or for a
        picture a uint8 Box, channels first).
    :param channels_last: a picture the environment gives as ``H x W x C``.
    :param start: a Discrete's first value, subtracted so choices count from 0.
    """

    key: str
    source: str | None
    space: spaces.Space[Any]
    channels_last: bool = False
    start: int = 0

    @property
    def is_image(self) -> bool:
        """True for a picture (a camera key)."""
        return isinstance(self.space, spaces.Box) and self.space.dtype == np.uint8

    def convert(self, value: Any) -> Any:
        """The environment's value of this part as the bridge carries it."""
        if isinstance(self.space, spaces.Discrete):
            return int(value) - self.start
        if self.is_image:
            frame = np.asarray(value, dtype=np.uint8)
            if frame.ndim == 2:
                return frame[None]
            return np.ascontiguousarray(frame.transpose(2, 0, 1)) if self.channels_last else frame
        return np.asarray(value, dtype=np.float32).reshape(-1)

    def entry(self) -> dict[str, Any]:
        """The part's entry in the ``env_info`` reply, bounds per dimension (null where
        unbounded)."""
        space = self.space
        if isinstance(space, spaces.Discrete):
            return {"size": int(space.n), "space": "discrete"}
        assert isinstance(space, spaces.Box)
        if self.is_image:
            return {"size": [int(v) for v in space.shape], "space": "box"}
        return {
            "size": [int(space.shape[0])],
            "space": "box",
            "low": _finite_or_none(space.low),
            "high": _finite_or_none(space.high),
        }


MIN_PICTURE_SIDE = 8
"""A uint8 Box whose two picture sides are both at least this is a picture."""


def _picture_shape(space: spaces.Box) -> tuple[tuple[int, int, int], bool] | None:
    """``(channels first shape, channels last?)`` of a uint8 Box that is a picture
    (``H x W``, ``H x W x C`` or ``C x H x W``, the channels the smallest side), else None."""
    shape = tuple(int(v) for v in space.shape)
    if space.dtype != np.uint8 or len(shape) not in (2, 3):
        return None
    if len(shape) == 2:
        chw, last = (1, *shape), False
    elif shape[-1] <= 4 < shape[0]:
        chw, last = (shape[2], shape[0], shape[1]), True
    else:
        chw, last = (shape[0], shape[1], shape[2]), False
    return ((chw[0], chw[1], chw[2]), last) if min(chw[1:]) >= MIN_PICTURE_SIDE else None


def _observation_part(source: str | None, space: spaces.Space[Any]) -> ObservationPart:
    """The part of an observation (or of a dictionary's key ``source``) the bridge sees.

    :raises UnsupportedEnv: a space other than Box and Discrete, a vector too large, or a
        vector key whose name marks a picture.
    """
    name = OBS_KEY if source is None else source
    if isinstance(space, spaces.Discrete):
        return ObservationPart(name, source, spaces.Discrete(int(space.n)), start=int(space.start))
    if not isinstance(space, spaces.Box):
        raise UnsupportedEnv(
            f"it observes a {type(space).__name__} space; the gym game serves Box and "
            "Discrete observations (and dictionaries of them)"
        )
    picture = _picture_shape(space)
    if picture is not None:
        shape, last = picture
        key = IMAGE_KEY if source is None else source if "2d" in source else f"{source}_2d"
        return ObservationPart(key, source, spaces.Box(0, 255, shape, np.uint8), last)
    if "2d" in name:
        raise UnsupportedEnv(f"its key {name!r} is not a picture, but a key with 2d names one")
    size = int(np.prod(space.shape))
    if size > MAX_OBSERVATION_VALUES or size < 1:
        raise UnsupportedEnv(
            f"its observation has {size:,} values; the gym game serves vectors of "
            f"1 to {MAX_OBSERVATION_VALUES:,} and pictures (a uint8 image)"
        )
    low = np.asarray(space.low, dtype=np.float32).reshape(-1)
    high = np.asarray(space.high, dtype=np.float32).reshape(-1)
    return ObservationPart(name, source, spaces.Box(low, high, (size,), np.float32))


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


class GameView(gymnasium.Wrapper[Any, Any, Any, Any]):
    """The environment as the bridge sees it (see the module's docstring).

    :raises UnsupportedEnv: spaces other than Box and Discrete observations (or a
        dictionary of them), and Box, Discrete and MultiDiscrete actions.
    """

    def __init__(self, env: gymnasium.Env[Any, Any], frames_per_step: int = 1) -> None:
        super().__init__(env)
        self.frames_per_step = frames_per_step
        """The game's own steps (frames) one step of the view holds an action for."""
        inner_obs, inner_action = env.observation_space, env.action_space
        if isinstance(inner_obs, spaces.Dict):
            self.parts = tuple(
                _observation_part(str(key), sub) for key, sub in inner_obs.spaces.items()
            )
            if len({part.key for part in self.parts}) < len(self.parts):
                raise UnsupportedEnv("two of its keys name one key on the wire")
            # A list of pairs keeps the environment's order (a mapping would be sorted).
            self.observation_space = spaces.Dict([(p.key, p.space) for p in self.parts])
        else:
            self.parts = (_observation_part(None, inner_obs),)
            self.observation_space = self.parts[0].space
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
            return {part.key: part.convert(obs[part.source]) for part in self.parts}
        return self.parts[0].convert(obs)

    def env_action(self, action: Any) -> Any:
        """The protocol's action as the environment takes it."""
        if self._scale is not None:
            centre, below, above = self._scale
            values = np.clip(np.asarray(action, dtype=np.float64).reshape(-1), -1.0, 1.0)
            scaled = centre + np.where(values < 0, below, above) * values
            return scaled.astype(np.float32).reshape(self._action_shape)
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
        if env_id not in gymnasium.registry and not atari.register_ale():
            hint = " (Atari ids need ale-py, which `./lander setup` installs)"
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
