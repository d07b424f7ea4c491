"""One line of ``lander setup``'s checklist: what was checked, and whether it holds now."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CheckResult:
    """One line of the checklist.

    :param name: what was checked.
    :param ok: True when it holds now (after any fix).
    :param detail: what was found or done; on failure, how to fix it.
    :param warning: True for a problem that does not stop lander from working.
    """

    name: str
    ok: bool
    detail: str
    warning: bool = False
