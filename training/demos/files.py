"""Recorded demonstrations: the files people make, read and checked before any training.

Two layouts are read. The Godot RL Agents plugin's (an AIController in
``RECORD_EXPERT_DEMOS`` mode writes it when the game window closes): a JSON array of
episodes, each ``[observations, actions]``, the observation list one longer than the
action list (the last observation is the terminal one, with no action). And lander's
own (``lander record``, the live page): one JSON object that also names the game it
came from and its spaces, with each step's reward (``docs/demos.md``). Both become
:class:`Demos`: the observation before each action, the action, and the reward when
the file has one. Nothing here needs torch.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from game_bridge.errors import LanderError
from game_bridge.file_input import read_bounded
from game_bridge.lfs_pointers import is_lfs_pointer, lfs_pointer_message
from training.demos.json_walk import JsonWalker
from training.runs.run_record import now_iso, write_bytes_atomic

DEMO_FORMAT = "lander-demos"
DEMO_VERSION = 1
MAX_DEMO_BYTES = 512 * 2**20
"""A larger file is refused before it is read (a demo is hours of play, not gigabytes)."""
RANGE_SLACK = 1e-5
"""How far beyond a Box's bounds an action may be (float32 rounding on the way)."""


class DemoError(LanderError):
    """A demonstration file that cannot teach this run: unreadable, empty, of another
    game, of other spaces, or holding an action out of range or a number that is not one."""


@dataclass(frozen=True)
class DemoEpisode:
    """One recorded episode.

    :param observations: the observation before each action, ``(T, obs_size)`` float32.
    :param actions: each action, ``(T, act_size)`` float32 (continuous) or ``(T,)`` int64.
    :param rewards: each step's reward ``(T,)``, or None (the plugin records none).
    """

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray | None

    @property
    def steps(self) -> int:
        return len(self.actions)


@dataclass(frozen=True)
class Demos:
    """The episodes of one file, and what the file says about where they came from.

    :param path: the file.
    :param sha256: its contents' hash (a run records which demos it started from).
    :param layout: ``lander`` or ``plugin``.
    :param episodes: the episodes, in the file's order.
    :param game: the game it was recorded on (:func:`training.evaluation.records.game_name`), or
        None when the file does not say (the plugin's layout).
    """

    path: Path
    sha256: str
    layout: str
    episodes: list[DemoEpisode]
    game: str | None

    @property
    def steps(self) -> int:
        return sum(episode.steps for episode in self.episodes)

    def summary(self) -> dict[str, Any]:
        """What run.json records of the file."""
        return {
            "path": str(self.path),
            "sha256": self.sha256,
            "layout": self.layout,
            "episodes": len(self.episodes),
            "steps": self.steps,
            "game": self.game,
        }


def _fail(path: Path, why: str) -> DemoError:
    return DemoError(f"demo file {str(path)!r}: {why}")


def _numbers(path: Path, where: str, value: Any, dtype: type) -> np.ndarray:
    """A JSON list of lists (or of numbers) as an array, every entry a finite number
    (not a string, a boolean or a null that numpy would turn into one)."""
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):  # ragged lists
        raise _fail(path, f"{where} are not lists of numbers") from None
    if array.dtype.kind not in "iuf":
        raise _fail(path, f"{where} are not lists of numbers")
    if not np.all(np.isfinite(array)):
        raise _fail(path, f"{where} hold NaN or infinity")
    return array.astype(dtype)


def _episode(path: Path, index: int, obs: Any, actions: Any, rewards: Any) -> DemoEpisode:
    where = f"episode {index}"
    observations = _numbers(path, f"{where}'s observations", obs, np.float32)
    acts = _numbers(path, f"{where}'s actions", actions, np.float32)
    if observations.ndim == 1:  # a number per step; or no step (ended at once): dropped later
        observations = observations.reshape(len(observations), -1 if len(observations) else 0)
    if observations.ndim != 2:
        raise _fail(path, f"{where}'s observations are not one list of numbers per step")
    if acts.ndim == 1:
        acts = acts[:, None]
    if len(acts) != len(observations):
        raise _fail(
            path,
            f"{where} has {len(observations)} observations for {len(acts)} actions "
            "(one observation before each action)",
        )
    reward_array = None
    if rewards is not None:
        reward_array = _numbers(path, f"{where}'s rewards", rewards, np.float32).reshape(-1)
        if len(reward_array) != len(acts):
            raise _fail(path, f"{where} has {len(reward_array)} rewards for {len(acts)} actions")
    return DemoEpisode(observations, acts, reward_array)


