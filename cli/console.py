"""The one rich console every command prints through, and the user-error exit."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console

console = Console(highlight=False)
error_console = Console(stderr=True, highlight=False)


def fail(message: str, code: int = 1) -> NoReturn:
    """Print a one-line red error and exit non-zero: the way every user mistake ends."""
    error_console.print(f"[bold red]error:[/] {message}", soft_wrap=True)
    raise typer.Exit(code)
