"""The ``lander`` Typer app: one function per command, its typed parameters its flags."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from cli import train_flags as flags
from cli.command_classes import LanderCommands, PanelledCommand, note_sigterm, terminating
from cli.console import console, error_console, fail
from cli.dashboard import DEFAULT_PAGE_PORT
from cli.paths import project_root
from game_bridge import TRANSPORTS
from game_bridge.errors import LanderError
from game_bridge.instance import interrupt_waits
from game_bridge.protocol import DEFAULT_PORT
from games import BUNDLED_GAMES, DEFAULT_GAME, GAME_NAMES, game_entry, is_game_name
from training.config import TUNED, TrainConfig

app = typer.Typer(
    name="lander",
    help="Training operations for reinforcement learning on games: set up a machine, "
    "train PPO against headless game instances over TCP, export the bot, carry results with git.",
    epilog="A day with lander: ./lander setup; ./lander start run03 --timesteps 20000000 --n-parallel 14; "
    "./lander status; ./lander stop run03; ./lander resume run03 --as run04 --ent-coef 0.001 --reset-std 0.3. "
    "On the laptop: git pull && ./lander status && ./lander play bots/run04.json. Guide: docs/operations.md",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help, grouped in panels by cli.command_classes: rich markup would eat
    # "[default: ...]" and label every flag <bool>.
    rich_markup_mode=None,
    cls=LanderCommands,
)


@app.callback()
def _root() -> None:
    """Training operations for reinforcement learning on games.

    A day with lander: `lander setup`, `lander train run01` (or `lander start run01` in tmux),
    `lander status`, and on another machine `git pull && lander play bots/run01.json`.
    """
    from cli.git_sync import network_timeout_s

    network_timeout_s()  # a bad LANDER_GIT_TIMEOUT is one line before any work


def _game_option(help_text: str) -> Any:
    """The ``--game`` option of a command that plays a bundled game."""
    return typer.Option(metavar=GAME_NAMES, help=help_text, show_default=False)


def _check_game(game: str | None) -> None:
    """One red line for a ``--game`` that is no game lander knows (None: not given)."""
    if game is not None and not is_game_name(game):
        fail(f"--game must be one of {GAME_NAMES}, got {game!r}")


@app.command(cls=PanelledCommand)
def setup(
    game_bin: Annotated[
        Path | None,
        typer.Option(
            help="A game executable that speaks the Godot RL Agents protocol "
            "(default: the bundled lander game, written to build/).",
            envvar="LANDER_GAME_BIN",
        ),
    ] = None,
    port: Annotated[
        int, typer.Option(help="TCP port for the smoke test's game instance.")
    ] = DEFAULT_PORT,
    cluster: Annotated[
        bool,
        typer.Option(
            "--cluster",
            help="Also install Ray, to run games or sweep trials on a cluster (docs/cluster.md).",
        ),
    ] = False,
    dev: Annotated[
        bool,
        typer.Option(
            "--dev",
            help="Also install everything the tests need: Ray, Playwright, and (with apt-get, "
            "as root) Debian's godot3-server, chromium and git-lfs.",
        ),
    ] = False,
    lfs: Annotated[
        bool,
        typer.Option(
            "--lfs",
            help="Keep checkpoints and bots in Git LFS from now on (.gitattributes, committed "
            "and pushed): history holds pointers, a clone fetches only the current files.",
        ),
    ] = False,
) -> None:
    """Check and fix this machine: Python, venv, torch (CUDA on a GPU), tmux, git, TensorBoard,
    the game binary and a headless smoke test. Safe to re-run."""
    from cli.setup import run_setup

    results = run_setup(project_root(), game_bin, port, cluster, dev, lfs)
    failed = [result.name for result in results if not result.ok and not result.warning]
    if failed:
        fail(f"setup incomplete: {', '.join(failed)} failed (see above)")
    console.print("[green]setup complete[/]")


RunName = Annotated[
    str,
    typer.Argument(metavar="RUN", help="Run name: letters, digits, '-', '_', '.' (at most 64)."),
]


@app.command(cls=PanelledCommand)
@flags.with_settings()
def train(
    run: RunName,
    config: flags.ConfigFile = None,
    resume: flags.Resume = None,
    reset_std: flags.ResetStd = None,
    force: flags.Force = False,
    git: flags.Git = None,
    auto_resume: flags.AutoResume = False,
    demos: flags.Demonstrations = None,
    until_steps: Annotated[int | None, typer.Option(hidden=True)] = None,
    settings: dict[str, Any] | None = None,
) -> None:
    """Train RUN in the foreground: PPO against the games, checkpoints, final save on Ctrl-C."""
    if auto_resume:
        from cli.supervisor import Session, supervise

        _valid_run(run)
        session = Session(
            run, settings or {}, config, resume, reset_std, force, git, tuple(demos or ())
        )
        raise typer.Exit(supervise(project_root(), session))
    from cli.run_flow import run_training
    from training.planning import TrainRequest

    request = TrainRequest(
        project_root(),
        run,
        settings or {},
        config_file=config,
        resume=resume,
        force=force,
        reset_std=reset_std,
        until_timesteps=until_steps,
        demos=tuple(demos or ()),
    )
    raise typer.Exit(run_training(request, git))


@app.command(cls=PanelledCommand)
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
    from cli.bot_flow import export_and_report

    export_and_report(project_root(), run, checkpoint, tiers, games)


@app.command("eval", cls=PanelledCommand)
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
    port: Annotated[
        int, typer.Option(help="Base TCP port when evaluating through --game-bin.")
    ] = DEFAULT_PORT,
    seed: Annotated[int, typer.Option(help="Seed of the evaluation episodes.")] = 1000,
    game: Annotated[
        str,
        _game_option(
            "The bundled game --policy random|reference plays (a bot knows its own) "
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
    publish: Annotated[
        bool,
        typer.Option(
            help="Commit and push this record although this checkout did not train the run "
            "(kept in a file of this checkout's own beside the run's records)."
        ),
    ] = False,
) -> None:
    """Score a bot or run: one line of mean_reward, std_reward, success_rate, normalized_score.

    The record goes with the run when this checkout trained it; otherwise it stays in the
    untracked .lander/evaluations.jsonl unless --publish."""
    from cli.bot_flow import evaluate_and_report

    _check_game(game)
    if transport is not None and transport not in TRANSPORTS:
        fail(f"--transport must be one of {', '.join(TRANSPORTS)}, got {transport!r}")
    evaluate_and_report(
        project_root(), target, episodes, policy, game_bin, port, seed, publish, game, transport
    )


@app.command(cls=PanelledCommand)
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
) -> None:
    """Watch a bot fly the bundled game (or --game-bin) in the terminal, without torch; record
    it; or, with --web, in a browser after your cursor."""
    if web:
        from cli.bot_flow import serve_web_page

        serve_web_page(project_root(), bot, host, web_port, record_demo)
        return
    from cli.bot_flow import play_and_report

    play_and_report(project_root(), bot, record, agents, seconds, seed, speed, game_bin, port)


@app.command(cls=PanelledCommand)
def serve(
    game: Annotated[
        str, typer.Argument(metavar="|".join(BUNDLED_GAMES), help="The bundled game to serve.")
    ] = DEFAULT_GAME,
    port: Annotated[int, typer.Option(help="TCP port of the server.")] = 8000,
    host: Annotated[
        str, typer.Option(help="The address to serve on (0.0.0.0 for the LAN or a container).")
    ] = "127.0.0.1",
    max_sessions: Annotated[
        int, typer.Option(help="Sessions (environments) at once; one more is refused.")
    ] = 8,
    game_arg: Annotated[
        list[str] | None,
        typer.Option("--game-arg", metavar="KEY=VALUE", help="A setting of the game."),
    ] = None,
) -> None:
    """Serve a bundled game as an OpenEnv environment (WebSocket sessions at /ws, /schema,
    /health), for OpenEnv's clients and `lander train --game-url` (docs/openenv.md)."""
    from cli.serving import serve_game

    serve_game(game, flags.parse_game_args(game_arg), host, port, max_sessions)


