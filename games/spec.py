"""What the rest of lander knows about a game: the :class:`GameEntry` each game folder
declares in its ``entry.py``, and the small types that entry is made of.

A game's own code (its protocol client, physics and pictures) imports nothing of lander
but the protocol, the game loop and the bot runner; its entry describes it to lander with
the types here, so ``training`` and ``cli`` never name a game.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from game_bridge.bot_runner import BotRunner

BUNDLED_TUNING: dict[str, Any] = {
    "agents_per_instance": 8,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "ent_coef": 0.0,
    "normalize_observations": False,
    "normalize_rewards": False,
    "adaptive_kl": 0.0,
    "std_regrowth": 0.0,
}
"""The settings lander's own games were tuned and measured with (time to reward 200 on the
lander, the stroke and duel tests' scores), which they keep in their ``train_defaults``:
the general defaults (training/config/settings.py) are chosen for games nobody tuned lander for."""

BUNDLED_CAMERA_TUNING: dict[str, Any] = {
    "camera_encoder": "centroids",
    "learning_rate": 2e-3,
    "n_epochs": 10,
    "clip_range": 0.2,
}
"""What the bundled games' camera modes were measured with (the lander's 0.8 within 10x the
time of its coordinates, the stroke's scope: docs/performance.md, "The camera, third part"),
which they start from instead of the defaults for pictures chosen on games nobody here drew
(``training/session/planning.py``)."""

Policy = Callable[[Any], np.ndarray]
"""Maps a batch of observations ((K, size), or a dict of keys for a game with several) to
a batch of actions."""


@dataclass(frozen=True)
class Baseline:
    """A game's baseline policy (random, reference): it reads the game's full numbers
    whatever a run's policy sees (a camera's frames, glimpses), so a normalized score means
    the same in every mode of the game."""

    act: Policy

    def __call__(self, obs: Any) -> np.ndarray:
        return self.act(obs)


GameArgs = Mapping[str, str]
"""A run's ``--game-arg`` settings, as the game receives them (``--key=value``)."""


def pixels_observed(game_args: GameArgs) -> bool:
    """True where a bundled game is seen through its camera (``--game-arg
    observation=pixels``): its ``sees_pictures``."""
    return game_args.get("observation") == "pixels"


