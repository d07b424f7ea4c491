"""Game processes die with the trainer that started them, however the trainer dies.

A game runs in a session of its own (a Ctrl-C in the trainer's terminal must reach
only the trainer), so a SIGKILL of the trainer would leave it running, re-parented
to PID 1, if it had stopped reading its socket. On Linux the kernel can send the
child a signal when its parent dies (``PR_SET_PDEATHSIG``); elsewhere games still
quit when their connection closes.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def die_with_this_process() -> Callable[[], None] | None:
    """A ``preexec_fn`` for :class:`subprocess.Popen` that makes the child receive SIGKILL
    when this process ends; None where the kernel has no such thing."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the line above took effect
            os._exit(1)

    return arm
