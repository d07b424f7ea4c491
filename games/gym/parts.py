"""The parts of a Gymnasium observation as the protocol carries them: each part a key of
numbers (a float32 vector with its bounds) or a picture (a uint8 image, channels first,
under a camera key).

The spaces environment libraries use are turned into those: a ``Dict`` (nested too) and a
``Tuple`` into one key per leaf (``image``, ``obs_0``, ``agent_pos``), joined into one
vector where none is a picture, a ``Discrete`` into
its choice one-hot, ``MultiBinary`` and ``MultiDiscrete`` into bounded numbers, and text
(MiniGrid's mission) into a choice among the few values it takes (one-hot), or left out
with a note when it never varies. A small grid of codes
(MiniGrid's 7 x 7 x 3 view) is numbers, not a picture: a camera encoder is built for frames of
tens of pixels a side, and the zoo's MiniGrid entries read the grid as a flat vector too.
What cannot be served is refused in one line naming the part and the wrapper to write.

Imports only gymnasium and numpy, so the game process stays light.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

OBS_KEY = "obs"
IMAGE_KEY = "obs_2d"
"""The key of an observation that is a picture: ``2d`` in a key is the plugin's mark of a
camera, which lander's policies see through a camera encoder."""
MAX_OBSERVATION_VALUES = 100_000
"""A flat vector larger than this is refused by name rather than sent as JSON numbers (a
picture, a uint8 image, is a camera key instead and is not counted here)."""
MIN_PICTURE_SIDE = 8
"""A uint8 Box whose two picture sides are both at least this is a picture."""
TEXT_SAMPLES = 32
"""Episodes started to learn which values a text part takes (seeds 0 to 31)."""
MAX_TEXT_VALUES = 16
"""A text part of at most this many values (seen at most half as many times as the
episodes sampled, so its values repeat) is a choice among them; more is refused."""

Path = tuple[str | int, ...]
"""Where a part lies in the environment's observation: dictionary keys and tuple indices."""


class UnsupportedEnv(ValueError):
    """A Gymnasium environment whose spaces the gym game cannot serve."""


def _finite_or_none(values: np.ndarray) -> list[float | None]:
    """Bounds for JSON, which has no infinity: null for an unbounded side."""
    limit = float(np.finfo(np.float32).max)
    return [float(v) if np.isfinite(v) and abs(v) < limit else None for v in values.tolist()]


@dataclass(frozen=True)
class ObservationPart:
    """One key of the observation as the protocol carries it.

    :param key: the key on the wire (:data:`IMAGE_KEY` or ``<name>_2d`` for a picture).
    :param source: where the part lies in the environment's observation (empty: the
        observation is this part).
    :param space: the part as the bridge declares it (a float32 Box, or for a picture a
        uint8 Box, channels first).
    :param channels_last: a picture the environment gives as ``H x W x C``.
    :param start: subtracted from the values (a Discrete's or a MultiDiscrete's first).
    :param choices: a Discrete's number of choices, sent one-hot (0: not a choice). One-hot
        is what SB3's policies make of a Discrete anyway; sent so, a bot of the game is
        vectors alone, which every player of a bot reads.
    :param words: a text part's values, in order (sent one-hot over them and one more, the
        place of a text never seen).
    """

    key: str
    source: Path
    space: spaces.Space[Any]
    channels_last: bool = False
    start: Any = 0
    choices: int = 0
    words: tuple[str, ...] = field(default=())

    @property
    def is_image(self) -> bool:
        """True for a picture (a camera key)."""
        return isinstance(self.space, spaces.Box) and self.space.dtype == np.uint8

    def pick(self, obs: Any) -> Any:
        """This part's value in the environment's observation."""
        for step in self.source:
            obs = obs[step]
        return obs

    def convert(self, value: Any) -> Any:
        """The environment's value of this part as the bridge carries it."""
        if self.words:
            word = str(value)
            return _one_hot(
                self.words.index(word) if word in self.words else len(self.words),
                len(self.words) + 1,
            )
        if self.choices:
            return _one_hot(int(value) - int(self.start), self.choices)
        if self.is_image:
            frame = np.asarray(value, dtype=np.uint8)
            if frame.ndim == 2:
                return frame[None]
            return np.ascontiguousarray(frame.transpose(2, 0, 1)) if self.channels_last else frame
        flat = np.asarray(value, dtype=np.float32).reshape(-1)
        return flat - self.start if isinstance(self.start, np.ndarray) else flat

    def entry(self) -> dict[str, Any]:
        """The part's entry in the ``env_info`` reply, bounds per dimension (null where
        unbounded)."""
        space = self.space
        assert isinstance(space, spaces.Box)
        if self.is_image:
            return {"size": [int(v) for v in space.shape], "space": "box"}
        return {
            "size": [int(space.shape[0])],
            "space": "box",
            "low": _finite_or_none(space.low),
            "high": _finite_or_none(space.high),
        }