class Scorer(Protocol):
    """A game's settings as an evaluation plays them in-process (a frozen, hashable
    dataclass, so its baselines are measured once per process)."""

    def play(
        self, policy: Policy, episodes: int, seed: int
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Play ``episodes`` episodes at once, one agent each; return their returns and
        successes (None for a game without success)."""

    def baseline_policies(self, rng: np.random.Generator) -> tuple[Policy, Policy | float | None]:
        """The random policy (normalized score 0) and the reference controller (score 1), or
        for a game without one the return that counts as solved (None: no score 1 known)."""

    def __hash__(self) -> int:
        """Hashable: its baselines are cached per settings."""


@dataclass(frozen=True)
class PlayOptions:
    """What ``lander play`` asks of a game's player.

    :param agents: agents playing at once.
    :param seconds: game seconds to play.
    :param seed: the game's seed.
    :param speed: game seconds per wall second of a live view.
    :param record: the picture to write (``.png`` or ``.gif``), if any.
    :param title: the picture's title so far (``bot run03 (1,000 steps)``).
    :param game_args: the ``--game-arg`` settings the bot trained with.
    :param action_repeat: the ``--action-repeat`` the bot trained with (None: the game's own).
    :param console: a rich console for a live view (None: none).
    :param remote: the running games of ``--game-bin`` as a VecEnv, for a game whose
        entry ``plays_remote``; None plays the game's own physics.
    :param normalize: the normalized score of a mean return on this game's settings (None
        on a game with no known score 1).
    """

    agents: int
    seconds: float
    seed: int
    speed: float
    record: Path | None
    title: str
    game_args: GameArgs
    action_repeat: int | None
    console: Any
    normalize: Callable[[float], float | None]
    remote: Any = None


@dataclass
class PlayResult:
    """What a play showed: the lines to print and the picture written (if any)."""

    lines: list[str]
    picture: Path | None = None


@dataclass(frozen=True)
class GameEntry:
    """Everything the rest of lander needs to know about one game.

    :param name: the ``--game`` name (the game's folder under ``games/``).
    :param module: ``python -m module`` starts one instance (the protocol client).
    :param fork_main: the module whose ``main(argv)`` runs one instance, for the fork
        server (None: every instance is launched as a process).
    :param transport: the transport the game speaks unless told otherwise.
    :param gym_module: the module of its in-process gymnasium environment
        (``--in-process``): imported, it registers the environment under its ``ENV_ID``.
    :param game_args: the ``--game-arg`` keys the game knows, with their values (None: a
        whole number of at least 1); any other is refused.
    :param observation_size: values in one agent's observation.
    :param action_size: values in one agent's continuous action.
    :param in_process_kwargs: the gymnasium keyword arguments of a run's settings.
    :param scorer: the in-process scorer of a run's settings (``--game-arg``, ``--action-repeat``).
    :param record_name: the name evaluations on these settings are championed under
        (another difficulty is another game).
    :param play: ``lander play`` of a bot: pictures and a live view.
    :param plays_remote: ``play --game-bin`` can draw a protocol game of this layout.
    :param web_files: the files of the game's web page (``play --web``), its
        ``index.html`` first, each served under its file name; empty for a game without one.
    :param build_name: the executable ``lander setup`` writes into ``build/`` for it (the
        default game's), so tools that launch a game by path can launch it.
    :param race_reward: the training reward ``tune --objective time`` races to by default
        (None: the user must give one).
    :param sides: the policy names of a game played by sides (``--self-play``, matches);
        empty for a game whose agents all play alike.
    :param page_plays: whether its web page plays a bot of these ``--game-arg`` settings.
    :param train_defaults: training settings this game learns best with, measured on it
        (as RL Zoo keeps hyperparameters per environment): a new run of the bundled game
        starts from them, under its config file and flags; a game binary never gets them.
    :param arg_defaults: more of them for one ``--game-arg`` value, over ``train_defaults``
        (``("observation", "pixels")``: the lander seen through its camera).
    :param launch_args: arguments after ``python -m module`` of every instance (the gym
        game's ``--env_id``).
    :param gym_id: the in-process environment's registered id (None: ``gym_module``'s ``ENV_ID``).
    :param env_factory: what makes the in-process environment of a run's settings (None:
        ``gymnasium.make(gym_id, **in_process_kwargs(...))``).
    :param check_args: refuses ``--game-arg`` settings (with the run's ``--action-repeat``)
        the game cannot take, for a game whose settings are not a fixed list (None:
        ``game_args`` lists them all).
    """

    name: str
    module: str
    transport: str
    gym_module: str
    observation_size: int
    action_size: int
    in_process_kwargs: Callable[[GameArgs, int | None], dict[str, Any]]
    scorer: Callable[[GameArgs, int | None], Scorer]
    record_name: Callable[[GameArgs], str]
    play: Callable[[BotRunner, PlayOptions], PlayResult]
    game_args: dict[str, tuple[str, ...] | None] = field(default_factory=dict)
    fork_main: str | None = None
    plays_remote: bool = False
    web_files: tuple[Path, ...] = ()
    build_name: str | None = None
    race_reward: float | None = None
    sides: tuple[str, ...] = ()
    train_defaults: dict[str, Any] = field(default_factory=dict)
    arg_defaults: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    launch_args: tuple[str, ...] = ()
    gym_id: str | None = None
    env_factory: Callable[[GameArgs, int | None], Callable[[], Any]] | None = None
    check_args: Callable[[GameArgs, int | None], None] | None = None
    sees_pictures: Callable[[GameArgs], bool] = lambda _game_args: False
    """Whether the game sends a camera key with these ``--game-arg`` settings: a new run
    then starts from the defaults for pictures (training/config/defaults.py ``PICTURE_DEFAULTS``),
    under the game's own ``train_defaults`` and ``arg_defaults``."""
    continuous_actions: Callable[[GameArgs], bool] = lambda _game_args: False
    """Whether its actions are continuous (a Box) with these ``--game-arg`` settings: a
    ``gym:`` game that sends pictures and acts so starts from the defaults for continuous
    actions from pictures too (``CONTINUOUS_PICTURE_DEFAULTS``)."""
    page_plays: Callable[[GameArgs], bool] = lambda _game_args: True
    """Whether the web page plays a bot of these ``--game-arg`` settings (the duel's page
    plays the race, not the chase)."""
    notes: tuple[str, ...] = ()
    """What a run says once of the game as lander serves it (a ``gym:`` game's text part
    that never varies, left out of the observation)."""
