"""The command of results and git: ``push`` (what runs left unpushed, or one run)."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common.options import valid_run
from cli.common.paths import project_root


def push(
    run: Annotated[
        str | None,
        typer.Argument(
            metavar="RUN", help="Publish this run only, even one trained with --no-git."
        ),
    ] = None,
) -> None:
    """Commit and push every run left unpushed (runs trained with --no-git stay out unless named)."""
    from cli.results.pushing import push_runs

    push_runs(project_root(), valid_run(run) if run else None)
