"""The bot commands: export a run, evaluate a bot or a run, play a bot.

Each turns user mistakes (a missing run, a broken bot file) into one red line.
"""

from __future__ import annotations

import math
from pathlib import Path

from cli.console import console, fail
from cli.git_sync import current_commit
from cli.paths import remembered_game_bin
from cli.publishing import in_git, publish_files
from cli.results import committed_champions
from game_bridge.bot_runner import BotFormatError, BotRunner
from game_bridge.errors import BridgeError
from training.bots import (
    BotFacts,
    EvalTarget,
    bot_facts,
    bot_target,
    bundled_settings,
    evaluate_target,
    export_run,
    replay_launch_config,
    run_target,
)
from training.checkpoints import CheckpointError
from training.errors import ExportError, GameNotGiven, program_name
from training.eval_records import game_name, record_evaluation
from training.evaluation import StrokeSettings, evaluate_in_process, game_settings
from training.run_paths import InvalidRunName, RunPaths

BOT_ERRORS = (
    BotFormatError,
    BridgeError,
    CheckpointError,
    ExportError,
    GameNotGiven,
    InvalidRunName,
)


def checkout_game_for(root: Path, trained: dict[str, object]) -> Path | None:
    """This checkout's own game (``lander setup --game-bin``) when a bot was trained on a
    program of the same file name: the program then comes from this checkout's settings,
    never from the bot file."""
    named, remembered = trained.get("game_bin"), remembered_game_bin(root)
    if not isinstance(named, str) or remembered is None:
        return None
    same = program_name(named) == Path(remembered).name
    return Path(remembered) if same else None


def export_and_report(root: Path, run: str, checkpoint: Path | None) -> None:
    """``lander export``: write the bot files and say how close they are to the model."""
    if checkpoint is not None and not checkpoint.is_file():
        fail(f"checkpoint {str(checkpoint)!r} does not exist")
    try:
        result = export_run(RunPaths(root, run), checkpoint, console)
    except BOT_ERRORS as exc:
        fail(str(exc))
    console.print(
        f"exported {result.bot_json} and {result.bot_onnx}: over {result.bot_parity.samples:,} observations "
        f"numpy max |diff| {result.bot_parity.max_abs_diff:.1e}, onnxruntime max |diff| "
        f"{result.onnx_parity.max_abs_diff:.1e}, discrete agreement {result.onnx_parity.agreement:.0%}"
    )


def _baseline(
    policy: str,
    episodes: int,
    seed: int,
    game_bin: Path | None,
    port: int,
    game: str,
    transport: str | None,
) -> None:
    """Score the random or reference policy on the game asked for: a bundled game
    in-process, or ``game_bin`` through the bridge (random actions of its own spaces)."""
    import numpy as np

    if game_bin is None:
        settings = game_settings(game, {})
        random_policy, reference = settings.baseline_policies(np.random.default_rng(seed))
        chosen = reference if policy == "reference" else random_policy
        console.print(evaluate_in_process(chosen, episodes, seed, settings).line())
        return
    if policy == "reference":
        fail("the reference controllers play the bundled games only: use --policy random")
    from game_bridge.launcher import LaunchConfig, game_command
    from game_bridge.vec_env import GameVecEnv
    from training.evaluation import evaluate_through_bridge

    try:
        env = GameVecEnv(
            LaunchConfig(
                command=game_command(game_bin),
                base_port=port,
                seed=seed,
                transport=transport or "tcp",
            )
        )
    except BOT_ERRORS as exc:
        fail(str(exc))
    try:
        space = env.action_space
        space.seed(seed)
        result = evaluate_through_bridge(
            lambda obs: np.stack([space.sample() for _ in range(env.num_envs)]), env, episodes
        )
    except BOT_ERRORS as exc:
        fail(str(exc))
    finally:
        env.close()
    console.print(result.line())


def _target(root: Path, target: str) -> EvalTarget:
    """A bot file when one is there; else a run of that name (even ``r.json``); else the
    missing file or run, by what the name looks like."""
    as_path = Path(target)
    if as_path.is_file():
        return bot_target(as_path)
    try:
        run = RunPaths(root, target)
    except InvalidRunName:
        return bot_target(as_path)
    if as_path.suffix == ".json" and not run.checkpoints.is_dir():
        return bot_target(as_path)
    return run_target(run, console)


def evaluate_and_report(
    root: Path,
    target: str | None,
    episodes: int,
    policy: str,
    game_bin: Path | None,
    port: int,
    seed: int,
    publish: bool = False,
    game: str = "lander",
    transport: str | None = None,
) -> None:
    """``lander eval``: print the one-line score and record it where this checkout may
    write (``training.eval_records``); a record in the run's committed files is
    committed and pushed with the run's other files."""
    if episodes < 1:
        fail(f"--episodes must be at least 1, got {episodes}")
    if policy in ("random", "reference"):
        _baseline(policy, episodes, seed, game_bin, port, game, transport)
        return
    if policy != "model":
        fail(f"--policy must be model, random or reference, got {policy!r}")
    if target is None:
        fail("name a run or a bot .json file to evaluate (or use --policy random|reference)")
    try:
        chosen = _target(root, target)
        if game_bin is None and chosen.game_bin is None:
            game_bin = checkout_game_for(root, chosen.trained)
        result = evaluate_target(chosen, episodes, game_bin, port, seed, transport)
    except BOT_ERRORS as exc:
        fail(str(exc))
    if not math.isfinite(result.mean_reward):
        fail(
            f"the evaluation scored {result.mean_reward}: the bot's actions are not numbers; nothing recorded"
        )
    console.print(result.line())
    game = game_name(chosen.trained, game_bin)
    champion = committed_champions(root).get(game)
    recorded = record_evaluation(
        root, chosen.run, chosen.timesteps, chosen.bot, result, current_commit(root), game, publish
    )
    where = recorded.path.relative_to(root)
    better = chosen.bot is not None and (
        champion is None or result.mean_reward > champion.mean_reward
    )
    if not recorded.tracked:
        console.print(
            f"recorded in {where} (this checkout does not commit run {chosen.run or '?'}"
            + ("; publish it with --publish)" if chosen.run else ")")
        )
        if better:
            console.print(f"better than the committed champion on {game}, once published")
        return
    console.print(f"recorded in {where}")
    if better:
        console.print(f"[green]new champion on {game}[/] ({chosen.bot})")
    if chosen.run and in_git(RunPaths(root, chosen.run)):
        publish_files(root, [str(where)], f"{chosen.run}: evaluation on {game} ({result.line()})")


