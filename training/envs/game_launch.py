"""A run's games as the bridge launches them, and their launch begun before torch loads.

Nothing here imports torch or Stable-Baselines3: ``lander train`` starts the games
(:class:`EarlyGames`) and only then imports the training stack, so the games boot
while torch loads (a launch takes 0.2 s for the bundled game, 0.7 s for the Godot
example of 4 instances).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from game_bridge.file_input import read_bounded
from game_bridge.instance import GameInstance
from game_bridge.launcher import (
    LaunchConfig,
    close_instances,
    connect_instances,
    discard_output,
    game_command,
    start_instances,
)
from game_bridge.spaces import EnvInfo
from games import EDITOR_GAME, launch_settings
from games.gym.packages import package_arguments
from training.config import MAX_SETTINGS_BYTES, ConfigError, TrainConfig
from training.envs.godot_games import godot_game


def game_launch(game: str, game_bin: str | Path | None) -> dict[str, Any]:
    """How the bridge starts a run's game: the executable ``game_bin``, or the bundled
    ``game`` (:func:`games.launch_settings`).

    :raises LaunchError: when the executable is missing or not executable.
    """
    return {"command": game_command(game_bin)} if game_bin is not None else launch_settings(game)


def launch_config(
    config: TrainConfig, output_dir: Path | None = None, build_root: Path | None = None
) -> LaunchConfig:
    """The bridge's launch settings for a run's configuration.

    :param build_root: the checkout's ``build/``, where a Godot project's training build
        goes (the project's resolution is kept for the process: later calls may omit it).
    :raises GodotProjectError, GodotEngineError: a Godot project that cannot be run.
    """
    common: dict[str, Any] = {
        "n_instances": config.n_parallel,
        "seed": config.seed,
        "read_timeout": config.read_timeout,
        "output_dir": output_dir,
    }
    if config.game_url is not None:
        return LaunchConfig(
            transport="openenv",
            game_url=config.game_url,
            max_episode_steps=config.max_episode_steps,
            schema_override=openenv_override(config.openenv_schema),
            **common,
        )
    if config.game == EDITOR_GAME:
        return LaunchConfig(
            external=True,
            base_port=config.port,
            connect_timeout=config.editor_wait,
            **{**common, "n_instances": 1},
        )
    game_args = {"agents": str(config.agents_per_instance), **config.game_args}
    if config.game_project is not None:
        godot = godot_game(config, build_root or Path.cwd() / "build")
        launch: dict[str, Any] = {"command": list(godot.command)}
    else:
        launch = game_launch(config.game, config.game_bin)
        if config.gym_packages:  # the game processes import what the trainer did
            launch["command"] = [*launch["command"], *package_arguments(config.gym_packages)]
    cluster = None
    if config.cluster is not None:
        from game_bridge.cluster import GameCluster  # Ray: only when a cluster is asked for

        cluster = GameCluster(config.cluster, config.instances_per_node)
    return LaunchConfig(
        cluster=cluster,
        **launch,
        transport=config.game_transport,
        base_port=config.port,
        speedup=config.speedup,
        action_repeat=config.action_repeat,
        game_args=game_args,
        fast_wire=config.fast_wire,
        **common,
    )


def editor_prompt(launch: LaunchConfig) -> str:
    """What a run (or an evaluation) says once, when it listens for the game a person starts."""
    return (
        f"[bold]waiting on port {launch.base_port} for the game: press Play in the Godot "
        f"editor[/] (giving up after {launch.connect_timeout:g} s: --editor-wait)"
    )


def openenv_override(path: str | None) -> dict[str, Any] | None:
    """``--openenv-schema``: the fields it replaces in the server's schemas.

    :raises ConfigError: a file that cannot be read or is not such an object.
    """
    if path is None:
        return None
    try:
        override = json.loads(read_bounded(Path(path), MAX_SETTINGS_BYTES))
    except OSError as exc:  # missing, a folder, a FIFO, /dev/zero, too large
        raise ConfigError(f"--openenv-schema {path}: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"--openenv-schema {path}: cannot read it as JSON ({exc})") from None
    if not isinstance(override, dict) or not all(
        key in ("action", "observation") and isinstance(value, dict)
        for key, value in override.items()
    ):
        raise ConfigError(
            f'--openenv-schema {path}: expected {{"action": {{...}}, "observation": {{...}}}}'
        )
    for part, fields in override.items():
        for name, schema in fields.items():
            if schema is not None and not isinstance(schema, dict):
                raise ConfigError(
                    f"--openenv-schema {path}: {part} field {name!r} must be a JSON Schema "
                    f"object or null, got {schema!r:.60}"
                )
    return override


class EarlyGames:
    """A run's games, started (their processes booting) and not yet connected.

    Starting a process takes milliseconds and the game's own start-up (a Godot binary:
    most of a second) runs in that process, so the trainer imports torch meanwhile and
    :meth:`take` then finds the games waiting on its sockets. Everything happens on the
    caller's thread: a game dies with the thread that started it (``PR_SET_PDEATHSIG``),
    so no helper thread may start one.

    :param config: how to launch them (the launch may move its ports, as always).
    :raises BridgeError: a launch fault (missing binary, no free port).
    """

    def __init__(self, config: LaunchConfig) -> None:
        self.config = config
        self._instances: list[GameInstance] | None = start_instances(config)

    def take(self) -> tuple[list[GameInstance], list[EnvInfo]]:
        """The connected instances and their ``env_info``; the caller closes them now.

        :raises BridgeError: a connection or protocol fault (every instance is closed).
        """
        instances, self._instances = self._instances, None
        if instances is None:
            raise RuntimeError("the early games were taken or closed already")
        try:
            return instances, connect_instances(instances, self.config)
        except BaseException:
            discard_output(self.config)
            raise

    def close(self) -> None:
        """Close the games unless they were taken (whoever took them closes them)."""
        if self._instances is not None:
            close_instances(self._instances)
            discard_output(self.config)
            self._instances = None
