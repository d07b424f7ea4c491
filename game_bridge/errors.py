"""The error base every layer's user-facing errors share, and the game bridge's faults.

Every fault names the game instance it happened on and what was seen, so a run
that stops can say exactly which game misbehaved and how.
"""

from __future__ import annotations


class LanderError(Exception):
    """Base of every error whose message is the user's one line: what happened and what to
    do. The CLI catches it in one place (``cli.app.LanderCommands``), prints the line in red
    and exits 1, so a new fault is a new subclass and no list of errors to update."""


class BridgeError(LanderError):
    """Base class of every fault between the trainer and a game instance.

    :param instance: 0-based index of the game instance, or None when no single
        instance is to blame (for example a bad configuration).
    :param message: what happened, in words a user can act on.
    """

    def __init__(self, instance: int | None, message: str) -> None:
        self.instance = instance
        self.detail = message
        prefix = f"game instance {instance}: " if instance is not None else ""
        super().__init__(prefix + message)


class LaunchError(BridgeError):
    """A game could not be started or did not connect in time."""


class PortInUse(LaunchError):
    """The TCP port a game instance needs is held by another process."""


class InstanceDied(BridgeError):
    """The game closed its connection or its process exited."""


class GameStopped(InstanceDied):
    """The game a person started (Play in the Godot editor) was stopped by them: the end of
    the run, in order, not a fault to restart."""


class InstanceTimeout(BridgeError):
    """The game did not answer within the read timeout."""


class Interrupted(BridgeError):
    """A wait for a game was cut short because the user stopped the run (Ctrl-C, SIGTERM):
    not the game's fault, so never a reason to restart it."""


class ProtocolViolation(BridgeError):
    """The game sent something the protocol does not allow.

    Covers an oversize frame, bytes that are not JSON, a message of the wrong
    type and a reply with the wrong number of agents.
    """


class FrameTooLarge(ProtocolViolation):
    """A frame's length prefix is beyond the configured limit."""