@app.command(cls=PanelledCommand)
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
        str, _game_option("With --policy reference: the bundled game to play.")
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
) -> None:
    """Record a bot, a run or the game's reference controller playing through the real
    bridge, as a demo file for `lander train RUN --demos FILE` (docs/demos.md)."""
    from cli.demo_flow import record_and_report

    _check_game(game)
    record_and_report(
        project_root(), target, policy, episodes, out, game, flags.parse_game_args(game_arg),
        game_bin, port, seed, agents,
    )  # fmt: skip


@app.command(cls=PanelledCommand)
def match(
    first: Annotated[
        str, typer.Argument(metavar="A", help="A bot .json file, or a run (its exported bot).")
    ],
    second: Annotated[str, typer.Argument(metavar="B", help="The bot or run A plays against.")],
    games: Annotated[
        int, typer.Option(help="Rounds to play (A plays each side for half of them).")
    ] = 40,
    game: Annotated[
        str | None, _game_option("The bundled game to play [default: the one A trained on].")
    ] = None,
    game_bin: flags.GameBin = None,
    port: Annotated[int, typer.Option(help="Base TCP port of the game.")] = DEFAULT_PORT,
    seed: Annotated[int, typer.Option(help="Seed of the game.")] = 0,
) -> None:
    """Play bot A against bot B on a game with sides (the real game, through the bridge):
    wins, draws, losses, A's score with its 95% interval and the Elo difference."""
    from cli.bot_flow import match_and_report

    _check_game(game)
    match_and_report(project_root(), first, second, games, game, game_bin, port, seed)


