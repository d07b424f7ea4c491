"""The one rich console every command prints through, and the user-error exit."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

# Off a terminal (tmux logs, CI, pipes) rich would wrap at 80 columns and cut
# the status table; a wide fixed width keeps every column readable.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
error_console = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)


def fail(message: str, code: int = 1) -> NoReturn:
    """Print a one-line red error and exit non-zero: the way every user mistake ends. The
    message is text, not markup: git's ``[remote rejected]`` or a path with brackets shows
    as it is."""
    error_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


def how(args: str) -> str:
    """A lander command as the user types it here, for hints: ``./lander ...`` when they
    run the bootstrap script (it says so in ``LANDER_COMMAND``), else ``lander ...``."""
    return f"{os.environ.get('LANDER_COMMAND') or 'lander'} {args}"
