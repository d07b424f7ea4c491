"""The options of every command that trains (``train``, ``start``, ``resume``, ``next``,
``sweep``, ``tune``), generated from the settings declared in ``training.config``.

A setting is declared once, with its default, help, bounds and whether a resume may
change it (:func:`training.config.setting`); :func:`with_settings` turns each into an
option of a command, so every command's ``--help`` lists every setting it accepts with
its default, and a new setting needs no line here.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import Field, fields
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, TypeVar, get_args, get_type_hints

import typer

from training.config import ConfigError, TrainConfig

_HINTS = get_type_hints(TrainConfig)
_DEFAULTS = TrainConfig()
GAME_ARG = "game_arg"  # the option of the ``game_args`` setting: one KEY=VALUE per use

Command = TypeVar("Command", bound=Callable[..., Any])


def _base_type(name: str) -> Any:
    kind = _HINTS[name]
    if isinstance(kind, UnionType):  # ``float | None``: the option takes a float
        kind = next(arg for arg in get_args(kind) if arg is not type(None))
    return kind


def _shown_default(item: Field[Any]) -> str:
    """The default as ``--help`` shows it."""
    if item.metadata["shown"]:
        return str(item.metadata["shown"])
    return _shown_value(item.name, getattr(_DEFAULTS, item.name))


def _shown_value(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int):
        # Counts read better grouped (20,000,000 steps); a port is a name, not a count.
        counted = value >= 10_000 and not name.endswith("port")
        return f"{value:,}" if counted else str(value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _given(args: list[str], flag: str) -> list[str]:
    """Every value ``flag`` takes in raw command-line ``args`` (``--flag V`` or ``--flag=V``)."""
    values = []
    for index, arg in enumerate(args):
        if arg == flag and index + 1 < len(args):
            values.append(args[index + 1])
        elif arg.startswith(flag + "="):
            values.append(arg.split("=", 1)[1])
    return values


def game_defaults_shown(args: list[str]) -> dict[str, str]:
    """The defaults ``--help`` shows for the game named in ``args`` (``--game``, else the
    default game) where they are not the general ones: a bundled game's own, the defaults
    for pictures of a game that sends them. A game binary or server (``--game-bin``,
    ``--game-url``) and a game the registry does not know get the general ones: none here.

    :param args: the command line as typed, ``--help`` among it.
    :return: option name -> what its ``[default: ...]`` says.
    """
    from games import DEFAULT_GAME, UnknownGame
    from training.session.planning import game_defaults

    if _given(args, "--game-bin") or _given(args, "--game-url"):
        return {}
    game = (_given(args, "--game") or [DEFAULT_GAME])[-1]
    game_args = dict(pair.split("=", 1) for pair in _given(args, "--game-arg") if "=" in pair)
    try:
        tuned = game_defaults(TrainConfig(game=game, game_args=game_args))
    except (UnknownGame, ConfigError, ValueError):
        return {}
    return {
        option_name(name): f"{_shown_value(name, value)} for {game}; general: "
        + _shown_value(name, getattr(_DEFAULTS, name))
        for name, value in tuned.items()
        if value != getattr(_DEFAULTS, name)
    }


ENGINE_ARG = "engine_arg"  # the option of the ``engine_args`` setting: one argument per use
GYM_PACKAGE = "gym_package"  # the option of the ``gym_packages`` setting: one package per use
PATH_SETTINGS = ("game_bin", "opponent", "game_project")
"""Settings that name a file or folder: made absolute, so a path typed in any folder names
the same one later (a resume, a tmux window)."""
_REPEATED = {"game_args": GAME_ARG, "engine_args": ENGINE_ARG, "gym_packages": GYM_PACKAGE}
"""Settings given once per item, by the singular option that gives each."""


def option_name(setting: str) -> str:
    """The command-line spelling of a setting (``n_parallel`` -> ``--n-parallel``)."""
    return "--" + _REPEATED.get(setting, setting).replace("_", "-")


def _parameter(item: Field[Any]) -> inspect.Parameter:
    """One command parameter for one declared setting."""
    help_text, flag = item.metadata["help"], option_name(item.name)
    panel = item.metadata["panel"]
    base = _base_type(item.name)
    if item.name in _REPEATED:
        each = {"game_args": "KEY=VALUE", "gym_packages": "PACKAGE"}.get(item.name, "ARG")
        option = typer.Option(flag, metavar=each, help=help_text, rich_help_panel=panel)
        return inspect.Parameter(
            _REPEATED[item.name], inspect.Parameter.KEYWORD_ONLY, default=None,
            annotation=Annotated[list[str] | None, option],
        )  # fmt: skip
    help_text += f" [default: {_shown_default(item)}]"
    if base is bool:
        decls = f"{flag}/--no-{flag.removeprefix('--')}"
        option = typer.Option(decls, help=help_text, show_default=False, rich_help_panel=panel)
        kind: Any = bool
    else:
        kind = Path if item.name in ("game_bin", "game_project") else base
        metavar = "|".join(item.metadata["choices"]) if item.metadata["choices"] else None
        option = typer.Option(
            flag, help=help_text, show_default=False, metavar=metavar, rich_help_panel=panel
        )
    return inspect.Parameter(
        item.name,
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[kind | None, option],
    )


def setting_parameters(exclude: tuple[str, ...] = ()) -> list[inspect.Parameter]:
    """A parameter per declared setting, in declaration order, but those in ``exclude``."""
    return [_parameter(item) for item in fields(TrainConfig) if item.name not in exclude]


def with_settings(exclude: tuple[str, ...] = ()) -> Callable[[Command], Command]:
    """Give a command one option per training setting; the command receives the ones
    the user gave as ``settings`` (a dict of setting name to value, None not given).

    :param exclude: settings the command declares in its own way (``tune`` races lists).
    """

    def decorate(command: Command) -> Command:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "settings"]
        generated = setting_parameters(exclude)
        names = [p.name for p in generated]

        @functools.wraps(command)
        def with_given(*args: Any, **kwargs: Any) -> Any:
            given = {name: kwargs.pop(name, None) for name in names}
            return command(*args, **kwargs, settings=collect_settings(**given))

        with_given.__signature__ = signature.replace(parameters=[*own, *generated])  # type: ignore[attr-defined]
        with_given.__annotations__ = {}  # typer reads the signature above, not these strings
        return with_given  # type: ignore[return-value]

    return decorate


def parse_game_args(pairs: list[str] | None) -> dict[str, str]:
    """``["difficulty=2", "level=a"]`` to ``{"difficulty": "2", "level": "a"}``.

    :raises ConfigError: on a pair without ``=`` or with an unsafe key.
    """
    result: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        key = key.strip().removeprefix("--")
        if not sep or not key or not key.replace("_", "").replace("-", "").isalnum():
            raise ConfigError(f"--game-arg expects KEY=VALUE with a plain key, got {pair!r}")
        result[key] = value
    return result


def collect_settings(**given: Any) -> dict[str, Any]:
    """The settings a user gave explicitly (None means "not given"), as ``TrainConfig``
    names and kinds: ``--game-arg`` pairs become ``game_args``, a game path absolute."""
    settings = {name: value for name, value in given.items() if value is not None}
    if settings.get(GAME_ARG):
        settings["game_args"] = parse_game_args(settings.pop(GAME_ARG))
    settings.pop(GAME_ARG, None)
    for option, name in ((ENGINE_ARG, "engine_args"), (GYM_PACKAGE, "gym_packages")):
        if option in settings:
            settings[name] = list(settings.pop(option))
    for name in PATH_SETTINGS:
        if name not in settings:
            continue
        try:
            settings[name] = str(Path(settings[name]).resolve())
        except (RuntimeError, OSError) as exc:  # a symlink loop (RuntimeError before 3.13)
            raise ConfigError(f"{option_name(name)} {str(settings[name])!r}: {exc}") from None
    return settings


def settings_argv(settings: dict[str, Any]) -> list[str]:
    """The command-line arguments that give ``settings`` (for the ``lander train`` a
    tmux window runs): the inverse of the generated options."""
    argv: list[str] = []
    for name, value in settings.items():
        flag = option_name(name)
        if name == "game_args":
            for key, item in value.items():
                argv += [flag, f"{key}={item}"]
        elif name in ("engine_args", "gym_packages"):
            argv += [f"{flag}={item}" for item in value]
        elif isinstance(value, bool):
            argv.append(flag if value else f"--no-{flag.removeprefix('--')}")
        else:
            argv += [flag, str(value)]
    return argv


ConfigFile = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="Settings file (.toml or .json), applied before the options.",
        rich_help_panel="Run",
    ),
]
Resume = Annotated[
    str | None,
    typer.Option(
        help="Continue from a run name (its final or newest checkpoint) or a .zip path.",
        rich_help_panel="Run",
    ),
]
ResetStd = Annotated[
    float | None,
    typer.Option(
        help="On resume, set the action standard deviation to this value.",
        rich_help_panel="Exploration",
    ),
]
Force = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Start the run over even though it exists (removes its old files).",
        rich_help_panel="Run",
    ),
]
Git = Annotated[
    bool | None,
    typer.Option(
        "--git/--no-git",
        help="Pull, commit and push (default), or keep the run out of git. A resumed run "
        "keeps the choice of the run it continues unless given.",
        show_default=False,
        rich_help_panel="Git",
    ),
]
GameBin = Annotated[
    Path | None,
    typer.Option(help="A game executable speaking the Godot RL Agents protocol."),
]


AutoResume = Annotated[
    bool,
    typer.Option(
        "--auto-resume/--no-auto-resume",
        help="Restart a trainer that ends abnormally (killed, a fault) from its newest "
        "checkpoint, at most 3 times an hour; never one stopped or finished.",
        rich_help_panel="Run",
    ),
]


Demonstrations = Annotated[
    list[Path] | None,
    typer.Option(
        "--demos",
        help="A demonstration file (the Godot RL Agents plugin's, or lander's own from "
        "`lander record`); repeat for more. A new run's policy is cloned from them before "
        "PPO starts (--bc-epochs).",
        rich_help_panel="Run",
    ),
]


def session_argv(
    config: Path | None,
    resume: str | None,
    reset_std: float | None,
    force: bool,
    git: bool | None,
    demos: list[Path] | tuple[Path, ...] = (),
) -> list[str]:
    """The arguments of the options that steer a training session (not settings)."""
    argv = ["--config", str(config.resolve())] if config is not None else []
    for demo in demos:
        argv += ["--demos", str(demo.resolve())]
    argv += ["--resume", resume] if resume is not None else []
    argv += ["--reset-std", str(reset_std)] if reset_std is not None else []
    argv += ["--force"] if force else []
    argv += [] if git is None else ["--git" if git else "--no-git"]
    return argv
