"""``lander play --web``: the page where a bot plays its game after your cursor.

Plain static files (the game's ``web_files``, ``games/lander/web/`` for the lander: the
game's physics and the bot runner in JavaScript, no build step, no CDN) and one dynamic
address, ``/bot``: the bot the page flies, read from disk again whenever the file changed. For a run that is training, that
is the bot it publishes every ``--publish-every`` steps (``.lander/live/RUN.json``),
so the page switches to each new one without a reload. The server is
:class:`~cli.serving.http_server.GuardedHttpServer`: answers for this machine's names only,
writes from its own page only, idle and slow connections closed, connections bounded.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cli.serving.http_server import GuardedHttpServer, Reply, Request, Respond
from game_bridge.bot_runner import MAX_BOT_BYTES
from game_bridge.file_input import read_bounded
from games.spec import GameEntry
from training.demos.files import MAX_DEMO_BYTES, DemoError, load_demos
from training.runs.local_state import live_bot_path
from training.runs.run_paths import RunPaths
from training.runs.run_record import write_bytes_atomic

_KINDS = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}


def static_files(game: GameEntry) -> dict[str, Path]:
    """The page's addresses and their files: ``/`` is the first of the game's web files."""
    if not game.web_files:
        return {}
    return {"/": game.web_files[0], **{f"/{path.name}": path for path in game.web_files}}


def bot_source(root: Path, target: str) -> Callable[[], Path]:
    """Where ``/bot`` reads from: a bot file, or a run's live bot (its exported bot when it
    publishes none)."""
    as_file = Path(target)
    if as_file.suffix == ".json" or as_file.is_file():
        return lambda: as_file
    paths = RunPaths(root, target)
    live = live_bot_path(root, paths.run)
    return lambda: live if live.exists() else paths.bot_json


def save_demo(body: bytes, destination: Path) -> str:
    """Keep a demo file the page recorded (a person flying with the keyboard) at
    ``destination``, if it is one: checked as ``lander train --demos`` would read it,
    then renamed into place, so a bad upload never replaces a good file.

    :raises DemoError: the body is not a sound lander demo file.
    """
    temporary = destination.with_name(f".{destination.name}.upload")
    write_bytes_atomic(temporary, body)
    try:
        load_demos(temporary)
        temporary.replace(destination)
    finally:
        temporary.unlink(missing_ok=True)
    return str(destination)


class BotCache:
    """The bytes ``/bot`` serves, read again only when the file changed (its size, time or
    inode: a publish renames a new file into place), so a hundred viewers polling every
    second cost a hundred ``stat`` calls, not a hundred reads; and, with the page asking
    ``If-None-Match``, a hundred short ``304`` answers, not a hundred bots sent."""

    def __init__(self, source: Callable[[], Path]) -> None:
        self.source = source
        self._key: tuple[str, int, int, int] | None = None
        self._body = b""
        self._etag = ""

    def read(self) -> tuple[bytes, str]:
        """The bot's bytes and their ETag (a new one for each file published).

        :raises OSError: no bot yet, or no regular file (a link to /dev/zero).
        """
        path = self.source()
        facts = path.stat()
        key = (str(path), facts.st_ino, facts.st_size, facts.st_mtime_ns)
        if key != self._key:
            self._body, self._key = read_bounded(path, MAX_BOT_BYTES), key
            self._etag = f'"{facts.st_ino:x}-{facts.st_size:x}-{facts.st_mtime_ns:x}"'
        return self._body, self._etag


def page_responder(
    source: Callable[[], Path], static: dict[str, Path], record_demo: Path | None
) -> Respond:
    """What the page's server answers: its files, ``/bot``, and ``POST /demo``."""
    files = {
        path: (file.read_bytes(), _KINDS.get(file.suffix, "application/octet-stream"))
        for path, file in static.items()
    }
    bot = BotCache(source)

    def respond(request: Request) -> Reply:
        if request.method == "POST":
            if request.path != "/demo" or record_demo is None:
                return Reply(404, b"this page saves no demos (play --web --record-demo FILE)")
            try:
                saved = save_demo(request.body, record_demo)
            except DemoError as exc:
                return Reply(400, str(exc)[:300].encode())
            return Reply(200, saved.encode())
        if request.method not in ("GET", "HEAD"):
            return Reply(405, b"GET, HEAD and POST /demo only")
        if request.path == "/bot":
            try:
                body, etag = bot.read()
            except OSError:
                return Reply(404, b"no bot yet")
            if request.headers.get("if-none-match") == etag:  # the page has this one
                return Reply(304, etag=etag)
            return Reply(200, body, "application/json", etag)
        if request.path in files:
            body, kind = files[request.path]
            return Reply(200, body, kind)
        return Reply(404, b"not found")

    return respond


def serve_page(
    root: Path,
    target: str,
    host: str,
    port: int,
    game: GameEntry,
    record_demo: Path | None = None,
) -> GuardedHttpServer:
    """Start serving ``game``'s page in a background thread; the caller stops it with
    ``shutdown``.

    :param record_demo: where the demos a person records on the page are saved (``POST
        /demo``; None: the page only offers them as a download).
    :raises OSError: the address cannot be bound.
    """
    respond = page_responder(bot_source(root, target), static_files(game), record_demo)

    def body_limit(method: str, path: str) -> int:
        return MAX_DEMO_BYTES if (method, path) == ("POST", "/demo") and record_demo else 0

    return GuardedHttpServer(host, port, respond, body_limit)
