"""Commands about bots: ``export``, ``eval``, ``play``, ``record``, ``match``, ``ladder`` (the
light install runs ``eval`` and ``play`` of a bot file without torch)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.common import train_flags as flags
from cli.common.console import fail
from cli.common.options import (
    DEFAULT_PAGE_PORT,
    GymPackages,
    check_game,
    game_option,
    use_gym_packages,
)
from cli.common.paths import project_root
from game_bridge import TRANSPORTS
from game_bridge.protocol import DEFAULT_PORT
from games import BUNDLED_GAMES, DEFAULT_GAME, EDITOR_GAME, game_entry


def export(
    run: Annotated[str, typer.Argument(metavar="RUN", help="The run whose policy to export.")],
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            help="A model .zip to export instead of the run's final or newest checkpoint."
        ),
    ] = None,
    tiers: Annotated[
        str | None,
        typer.Option(
            metavar="NAMES",
            help="Graded bots instead, weakest first, like easy,medium,hard: bots/RUN-NAME.json "
            "from the run's models spread by rating (self-play) or normalized score.",
        ),
    ] = None,
    games: Annotated[
        int, typer.Option(help="With --tiers on a game with sides: rounds against the hardest.")
    ] = 40,
) -> None:
    """Write bots/RUN.json and bots/RUN.onnx, after proving both give the model's actions."""
    from cli.bots.bot_flow import export_and_report

    export_and_report(project_root(), run, checkpoint, tiers, games)


def evaluate(
    target: Annotated[
        str | None,
        typer.Argument(
            metavar="RUN|BOT",
            help="A run name or a bot .json file (not needed with --policy random|reference).",
        ),
    ] = None,
    episodes: Annotated[int, typer.Option(help="Episodes to play.")] = 50,
    policy: Annotated[
        str, typer.Option(help="model (the target), random or reference (baselines).")
    ] = "model",
    game_bin: flags.GameBin = None,
    game_project: Annotated[
        Path | None,
        typer.Option(
            help="A Godot project folder to evaluate on: the engine runs it headless from "
            "source (lander setup fetches the engine)."
        ),
    ] = None,
    port: Annotated[
        int,
        typer.Option(help="Base TCP port when evaluating through a game (--game-bin, editor)."),
    ] = DEFAULT_PORT,
    seed: Annotated[int, typer.Option(help="Seed of the evaluation episodes.")] = 1000,
    game: Annotated[
        str,
        game_option(
            "The bundled game --policy random|reference plays (a bot knows its own); "
            f"{EDITOR_GAME}: wait on --port for the game a person starts in the Godot editor "
            f"[default: {DEFAULT_GAME}]."
        ),
    ] = DEFAULT_GAME,
    transport: Annotated[
        str | None,
        typer.Option(
            metavar="tcp|stdio",
            help="How --game-bin talks [default: as the bot trained, else tcp].",
            show_default=False,
        ),
    ] = None,
    editor_wait: Annotated[
        float,
        typer.Option(help="With --game editor: seconds to wait for the game a person starts."),
    ] = 300.0,
    publish: Annotated[
        bool,
        typer.Option(
            help="Commit and push this record although this checkout did not train the run "
            "(kept in a file of this checkout's own beside the run's records)."
        ),
    ] = False,
    gym_package: GymPackages = None,
) -> None:
    """Score a bot or run: one line of mean_reward, std_reward, success_rate, normalized_score.

    The record goes with the run when this checkout trained it; otherwise it stays in the
    untracked .lander/evaluations.jsonl unless --publish."""
    from cli.bots.bot_flow import evaluate_and_report

    check_game(game)
    use_gym_packages(gym_package)
    if transport is not None and transport not in TRANSPORTS:
        fail(f"--transport must be one of {', '.join(TRANSPORTS)}, got {transport!r}")
    evaluate_and_report(
        project_root(), target, episodes, policy, game_bin, port, seed, publish, game, transport,
        (game_project, editor_wait),
    )  # fmt: skip


