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


def main() -> None:
    """Console-script entry point."""
    app()
