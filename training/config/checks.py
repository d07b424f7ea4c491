"""The checks of a whole configuration: each setting against its declaration, the settings that
depend on each other, and a bundled game's ``--game-arg``s; one :class:`ConfigError` line each."""

from __future__ import annotations

import math
from dataclasses import fields

from game_bridge.openenv_instance import server_url
from game_bridge.spaces import agents_beyond_memory
from games import (
    BUNDLED_GAMES,
    DEFAULT_GAME,
    EDITOR_GAME,
    GAME_NAMES,
    GYM_PREFIX,
    PZ_PREFIX,
    UnknownGame,
    game_entry,
    is_game_name,
)
from games.gym.packages import GymPackageError, check_package_name
from training.config.declare import ConfigError
from training.config.settings import TrainConfig


def check_config(config: TrainConfig) -> TrainConfig:
    """Check every setting against its declaration (finite, bounds, choices), then the
    settings that depend on each other; :class:`ConfigError` names the offender."""
    for item in fields(config):
        value, meta = getattr(config, item.name), item.metadata
        flag = item.name.replace("_", "-")
        if isinstance(value, float) and not math.isfinite(value):
            # nan passes every comparison below: a nan step size or timeout would
            # reach PPO or the socket code and fail far from the cause.
            raise ConfigError(f"{flag} must be a finite number, got {value}")
        if isinstance(value, int | float) and not isinstance(value, bool):
            if meta.get("low") is not None and value < meta["low"]:
                low = meta["low"]
                least = "0 or more" if low == 0 else "positive" if low < 1 else f"at least {low:g}"
                raise ConfigError(f"{flag} must be {least}, got {value:g}")
            if meta.get("high") is not None and value > meta["high"]:
                raise ConfigError(f"{flag} must be at most {meta['high']:,}, got {value:,}")
        if meta.get("choices") and value is not None and value not in meta["choices"]:
            raise ConfigError(f"{flag} must be one of {', '.join(meta['choices'])}, got {value!r}")
    if config.instances_per_node is not None and config.cluster is None:
        raise ConfigError("--instances-per-node places games on a cluster: add --cluster ADDRESS")
    if config.game.startswith(PZ_PREFIX) and config.in_process:
        raise ConfigError(
            f"--game {config.game} has many agents: it trains through its game processes "
            "(drop --in-process)"
        )
    if config.self_play and config.in_process:
        raise ConfigError("--self-play plays a game's sides through the bridge: drop --in-process")
    if config.self_play and config.collector == "async":
        raise ConfigError(
            "--collector async plays ahead of the update; self-play swaps opponents and "
            "sides between steps: use --collector lean"
        )
    if config.self_play and config.frame_stack > 1:
        raise ConfigError(
            "--frame-stack with --self-play: the other sides' snapshots play single "
            "frames; train a camera game's sides without stacking"
        )
    _check_memory(config)
    beyond = agents_beyond_memory(config.agents_per_instance, "--agents-per-instance")
    if beyond is not None:
        raise ConfigError(beyond)
    if config.opponent is not None and not config.self_play:
        raise ConfigError("--opponent plays the other sides of --self-play: add --self-play")
    if config.cluster is not None and config.in_process:
        raise ConfigError("--in-process trains without games: it cannot use --cluster")
    if (config.game_url is not None) != (config.game_transport == "openenv"):
        raise ConfigError(
            "--transport openenv trains an OpenEnv server: give it with --game-url URL"
            if config.game_url is None
            else "--game-url is an OpenEnv server: its transport is openenv"
        )
    if config.game_url is not None and (config.game_bin is not None or config.cluster is not None):
        raise ConfigError("--game-url is a running server: drop --game-bin and --cluster")
    if config.game_url is not None:
        try:
            server_url(config.game_url)
        except ValueError as exc:
            raise ConfigError(f"--game-url: {exc}") from None
    if not is_game_name(config.game):
        raise ConfigError(f"game must be one of {GAME_NAMES}, got {config.game!r}")
    _check_gym_packages(config)
    if config.own_game is None:
        check_bundled_game_args(config.game, config.game_args, config.action_repeat)
    if config.game_bin is not None and config.game != DEFAULT_GAME:
        raise ConfigError(
            f"--game {config.game} names a bundled game and --game-bin another: give one"
        )
    _check_godot(config)
    if config.cluster is not None and config.game_transport == "stdio":
        raise ConfigError("stdio games run on the trainer's machine: --cluster needs tcp")
    if config.port > 65535 - config.n_parallel:
        raise ConfigError(
            f"port must leave room for {config.n_parallel} instances below 65536, got {config.port}"
        )
    return config


