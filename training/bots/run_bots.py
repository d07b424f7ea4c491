"""The glue between a run and its bot: export a run's checkpoint with the run's
settings, and evaluate a bot or a checkpoint on the game it was trained on.

A bot file is evaluated with numpy alone, so a laptop's light install (no torch, no
Stable-Baselines3) can score it: what needs them is imported where it is used.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from game_bridge.bot_runner import BotFormatError, BotRunner
from game_bridge.launcher import LaunchConfig, game_command
from games import DEFAULT_GAME, EDITOR_GAME
from games.gym.packages import (
    GymPackageError,
    check_package_name,
    import_packages,
    imported_packages,
)
from training.config import ConfigError, TrainConfig, apply_overrides, check_config
from training.errors import ExportError, GameNotGiven, game_not_given
from training.evaluation.ratings import LEARNER
from training.evaluation.records import owns_run
from training.evaluation.scoring import (
    EvalResult,
    GameSettings,
    Policy,
    evaluate_in_process,
    evaluate_through_bridge,
    game_settings,
    model_policy,
)
from training.runs.checkpoints import find_resume_point
from training.runs.run_paths import InvalidRunName, RunPaths, validate_run_name
from training.runs.run_record import RunRecord

if TYPE_CHECKING:
    from training.bots.export import ExportResult


def trained_with(config: TrainConfig) -> dict[str, Any]:
    """The game settings a bot needs to be played or evaluated as it was trained."""
    return {
        "game": config.game,
        "game_bin": config.game_bin,
        "game_url": config.game_url,
        "game_project": config.game_project,
        "transport": config.game_transport,
        "game_args": dict(config.game_args),
        "action_repeat": config.action_repeat,
        "speedup": config.speedup,
        "agents_per_instance": config.agents_per_instance,
        "gym_packages": list(config.gym_packages),
    }


BOT_SETTINGS = (
    "game",
    "game_bin",
    "game_url",
    "game_project",
    "transport",
    "game_args",
    "action_repeat",
    "speedup",
    "agents_per_instance",
    "gym_packages",
)
"""The settings of its run a bot records in ``trained_with`` (:func:`trained_with`)."""


def checked_trained_with(raw: object) -> dict[str, Any]:
    """A bot's ``trained_with`` as lander may use it: a bot file may come from anywhere,
    so its settings are checked as the run's own were, against their declarations in
    ``training.config`` (kinds, bounds, choices, the bundled game's arguments), before any
    game is set up from them (an ``action_repeat`` of 10^9 would make one step take hours).

    :raises BotFormatError: naming the field.
    """
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise BotFormatError("the bot's trained_with must be an object")
    game_args = raw.get("game_args") or {}
    if not isinstance(game_args, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in game_args.items()
    ):  # as lander writes them: the settings' own check would turn numbers into text
        raise BotFormatError(
            "the bot's trained_with is not one lander wrote: game_args must map names to text"
        )
    given = {name: raw[name] for name in BOT_SETTINGS if raw.get(name) is not None}
    _check_packages_imported(given.get("gym_packages") or [])
    if given.get("game") == EDITOR_GAME:
        given["n_parallel"] = 1  # as its run was: the one game a person ran
    try:
        check_config(apply_overrides(TrainConfig(), given, "the bot's trained_with"))
    except ConfigError as exc:
        raise BotFormatError(f"the bot's trained_with is not one lander wrote: {exc}") from None
    return dict(raw)


def _check_packages_imported(packages: object) -> None:
    """A bot names the packages its game's ids come from; a bot file may come from anyone,
    so they are imported only where the user names them (``--gym-package``).

    :raises BotFormatError: a list that is not names of packages.
    :raises GymPackageError: a package not imported, with the option that imports it.
    """
    if not isinstance(packages, list) or not all(isinstance(name, str) for name in packages):
        raise BotFormatError("the bot's trained_with is not one lander wrote: gym_packages")
    for name in packages:
        check_package_name(name)
    missing = [name for name in packages if name not in imported_packages()]
    if missing:
        options = " ".join(f"--gym-package {name}" for name in missing)
        raise GymPackageError(
            f"the bot's game comes from {', '.join(missing)}, and a bot file imports nothing by "
            f"itself: give {options} to import {'them' if len(missing) > 1 else 'it'} here"
        )


def bundled_settings(trained: dict[str, Any]) -> GameSettings:
    """The bundled game's settings from a bot's ``trained_with`` (the default game for a
    bot from before lander had other games)."""
    return game_settings(
        trained.get("game") or DEFAULT_GAME,
        trained.get("game_args") or {},
        trained.get("action_repeat"),
    )


def _record_of(paths: RunPaths) -> RunRecord | None:
    return RunRecord.load(paths.run_json) if paths.run_json.exists() else None


def replay_launch_config(
    trained: dict[str, Any],
    game_bin: str | Path,
    port: int,
    seed: int,
    agents: int,
    transport: str | None = None,
) -> LaunchConfig:
    """One game instance set up as a bot's run trained it (action repeat, speedup,
    game arguments, transport unless ``transport`` is given), with ``agents`` agents:
    for evaluation and play through the bridge."""
    return LaunchConfig(
        command=game_command(game_bin),
        transport=transport or trained.get("transport") or "tcp",
        base_port=port,
        seed=seed,
        action_repeat=trained.get("action_repeat"),
        speedup=trained.get("speedup"),
        game_args={**(trained.get("game_args") or {}), "agents": str(agents)},
    )


def export_run(
    paths: RunPaths, checkpoint: Path | None = None, console: Console | None = None
) -> ExportResult:
    """Export a run's model (``checkpoint``, else its final or newest valid one) to ``bots/``.

    :raises CheckpointError, ExportError: nothing to export, or parity failed.
    """
    model_path = find_resume_point(paths.root, str(checkpoint or paths.run), console).model
    record = _record_of(paths)
    layout = record.extra.game_layout if record else None
    notes = rating_notes(record) | side_note(record)
    return _export_model(paths, record, model_path, (paths.bot_json, paths.bot_onnx), layout, notes)


def _export_model(
    paths: RunPaths,
    record: RunRecord | None,
    model_path: Path,
    files: tuple[Path, Path],
    layout: dict[str, Any] | None,
    notes: dict[str, Any],
) -> ExportResult:
    """One model of the run to a bot JSON and ONNX pair, with the run's commit and settings.

    :raises ExportError: where the bots cannot go (a ``bots`` that is a file), before the
        model is loaded.
    """
    from training.bots.export import export_policy
    from training.bots.plugin_layout import OnnxLayout

    folder = files[0].parent
    if folder.exists() and not folder.is_dir():
        raise ExportError(
            f"{folder} is a file, not a folder: move it aside, then `lander export {paths.run}`"
        )
    from training.ppo.inference import load_for_inference

    model, normalizer = load_for_inference(model_path)
    return export_policy(
        model,
        normalizer,
        paths.run,
        *files,
        git_commit=record.git_commit if record else None,
        trained_with=trained_with(record.config) if record else None,
        layout=OnnxLayout.of_game(layout),
        notes=notes,
    )


def side_note(record: RunRecord | None) -> dict[str, Any]:
    """The side a run's own bot plays, when the game's sides have models of their own."""
    if record is None or not record.extra.side_layouts or not record.extra.self_play:
        return {}
    return {"side": record.extra.self_play.get("side")}


def export_sides(paths: RunPaths, console: Console | None = None) -> list[ExportResult]:
    """Export the other sides' models of a game whose sides have their own spaces (each
    side's final or newest valid model, ``checkpoints/RUN/sides/SIDE``) to
    ``bots/RUN-SIDE.json`` and ``.onnx``; none for any other run.

    :raises CheckpointError, ExportError: a side with nothing to export, or parity failed.
    """
    from training.runs.checkpoints import CheckpointError, newest_valid_model

    record = _record_of(paths)
    layouts = (record.extra.side_layouts if record else None) or {}
    results = []
    for side in paths.other_sides():
        model_path = newest_valid_model(paths.side_checkpoints(side), console)
        if model_path is None:
            raise CheckpointError(f"side {side!r} of run {paths.run!r} has no valid model")
        files = (paths.side_bot_json(side), paths.side_bot_onnx(side))
        notes = {"side": side, **rating_notes(record, f"{LEARNER}:{side}")}
        results.append(_export_model(paths, record, model_path, files, layouts.get(side), notes))
    return results


def rating_notes(record: RunRecord | None, learner: str = LEARNER) -> dict[str, Any]:
    """The bot file's ``rating`` of a self-play run: the learner's Elo when it was exported
    (``learner:SIDE`` for another side's model)."""
    state = record.extra.self_play if record is not None else None
    ratings = (state or {}).get("ratings") or {}
    elo = ratings.get(learner)
    return {"rating": {"elo": elo, "rounds": state.get("rounds")}} if state and elo else {}


@dataclass(frozen=True)
class EvalTarget:
    """What is evaluated: a policy, its name, and where it came from.

    :param game_bin: the game program this checkout itself chose for it (a run it trained
        with ``--game-bin``); never what a bot file names.
    """

    policy: Policy
    run: str | None
    timesteps: int | None
    bot: Path | None
    trained: dict[str, Any]
    game_bin: str | None = None


@dataclass(frozen=True)
class BotFacts:
    """What a bot file says of itself, checked (it may come from anywhere).

    :param run: the run it was exported from, a valid run name, or None.
    :param timesteps: the steps it was trained, or None.
    :param trained: :func:`checked_trained_with` of its ``trained_with``.
    """

    run: str | None
    timesteps: int | None
    trained: dict[str, Any]


def bot_facts(bot: BotRunner, path: Path) -> BotFacts:
    """:class:`BotFacts` of a bot read from ``path``.

    :raises BotFormatError: a field that no lander export writes.
    """
    run, steps = bot.spec.get("run"), bot.spec.get("timesteps")
    try:
        run = validate_run_name(run) if run is not None else None
    except (InvalidRunName, TypeError):
        raise BotFormatError(f"bot {str(path)!r} names no valid run ({run!r:.40})") from None
    if steps is not None and (type(steps) is not int or steps < 0):
        raise BotFormatError(
            f"bot {str(path)!r}: timesteps must be a whole number, not {steps!r:.40}"
        )
    return BotFacts(run, steps, checked_trained_with(bot.spec.get("trained_with")))


def bot_target(path: Path) -> EvalTarget:
    """A bot JSON file as an evaluation target (played with numpy alone).

    :raises BotFormatError: the file is not a sound bot.
    """
    bot = BotRunner.from_file(path)
    facts = bot_facts(bot, path)
    return EvalTarget(bot.policy(), facts.run, facts.timesteps, path, facts.trained)


def import_run_packages(paths: RunPaths) -> None:
    """Import the ``--gym-package``s a run recorded, where this checkout trained it (a
    record from elsewhere imports nothing: the user names them).

    :raises GymPackageError: one that is not installed or fails.
    """
    record = _record_of(paths)
    if record is not None and record.config.gym_packages and owns_run(paths):
        import_packages(record.config.gym_packages)


def run_target(paths: RunPaths, console: Console | None = None) -> EvalTarget:
    """A run as an evaluation target: its exported bot if there is one, else its checkpoint."""
    record = _record_of(paths)
    # The run's own record names its game (and the packages of its ids) only when this
    # checkout trained it.
    own_game = record.config.game_bin if record is not None and owns_run(paths) else None
    import_run_packages(paths)
    if paths.bot_json.exists():
        return replace(bot_target(paths.bot_json), game_bin=own_game)
    from training.ppo.inference import load_for_inference

    point = find_resume_point(paths.root, paths.run, console)
    model, normalizer = load_for_inference(point.model)
    trained = trained_with(record.config) if record else {}
    return EvalTarget(
        model_policy(model, normalizer), paths.run, int(model.num_timesteps), None, trained,
        own_game,
    )  # fmt: skip


def evaluate_target(
    target: EvalTarget,
    episodes: int,
    game_bin: Path | None,
    port: int,
    seed: int = 1000,
    transport: str | None = None,
    launch: LaunchConfig | None = None,
) -> EvalResult:
    """Evaluate on the bundled game in-process, or on ``game_bin`` (else the game this
    checkout trained the run on) through the bridge, over ``transport`` (else the one the
    bot trained with).

    :param launch: the game to evaluate on, set up by the caller (the game in the editor,
        a Godot project), instead of any of the above.
    :raises GameNotGiven: the bot trained on a game program that nobody named here.
    """
    if launch is not None:
        from game_bridge.vec_env import GameVecEnv  # SB3: only where a game is played

        env = GameVecEnv(launch)
        try:
            return evaluate_through_bridge(target.policy, env, episodes)
        finally:
            env.close()
    url = target.trained.get("game_url")
    if url is not None:
        raise GameNotGiven(
            f"bot {target.run or target.bot} was trained on the OpenEnv server {url}; lander "
            "eval plays bundled games and --game-bin games (its run evaluates it on the server "
            "with --eval-every)"
        )
    chosen = str(game_bin) if game_bin is not None else target.game_bin
    named = target.trained.get("game_bin")
    if chosen is None and named is not None:
        raise game_not_given(f"bot {target.run or target.bot}", str(named))
    godot = target.trained.get("game_project") or (
        "the Godot editor" if target.trained.get("game") == EDITOR_GAME else None
    )
    if chosen is None and godot is not None:
        raise GameNotGiven(
            f"bot {target.run or target.bot} was trained on a Godot game ({godot}): evaluate it "
            "with --game-project PATH, or --game editor and press Play"
        )
    if chosen is None:
        return evaluate_in_process(target.policy, episodes, seed, bundled_settings(target.trained))
    from game_bridge.vec_env import GameVecEnv

    game_args = target.trained.get("game_args") or {}
    agents = int(game_args.get("agents", target.trained.get("agents_per_instance") or 1))
    env = GameVecEnv(replay_launch_config(target.trained, chosen, port, seed, agents, transport))
    try:
        return evaluate_through_bridge(target.policy, env, episodes)
    finally:
        env.close()