@app.command(cls=PanelledCommand)
def ladder(
    game: Annotated[
        str | None,
        _game_option("The game whose bots play [default: the first bundled game with sides]."),
    ] = None,
    games: Annotated[int, typer.Option(help="Rounds each pair of bots plays.")] = 20,
    port: Annotated[int, typer.Option(help="Base TCP port of the game.")] = DEFAULT_PORT,
) -> None:
    """A round robin of the committed bots of one game with sides, and their ratings
    (derived on demand, like the champion; the matches stay this checkout's own)."""
    from cli.bot_flow import ladder_and_report

    _check_game(game)
    if games < 2:
        fail(f"--games must be at least 2 (each bot plays each side), got {games}")
    chosen = game or next(name for name in BUNDLED_GAMES if game_entry(name).sides)
    ladder_and_report(project_root(), chosen, games, port)


@app.command(cls=PanelledCommand)
@flags.with_settings(exclude=("push_every",))  # a sweep pushes every --push-every trials
def sweep(
    name: Annotated[
        str,
        typer.Argument(
            metavar="NAME", help="Sweep name: trials are runs NAME-t0000, NAME-t0001, ..."
        ),
    ],
    trials: Annotated[
        int, typer.Option(help="Trials to finish in all (a stopped sweep resumes).")
    ] = 10,
    timesteps_per_trial: Annotated[
        int, typer.Option(help="Training steps of each trial.")
    ] = 200_000,
    space: Annotated[
        Path | None,
        typer.Option(help="Search space YAML (default: lr, entropy, n_steps, batch, clip, width)."),
    ] = None,
    push_every: Annotated[
        int, typer.Option(help="Trials between commits and pushes (0: only at the end).")
    ] = 1,
    parallel: Annotated[
        int,
        typer.Option(
            help="With --cluster: trials at once, as Ray tasks spread over the nodes "
            "(each trains in a scratch folder there; this checkout alone commits)."
        ),
    ] = 1,
    config: flags.ConfigFile = None,
    git: flags.Git = None,
    settings: dict[str, Any] | None = None,
) -> None:
    """Search training settings with Optuna (TPE, median pruning; no pruning on a cluster);
    the options below are every trial's settings outside the search space."""
    from cli.campaigns import sweep as run

    _valid_run(name)
    overrides = _with_config_file(config, settings or {})
    raise typer.Exit(
        run(
            project_root(),
            name,
            trials,
            timesteps_per_trial,
            space,
            overrides,
            push_every,
            git is not False,
            parallel,
        )
    )


def _with_config_file(config: Path | None, settings: dict[str, Any]) -> dict[str, Any]:
    """A settings file's values under the options given (options win)."""
    from training.config import load_config_file

    return {**(load_config_file(config) if config is not None else {}), **settings}


@app.command("next", cls=PanelledCommand)
@flags.with_settings()
def next_(
    from_run: Annotated[
        str | None, typer.Option("--from", help="The run to continue (default: the newest run).")
    ] = None,
    config: flags.ConfigFile = None,
    reset_std: flags.ResetStd = None,
    git: flags.Git = None,
    settings: dict[str, Any] | None = None,
) -> None:
    """Train the next run (run03 -> run04) from the previous run's final model."""
    from cli.campaigns import next_run

    source = _valid_run(from_run) if from_run else None
    overrides = _with_config_file(config, settings or {})
    raise typer.Exit(next_run(project_root(), source, overrides, git, reset_std))