@dataclass(frozen=True)
class JoinedPart(ObservationPart):
    """Parts of numbers sent as one vector, in the environment's order: a dictionary or a
    tuple of numbers (MiniGrid's direction and grid) is one observation, which takes the
    fastest path through the bridge (the binary step) and the trainer (the lean loop), and
    makes a bot of one input.

    :param members: the parts, each its own values in turn.
    """

    members: tuple[ObservationPart, ...] = ()

    def pick(self, obs: Any) -> Any:
        return obs

    def convert(self, value: Any) -> Any:
        return np.concatenate([part.convert(part.pick(value)) for part in self.members])


def joined(parts: tuple[ObservationPart, ...]) -> JoinedPart:
    """``parts`` (numbers, none a picture) as one vector of all their values."""
    boxes = [part.space for part in parts]
    assert all(isinstance(box, spaces.Box) for box in boxes)
    low = np.concatenate([np.asarray(box.low).reshape(-1) for box in boxes])  # type: ignore[attr-defined]
    high = np.concatenate([np.asarray(box.high).reshape(-1) for box in boxes])  # type: ignore[attr-defined]
    box = spaces.Box(low, high, (low.size,), np.float32)
    return JoinedPart(OBS_KEY, (), box, members=parts)


def _one_hot(index: int, size: int) -> np.ndarray:
    """``size`` zeros with a one at ``index`` (none for a value outside the choices)."""
    values = np.zeros(size, dtype=np.float32)
    if 0 <= index < size:
        values[index] = 1.0
    return values


def _choice(name: str, source: Path, choices: int, **more: Any) -> ObservationPart:
    """A part that is one of ``choices``, sent one-hot."""
    box = spaces.Box(0.0, 1.0, (choices,), np.float32)
    return ObservationPart(name, source, box, choices=choices, **more)


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


def _numbers(
    name: str, source: Path, low: Any, high: Any, size: int, start: Any = 0
) -> ObservationPart:
    """A part of ``size`` float32 numbers between ``low`` and ``high`` (per value or one).

    :raises UnsupportedEnv: a vector too large to send as numbers.
    """
    if size > MAX_OBSERVATION_VALUES or size < 1:
        raise UnsupportedEnv(
            f"its observation {name!r} has {size:,} values; the gym game serves vectors of "
            f"1 to {MAX_OBSERVATION_VALUES:,} and pictures (a uint8 image)"
        )
    low = np.broadcast_to(np.asarray(low, dtype=np.float32).reshape(-1), (size,))
    high = np.broadcast_to(np.asarray(high, dtype=np.float32).reshape(-1), (size,))
    return ObservationPart(name, source, spaces.Box(low, high, (size,), np.float32), start=start)


def _leaf(name: str, source: Path, space: spaces.Space[Any]) -> ObservationPart:
    """The part of one leaf space (not a Dict, Tuple or text).

    :raises UnsupportedEnv: a space the gym game cannot serve, a vector too large, or a
        vector key whose name marks a picture.
    """
    if isinstance(space, spaces.Discrete):
        return _choice(name, source, int(space.n), start=int(space.start))
    if isinstance(space, spaces.MultiBinary):
        return _numbers(name, source, 0.0, 1.0, int(np.prod(space.shape)))
    if isinstance(space, spaces.MultiDiscrete):
        start = np.asarray(space.start, dtype=np.float32).reshape(-1)
        top = np.asarray(space.nvec, dtype=np.float32).reshape(-1) - 1
        return _numbers(name, source, 0.0, top, int(top.size), start)
    if not isinstance(space, spaces.Box):
        raise UnsupportedEnv(
            f"its observation {name!r} is a {type(space).__name__} space; the gym game serves "
            "Box, Discrete, MultiBinary, MultiDiscrete and text parts (in dictionaries and "
            "tuples): wrap the environment in a gymnasium.ObservationWrapper that gives "
            f"{name!r} as numbers, and register that as your own id"
        )
    picture = _picture_shape(space)
    if picture is not None:
        shape, last = picture
        key = IMAGE_KEY if not source else name if "2d" in name else f"{name}_2d"
        return ObservationPart(key, source, spaces.Box(0, 255, shape, np.uint8), last)
    if "2d" in name:
        raise UnsupportedEnv(f"its key {name!r} is not a picture, but a key with 2d names one")
    return _numbers(name, source, space.low, space.high, int(np.prod(space.shape)))