def _check_gym_packages(config: TrainConfig) -> None:
    """Package names that are module paths, for a ``gym:`` game (nothing is imported here:
    a bot file's settings are checked too, and a file imports nothing by itself)."""
    if not config.gym_packages:
        return
    if not config.game.startswith((GYM_PREFIX, PZ_PREFIX)) or config.own_game is not None:
        raise ConfigError(
            f"--gym-package imports packages that register Gymnasium ids: it goes with "
            f"--game {GYM_PREFIX}ENV_ID (or {PZ_PREFIX}MODULE), not {config.own_game or config.game}"
        )
    for name in config.gym_packages:
        try:
            check_package_name(name)
        except GymPackageError as exc:
            raise ConfigError(str(exc)) from None


def _check_godot(config: TrainConfig) -> None:
    """The Godot ways (the editor, a project from source or its training build), each
    refused in one line where it meets a setting it cannot take."""
    if config.game_project is not None:
        other = "--game-bin" if config.game_bin else "--game-url" if config.game_url else None
        if other is None and config.game != DEFAULT_GAME:
            other = f"--game {config.game}"
        if other is not None:
            raise ConfigError(f"--game-project names the game and {other} another: give one")
        if config.cluster is not None:
            raise ConfigError(
                "--game-project runs the engine on this machine: for --cluster, give each node "
                "the exported game with --game-bin"
            )
        if config.game_transport != "tcp":
            raise ConfigError(
                "--game-project: the Godot RL Agents plugin speaks TCP; drop --transport"
            )
        if config.export_preset is not None and config.scene is not None:
            raise ConfigError(
                "--scene runs the project from source; an exported build cannot be pointed at "
                "another scene: select the training scene in the preset (custom_features)"
            )
    else:
        named: dict[str, object] = {
            "--scene": config.scene,
            "--engine-arg": config.engine_args,
            "--export-preset": config.export_preset,
        }
        for flag, value in named.items():
            if value:
                raise ConfigError(f"{flag} applies to a Godot project: add --game-project PATH")
    if config.game != EDITOR_GAME:
        return
    refused = {
        "--n-parallel above 1 (the editor runs one game)": config.n_parallel != 1,
        "--speedup (the scene's own applies)": config.speedup is not None,
        "--action-repeat (the scene's own applies)": config.action_repeat is not None,
        "--cluster": config.cluster is not None,
        "--in-process": config.in_process,
        "--transport stdio": config.game_transport != "tcp",
        "--game-bin": config.game_bin is not None,
        "--game-url": config.game_url is not None,
        "--game-arg (the editor's game gets no arguments)": bool(config.game_args),
        "--eval-every (the editor runs one game, the one that trains)": bool(config.eval_every),
    }
    for what, given in refused.items():
        if given:
            raise ConfigError(f"--game {EDITOR_GAME} with {what}: drop it")


def _check_memory(config: TrainConfig) -> None:
    """The settings a policy with memory cannot take yet, refused in one line each."""
    if not config.memory:
        return
    refused = {
        "--self-play": config.self_play,
        "--collector async": config.collector == "async",
        "--collector sb3": config.collector == "sb3",
        "--frame-stack": config.frame_stack > 1,
    }
    for flag, given in refused.items():
        if given:
            raise ConfigError(
                f"--memory with {flag}: not supported yet; train the policy with memory "
                f"without {flag}"
            )


def check_bundled_game_args(
    game: str, game_args: dict[str, str], action_repeat: int | None = None
) -> None:
    """Refuse a ``--game-arg`` the bundled ``game`` does not know, or a value it cannot take,
    naming what it knows: silently ignored, it would train as if it had not been given. A
    ``gym:`` game checks its settings with ``--action-repeat`` too (an ALE id that skips
    frames itself refuses a second skip) before any game process starts.

    :raises ConfigError: naming the argument.
    """
    if game.startswith((GYM_PREFIX, PZ_PREFIX)):
        try:
            check = game_entry(game).check_args
            if check is not None:
                check(game_args, action_repeat)
        except (UnknownGame, ValueError) as exc:
            raise ConfigError(str(exc)) from None
        return
    known = game_entry(game).game_args if game in BUNDLED_GAMES else {}
    for key, value in game_args.items():
        if key not in known:
            raise ConfigError(
                f"--game-arg {key}: the bundled {game} game knows only " + ", ".join(sorted(known))
            )
        choices = known[key]
        if choices is None:
            if not (value.isdigit() and int(value) >= 1):
                raise ConfigError(f"--game-arg {key} must be a whole number from 1, got {value!r}")
            beyond = agents_beyond_memory(int(value), f"--game-arg {key}")
            if beyond is not None:
                raise ConfigError(beyond)
        elif value not in choices:
            raise ConfigError(
                f"--game-arg {key} must be one of {', '.join(choices)}, got {value!r}"
            )