@app.command(cls=PanelledCommand)
def curriculum(
    plan: Annotated[
        Path,
        typer.Argument(
            metavar="PLAN", help="A plan YAML: stages with their runs, game args and budgets."
        ),
    ],
    git: flags.Git = None,
) -> None:
    """Run a curriculum: stages in order, each resuming from the one before; stops at a failed stage."""
    from cli.campaigns import curriculum as run

    raise typer.Exit(run(project_root(), plan, git is not False))


TbHost = Annotated[
    str | None,
    typer.Option(
        help="Address TensorBoard listens on (0.0.0.0: the whole LAN). "
        "Default: the last one used in this checkout, else 0.0.0.0."
    ),
]
TbPort = Annotated[
    int | None,
    typer.Option(
        help="TensorBoard port. Default: the last one used in this checkout, else 6006; "
        "a taken port moves to the next free one."
    ),
]
WebPort = Annotated[
    int | None,
    typer.Option(
        help="The live page's port. Default: the last one used in this checkout, else "
        f"{DEFAULT_PAGE_PORT}; a taken port moves to the next free one."
    ),
]


@app.command(cls=PanelledCommand)
@flags.with_settings(exclude=TUNED)
def tune(
    objective: Annotated[
        str,
        typer.Option(
            help="What to race for: 'time' (wall seconds from launch to --reward, samples that "
            "teach) or 'fps' (training steps per second)."
        ),
    ] = "fps",
    seconds: Annotated[
        float,
        typer.Option(help="Training seconds per setting (time: the longest a race may take)."),
    ] = 20.0,
    reward: Annotated[
        float | None,
        typer.Option(
            help="time: the training reward (rollout/ep_rew_mean) to race to; "
            "default 200 on the bundled game, required for other games."
        ),
    ] = None,
    n_parallel: Annotated[
        str | None,
        typer.Option(help="Instance counts to try, comma-separated [fps: 2,4,8; time: 2,4]."),
    ] = None,
    agents: Annotated[
        str | None,
        typer.Option(
            help="Agents per instance to try, comma-separated (bundled game's --agents) "
            "[fps: 4,8,16; time: 8,16]."
        ),
    ] = None,
    speedup: Annotated[
        str, typer.Option(help="Speedups to try, comma-separated ('default': the game's own).")
    ] = "default",
    n_steps: Annotated[
        str | None,
        typer.Option(
            help="Rollout lengths (steps per env) to try, comma-separated "
            "('default': the run's) [fps: default; time: 32,64]."
        ),
    ] = None,
    batch_size: Annotated[
        str,
        typer.Option(help="Minibatch sizes to try, comma-separated ('default': the run's)."),
    ] = "default",
    config: flags.ConfigFile = None,
    settings: dict[str, Any] | None = None,
) -> None:
    """Find the best --n-parallel, --agents-per-instance, --speedup, --n-steps and --batch-size
    here: a short run per setting, ranked by time to a reward (--objective time) or by fps."""
    from training.tuning import best, plan_races, tune

    lists = {
        "n_parallel": n_parallel,
        "agents_per_instance": agents,
        "speedup": speedup,
        "n_steps": n_steps,
        "batch_size": batch_size,
    }
    plan = plan_races(objective, seconds, reward, lists, _with_config_file(config, settings or {}))
    results = tune(plan.races, plan.seconds, plan.overrides, console, plan.target)
    console.print(_race_table(results, plan.target, plan.seconds))
    winner = best(results, objective)
    target = plan.target
    if winner is None:
        fail(
            f"no setting reached reward {target:g} in {seconds:g} s; try more --seconds"
            if target is not None
            else "no setting trained; run `lander setup` to check the game"
        )
    measured = (
        f"reward {target:g} in {winner.seconds_to_reward:.1f} s"
        if target is not None
        else f"{winner.fps:,.0f} fps"
    )
    console.print(
        f"fastest: {measured}. Use: ./lander start RUN {winner.setting.flags()} "
        + " ".join(flags.settings_argv(settings or {}))
    )


