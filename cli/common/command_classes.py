"""The click classes lander's Typer app is built of: help that lists options in panels,
and the one place a user-facing error becomes a red line.

Typer's own panels need rich help, whose markup would eat the ``[default: ...]`` of every
option; plain help grouped here keeps the defaults and still reads as panels.
"""

from __future__ import annotations

import re
from typing import Any

import typer
from rich.markup import escape
from typer._click.exceptions import NoSuchOption  # Typer's vendored click: no public name
from typer.core import TyperCommand, TyperGroup

from cli.common.console import error_console
from game_bridge.errors import LanderError

OWN_OPTIONS = "Options"
"""The panel of a command's options that name no panel of their own."""
PANEL_ORDER = (
    OWN_OPTIONS, "Run", "Games", "Godot", "Cluster", "PPO", "Exploration", "Self-play", "Evaluation",
)  # fmt: skip
"""Panels shown first, in this order; any other follows in the order it is first declared."""
RAW_ARGS = "lander.raw_args"
"""Where a command's context keeps its arguments as typed (for ``--help``)."""
_DEFAULT = re.compile(r"\[default: [^\]]*\]$")


class PanelledCommand(TyperCommand):
    """A command whose ``--help`` groups its options by their ``rich_help_panel``
    (:data:`PANEL_ORDER` first)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """Click's parsing, but a mistyped option is never offered a hidden one (an
        internal flag such as ``--until-steps``) as what the user meant. The raw arguments
        are kept for ``--help``, which Click answers before any other option is read."""
        ctx.meta[RAW_ARGS] = list(args)
        try:
            return list(super().parse_args(ctx, args))
        except NoSuchOption as exc:
            hidden = {
                name
                for param in self.params
                if getattr(param, "hidden", False)
                for name in [*param.opts, *param.secondary_opts]
            }
            exc.possibilities = [name for name in exc.possibilities or [] if name not in hidden]
            raise

    # ctx and formatter are click's (vendored by Typer under a private name): typed Any.
    def format_options(self, ctx: Any, formatter: Any) -> None:
        panels: dict[str, list[tuple[str, str]]] = {panel: [] for panel in PANEL_ORDER}
        shown = self._game_defaults(ctx)
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            name = param.opts[0] if param.opts else ""
            if name in shown:
                record = (record[0], _DEFAULT.sub(f"[default: {shown[name]}]", record[1]))
            panel = getattr(param, "rich_help_panel", None) or OWN_OPTIONS
            panels.setdefault(panel, []).append(record)
        for panel, records in panels.items():
            if records:
                with formatter.section(panel):
                    formatter.write_dl(records)

    def _game_defaults(self, ctx: Any) -> dict[str, str]:
        """For a command that trains: the defaults of the game its command line names,
        where they differ from the general ones (:func:`train_flags.game_defaults_shown`)."""
        if not any("--n-steps" in param.opts for param in self.params):
            return {}
        from cli.common.train_flags import game_defaults_shown

        return game_defaults_shown(ctx.meta.get(RAW_ARGS, []))


class LanderCommands(TyperGroup):
    """The app's command group: a :class:`LanderError` from any command (or from reading
    its flags) ends as its one red line and exit 1, here and nowhere else."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except LanderError as exc:
            if terminating():
                raise  # a fault caused by SIGTERM: main() reports the signal instead
            error_console.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
            raise typer.Exit(1) from None


_SIGTERM_SEEN: list[int] = []


def note_sigterm(signum: int) -> None:
    """Remember that SIGTERM arrived, so the faults it causes are not reported as errors."""
    _SIGTERM_SEEN.append(signum)


def terminating() -> bool:
    """True once SIGTERM has arrived in this process."""
    return bool(_SIGTERM_SEEN)
