"""The ``lander`` Typer app: one function per command, its typed parameters its flags."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli import train_flags as flags
from cli.console import console, fail
from cli.paths import project_root
from game_bridge.protocol import DEFAULT_PORT

app = typer.Typer(
    name="lander",
    help="Training operations for reinforcement learning on games: set up a machine, "
    "train PPO against headless game instances over TCP, export the bot, carry results with git.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Training operations for reinforcement learning on games.

    A day with lander: `lander setup`, `lander train run01` (or `lander start run01` in tmux),
    `lander status`, and on another machine `git pull && lander play bots/run01.json`.
    """


@app.command()
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
) -> None:
    """Check and fix this machine: Python, the game binary, a headless smoke test. Safe to re-run."""
    from cli.setup import run_setup

    results = run_setup(project_root(), game_bin, port)
    failed = [result.name for result in results if not result.ok]
    if failed:
        fail(f"setup incomplete: {', '.join(failed)} failed (see above)")
    console.print("[green]setup complete[/]")


@app.command()
def train(
    run: Annotated[
        str, typer.Argument(help="Run name: letters, digits, '-', '_', '.' (at most 64).")
    ],
    timesteps: flags.Timesteps = None,
    n_parallel: flags.NParallel = None,
    agents_per_instance: flags.AgentsPerInstance = None,
    speedup: flags.Speedup = None,
    action_repeat: flags.ActionRepeat = None,
    port: flags.Port = None,
    seed: flags.Seed = None,
    game_bin: flags.GameBin = None,
    game_arg: flags.GameArg = None,
    in_process: flags.InProcess = None,
    ent_coef: flags.EntCoef = None,
    learning_rate: flags.LearningRate = None,
    n_steps: flags.NSteps = None,
    batch_size: flags.BatchSize = None,
    checkpoint_every: flags.CheckpointEvery = None,
    eval_every: flags.EvalEvery = None,
    push_every: flags.PushEvery = None,
    device: flags.Device = None,
    read_timeout: flags.ReadTimeout = None,
    config: flags.ConfigFile = None,
    resume: flags.Resume = None,
    reset_std: flags.ResetStd = None,
    force: flags.Force = False,
    no_git: flags.NoGit = False,
) -> None:
    """Train RUN in the foreground: PPO against the games, checkpoints, final save on Ctrl-C."""
    from cli.run_flow import run_training

    overrides = flags.collect_overrides(
        timesteps=timesteps,
        n_parallel=n_parallel,
        agents_per_instance=agents_per_instance,
        speedup=speedup,
        action_repeat=action_repeat,
        port=port,
        seed=seed,
        game_bin=game_bin,
        game_arg=game_arg,
        in_process=in_process,
        ent_coef=ent_coef,
        learning_rate=learning_rate,
        n_steps=n_steps,
        batch_size=batch_size,
        checkpoint_every=checkpoint_every,
        eval_every=eval_every,
        push_every=push_every,
        device=device,
        read_timeout=read_timeout,
    )
    code = run_training(
        project_root(), run, overrides, config, resume, reset_std, force, use_git=not no_git
    )
    raise typer.Exit(code)


@app.command()
def export(
    run: Annotated[str, typer.Argument(help="The run whose policy to export.")],
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            help="A model .zip to export instead of the run's final or newest checkpoint."
        ),
    ] = None,
) -> None:
    """Write bots/RUN.json and bots/RUN.onnx, after proving both give the model's actions."""
    from cli.bot_flow import export_and_report

    export_and_report(project_root(), run, checkpoint)


@app.command("eval")
def evaluate(
    target: Annotated[
        str | None,
        typer.Argument(
            help="A run name or a bot .json file (not needed with --policy random|reference)."
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
) -> None:
    """Score a bot or run: one line of mean_reward, std_reward, success_rate, normalized_score."""
    from cli.bot_flow import evaluate_and_report

    evaluate_and_report(project_root(), target, episodes, policy, game_bin, port, seed)


@app.command()
def play(
    bot: Annotated[Path, typer.Argument(help="A bot .json file (bots/RUN.json).")],
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
) -> None:
    """Watch a bot fly the bundled game in the terminal, without torch; optionally record it."""
    from cli.bot_flow import play_and_report

    play_and_report(bot, record, agents, seconds, seed, speed)


def main() -> None:
    """Console-script entry point."""
    app()
