"""Training speed with a hundred viewers of the live page against none, side by side.

A real run of the bundled game as ``lander start`` runs it: ``lander train`` (default
settings, games over TCP, the bot published for the page every ``--publish-every`` steps)
beside ``lander play --web RUN`` serving its live page. In one arm nobody looks; in the
other ``--viewers`` pages poll ``/bot`` every second, as the page does, each over its own
kept-alive connection and, as a browser does for the page's ``cache: "no-cache"``, asking
with the ETag of the bot it has (``304`` while the bot is the same). The arms alternate ``--repeats`` times; each run's speed is its
session-average steps per second (``run.json``'s ``last_fps`` at its end).

The viewers run here, on the same two cores (on a LAN they would be other machines), so
their own CPU counts against the run too; the table also shows the CPU seconds the page's
server and the viewers used, and every viewer request's status and slowest answer.

    .venv/bin/python benchmarks/page_viewers.py [--viewers 100] [--repeats 5] [--timesteps 600000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from measure import cpu_seconds, free_base_port
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
LANDER = ROOT / ".venv" / "bin" / "lander"
console = Console()


@dataclass
class Viewing:
    """What the viewers saw in one arm."""

    answers: dict[int, int] = field(default_factory=dict)  # status -> count
    failures: int = 0
    slowest_s: float = 0.0
    cpu_s: float = 0.0


async def _viewer(port: int, stop: asyncio.Event, seen: Viewing) -> None:
    """One page: GET /bot every second over one kept-alive connection (reopened if closed)."""
    await asyncio.sleep(random.random())  # pages opened at different moments
    reader = writer = None
    etag = ""  # what a browser keeps of the last bot (the page asks with cache: no-cache)
    while not stop.is_set():
        began = time.monotonic()
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            assert reader is not None
            asked = f"If-None-Match: {etag}\r\n" if etag else ""
            writer.write(f"GET /bot HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{asked}\r\n".encode())
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            status = int(head.split(b" ", 2)[1])
            fields = dict(
                line.lower().split(b":", 1) for line in head.split(b"\r\n")[1:] if b":" in line
            )
            if b"etag" in fields:
                etag = fields[b"etag"].strip().decode()
            await asyncio.wait_for(reader.readexactly(int(fields.get(b"content-length", 0))), 10)
            seen.answers[status] = seen.answers.get(status, 0) + 1
            seen.slowest_s = max(seen.slowest_s, time.monotonic() - began)
            if b"connection: close" in head.lower():
                writer.close()
                writer = None
        except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError):
            seen.failures += 1
            if writer is not None:
                writer.close()
            writer = None
        await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - began)))
    if writer is not None:
        writer.close()


def _watch(port: int, viewers: int, stop: threading.Event, seen: Viewing) -> None:
    async def all_viewers() -> None:
        done = asyncio.Event()
        tasks = [asyncio.create_task(_viewer(port, done, seen)) for _ in range(viewers)]
        while not stop.is_set():
            await asyncio.sleep(0.2)
        done.set()
        await asyncio.gather(*tasks)

    asyncio.run(all_viewers())


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Arm:
    """One run of one arm: its speed, its length, and what serving and watching it cost."""

    fps: float
    wall_s: float
    server_cpu_s: float
    seen: Viewing


def one_run(home: Path, run: str, viewers: int, timesteps: int) -> Arm:
    """Train ``run`` with its page served and ``viewers`` watching."""
    env = {**os.environ, "LANDER_HOME": str(home)}
    port = free_base_port(1, 42000)
    page = subprocess.Popen(
        [str(LANDER), "play", "--web", run, "--web-port", str(port)], env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    seen, stop = Viewing(), threading.Event()
    try:
        deadline = time.monotonic() + 60
        while not _listening(port):
            if time.monotonic() > deadline or page.poll() is not None:
                raise SystemExit("the page's server did not start")
            time.sleep(0.2)
        watching = threading.Thread(target=_watch, args=(port, viewers, stop, seen))
        before = resource.getrusage(resource.RUSAGE_SELF)
        idle_cpu = cpu_seconds(page.pid)  # its start: the same in both arms
        if viewers:
            watching.start()
        began = time.monotonic()
        trained = subprocess.run(
            [str(LANDER), "train", run, "--timesteps", str(timesteps), "--no-git"], env=env,
            capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        wall = time.monotonic() - began
        stop.set()
        if viewers:
            watching.join()
        after = resource.getrusage(resource.RUSAGE_SELF)
        seen.cpu_s = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        if trained.returncode != 0:
            raise SystemExit(f"training failed:\n{trained.stdout}{trained.stderr}")
        server_cpu = cpu_seconds(page.pid) - idle_cpu
    finally:
        page.terminate()
        page.wait(timeout=10)
    record = json.loads((home / "checkpoints" / run / "run.json").read_text())
    return Arm(float(record["extra"]["last_fps"]), wall, server_cpu, seen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--viewers", type=int, default=100, help="pages polling every second")
    parser.add_argument("--repeats", type=int, default=5, help="alternations of the two arms")
    parser.add_argument("--timesteps", type=int, default=600_000, help="steps of each run")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4 * args.viewers)), hard))
    arms: dict[int, list[Arm]] = {0: [], args.viewers: []}
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        for repeat in range(args.repeats):
            order = (0, args.viewers) if repeat % 2 == 0 else (args.viewers, 0)
            for viewers in order:
                arm = one_run(home, f"v{repeat}w{viewers}", viewers, args.timesteps)
                arms[viewers].append(arm)
                seen = arm.seen
                console.print(
                    f"repeat {repeat}: {viewers:>3} viewers  {arm.fps:,.0f} steps/s  "
                    f"{arm.wall_s:.0f} s  page server {arm.server_cpu_s:.2f} CPU s  viewers "
                    f"{seen.cpu_s:.2f} CPU s  answers {seen.answers} failures {seen.failures}  "
                    f"slowest {seen.slowest_s * 1000:.0f} ms"
                )
    report(arms, args.viewers, args.timesteps)


def report(arms: dict[int, list[Arm]], viewers: int, timesteps: int) -> None:
    """The side-by-side table, the ratio of each pair, and the page server's share of the
    machine: the part of the cost that a LAN's viewers (on their own machines) leave."""
    cores = os.cpu_count() or 1
    table = Table(title=f"lander train ({timesteps:,} steps) with its live page, {cores} cores")
    for column in ("viewers", "steps/s (median)", "each", "page server CPU, % of the machine"):
        table.add_column(column, justify="right")
    for count in (0, viewers):
        runs = arms[count]
        table.add_row(
            str(count),
            f"{statistics.median(a.fps for a in runs):,.0f}",
            " / ".join(f"{a.fps:,.0f}" for a in runs),
            " / ".join(f"{100 * a.server_cpu_s / (cores * a.wall_s):.2f}" for a in runs),
        )
    console.print(table)
    pairs = [watched.fps / alone.fps for alone, watched in zip(arms[0], arms[viewers], strict=True)]
    share = statistics.median(
        (w.server_cpu_s - a.server_cpu_s) / (cores * w.wall_s)
        for a, w in zip(arms[0], arms[viewers], strict=True)
    )
    seen = [a.seen for a in arms[viewers]]
    watchers = statistics.median(a.seen.cpu_s / (cores * a.wall_s) for a in arms[viewers])
    answered = sum(sum(s.answers.values()) for s in seen)
    console.print(
        f"each pair's speed with {viewers} viewers / without: "
        + " / ".join(f"{ratio:.3f}" for ratio in pairs)
        + f"; median {statistics.median(pairs):.3f} (goal > 0.95)"
    )
    console.print(
        f"the page server's added CPU: {share:.2%} of the machine (median of the pairs); "
        f"the viewers here used {watchers:.2%} of it ({answered:,} answers, {sum(s.failures for s in seen)} failures, slowest "
        f"{max(s.slowest_s for s in seen) * 1000:.0f} ms)"
    )


if __name__ == "__main__":
    main()