def _race_table(results: list[Any], target: float | None, seconds: float) -> Any:
    """``tune``'s table: a row per setting, its fps and (racing to a reward) its time."""
    from rich.table import Table

    title = (
        f"seconds from launch to reward {target:g} per setting (at most {seconds:g} s each)"
        if target is not None
        else f"training fps per setting ({seconds:g} s each)"
    )
    table = Table(title=title)
    columns = ("n-parallel", "agents-per-instance", "speedup", "n-steps", "batch-size", "fps")
    for column in (*columns, *(("seconds to reward",) if target is not None else ())):
        table.add_column(column, justify="right")
    for result in results:
        setting = result.setting
        row = [
            str(setting.n_parallel),
            str(setting.agents_per_instance),
            str(setting.speedup or "default"),
            str(setting.n_steps or "default"),
            str(setting.batch_size or "default"),
            "failed" if result.fps is None else f"{result.fps:,.0f}",
        ]
        if target is not None:
            reached = result.seconds_to_reward
            row.append("not reached" if reached is None else f"{reached:.1f}")
        table.add_row(*row)
    return table


def _check_plan(
    run: str,
    settings: dict[str, Any],
    config: Path | None,
    resume: str | None,
    force: bool,
    reset_std: float | None,
    demos: tuple[Path, ...] = (),
) -> TrainConfig:
    """Plan the run as ``lander train`` would, without writing, so a mistake is one red
    line here, not a tmux window that dies; return the run's settings."""
    from training.planning import TrainRequest, plan_training

    request = TrainRequest(
        project_root(), run, settings, config_file=config, resume=resume, force=force,
        reset_std=reset_std, demos=demos,
    )  # fmt: skip
    return plan_training(request).config


@app.command(cls=PanelledCommand)
@flags.with_settings()
def start(
    run: RunName,
    tb_host: TbHost = None,
    tb_port: TbPort = None,
    web_port: WebPort = None,
    sweep_space: Annotated[
        Path | None,
        typer.Option("--sweep", help="Run `lander sweep RUN --space FILE ...` instead of one run."),
    ] = None,
    curriculum_plan: Annotated[
        Path | None,
        typer.Option("--curriculum", help="Run `lander curriculum PLAN` instead of one run."),
    ] = None,
    config: flags.ConfigFile = None,
    resume: flags.Resume = None,
    reset_std: flags.ResetStd = None,
    force: flags.Force = False,
    git: flags.Git = None,
    auto_resume: flags.AutoResume = True,
    demos: flags.Demonstrations = None,
    settings: dict[str, Any] | None = None,
) -> None:
    """Start RUN in a detached tmux session (train, dashboard, live page); attach if it runs.

    Takes every option of `lander train`, e.g. `lander start run03 --timesteps 20000000 --n-parallel 14`.
    """
    from cli.operations import start_in_tmux
    from cli.tmux_sessions import TRAIN_WINDOW, find_session, window_alive

    _valid_run(run)
    settings = settings or {}
    demo_files = tuple(demos or ())
    if demo_files and (curriculum_plan is not None or sweep_space is not None):
        fail("--demos start one run: give them to `lander train` or `start` of a single run")
    session = flags.session_argv(config, resume, reset_std, force, git, demo_files)
    # Detached runs are the ones nobody watches: they heal themselves unless told not to.
    session += ["--auto-resume"] if auto_resume else []
    command: list[str] | None = None
    game = settings.get("game", DEFAULT_GAME)
    game_args: dict[str, str] = {}
    if curriculum_plan is not None:
        if not curriculum_plan.is_file():
            fail(f"plan {str(curriculum_plan)!r} does not exist")
        if settings or config or resume or reset_std is not None or force:
            fail("a curriculum's plan sets its stages' settings: give them in the plan, not here")
        from training.curriculum import load_plan

        load_plan(curriculum_plan)  # a bad plan is one line here, not a dead tmux window
        command = ["curriculum", str(curriculum_plan.resolve())]
        command += [] if git is None else ["--git" if git else "--no-git"]
    elif sweep_space is not None:
        if not sweep_space.is_file():
            fail(f"search space {str(sweep_space)!r} does not exist")
        from training.search_space import load_space

        load_space(sweep_space)
        if "push_every" in settings or resume or reset_std is not None or force:
            fail(
                "--push-every, --resume, --reset-std and --force are not sweep options "
                "(a sweep pushes every trial and resumes by running it again)"
            )
        command = ["sweep", run, "--space", str(sweep_space.resolve())]
        command += flags.settings_argv(settings) + flags.session_argv(
            config, None, None, False, git
        )
    else:
        live = find_session(project_root(), run)
        if live is None or not window_alive(live, TRAIN_WINDOW):
            planned = _check_plan(run, settings, config, resume, force, reset_std, demo_files)
            game, game_args = planned.game, planned.game_args
    start_in_tmux(
        project_root(), run, flags.settings_argv(settings) + session, tb_host, tb_port, command,
        live_page=_has_page(game, game_args), web_port=web_port,
    )  # fmt: skip


