"""Who is on the other end of a loopback connection to an instance's port.

Any local process may connect to a listening port. The trainer must not take one
that does so before the real game for that game: it would receive the policy's
actions and could feed it any reward. On Linux the kernel says which socket is
the other end (``/proc/net/tcp``) and which process holds it (``/proc/PID/fd``),
so a connection is accepted only from the launched game or a process it started
(a launcher script's child, say). Nothing is asked of the game, so Godot games
that know nothing of lander keep working unchanged.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path


def _hex_address(address: tuple[str, int]) -> str:
    """An IPv4 address and port as ``/proc/net/tcp`` writes them (``0100007F:2B11``)."""
    packed = socket.inet_aton(address[0])
    return f"{int.from_bytes(packed, 'little'):08X}:{address[1]:04X}"


def _peer_inode(conn: socket.socket) -> str | None:
    """The inode of the socket at the other end of ``conn`` (same host), if listed."""
    ours, theirs = _hex_address(conn.getsockname()), _hex_address(conn.getpeername())
    try:
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > 9 and fields[1] == theirs and fields[2] == ours:
            return fields[9]
    return None


def _process_tree(pid: int) -> list[int]:
    """``pid`` and every process descended from it."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = Path(f"/proc/{current}/task/{task}/children").read_text().split()
            except OSError:
                continue
            pending.extend(int(child) for child in children)
    return found


def _holds(pid: int, target: str) -> bool:
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for descriptor in descriptors:
        try:
            if os.readlink(f"/proc/{pid}/fd/{descriptor}") == target:
                return True
        except OSError:
            continue
    return False


def connected_by(conn: socket.socket, pid: int) -> bool | None:
    """True when process ``pid`` (or a descendant) holds the other end of ``conn``; False
    when another process does; None when it cannot be told (not an IPv4 loopback
    connection, or no ``/proc``): then the caller accepts, as before this check."""
    try:
        host = conn.getpeername()[0]
    except OSError:
        return False  # already gone
    if (
        not isinstance(host, str)
        or not host.startswith("127.")
        or not Path("/proc/net/tcp").exists()
    ):
        return None
    inode = _peer_inode(conn)
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    return any(_holds(member, target) for member in _process_tree(pid))