def _plugin_episode(path: Path, index: int, item: Any) -> DemoEpisode:
    """One of the plugin's ``[observations, actions]``: its last observation is terminal."""
    if not (isinstance(item, list) and len(item) >= 2):
        raise _fail(path, f"episode {index} is not [observations, actions]")
    obs, actions = item[0], item[1]
    if not isinstance(obs, list) or not isinstance(actions, list):
        raise _fail(path, f"episode {index} is not [observations, actions]")
    if len(obs) == len(actions) + 1:
        obs = obs[:-1]  # the terminal observation: no action was taken there
    return _episode(path, index, obs, actions, None)


def _lander_episode(path: Path, index: int, item: Any) -> DemoEpisode:
    if not isinstance(item, dict):
        raise _fail(path, f"episode {index} is not an object")
    return _episode(path, index, item.get("observations"), item.get("actions"), item.get("rewards"))


def _parse(path: Path, text: str) -> tuple[str, list[DemoEpisode], str | None]:
    """The layout, the episodes and the game of a demo file's text, each episode made
    numpy arrays as soon as it is read (:mod:`training.demos.json_walk`: the file's numbers
    never all live as Python floats at once)."""
    walker = JsonWalker(text)
    start = walker.peek()
    if start == "[":
        episodes = [_plugin_episode(path, i, item) for i, item in enumerate(walker.items())]
        walker.end()
        return "plugin", episodes, None
    if start != "{":
        walker.value()
        walker.end()
        raise _fail(path, "is neither a Godot RL Agents demo array nor a lander demo file")
    fields: dict[str, Any] = {}
    lander_episodes: list[DemoEpisode] | None = None
    for key in walker.members():
        if key == "episodes" and walker.peek() == "[":
            lander_episodes = [
                _lander_episode(path, i, item) for i, item in enumerate(walker.items())
            ]
        else:
            fields[key] = walker.value()
            if key == "episodes":
                lander_episodes = None  # the last of a repeated key counts, as in json.loads
    walker.end()
    if fields.get("format") != DEMO_FORMAT:
        raise _fail(path, "is neither a Godot RL Agents demo array nor a lander demo file")
    if fields.get("version") != DEMO_VERSION:
        raise _fail(path, f"version {fields.get('version')!r} is not one lander reads")
    if lander_episodes is None:
        raise _fail(path, "has no list of episodes")
    game = fields.get("game")
    return "lander", lander_episodes, game if isinstance(game, str) else None


def load_demos(path: Path) -> Demos:
    """Read a demo file of either layout, checking everything the file alone can tell.

    :raises DemoError: unreadable, not JSON, of neither layout, empty, or holding a
        number that is not one.
    """
    if is_lfs_pointer(path):
        raise DemoError(lfs_pointer_message(path, "demo file"))
    try:
        size = path.stat().st_size
        if size > MAX_DEMO_BYTES:
            raise _fail(
                path, f"{size / 2**20:,.0f} MB, over the {MAX_DEMO_BYTES >> 20} MB a demo may be"
            )
        raw = read_bounded(path, MAX_DEMO_BYTES)
    except OSError as exc:
        raise DemoError(f"cannot read demo file {str(path)!r}: {exc.strerror or exc}") from None
    digest = hashlib.sha256(raw).hexdigest()
    try:
        text = raw.decode(json.detect_encoding(raw), "surrogatepass")
        del raw  # the text is what is read from here on
        layout, episodes, game = _parse(path, text)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise _fail(path, f"is not JSON ({exc})") from None
    episodes = [episode for episode in episodes if episode.steps > 0]
    if not episodes:
        raise _fail(path, "holds no episode with a step in it")
    sizes = {episode.observations.shape[1] for episode in episodes}
    if len(sizes) > 1:
        raise _fail(path, f"its episodes' observations differ in size ({sorted(sizes)})")
    return Demos(path, digest, layout, episodes, game)