@dataclass
class PartsFound:
    """The parts of an observation, and what was left out (a line each, for the user)."""

    parts: list[ObservationPart] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    texts: list[tuple[str, Path]] = field(default_factory=list)
    """Text parts whose values are still to be learned (name, where)."""


def _is_text(space: spaces.Space[Any]) -> bool:
    """Gymnasium's ``Text``, or a space of its own whose values are text (MiniGrid's
    ``MissionSpace`` is not a ``Text``)."""
    if isinstance(space, spaces.Text):
        return True
    if isinstance(space, spaces.Box | spaces.Discrete | spaces.MultiBinary | spaces.MultiDiscrete):
        return False
    try:
        return isinstance(space.sample(), str)
    except Exception:  # a space of its own may not sample: then it is not known as text
        return False


def _walk(space: spaces.Space[Any], name: str, source: Path, found: PartsFound) -> None:
    if isinstance(space, spaces.Dict):
        for key, sub in space.spaces.items():
            _walk(sub, str(key) if not source else f"{name}_{key}", (*source, str(key)), found)
    elif isinstance(space, spaces.Tuple):
        for index, sub in enumerate(space.spaces):
            _walk(sub, f"{name}_{index}", (*source, index), found)
    elif _is_text(space):
        found.texts.append((name, source))
        found.parts.append(ObservationPart(name, source, spaces.Discrete(1)))  # placeholder
    else:
        found.parts.append(_leaf(name, source, space))


def _text_part(env: gymnasium.Env[Any, Any], name: str, source: Path) -> ObservationPart | str:
    """A text part as a choice among the values it takes over :data:`TEXT_SAMPLES` episodes'
    starts, or the note that leaves it out (it never varies).

    :raises UnsupportedEnv: text of many values, naming the wrapper to write.
    """
    probe = ObservationPart(name, source, spaces.Discrete(1))
    seen = [str(probe.pick(env.reset(seed=seed)[0])) for seed in range(TEXT_SAMPLES)]
    words = tuple(sorted(set(seen)))
    if len(words) == 1:
        return f"its text {name!r} is always {words[0][:60]!r}: left out of the observation"
    if len(words) > min(MAX_TEXT_VALUES, TEXT_SAMPLES // 2):
        raise UnsupportedEnv(
            f"its text {name!r} takes many values ({len(words)} in {TEXT_SAMPLES} episodes); "
            "the gym game serves text of a few values: wrap the environment in a "
            f"gymnasium.ObservationWrapper that gives {name!r} as numbers (an encoding of the "
            "words), and register that as your own id"
        )
    return _choice(name, source, len(words) + 1, words=words)


def space_parts(space: spaces.Space[Any]) -> tuple[ObservationPart, ...]:
    """The parts of one observation space, with no environment to sample texts from (a
    PettingZoo agent's).

    :raises UnsupportedEnv: a part the gym game cannot serve, text among them.
    """
    found = PartsFound()
    _walk(space, OBS_KEY, (), found)
    if found.texts:
        name = found.texts[0][0]
        raise UnsupportedEnv(f"its observation {name!r} is text: wrap the game so it is numbers")
    return tuple(found.parts)


def observation_parts(
    env: gymnasium.Env[Any, Any],
) -> tuple[tuple[ObservationPart, ...], list[str]]:
    """The parts of ``env``'s observation and the notes on what was left out (a text that
    never varies). A text part's values are learned by starting episodes of ``env``.

    :raises UnsupportedEnv: a part the gym game cannot serve, or nothing left to observe.
    """
    found = PartsFound()
    _walk(env.observation_space, OBS_KEY, (), found)
    parts: list[ObservationPart] = []
    for part in found.parts:
        if (part.key, part.source) not in found.texts:
            parts.append(part)
            continue
        made = _text_part(env, part.key, part.source)
        if isinstance(made, str):
            found.notes.append(made)
        else:
            parts.append(made)
    if not parts:
        raise UnsupportedEnv("nothing is left to observe once its constant text is left out")
    if len({part.key for part in parts}) < len(parts):
        raise UnsupportedEnv("two of its keys name one key on the wire")
    if len(parts) > 1 and not any(part.is_image for part in parts):
        return (joined(tuple(parts)),), found.notes
    return tuple(parts), found.notes