@app.command(cls=PanelledCommand)
@flags.with_settings()
def resume(
    run: Annotated[
        str | None,
        typer.Argument(metavar="RUN", help="The run to resume (default: the newest run)."),
    ] = None,
    as_run: Annotated[
        str | None,
        typer.Option(
            "--as", help="Resume into a new run of this name (a branch); default: continue RUN."
        ),
    ] = None,
    tb_host: TbHost = None,
    tb_port: TbPort = None,
    web_port: WebPort = None,
    config: flags.ConfigFile = None,
    reset_std: flags.ResetStd = None,
    git: flags.Git = None,
    auto_resume: flags.AutoResume = True,
    settings: dict[str, Any] | None = None,
) -> None:
    """Resume a run in tmux, in place or as a new branch run (--as), with changed settings.

    Example: `lander resume run03 --as run04 --ent-coef 0.001 --reset-std 0.3`. Settings not
    given keep the resumed run's values (the defaults shown are a new run's)."""
    from cli.operations import newest_run, start_in_tmux

    root = project_root()
    source = run or newest_run(root)
    if source is None:
        fail("no runs in checkpoints/ to resume")
    _valid_run(source)
    target = _valid_run(as_run) if as_run else source
    settings = settings or {}
    planned = _check_plan(target, settings, config, source, False, reset_std)
    args = flags.settings_argv(settings) + flags.session_argv(config, source, reset_std, False, git)
    args += ["--auto-resume"] if auto_resume else []
    live_page = _has_page(planned.game, planned.game_args)
    start_in_tmux(root, target, args, tb_host, tb_port, live_page=live_page, web_port=web_port)


@app.command(cls=PanelledCommand)
def stop(
    run: Annotated[str, typer.Argument(metavar="RUN", help="The run to stop.")],
    timeout: Annotated[
        float, typer.Option(help="Seconds to wait for the final save, export and push.")
    ] = 300.0,
) -> None:
    """Stop RUN gracefully: Ctrl-C, then wait for the final checkpoint, the export and the push."""
    from cli.operations import stop_run

    stop_run(project_root(), _valid_run(run), timeout)


@app.command(cls=PanelledCommand)
def status(
    show_all: Annotated[
        bool, typer.Option("--all", help="Every run, not only the newest 40.")
    ] = False,
) -> None:
    """A table of runs: state, steps, fps, reward, last checkpoint, best evaluation, pushed or not."""
    from cli.results import committed_records
    from cli.status_table import (
        SHOWN_RUNS,
        champion_lines,
        cluster_lines,
        health_lines,
        status_table,
    )
    from training.run_record import scan_runs

    root = project_root()
    evaluations = committed_records(root)  # read once for the table and the champions
    scanned = scan_runs(root)
    console.print(status_table(root, evaluations, scanned, None if show_all else SHOWN_RUNS))
    records = scanned[0]
    lines = [*health_lines(root, records), *cluster_lines(root, records)]
    for line in [*lines, *champion_lines(root, evaluations)]:
        console.print(line)


@app.command(cls=PanelledCommand)
def prune(
    run: Annotated[str, typer.Argument(metavar="RUN", help="The finished run to prune.")],
) -> None:
    """Drop a finished run's intermediate checkpoints (commit and push the removal), keeping
    final.zip, its bots, records and logs: the repository's next clones stay light."""
    from cli.operations import prune_run

    prune_run(project_root(), _valid_run(run))


@app.command(cls=PanelledCommand)
def clean() -> None:
    """Remove the tmux sessions of runs that have ended (and of dashboards that exited)."""
    from cli.operations import clean_sessions

    clean_sessions(project_root())


