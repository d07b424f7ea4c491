"""The bot commands: export a run, evaluate a bot or a run, play a bot.

User mistakes (a missing run, a broken bot file) raise :class:`LanderError`s, which the
CLI ends as one red line.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.common.console import console, fail, how
from cli.common.paths import remembered_game_bin
from cli.results.git_sync import current_commit
from cli.results.publishing import in_git, publish_files
from cli.results.records import committed_champions
from game_bridge.bot_runner import BotRunner
from game_bridge.errors import LanderError
from game_bridge.file_input import not_a_file
from game_bridge.launcher import LaunchConfig
from game_bridge.protocol import DEFAULT_PORT
from games import DEFAULT_GAME, EDITOR_GAME, game_entry
from games.spec import PlayOptions
from training.bots.run_bots import (
    EvalTarget,
    bot_facts,
    bot_target,
    bundled_settings,
    evaluate_target,
    export_run,
    export_sides,
    import_run_packages,
    replay_launch_config,
    run_target,
)
from training.config import TrainConfig, apply_overrides, check_config
from training.envs.game_launch import editor_prompt, launch_config
from training.errors import program_name
from training.evaluation.records import game_name, record_evaluation
from training.evaluation.scoring import evaluate_in_process, game_settings, normalized_score
from training.runs.run_paths import InvalidRunName, RunPaths, unknown_run
from training.runs.run_record import RunRecord

if TYPE_CHECKING:
    from training.evaluation.matches import MatchResult


def checkout_game_for(root: Path, trained: dict[str, object]) -> Path | None:
    """This checkout's own game (``lander setup --game-bin``) when a bot was trained on a
    program of the same file name: the program then comes from this checkout's settings,
    never from the bot file."""
    named, remembered = trained.get("game_bin"), remembered_game_bin(root)
    if not isinstance(named, str) or remembered is None:
        return None
    same = program_name(named) == Path(remembered).name
    return Path(remembered) if same else None


def export_and_report(
    root: Path, run: str, checkpoint: Path | None, tiers: str | None = None, games: int = 40
) -> None:
    """``lander export``: write the bot files and say how close they are to the model;
    with ``tiers``, one bot per tier instead (``training.bots.tiers``)."""
    if checkpoint is not None and not checkpoint.is_file():
        fail(f"checkpoint {str(checkpoint)!r} does not exist")
    if tiers is not None:
        if checkpoint is not None:
            fail("--tiers picks the run's models itself: drop --checkpoint")
        _export_tiers(RunPaths(root, run), tiers, games)
        return
    paths = RunPaths(root, run)
    results = [export_run(paths, checkpoint, console)]
    if checkpoint is None:  # a game whose sides have their own models: each side's bot
        results += export_sides(paths, console)
    for result in results:
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
        if not callable(chosen):
            fail(f"{game} has no reference controller: use --policy random")
        console.print(evaluate_in_process(chosen, episodes, seed, settings).line())
        return
    if policy == "reference":
        fail("the reference controllers play the bundled games only: use --policy random")
    from game_bridge.launcher import LaunchConfig, game_command
    from game_bridge.vec_env import GameVecEnv
    from training.evaluation.scoring import evaluate_through_bridge

    env = GameVecEnv(
        LaunchConfig(
            command=game_command(game_bin), base_port=port, seed=seed, transport=transport or "tcp"
        )
    )
    try:
        space = env.action_space
        space.seed(seed)
        result = evaluate_through_bridge(
            lambda obs: np.stack([space.sample() for _ in range(env.num_envs)]), env, episodes
        )
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
    game: str = DEFAULT_GAME,
    transport: str | None = None,
    godot_game: tuple[Path | None, float] = (None, 300.0),
) -> None:
    """``lander eval``: print the one-line score and record it where this checkout may
    write (``training.evaluation.records``); a record in the run's committed files is
    committed and pushed with the run's other files.

    :param godot_game: a Godot project to play on (``--game-project``), and how long to wait
        for the game a person starts in the editor (``--game editor``)."""
    game_project, editor_wait = godot_game
    if episodes < 1:
        fail(f"--episodes must be at least 1, got {episodes}")
    godot = game == EDITOR_GAME or game_project is not None
    if game == EDITOR_GAME and game_project is not None:
        fail("--game editor and --game-project each name the game: give one")
    if godot and (policy != "model" or game_bin is not None):
        fail(
            "a Godot game (--game editor, --game-project) evaluates a run or a bot: drop "
            "--game-bin and --policy random|reference"
        )
    if policy in ("random", "reference"):
        _baseline(policy, episodes, seed, game_bin, port, game, transport)
        return
    if policy != "model":
        fail(f"--policy must be model, random or reference, got {policy!r}")
    if target is None:
        fail("name a run or a bot .json file to evaluate (or use --policy random|reference)")
    chosen = _target(root, target)
    if game_bin is None and chosen.game_bin is None:
        game_bin = checkout_game_for(root, chosen.trained)
    launch = (
        godot_launch(root, chosen.trained, game, game_project, (port, seed, editor_wait))
        if godot
        else None
    )
    result = evaluate_target(chosen, episodes, game_bin, port, seed, transport, launch)
    if not math.isfinite(result.mean_reward):
        fail(
            f"the evaluation scored {result.mean_reward}: the bot's actions are not numbers; nothing recorded"
        )
    console.print(result.line())
    game = game_name(chosen.trained, game_bin)
    if godot:
        game = EDITOR_GAME if game_project is None else game_project.resolve().name
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


def godot_launch(
    root: Path,
    trained: dict[str, Any],
    game: str,
    game_project: Path | None,
    where: tuple[int, int, float],
) -> LaunchConfig:
    """The Godot game ``lander eval`` plays a bot on: the one a person starts in the editor
    (waiting on the port, said once), or ``game_project`` run from source by the engine,
    with the settings the bot trained with.

    :param where: the port, the seed, and the seconds to wait for the game in the editor."""
    port, seed, editor_wait = where
    settings: dict[str, Any] = {"n_parallel": 1, "port": port, "seed": seed, "game": game}
    settings["editor_wait"] = editor_wait
    if game_project is not None:
        agents = (trained.get("game_args") or {}).get("agents") or trained.get(
            "agents_per_instance"
        )
        if agents is not None and not str(agents).isdigit():  # a bot file from anywhere
            fail(f"the bot's trained_with names {agents!r} agents: not a count")
        settings.update(
            game=DEFAULT_GAME,
            game_project=str(game_project.resolve()),
            speedup=trained.get("speedup"),
            action_repeat=trained.get("action_repeat"),
            agents_per_instance=int(agents or 1),
        )
    config = check_config(apply_overrides(TrainConfig(), settings, "lander eval"))
    launch = launch_config(config, build_root=root / "build")
    launch.announce = lambda listening: console.print(editor_prompt(listening))
    return launch


def play_and_report(
    root: Path,
    target: str,
    record: Path | None,
    agents: int,
    seconds: float,
    seed: int,
    speed: float,
    game_bin: Path | None = None,
    port: int = 11008,
) -> None:
    """``lander play``: the bot plays its game (the bundled one it trained on, or
    ``game_bin`` over the protocol for a game that draws such games); print its episodes,
    write the picture if asked."""
    if record is not None and record.suffix.lower() not in (".png", ".gif"):
        fail(f"--record writes a .png or .gif file, not {record.name!r}")
    if agents < 1 or seconds <= 0 or speed <= 0:
        fail("--agents must be at least 1, --seconds and --speed positive")
    chosen = bot_path(root, target)
    bot = BotRunner.from_file(chosen)
    facts = bot_facts(bot, chosen)
    trained = facts.trained
    game = game_entry(str(trained.get("game") or DEFAULT_GAME))
    if game_bin is not None and not game.plays_remote:
        fail(f"a {game.name} bot plays in the bundled {game.name} game only: drop --game-bin")
    settings = bundled_settings(trained)
    steps = f" ({facts.timesteps:,} steps)" if facts.timesteps else ""
    options = PlayOptions(
        agents=agents,
        seconds=seconds,
        seed=seed,
        speed=speed,
        record=record,
        title=f"bot {facts.run or chosen.stem}{steps}",
        game_args=trained.get("game_args") or {},
        action_repeat=trained.get("action_repeat"),
        console=console,
        normalize=lambda mean: normalized_score(mean, settings),
    )
    env = None
    try:
        if game_bin is not None:
            from game_bridge.vec_env import GameVecEnv

            env = GameVecEnv(replay_launch_config(trained, game_bin, port, seed, agents))
            options = replace(options, remote=env)
        result = game.play(bot, options)
    except ValueError as exc:  # a game of another layout, a bot of other sizes
        fail(str(exc))
    finally:
        if env is not None:
            env.close()
    for line in result.lines:
        console.print(line)
    if result.picture is not None:
        console.print(f"recorded {result.picture}")


def _game_of(root: Path, target: str) -> tuple[str, dict[str, str]]:
    """The bundled game a bot file or a run plays (the default one when it says none),
    and its ``--game-arg`` settings."""
    as_file = Path(target)
    try:
        if as_file.is_file():
            trained = bot_facts(BotRunner.from_file(as_file), as_file).trained
            return str(trained.get("game") or DEFAULT_GAME), dict(trained.get("game_args") or {})
        record = RunPaths(root, target).run_json
        if not record.is_file():
            return DEFAULT_GAME, {}
        config = RunRecord.load(record).config
        return config.game, dict(config.game_args)
    except LanderError:
        return DEFAULT_GAME, {}  # the page itself reports a bot it cannot fly


def serve_web_page(
    root: Path, target: str, host: str, port: int, record_demo: Path | None = None
) -> None:
    """``lander play --web``: serve the page until Ctrl-C (saving the demos a person
    records there to ``record_demo``)."""
    import time

    from cli.serving.dashboard import dashboard_url
    from cli.serving.game_server import check_address
    from cli.serving.web_page import serve_page
    from game_bridge.local_names import who_can_reach

    check_address(host, port, "--web-port")
    as_file = Path(target)
    if as_file.suffix != ".json" and not as_file.is_file():
        RunPaths(root, target)  # a bad run name is one line
    elif not as_file.is_file():
        odd = not_a_file(as_file)
        fail(
            f"bot file {target!r} " + (f"is {odd}, not a regular file" if odd else "does not exist")
        )
    name, game_args = _game_of(root, target)
    game = game_entry(name)
    if not game.web_files:
        fail(f"the {game.name} game has no web page: play it with `lander play BOT`")
    if not game.page_plays(game_args):
        settings = " ".join(f"{key}={value}" for key, value in sorted(game_args.items()))
        fail(
            f"the {game.name} game's web page does not play {settings}: play it with `lander play BOT`"
        )
    if record_demo is not None and record_demo.suffix.lower() != ".json":
        fail(f"--record-demo writes a .json demo file, not {record_demo.name!r}")
    if record_demo is not None and not record_demo.resolve().parent.is_dir():
        fail(f"--record-demo: folder {str(record_demo.parent)!r} does not exist")
    try:
        server = serve_page(root, target, host, port, game, record_demo)
    except OSError as exc:
        fail(f"cannot serve on {host}:{port}: {exc.strerror or exc}")
    console.print(
        f"the bot flies after your cursor at {dashboard_url(host, port)}  "
        f"({who_can_reach(host)}; Ctrl-C to stop)"
    )
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.shutdown()


def bot_path(root: Path, target: str) -> Path:
    """A bot file, or a run's exported bot (``bots/RUN.json``): what every command that
    plays a bot takes. A name that is neither fails in one line that says which it
    looked like (a missing file, an unknown run, a run not exported yet).
    """
    path = Path(target)
    if path.is_file():
        return path
    odd = not_a_file(path)
    if odd is not None:
        fail(f"bot file {target!r} is {odd}, not a regular file")
    if path.suffix == ".json" or "/" in target:
        fail(f"bot file {target!r} does not exist")
    paths = RunPaths(root, target)  # a bad run name is one line
    if paths.bot_json.is_file():
        import_run_packages(paths)  # the run's own game, where this checkout trained it
        return paths.bot_json
    if not paths.exists():
        fail(unknown_run(root, target) + f", and no bot file {target!r} is here")
    fail(
        f"run {target} has no exported bot ({paths.bot_json.relative_to(root)}): "
        f"export it with {how(f'export {target}')}"
    )


def match_and_report(
    root: Path,
    first: str,
    second: str,
    rounds: int,
    game: str | None,
    game_bin: Path | None,
    port: int,
    seed: int,
) -> None:
    """``lander match A B``: A against B on the real game through the bridge; print the
    tally, the score with its 95% interval and the Elo difference it implies."""
    if rounds < 2:
        fail(f"--games must be at least 2 (each bot plays each side), got {rounds}")
    first_path, second_path = bot_path(root, first), bot_path(root, second)
    result = _play(first_path, second_path, rounds, game, game_bin, port, seed)
    console.print(result.line(Path(first).stem, Path(second).stem))


def _play(
    first: Path,
    second: Path,
    rounds: int,
    game: str | None,
    game_bin: Path | None,
    port: int,
    seed: int,
) -> MatchResult:
    """Bot file ``first`` against ``second`` on the game (by default the first's own)."""
    from game_bridge.launcher import LaunchConfig
    from game_bridge.vec_env import GameVecEnv
    from training.envs.game_launch import game_launch
    from training.evaluation.matches import play_match

    first_bot = BotRunner.from_file(first)
    second_bot = BotRunner.from_file(second)
    trained = bot_facts(first_bot, first).trained
    bot_facts(second_bot, second)
    chosen = game or str(trained.get("game") or DEFAULT_GAME)
    launch = game_launch(chosen, game_bin)
    # A bundled game plays up to 8 matches at once: an agent of each side per match.
    per_match = max(len(game_entry(chosen).sides), 2)
    game_args = (
        {}
        if game_bin is not None
        else {**(trained.get("game_args") or {}), "agents": str(per_match * min(rounds, 8))}
    )
    env = GameVecEnv(LaunchConfig(**launch, base_port=port, seed=seed, game_args=game_args))
    sides = (first_bot.spec.get("side"), second_bot.spec.get("side"))
    try:
        # policy(): a bot with memory keeps each of its agents' states through the rounds
        return play_match(first_bot.policy(), second_bot.policy(), rounds, env, sides)
    except ValueError as exc:
        fail(str(exc))
    finally:
        env.close()


def _export_tiers(paths: RunPaths, text: str, games: int) -> None:
    """``lander export RUN --tiers ...``: the graded bots, and (on a game with sides) each
    one's score against the hardest over ``games`` rounds."""
    from training.bots.tiers import export_tiers, parse_tiers

    names = parse_tiers(text)
    record = RunRecord.load(paths.run_json) if paths.run_json.exists() else None
    versus = None
    # Tiers of one side cannot play each other where the sides have their own spaces.
    sided = record is not None and bool(record.extra.side_layouts)
    if (
        record is not None
        and record.extra.self_play is not None
        and record.config.game_bin is None
        and not sided
    ):
        game = record.config.game

        def versus(first: Path, second: Path) -> MatchResult:
            return _play(first, second, games, game, None, DEFAULT_PORT, 0)

    for tier in export_tiers(paths, names, console, versus):
        rating = ", ".join(
            f"{k} {v:.1f}" for k, v in tier.rating.items() if isinstance(v, int | float)
        )
        against = tier.versus_hardest
        measured = f"; against {names[-1]}: {against.summary()}" if against is not None else ""
        console.print(
            f"{tier.name}: {tier.bot_json.name} from {tier.candidate.name} ({rating}){measured}"
        )


def ladder_and_report(root: Path, game: str, rounds: int, port: int) -> None:
    """``lander ladder``: every committed bot of ``game`` against every other for ``rounds``
    rounds, and the ratings those results imply (each match kept in this checkout's own
    ``.lander/matches.jsonl``)."""
    import itertools
    import json

    from rich.table import Table

    from cli.results.git_sync import tracked
    from training.evaluation.matches import ladder_ratings
    from training.runs.local_state import local_matches_path
    from training.runs.run_record import now_iso

    bots = []
    for name in sorted(tracked(root, ["bots/*.json"]) or []):
        path = root / name
        try:
            trained = bot_facts(BotRunner.from_file(path), path).trained
        except LanderError:
            continue  # a file there that is no bot of lander's is no player
        if str(trained.get("game") or DEFAULT_GAME) == game and not trained.get("game_bin"):
            bots.append(path)
    if len(bots) < 2:
        fail(
            f"the ladder needs two committed bots of the {game} game; this checkout has {len(bots)}"
        )
    results = []
    records = local_matches_path(root)
    records.parent.mkdir(parents=True, exist_ok=True)
    for first, second in itertools.combinations(bots, 2):
        result = _play(first, second, rounds, game, None, port, 0)
        console.print(result.line(first.stem, second.stem))
        results.append((first.stem, second.stem, result))
        with records.open("a") as handle:
            entry: dict[str, object] = {"date": now_iso(), "game": game}
            entry |= {"first": first.stem, "second": second.stem, "wins": result.wins}
            entry |= {"draws": result.draws, "losses": result.losses}
            handle.write(json.dumps(entry) + "\n")
    ratings = ladder_ratings(results)
    table = Table(title=f"ladder of the {game} game ({rounds} rounds a pair)")
    for column in ("rank", "bot", "rating", "score"):
        table.add_column(column, justify="left" if column == "bot" else "right")
    scores = {name: [0.0, 0] for name in ratings}
    for one, other, result in results:
        scores[one][0] += result.score * result.games
        scores[other][0] += (1 - result.score) * result.games
        scores[one][1] += result.games
        scores[other][1] += result.games
    ranked = sorted(ratings, key=lambda name: -ratings[name])
    for rank, name in enumerate(ranked, 1):
        total, played = scores[name]
        table.add_row(str(rank), name, f"{ratings[name]:.0f}", f"{total / max(played, 1):.3f}")
    console.print(table)