def play(
    bot: Annotated[
        str,
        typer.Argument(metavar="BOT", help="A bot .json file, or a run (its exported bot)."),
    ],
    record: Annotated[
        Path | None,
        typer.Option(
            help="Write a picture of the trajectories: FILE.png (paths) or FILE.gif (replay)."
        ),
    ] = None,
    agents: Annotated[int, typer.Option(help="Landers flying at once.")] = 4,
    seconds: Annotated[float, typer.Option(help="Game seconds to play.")] = 20.0,
    seed: Annotated[int, typer.Option(help="Seed of the game.")] = 0,
    speed: Annotated[
        float, typer.Option(help="Game seconds per wall second in the live view.")
    ] = 2.0,
    game_bin: Annotated[
        Path | None, typer.Option(help="Fly in this game over the protocol (the Godot lander).")
    ] = None,
    port: Annotated[int, typer.Option(help="TCP port of the game with --game-bin.")] = DEFAULT_PORT,
    web: Annotated[
        bool,
        typer.Option(
            "--web",
            help="Serve a page where the bot flies after your cursor (BOT may be a RUN: its "
            "live bot while it trains, swapped without a reload).",
        ),
    ] = False,
    host: Annotated[
        str, typer.Option(help="With --web: the address to serve on (0.0.0.0 for the LAN).")
    ] = "127.0.0.1",
    web_port: Annotated[int, typer.Option(help="With --web: the page's port.")] = DEFAULT_PAGE_PORT,
    record_demo: Annotated[
        Path | None,
        typer.Option(
            help="With --web: save the demos a person records on the page (K, arrow keys) "
            "to this .json file too."
        ),
    ] = None,
    gym_package: GymPackages = None,
) -> None:
    """Watch a bot fly the bundled game (or --game-bin) in the terminal, without torch; record
    it; or, with --web, in a browser after your cursor."""
    use_gym_packages(gym_package)
    if web:
        from cli.bots.bot_flow import serve_web_page

        serve_web_page(project_root(), bot, host, web_port, record_demo)
        return
    from cli.bots.bot_flow import play_and_report

    play_and_report(project_root(), bot, record, agents, seconds, seed, speed, game_bin, port)


def record(
    target: Annotated[
        str | None,
        typer.Argument(
            metavar="[RUN|BOT]", help="A run (its exported bot) or a bot .json file to record."
        ),
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="The demo file to write (.json).")] = Path(
        "demos.json"
    ),
    episodes: Annotated[int, typer.Option(help="Episodes to record.")] = 10,
    policy: Annotated[
        str,
        typer.Option(help="model (the bot or run) or reference (the game's own controller)."),
    ] = "model",
    game: Annotated[
        str, game_option("With --policy reference: the bundled game to play.")
    ] = DEFAULT_GAME,
    game_arg: Annotated[
        list[str] | None,
        typer.Option(
            "--game-arg",
            metavar="KEY=VALUE",
            help="With --policy reference: a setting of the game (reward_mode=delayed).",
        ),
    ] = None,
    game_bin: Annotated[
        Path | None, typer.Option(help="Record on this game program instead (a bot's own game).")
    ] = None,
    port: Annotated[int, typer.Option(help="Base TCP port of the game.")] = DEFAULT_PORT,
    seed: Annotated[int, typer.Option(help="Seed of the game.")] = 0,
    agents: Annotated[int, typer.Option(help="Agents playing at once.")] = 4,
    gym_package: GymPackages = None,
) -> None:
    """Record a bot, a run or the game's reference controller playing through the real
    bridge, as a demo file for `lander train RUN --demos FILE` (docs/demos.md)."""
    from cli.bots.demo_flow import record_and_report

    check_game(game)
    use_gym_packages(gym_package)
    record_and_report(
        project_root(), target, policy, episodes, out, game, flags.parse_game_args(game_arg),
        game_bin, port, seed, agents,
    )  # fmt: skip


def match(
    first: Annotated[
        str, typer.Argument(metavar="A", help="A bot .json file, or a run (its exported bot).")
    ],
    second: Annotated[str, typer.Argument(metavar="B", help="The bot or run A plays against.")],
    games: Annotated[
        int, typer.Option(help="Rounds to play (A plays each side for half of them).")
    ] = 40,
    game: Annotated[
        str | None, game_option("The bundled game to play [default: the one A trained on].")
    ] = None,
    game_bin: flags.GameBin = None,
    port: Annotated[int, typer.Option(help="Base TCP port of the game.")] = DEFAULT_PORT,
    seed: Annotated[int, typer.Option(help="Seed of the game.")] = 0,
    gym_package: GymPackages = None,
) -> None:
    """Play bot A against bot B on a game with sides (the real game, through the bridge):
    wins, draws, losses, A's score with its 95% interval and the Elo difference."""
    from cli.bots.bot_flow import match_and_report

    check_game(game)
    use_gym_packages(gym_package)
    match_and_report(project_root(), first, second, games, game, game_bin, port, seed)


def ladder(
    game: Annotated[
        str | None,
        game_option("The game whose bots play [default: the first bundled game with sides]."),
    ] = None,
    games: Annotated[int, typer.Option(help="Rounds each pair of bots plays.")] = 20,
    port: Annotated[int, typer.Option(help="Base TCP port of the game.")] = DEFAULT_PORT,
    gym_package: GymPackages = None,
) -> None:
    """A round robin of the committed bots of one game with sides, and their ratings
    (derived on demand, like the champion; the matches stay this checkout's own)."""
    from cli.bots.bot_flow import ladder_and_report

    check_game(game)
    use_gym_packages(gym_package)
    if games < 2:
        fail(f"--games must be at least 2 (each bot plays each side), got {games}")
    chosen = game or next(name for name in BUNDLED_GAMES if game_entry(name).sides)
    ladder_and_report(project_root(), chosen, games, port)