def play_and_report(
    bot_path: Path,
    record: Path | None,
    agents: int,
    seconds: float,
    seed: int,
    speed: float,
    game_bin: Path | None = None,
    port: int = 11008,
) -> None:
    """``lander play``: fly the bot (in the bundled game, or in ``game_bin`` over the
    protocol), print its episodes, write the picture if asked."""
    from game_bridge.lander_game.play import Flight, play_bot, record_picture

    if record is not None and record.suffix.lower() not in (".png", ".gif"):
        fail(f"--record writes a .png or .gif file, not {record.name!r}")
    if agents < 1 or seconds <= 0 or speed <= 0:
        fail("--agents must be at least 1, --seconds and --speed positive")
    try:
        bot = BotRunner.from_file(bot_path)
        facts = bot_facts(bot, bot_path)
    except BotFormatError as exc:
        fail(str(exc))
    trained = facts.trained
    settings = bundled_settings(trained)
    if isinstance(settings, StrokeSettings):
        if game_bin is not None:
            fail("a stroke bot corrects strokes in the bundled stroke game only: drop --game-bin")
        try:
            _play_strokes(bot, facts, settings, record, agents, seed)
        except BotFormatError as exc:
            fail(str(exc))
        return
    flight: Flight | None = None
    env = None
    try:
        if game_bin is not None:
            from game_bridge.remote_flight import BridgeFlight
            from game_bridge.vec_env import GameVecEnv

            env = GameVecEnv(replay_launch_config(trained, game_bin, port, seed, agents))
            flight = BridgeFlight(env)
        trace = play_bot(
            bot,
            agents,
            seconds,
            seed,
            settings.action_repeat,
            settings.difficulty,
            console,
            speed,
            flight,
        )
    except (BridgeError, ValueError) as exc:
        fail(str(exc))
    finally:
        if env is not None:
            env.close()
    if trace.returns:
        mean = sum(trace.returns) / len(trace.returns)
        rate = sum(trace.successes) / len(trace.successes)
        console.print(
            f"{len(trace.returns)} episode(s): mean_reward={mean:.2f} success_rate={rate:.2f}"
        )
    if record is not None:
        score = (
            f"mean return {sum(trace.returns) / len(trace.returns):.1f}, success "
            f"{sum(trace.successes) / len(trace.successes):.0%} over {len(trace.returns)} episode(s)"
            if trace.returns
            else "no episode ended"
        )
        name = facts.run or bot_path.stem
        steps = facts.timesteps
        title = f"bot {name}" + (f" ({steps:,} steps)" if steps else "") + f": {score}"
        picture = record_picture(
            trace, record, title=title, steps_per_second=60 / settings.action_repeat
        )
        console.print(f"recorded {picture}")


def _play_strokes(
    bot: BotRunner,
    facts: BotFacts,
    settings: StrokeSettings,
    record: Path | None,
    pens: int,
    seed: int,
) -> None:
    """``lander play`` of a stroke bot: one stroke per pen, its score, and the picture."""
    from game_bridge.stroke_game.play import play_strokes, record_strokes
    from training.evaluation import normalized_score

    trace = play_strokes(bot.act, pens, seed, settings.reward_mode)
    mean = sum(trace.returns) / len(trace.returns)
    score = normalized_score(mean, settings)
    console.print(
        f"{len(trace.returns)} stroke(s): mean_reward={mean:.2f} normalized_score={score:.3f}"
    )
    if record is not None:
        name = facts.run or "bot"
        steps = facts.timesteps
        title = (
            f"bot {name}" + (f" ({steps:,} steps)" if steps else "")
            + f", {settings.reward_mode} rewards: mean return {mean:.1f}, normalized {score:.2f}"
        )  # fmt: skip
        console.print(f"recorded {record_strokes(trace, record, title)}")


def serve_web_page(root: Path, target: str, host: str, port: int) -> None:
    """``lander play --web``: serve the page until Ctrl-C."""
    import time

    from cli.web_page import serve_page

    as_file = Path(target)
    if as_file.suffix != ".json" and not as_file.is_file():
        try:
            RunPaths(root, target)
        except InvalidRunName as exc:
            fail(str(exc))
    elif not as_file.is_file():
        fail(f"bot file {target!r} does not exist")
    try:
        server = serve_page(root, target, host, port)
    except OSError as exc:
        fail(f"cannot serve on {host}:{port}: {exc.strerror or exc}")
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    console.print(f"the bot flies after your cursor at http://{shown}:{port}/  (Ctrl-C to stop)")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.shutdown()
