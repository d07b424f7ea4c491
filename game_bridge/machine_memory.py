"""How much memory this machine can give a run: what the kernel says is available, within the
container's limit where there is one (cgroup v2 or v1). The limits a game's agents and a run's
rollout must fit are figured from it, with the figures in the message, not fixed numbers."""

from __future__ import annotations

import os
from pathlib import Path

MEMINFO = Path("/proc/meminfo")
CGROUP_LIMITS = (
    (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory.current")),
    (
        Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
        Path("/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ),
)
"""A container's memory limit and what it uses now: cgroup v2, then v1."""
NO_LIMIT = 2**60
"""cgroup v1 writes "no limit" as a number near 2^63."""


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _meminfo_available() -> int | None:
    try:
        lines = MEMINFO.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("MemAvailable:"):
            fields = line.split()
            return int(fields[1]) * 1024 if len(fields) >= 2 and fields[1].isdigit() else None
    return None


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        return None


def available_memory() -> int | None:
    """Bytes a new allocation can have now: the kernel's ``MemAvailable``, no more than the
    container's limit less its use; the physical memory where neither can be read (not
    Linux); None where nothing can."""
    kernel = _meminfo_available()
    readings = [] if kernel is None else [kernel]
    for limit_path, usage_path in CGROUP_LIMITS:
        limit, usage = _read_int(limit_path), _read_int(usage_path)
        if limit is not None and limit < NO_LIMIT:
            readings.append(max(0, limit - (usage or 0)))
            break
    return min(readings) if readings else _physical_memory()


def in_gb(size: float) -> str:
    """Bytes as a user reads them in a message: ``12.3 GB``."""
    return f"{size / 2**30:,.1f} GB"
