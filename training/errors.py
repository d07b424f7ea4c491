"""Errors of the training package that light commands catch too (a laptop without
torch catches them around a bot's evaluation), so they live apart from the modules
that import torch."""

from __future__ import annotations


class ExportError(Exception):
    """A policy that cannot be exported, or an export that failed its parity check."""
