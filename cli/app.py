"""The ``lander`` Typer app, only the wiring: the commands registered in the order ``--help``
lists them, each a function in the ``commands`` module of its group's package (``cli/runs/``,
``cli/bots/``, ``cli/serving/``, ``cli/machine/``, ``cli/results/``), and the entry point."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from cli.bots import commands as bots
from cli.common.command_classes import LanderCommands, PanelledCommand
from cli.common.endings import run_app
from cli.machine import commands as machine
from cli.results import commands as results
from cli.runs import session_commands as sessions
from cli.runs import training_commands as training
from cli.serving import commands as serving

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
    # Plain help, grouped in panels by cli.common.command_classes: rich markup would eat
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
    from cli.results.git_sync import network_timeout_s

    network_timeout_s()  # a bad LANDER_GIT_TIMEOUT is one line before any work


COMMANDS: list[tuple[str, Callable[..., Any]]] = [
    ("setup", machine.setup),
    ("train", training.train),
    ("export", bots.export),
    ("eval", bots.evaluate),
    ("play", bots.play),
    ("serve", serving.serve),
    ("record", bots.record),
    ("match", bots.match),
    ("ladder", bots.ladder),
    ("sweep", training.sweep),
    ("next", training.next_),
    ("curriculum", training.curriculum),
    ("tune", training.tune),
    ("start", sessions.start),
    ("resume", sessions.resume),
    ("stop", sessions.stop),
    ("status", sessions.status),
    ("prune", sessions.prune),
    ("clean", sessions.clean),
    ("attach", sessions.attach),
    ("dashboard", serving.dashboard),
    ("push", results.push),
    ("cluster", machine.cluster),
]
"""Every command under its name, in the order of ``lander --help``."""
for _name, _command in COMMANDS:
    app.command(_name, cls=PanelledCommand)(_command)


def main() -> None:
    """Console-script entry point (``lander``, ``python -m cli``): the app, with every way it
    can end made one line and an exit code (:func:`cli.common.endings.run_app`)."""
    run_app(app)