@app.command(cls=PanelledCommand)
def attach(
    run: Annotated[
        str, typer.Argument(metavar="RUN", help="The run whose tmux session to attach.")
    ],
) -> None:
    """Attach this terminal to RUN's tmux session (detach with Ctrl-b d)."""
    from cli.tmux_sessions import attach as attach_session
    from cli.tmux_sessions import find_session

    session = find_session(project_root(), _valid_run(run))
    if session is None:
        fail(f"run {run} has no tmux session here")
    if not sys.stdin.isatty():
        fail("attach needs a terminal")
    attach_session(session)


@app.command(cls=PanelledCommand)
def dashboard(
    host: TbHost = None,
    port: TbPort = None,
    stop_it: Annotated[
        bool,
        typer.Option("--stop", help="Stop this checkout's TensorBoard that `start` left in tmux."),
    ] = False,
) -> None:
    """Serve TensorBoard over logs/ in the foreground (every run's curves); if this
    checkout's dashboard already runs, print its address instead."""
    from cli.dashboard import choose_dashboard

    if stop_it:
        from cli.operations import stop_dashboard

        stop_dashboard(project_root())
        return
    choice = choose_dashboard(project_root(), host, port)
    console.print(f"dashboard: {choice.url}  ({choice.note})")
    if choice.command is not None:
        os.execv(choice.command[0], choice.command)


@app.command(cls=PanelledCommand)
def push(
    run: Annotated[
        str | None,
        typer.Argument(
            metavar="RUN", help="Publish this run only, even one trained with --no-git."
        ),
    ] = None,
) -> None:
    """Commit and push every run left unpushed (runs trained with --no-git stay out unless named)."""
    from cli.operations import push_runs

    push_runs(project_root(), _valid_run(run) if run else None)


def _valid_run(name: str) -> str:
    """``name`` if it is a valid run name (else :class:`InvalidRunName`, one red line)."""
    from training.run_paths import validate_run_name

    return validate_run_name(name)


def _has_page(game: str, game_args: dict[str, str]) -> bool:
    """True when the game has a web page a run's live bot of these ``--game-arg`` settings
    can be watched on."""
    entry = game_entry(game)
    return bool(entry.web_files) and entry.page_plays(game_args)


TRAINING_STACK = frozenset(
    ("torch", "stable_baselines3", "onnx", "onnxruntime", "onnxscript", "optuna")
)
"""What the light install leaves out (pyproject's ``train`` extra)."""


class Terminated(BaseException):
    """SIGTERM outside training (which handles it as a graceful stop): unwinds like an
    error, so what is being set up (games being launched) is closed on the way out."""


def _terminated(signum: int, _frame: object) -> None:
    note_sigterm(signum)
    # The exception below is lost if the signal lands where Python ignores exceptions
    # (an at-fork hook while a game is being launched); every wait for a game then
    # ends within a poll slice instead, and main() still reports the signal.
    interrupt_waits()
    raise Terminated


def _quiet_when_terminated(unraisable: Any) -> None:
    """A Terminated that Python had to drop (see :func:`_terminated`) is no error to show."""
    if isinstance(unraisable.exc_value, Terminated):
        return
    sys.__unraisablehook__(unraisable)


def main() -> None:
    """Console-script entry point.

    User-facing errors end as one red line in :class:`~cli.command_classes.LanderCommands`;
    here is the last guard against a traceback: a signal, a missing training stack, an
    operating-system error that no command expected (a full disk, a vanished folder).
    """
    signal.signal(signal.SIGTERM, _terminated)
    sys.unraisablehook = _quiet_when_terminated
    try:
        app()
    except (Terminated, SystemExit, LanderError):
        if not terminating():
            raise
        error_console.print("[yellow]terminated[/] (SIGTERM)")
        sys.exit(128 + signal.SIGTERM)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in TRAINING_STACK:
            raise
        error_console.print(
            f"[bold red]error:[/] this needs the training stack ({exc.name} is not installed): "
            "run ./lander setup, or any training command through ./lander, to install it",
            soft_wrap=True,
        )
        sys.exit(1)
    except KeyboardInterrupt:
        # Ctrl-C before a trainer took over the signal (while games start, say).
        error_console.print("[yellow]interrupted[/]")
        sys.exit(130)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        error_console.print(f"[bold red]error:[/] {exc.strerror or exc}{where}", soft_wrap=True)
        sys.exit(1)