def check_game(demos: Demos, game: str) -> None:
    """Refuse demos recorded on another game than the run's (when the file names one):
    checked while planning, before any game starts.

    :param game: the run's game (:func:`training.evaluation.records.game_name`).
    :raises DemoError: the file names another game.
    """
    if demos.game is not None and demos.game != game:
        raise _fail(demos.path, f"was recorded on {demos.game}, and this run trains {game}")


def check_demos(demos: Demos, observation_space: spaces.Space, action_space: spaces.Space) -> None:
    """Refuse demos whose observations or actions are not this game's (its game was
    checked by :func:`check_game` when the run was planned).

    :raises DemoError: the first reason found.
    """
    path = demos.path
    if not isinstance(observation_space, spaces.Box) or len(observation_space.shape) != 1:
        raise _fail(path, f"this game's observations ({observation_space}) are not one vector")
    size = int(observation_space.shape[0])
    recorded = demos.episodes[0].observations.shape[1]
    if recorded != size:
        raise _fail(path, f"observations of {recorded} numbers, and this game sends {size}")
    for index, episode in enumerate(demos.episodes):
        _check_actions(path, index, episode.actions, action_space)


def _check_actions(path: Path, index: int, actions: np.ndarray, space: spaces.Space) -> None:
    where = f"episode {index}"
    if isinstance(space, spaces.Discrete):
        choices = actions.reshape(len(actions), -1)
        if choices.shape[1] != 1:
            raise _fail(path, f"{where}'s actions hold {choices.shape[1]} numbers, not one choice")
        bad = np.flatnonzero(
            (choices[:, 0] != np.round(choices[:, 0]))
            | (choices[:, 0] < 0)
            | (choices[:, 0] >= space.n)
        )
        if len(bad):
            raise _fail(
                path,
                f"{where} step {bad[0]}: action {choices[bad[0], 0]:g} is not a choice in 0-{space.n - 1}",
            )
        return
    if not isinstance(space, spaces.Box) or len(space.shape) != 1:
        raise _fail(path, f"this game's actions ({space}) are neither a vector nor a choice")
    if actions.shape[1] != space.shape[0]:
        raise _fail(
            path,
            f"{where}'s actions hold {actions.shape[1]} numbers, and this game takes {space.shape[0]}",
        )
    low, high = space.low - RANGE_SLACK, space.high + RANGE_SLACK
    outside = np.argwhere((actions < low) | (actions > high))
    if len(outside):
        step, slot = (int(value) for value in outside[0])
        raise _fail(
            path,
            f"{where} step {step}: action {actions[step, slot]:g} is outside "
            f"[{space.low[slot]:g}, {space.high[slot]:g}]",
        )


def write_demos(
    path: Path,
    episodes: list[DemoEpisode],
    game: str,
    game_args: dict[str, str],
    observation_space: spaces.Box,
    action_space: spaces.Space,
    recorded_by: str,
) -> None:
    """Write lander's own layout atomically (``docs/demos.md``).

    :param game: the game it is played on (:func:`training.evaluation.records.game_name`).
    :param recorded_by: who played: a bot file, ``reference``, ``keyboard``.
    """
    if isinstance(action_space, spaces.Discrete):
        action: dict[str, Any] = {"type": "discrete", "n": int(action_space.n)}
    else:
        box = action_space
        assert isinstance(box, spaces.Box)
        action = {
            "type": "continuous",
            "size": int(box.shape[0]),
            "low": [float(value) for value in box.low],
            "high": [float(value) for value in box.high],
        }

    document = {
        "format": DEMO_FORMAT,
        "version": DEMO_VERSION,
        "game": game,
        "game_args": dict(game_args),
        "recorded_by": recorded_by,
        "recorded_at": now_iso(),
        "observation": {"size": int(observation_space.shape[0])},
        "action": action,
        "episodes": [
            {
                "observations": episode.observations.astype(np.float64).tolist(),
                "actions": (
                    episode.actions.reshape(-1).astype(int).tolist()
                    if action["type"] == "discrete"
                    else episode.actions.astype(np.float64).tolist()
                ),
                "rewards": None
                if episode.rewards is None
                else episode.rewards.astype(float).tolist(),
            }
            for episode in episodes
        ],
    }
    # Compact: a demo holds a number per observation entry per step.
    write_bytes_atomic(path, (json.dumps(document, separators=(",", ":")) + "\n").encode())
